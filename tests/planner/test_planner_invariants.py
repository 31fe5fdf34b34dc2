"""Invariants of ``recommend`` over generated catalogs (hypothesis, derandomized):

* recommendations are distinct choices (provider, instance type, market), each in its best
  region, with the other regions of the same choice listed after it, no better than it;
* every offer is either recommended (in its best region or among the other regions of its
  choice) or counted in exactly one rejected group;
* recommendations are sorted by the objective, at most ``top_k``, their plans use every GPU
  they pay for and fit the usable memory;
* the Pareto points are not dominated by any recommendation.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_advisor.core.planner import recommend
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

from .fixtures import GPUS, INFINIBAND, make_arch, make_offer, make_request, providers, toy_estimate

GPU_IDS = sorted(GPUS)
COUNTS = [1, 2, 4, 8]


def _offer(i, region, price, spot, increment, network):  # type: ignore[no-untyped-def]
    # an instance type is one piece of hardware of one provider wherever it is offered: its
    # provider, GPU, count, interconnect and network follow from its number; price, spot and
    # billing vary by region
    gpu = GPU_IDS[i % len(GPU_IDS)]
    return make_offer(
        gpu,
        COUNTS[(i // len(GPU_IDS)) % len(COUNTS)],
        price=price,
        spot=round(price * spot, 2) if spot else None,
        increment=increment,
        network=INFINIBAND if network and i % 2 else None,
        provider="abc"[i % 3],
        instance_type=f"i{i}",
        region=region,
        interconnect="nvswitch" if GPUS[gpu].form_factor == "sxm" else "pcie",
    )


offer_strategy = st.builds(
    _offer,
    st.integers(0, 11),
    st.sampled_from(["r1", "r2", "r3"]),
    st.floats(0.5, 40.0).map(lambda p: round(p, 2)),
    st.one_of(st.none(), st.floats(0.2, 0.9)),
    st.sampled_from([1, 60, 3600]),
    st.booleans(),
)

workloads = st.one_of(
    st.builds(
        lambda tokens: TrainingWorkload(tokens=tokens, sequence_length=2048),
        st.sampled_from([1e8, 1e9]),
    ),
    st.builds(
        lambda concurrency: InferenceWorkload(concurrency=concurrency, context_length=4096),
        st.sampled_from([1, 8, 32]),
    ),
)


@settings(derandomize=True, max_examples=80, deadline=None)
@given(
    st.lists(
        offer_strategy,
        min_size=1,
        max_size=20,
        unique_by=lambda o: (o.instance_type, o.region),
    ),
    workloads,
    st.sampled_from([7 * 10**9, 30 * 10**9, 70 * 10**9]),
    st.sampled_from(["total_cost", "time_to_result", "price_per_hour", "cost_per_million_tokens"]),
    st.sampled_from(["forbid", "allow", "only"]),
    st.one_of(st.none(), st.floats(5.0, 500.0)),
)
def test_every_offer_is_accounted_for_and_rankings_are_sound(
    offers, workload, params, objective, spot, budget
) -> None:  # type: ignore[no-untyped-def]
    arch = make_arch(params, layers=32, hidden=4096, heads=32)
    request = make_request(
        workload, objective=objective, spot=spot, budget_usd=budget, max_nodes=4, top_k=50
    )
    result = recommend(arch, request, offers, GPUS, providers(a=0.05, b=None), toy_estimate)

    choices = [(r.offer.provider, r.offer.instance_type, r.spot) for r in result.recommendations]
    assert len(set(choices)) == len(choices)  # distinct choices
    by_name = {(o.provider, o.instance_type, o.region): o for o in offers}
    recommended = set()
    for rec in result.recommendations:
        recommended.add((rec.offer.provider, rec.offer.instance_type, rec.offer.region))
        assert rec.other_regions_count == len(rec.other_regions)  # 3 regions: none cut off
        for other in rec.other_regions:
            assert other.region != rec.offer.region
            same = by_name[(rec.offer.provider, rec.offer.instance_type, other.region)]
            assert other.price_per_hour_usd == same.price_per_hour_usd
            assert other.spot_price_per_hour_usd == same.spot_price_per_hour_usd
            if rec.spot:
                assert other.spot_price_per_hour_usd is not None
            if objective == "total_cost" and other.total_usd is not None:
                assert rec.cost.total_usd is not None
                assert other.total_usd >= rec.cost.total_usd  # the best region leads
            recommended.add((rec.offer.provider, rec.offer.instance_type, other.region))
        totals = [o.total_usd for o in rec.other_regions]
        if objective == "total_cost" and None not in totals:
            assert totals == sorted(totals)  # type: ignore[type-var]
    rejected = sum(g.count for g in result.rejected)
    assert len(recommended) + rejected == len(offers)

    keys = []
    for rec in result.recommendations:
        assert rec.gpus == rec.nodes * rec.offer.gpu_count == rec.plan.gpus
        assert rec.memory_per_gpu.total_bytes <= rec.offer.gpu_memory_exposed_bytes
        match objective:
            case "total_cost":
                keys.append(rec.cost.total_usd)
            case "price_per_hour":
                keys.append(rec.cost.price_per_hour_usd)
            case "cost_per_million_tokens":
                keys.append(rec.cost.per_million_tokens_usd)
            case _:
                keys.append(
                    rec.performance.time_to_result_hours
                    if isinstance(workload, TrainingWorkload)
                    else rec.performance.request_latency_seconds
                )
    assert keys == sorted(keys)
    assert [r.rank for r in result.recommendations] == list(range(1, len(keys) + 1))

    def time_of(rec):  # type: ignore[no-untyped-def]
        if isinstance(workload, TrainingWorkload):
            return rec.performance.time_to_result_hours
        return rec.performance.request_latency_seconds

    for point in result.pareto:
        time = (
            point.time_to_result_hours if point.latency_seconds is None else point.latency_seconds
        )
        for rec in result.recommendations:
            other = (rec.cost.total_usd, time_of(rec))
            assert not (
                other[0] <= point.total_usd
                and other[1] <= time
                and other != (point.total_usd, time)
            )
