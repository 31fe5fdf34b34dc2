"""Invariants of ``recommend`` over generated catalogs (hypothesis, derandomized):

* every offer is either recommendable or counted in exactly one rejected group;
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

offer_strategy = st.builds(
    lambda i, gpu, count, price, spot, increment, network, provider: make_offer(
        gpu,
        count,
        price=price,
        spot=round(price * spot, 2) if spot else None,
        increment=increment,
        network=INFINIBAND if network else None,
        provider=provider,
        instance_type=f"i{i}",
        interconnect="nvswitch" if GPUS[gpu].form_factor == "sxm" else "pcie",
    ),
    st.integers(0, 10_000),
    st.sampled_from(GPU_IDS),
    st.sampled_from([1, 2, 4, 8]),
    st.floats(0.5, 40.0).map(lambda p: round(p, 2)),
    st.one_of(st.none(), st.floats(0.2, 0.9)),
    st.sampled_from([1, 60, 3600]),
    st.booleans(),
    st.sampled_from(["a", "b", "c"]),
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


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    st.lists(offer_strategy, min_size=1, max_size=20, unique_by=lambda o: o.instance_type),
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

    recommended = {(r.offer.instance_type, r.offer.provider) for r in result.recommendations}
    rejected = sum(g.count for g in result.rejected)
    assert len(recommended) + rejected == len(offers)  # instance types are unique

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
