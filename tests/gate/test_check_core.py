"""The gate's pure core (``gpu_advisor.core.check``) on hand-built offers and the planner tests'
toy estimator, whose arithmetic is written out in tests/planner/fixtures.py:

* inference, per GPU: weights 2 P / (TP x PP), KV ceil(concurrency / DP) x context x
  kv_per_token / (TP x PP) with kv_per_token = 2 x layers x kv_heads x head_dim x 2, overhead
  1 GiB;
* training: 16 P / (TP x PP) of model states (ZeRO divides by DP), activations 2 GiB / TP,
  overhead 1 GiB.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

from gpu_advisor.core.check import (
    CheckOutcome,
    ResolvedTarget,
    evaluate_check,
    resolve_target,
    target_form,
    validate_check_request,
)
from gpu_advisor.core.errors import InvalidSpecError, NotFoundError, UnknownGpuError
from gpu_advisor.core.gpus import GpuCatalog
from gpu_advisor.core.spec import (
    CheckRequest,
    CheckTarget,
    InferenceWorkload,
    ModelSpec,
    TrainingWorkload,
)
from tests.planner.fixtures import GIB, GPUS, make_arch, make_offer, providers, toy_estimate

CATALOG = GpuCatalog.from_specs(GPUS.values())
L4_EXPOSED = 22_888 * 2**20  # AWS reports an L4 as 22,888 MiB
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B
OVERHEAD = 1 * GIB
OFFERS = [
    make_offer("L4-24GB", 1, price=1.00, instance_type="l4.x1", region="r1", interconnect="none"),
    make_offer("L4-24GB", 1, price=0.80, instance_type="l4.x1", region="r2", interconnect="none"),
    make_offer("H100-SXM-80GB", 8, price=25.0, instance_type="h100.x8", increment=3600),
    make_offer("H100-SXM-80GB", 8, price=20.0, instance_type="h100.x8b", increment=3600),
]
PROVIDERS = providers(acme=None)


def _serving(params: int, **request: Any) -> tuple[Any, CheckRequest]:
    arch = make_arch(params)
    body = CheckRequest(
        model=ModelSpec(preset="toy"),
        workload=InferenceWorkload(context_length=4096, concurrency=1),
        target=CheckTarget(provider="acme", instance_type="l4.x1"),
        **request,
    )
    return arch, body


def _evaluate(arch: Any, request: CheckRequest) -> tuple[ResolvedTarget, CheckOutcome]:
    target = resolve_target(request.target, OFFERS, CATALOG)
    outcome = evaluate_check(arch, request, target, OFFERS, GPUS, PROVIDERS, toy_estimate)
    return target, outcome


def _checks(outcome: CheckOutcome) -> dict[str, Any]:
    return {c.name: c for c in outcome.checks}


def test_a_7b_server_passes_on_the_cheaper_region() -> None:
    arch, request = _serving(7_000_000_000, budget_usd=1.0)
    target, outcome = _evaluate(arch, request)
    assert target.info.offers == 2  # both regions of l4.x1
    assert outcome.verdict == "pass"
    need = 2 * 7_000_000_000 + 4096 * KV_PER_TOKEN + OVERHEAD
    assert need == 15_610_612_736
    memory = _checks(outcome)["memory"]
    assert memory.data["need_bytes"] == need
    assert memory.data["exposed_bytes"] == L4_EXPOSED
    assert memory.data["headroom_fraction"] == pytest.approx(1 - need / L4_EXPOSED)
    assert "14.5 GiB per GPU; L4-24GB exposes 22.4 GiB (35 % free)" in memory.detail
    # one hour of serving (the default serving_hours) on the $0.80 region
    budget = _checks(outcome)["budget"]
    assert budget.data["total_usd"] == pytest.approx(0.80 * 1)
    assert outcome.estimate.offer.region == "r2"
    assert outcome.alternative is None


def test_budget_and_headroom_fail_with_their_numbers() -> None:
    arch, request = _serving(7_000_000_000, budget_usd=0.5, min_headroom_fraction=0.5)
    _, outcome = _evaluate(arch, request)
    checks = _checks(outcome)
    assert outcome.verdict == "fail"
    assert checks["memory"].passed is True
    headroom = checks["headroom"]
    assert headroom.passed is False
    # the least any plan needs is the one-GPU requirement: 35 % of the L4 stays free, not 50 %
    assert headroom.data["need_bytes"] == 15_610_612_736
    assert headroom.data["best_headroom_fraction"] == pytest.approx(1 - 15_610_612_736 / L4_EXPOSED)
    budget = checks["budget"]
    assert budget.passed is False
    assert budget.data["total_usd"] == pytest.approx(0.80)  # the cheapest plan: $0.80 > $0.50
    assert budget.detail.endswith("budget_usd is $0.50")
    assert outcome.alternative is None  # nothing in this catalog meets both
    assert outcome.suggestions


def test_memory_fails_with_the_smallest_requirement() -> None:
    arch, request = _serving(70_000_000_000)
    _, outcome = _evaluate(arch, request)
    checks = _checks(outcome)
    assert outcome.verdict == "fail"
    memory = checks["memory"]
    assert memory.passed is False
    assert memory.code == "insufficient_memory"
    # 2 x 70e9 B of weights alone is 130.4 GiB > 22.35 GiB
    assert memory.data["need_bytes"] == 2 * 70_000_000_000 + 4096 * KV_PER_TOKEN + OVERHEAD
    assert [checks[n].passed for n in ("topology", "headroom", "budget", "deadline")] == [None] * 4
    assert outcome.estimate.fits is False
    assert outcome.estimate.memory_per_gpu.weights_bytes == 2 * 70_000_000_000
    # the alternative: 8 x H100 at $20/h, billed by the hour: $20 for the hour of serving
    alternative = outcome.alternative
    assert alternative is not None
    assert alternative.offer.instance_type == "h100.x8b"
    assert alternative.cost.total_usd == pytest.approx(20.0)


def test_gpu_target_priced_as_the_cheapest_matching_offer() -> None:
    arch = make_arch(10_000_000_000)
    request = CheckRequest(
        model=ModelSpec(preset="toy"),
        workload=TrainingWorkload(tokens=1e9),
        target=CheckTarget(gpu="h100", gpu_count=8),
        budget_usd=1000,
    )
    target, outcome = _evaluate(arch, request)
    assert target.info.gpu == "H100-SXM-80GB"
    assert target.info.offers == 2
    assert target.info.priced_as is not None
    assert target.info.priced_as.instance_type == "h100.x8b"  # $20 < $25
    assert outcome.verdict == "pass"
    cost = outcome.estimate.cost
    hours = outcome.estimate.performance.time_to_result_hours  # type: ignore[union-attr]
    assert cost is not None
    assert hours is not None
    # billed by the hour (the offer's increment), at $20 per instance-hour
    assert cost.billed_hours == math.ceil(hours)
    assert cost.total_usd == pytest.approx(20.0 * math.ceil(hours))
    # the reference instance keeps the GPU's NVLink, whatever the priced offer has
    assert outcome.estimate.offer.interconnect == "nvlink"


def test_target_forms() -> None:
    assert target_form(CheckTarget(provider="aws", instance_type="p5.48xlarge")) == "instance_type"
    assert target_form(CheckTarget(instance_types=["a", "b"], provider="aws")) == "instance_types"
    assert target_form(CheckTarget(gpu="H100", nodes=2)) == "gpu"
    cases = [
        (CheckTarget(), "target"),
        (CheckTarget(gpu="H100", provider="aws"), "target.provider"),
        (CheckTarget(gpu="H100", instance_types=["x"]), "target.instance_types"),
        (CheckTarget(gpu_count=4), "target.gpu_count"),
        (CheckTarget(instance_type="x"), "target.provider"),
        (CheckTarget(instance_type="x", instance_types=["y"]), "target.instance_type"),
    ]
    for target, field in cases:
        with pytest.raises(InvalidSpecError) as caught:
            target_form(target)
        assert caught.value.field == field


def test_unknown_targets_name_the_field() -> None:
    with pytest.raises(NotFoundError) as caught:
        resolve_target(CheckTarget(provider="acme", instance_type="l4.x2"), OFFERS, CATALOG)
    assert caught.value.field == "target.instance_type"
    assert "l4.x1" in caught.value.message  # the close name
    with pytest.raises(NotFoundError) as caught:
        resolve_target(CheckTarget(instance_types=["l4.x1", "zzz"]), OFFERS, CATALOG)
    assert caught.value.field == "target.instance_types.1"
    with pytest.raises(UnknownGpuError) as caught_gpu:
        resolve_target(CheckTarget(gpu="Z9000"), OFFERS, CATALOG)
    assert caught_gpu.value.field == "target.gpu"


def test_limits_the_workload_cannot_be_checked_against() -> None:
    target = CheckTarget(provider="acme", instance_type="l4.x1")
    serving = InferenceWorkload()
    with pytest.raises(InvalidSpecError) as caught:
        validate_check_request(
            CheckRequest(
                model=ModelSpec(preset="toy"), workload=serving, target=target, deadline_hours=3
            )
        )
    assert caught.value.field == "deadline_hours"
    untimed = TrainingWorkload()  # no tokens: no run length to time or price
    for limit in ("budget_usd", "deadline_hours"):
        with pytest.raises(InvalidSpecError) as caught:
            validate_check_request(
                CheckRequest(
                    model=ModelSpec(preset="toy"), workload=untimed, target=target, **{limit: 1.0}
                )
            )
        assert caught.value.field == limit
        assert "workload.tokens" in caught.value.message


def test_a_context_beyond_the_model_fails_the_memory_check_with_the_limit() -> None:
    arch = msgspec.structs.replace(make_arch(7_000_000_000), max_position_embeddings=2048)
    _, request = _serving(7_000_000_000)
    _, outcome = _evaluate(arch, request)
    memory = _checks(outcome)["memory"]
    assert outcome.verdict == "fail"
    assert (memory.passed, memory.code) == (False, "context_exceeds_model")
    assert memory.detail == (
        "context_length 4,096 is longer than the 2,048 tokens toy was trained for "
        "(max_position_embeddings): a serving engine refuses it"
    )


def test_a_throughput_target_one_sequence_cannot_reach_fails_the_topology_check() -> None:
    # concurrency 1 on one L4: a 7e9 model decodes one sequence at a few tens of tokens/s
    # (14e9 B of weights read per token at 300 GB/s x 0.6); 10,000 tokens/s needs more
    # concurrent sequences, not more replicas.
    arch, request = _serving(7_000_000_000)
    workload = InferenceWorkload(context_length=4096, target_tokens_per_second=10_000.0)
    request = msgspec.structs.replace(request, workload=workload)
    _, outcome = _evaluate(arch, request)
    checks = _checks(outcome)
    assert outcome.verdict == "fail"
    assert (checks["memory"].passed, checks["memory"].code) == (True, "fits_below_target")
    assert checks["topology"].passed is False
    assert checks["topology"].code == "target_over_concurrency"
    # one sequence at most 300e9 x 0.6 / 14e9 = 12.9 tokens/s
    assert checks["topology"].data["sequence_tokens_per_second"] < 300e9 * 0.6 / 14e9
    assert checks["topology"].data["concurrency_needed"] > 10_000 / (300e9 * 0.6 / 14e9)


def test_an_instance_target_is_checked_with_the_catalogs_figure_for_its_gpu() -> None:
    # The catalog holds an AWS L40S reported at 45,776 MiB and another cloud's at 46,068 MiB:
    # the check of the other cloud's instance quotes the L40S as the catalog (and
    # /v1/recommendations) does, 45,776 MiB = 44.7 GiB, not a second figure.
    aws = make_offer("L40S-48GB", 1, provider="aws", instance_type="g6e", exposed=45_776 * 2**20)
    other = make_offer("L40S-48GB", 1, provider="acme", instance_type="l40s.x1")
    catalog = [aws, other]
    arch, request = _serving(7_000_000_000)
    request = msgspec.structs.replace(
        request, target=CheckTarget(provider="acme", instance_type="l40s.x1")
    )
    target = resolve_target(request.target, catalog, CATALOG)
    outcome = evaluate_check(arch, request, target, catalog, GPUS, PROVIDERS, toy_estimate)
    memory = _checks(outcome)["memory"]
    assert memory.data["exposed_bytes"] == 45_776 * 2**20
    assert "L40S-48GB exposes 44.7 GiB" in memory.detail
