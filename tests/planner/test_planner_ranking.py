"""Objectives, deterministic tie-breaks and the Pareto set."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_advisor.core.planner import recommend
from gpu_advisor.core.planner.ranking import Candidates, pareto_front, top_k
from gpu_advisor.core.spec import TrainingWorkload

from .fixtures import (
    GPUS,
    INFINIBAND,
    make_arch,
    make_offer,
    make_request,
    providers,
    toy_estimate,
)


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[0] and a[1] <= b[1] and a != b


points = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 20)).map(lambda p: (float(p[0]), float(p[1]))),
    max_size=60,
)


@settings(derandomize=True, max_examples=300)
@given(points)
def test_pareto_front_is_exactly_the_non_dominated_points(pts: list[tuple[float, float]]) -> None:
    front = pareto_front([p[0] for p in pts], [p[1] for p in pts])
    chosen = set(front)
    for i in front:  # nothing in the front is dominated
        assert not any(dominates(q, pts[i]) for q in pts)
    for i, p in enumerate(pts):  # every non-dominated point is in the front
        if not any(dominates(q, p) for q in pts):
            assert i in chosen
    assert front == sorted(front, key=lambda i: (pts[i][0], pts[i][1], front.index(i)))


def test_pareto_front_ignores_nan() -> None:
    assert pareto_front([1.0, float("nan"), 2.0], [2.0, 0.0, 1.0]) == [0, 2]


def _candidates(
    rows: list[tuple[float, float, int, int, int]], nodes: list[int] | None = None
) -> Candidates:
    total = np.array([r[0] for r in rows])
    return Candidates(
        offer=np.arange(len(rows)),
        spot=np.array([r[3] for r in rows], dtype=np.int64),
        option=np.zeros(len(rows), dtype=np.intp),
        total_usd=total,
        time_hours=np.array([r[1] for r in rows]),
        price_per_hour_usd=total,
        per_million_usd=total,
        latency_seconds=np.full(len(rows), np.nan),
        gpus=np.array([r[2] for r in rows], dtype=np.int64),
        nodes=np.array(nodes or [1] * len(rows), dtype=np.int64),
        name_rank=np.array([r[4] for r in rows], dtype=np.int64),
    )


def test_ties_break_on_nodes_then_gpus_then_time_then_on_demand_then_name() -> None:
    #        total  time  gpus spot name
    rows = [
        (10.0, 2.0, 8, 0, 0),  # 4: slower
        (10.0, 1.0, 8, 1, 1),  # 3: spot
        (10.0, 1.0, 8, 0, 3),  # 2: on-demand, later name
        (10.0, 1.0, 8, 0, 2),  # 1: on-demand, earlier name
        (10.0, 0.5, 16, 0, 4),  # 6: faster, but more GPUs at equal cost
        (9.0, 5.0, 16, 1, 5),  # 0: cheapest wins whatever else
        (10.0, 0.5, 8, 0, 6),  # 7: fastest of the 8-GPU ones, but on 8 nodes
    ]
    nodes = [1, 1, 1, 1, 1, 1, 8]
    cands = _candidates(rows, nodes)
    order = top_k(cands.total_usd, cands, k=7)
    assert order == [5, 3, 2, 1, 0, 4, 6]


def test_one_eight_gpu_node_beats_eight_one_gpu_nodes_at_equal_price() -> None:
    # /v1/estimate's min_gpus: 8 GPUs at $1 per GPU-hour either way; the 1-GPU nodes each
    # get a whole node's network, so they finish sooner, yet one node wins.
    rows = [(8.0, 1.0, 8, 0, 0), (8.0, 1.2, 8, 0, 1)]
    cands = _candidates(rows, nodes=[8, 1])
    assert top_k(cands.price_per_hour_usd, cands, k=2) == [1, 0]


def test_top_k_is_independent_of_input_order() -> None:
    rng = random.Random(7)
    rows = [
        (float(rng.randint(1, 4)), float(rng.randint(1, 3)), 8, rng.randint(0, 1), i)
        for i in range(40)
    ]
    cands = _candidates(rows)
    expected = [rows[i][4] for i in top_k(cands.total_usd, cands, k=10)]
    shuffled = rows[:]
    rng.shuffle(shuffled)
    cands2 = _candidates(shuffled)
    assert [shuffled[i][4] for i in top_k(cands2.total_usd, cands2, k=10)] == expected


def test_recommend_pareto_has_no_dominated_point_and_marks_ranks() -> None:
    # Three node counts on one clustered offer trade cost against time; a second, pricier
    # offer is dominated at every node count.
    arch = make_arch(7 * 10**9)
    workload = TrainingWorkload(tokens=5e9, sequence_length=2048)
    rng = random.Random(11)
    offers = [
        make_offer(network=INFINIBAND, price=round(rng.uniform(10, 40), 2), instance_type=f"i{i}")
        for i in range(6)
    ]
    result = recommend(
        arch, make_request(workload, max_nodes=4, top_k=3), offers, GPUS, {}, toy_estimate
    )
    front = [(p.total_usd, p.time_to_result_hours) for p in result.pareto]
    assert front
    everything = [
        (r.cost.total_usd, r.performance.time_to_result_hours) for r in result.recommendations
    ]
    for point in front:
        assert not any(dominates(q, point) for q in front + everything)  # type: ignore[arg-type]
    assert result.pareto[0].rank == 1  # the cheapest is the total_cost winner


def test_time_to_result_objective_prefers_more_nodes() -> None:
    arch = make_arch(7 * 10**9)
    workload = TrainingWorkload(tokens=5e9, sequence_length=2048)
    offer = make_offer(network=INFINIBAND)
    cheap = recommend(arch, make_request(workload, max_nodes=4), [offer], GPUS, {}, toy_estimate)
    fast = recommend(
        arch,
        make_request(workload, max_nodes=4, objective="time_to_result"),
        [offer],
        GPUS,
        {},
        toy_estimate,
    )
    assert cheap.recommendations[0].nodes == 1
    assert fast.recommendations[0].nodes == 4
    assert (
        fast.recommendations[0].performance.time_to_result_hours
        < cheap.recommendations[0].performance.time_to_result_hours
    )


def test_recommendations_are_distinct_choices_with_their_other_regions() -> None:
    # One instance type in 12 regions at $10.00 + $0.50 x i per hour, a second instance type
    # in one region at $12.20: the top two are the two instance types, each once. The first
    # is in its cheapest region (r00, $10.00); its 11 other regions follow by price, the
    # first MAX_OTHER_REGIONS (10) of them listed.
    arch = make_arch(2 * 10**9)  # 16 B/param x 2e9 = 32 GB: one 80 GB GPU
    workload = TrainingWorkload(tokens=1e9, sequence_length=2048)
    many = [
        make_offer(gpu_count=1, price=10.0 + 0.5 * i, instance_type="a", region=f"r{i:02d}")
        for i in reversed(range(12))
    ]
    other = make_offer(gpu_count=1, price=12.2, instance_type="b", region="r05")
    result = recommend(arch, make_request(workload), [*many, other], GPUS, {}, toy_estimate)
    first, second = result.recommendations
    assert (first.offer.instance_type, first.offer.region) == ("a", "r00")
    assert first.cost.price_per_hour_usd == 10.0
    assert first.other_regions_count == 11
    assert [r.region for r in first.other_regions] == [f"r{i:02d}" for i in range(1, 11)]
    assert [r.price_per_hour_usd for r in first.other_regions] == [
        10.0 + 0.5 * i for i in range(1, 11)
    ]
    hours = first.cost.billed_hours
    assert first.other_regions[0].total_usd == pytest.approx(10.5 * hours)
    # the cheapest region of "a" costs 10.00 x h; "b" costs 12.20 x h, after it
    assert (second.offer.instance_type, second.other_regions) == ("b", [])
    assert second.rank == 2


def test_on_demand_and_spot_of_one_instance_are_two_choices() -> None:
    arch = make_arch(2 * 10**9)  # 16 B/param x 2e9 = 32 GB: one 80 GB GPU
    workload = TrainingWorkload(tokens=1e8, sequence_length=2048)
    offers = [
        make_offer(gpu_count=1, price=10.0, spot=4.0, instance_type="a", region="east"),
        make_offer(gpu_count=1, price=9.0, spot=5.0, instance_type="a", region="west"),
    ]
    result = recommend(
        arch, make_request(workload, spot="allow"), offers, GPUS, providers(acme=0.01), toy_estimate
    )
    picks = [
        (r.spot, r.offer.region, [o.region for o in r.other_regions])
        for r in result.recommendations
    ]
    # spot is cheapest in east, on-demand in west; each lists the other region once
    assert picks == [(True, "east", ["west"]), (False, "west", ["east"])]
