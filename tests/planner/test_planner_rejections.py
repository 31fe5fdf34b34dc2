"""Rejected groups: technical reasons before constraint exclusions, then by size; each group's
data, sentence and first example describe its nearest miss."""

from __future__ import annotations

from gpu_advisor.core.memory import WorkloadEstimator
from gpu_advisor.core.models.resolve import resolve_model
from gpu_advisor.core.planner import MEMORY_CAPACITY_RULE, recommend
from gpu_advisor.core.planner.explain import TECHNICAL_CODES, rejection_order
from gpu_advisor.core.spec import ModelSpec, TrainingWorkload

from .fixtures import GPUS, make_offer, make_request, providers, toy_estimate
from .test_planner_billing import ARCH, job

LLAMA_8B = resolve_model(ModelSpec(preset="meta-llama/Llama-3.1-8B"))

# Activations that no node count holds: full fine-tuning of Llama-3.1-8B at 32,768 tokens x 8
# sequences without recomputation keeps about 34 bytes x s x b x h per layer (Korthikanti
# Table 2 with FlashAttention) = 34 x 32,768 x 8 x 4,096 = 36.5e9 B per layer, 32 layers:
# over 1 TB per replica. Data parallelism does not divide it; TP = 8 with sequence parallel
# divides it by 8 (still over 100 GB per GPU), so the 8-GPU instance misses by less.
HUGE_ACTIVATIONS = TrainingWorkload(sequence_length=32_768, micro_batch_size=8, tokens=1e9)


def _recommend(offers, **constraints):  # type: ignore[no-untyped-def]
    workload = HUGE_ACTIVATIONS
    return recommend(
        LLAMA_8B,
        make_request(workload, **constraints),
        offers,
        GPUS,
        {},
        WorkloadEstimator(LLAMA_8B, workload),
        capacity_rule=MEMORY_CAPACITY_RULE,
    )


def test_the_nearest_miss_names_its_instance_shape_and_leads_the_examples() -> None:
    # "a-one" sorts before "b-eight" by name, but the 8-GPU instance comes closer to fitting
    offers = [
        make_offer("H100-SXM-80GB", 1, instance_type="a-one"),
        make_offer("H100-SXM-80GB", 8, instance_type="b-eight"),
    ]
    [group] = _recommend(offers).rejected
    assert (group.code, group.gpu, group.count) == ("insufficient_memory", "H100-SXM-80GB", 2)
    assert group.data["gpu_count"] == 8
    # the nearest miss is the plan that divides the activations most: TP = 8 (with sequence
    # parallel) over the whole instance, quoted with its degrees
    assert group.data["plan"]["tensor_parallel"] == 8
    assert (
        " per GPU on 8 × H100-SXM-80GB with TP=8, PP=1, DP=1; H100-SXM-80GB exposes 79.6 GiB"
        in group.text
    )
    assert group.examples == ["acme b-eight us-east-1", "acme a-one us-east-1"]
    # the 8-GPU shape's requirement is the one quoted: far above 79.6 GiB, below the 1-GPU's
    one = _recommend(offers[:1]).rejected[0].data["need_bytes"]
    assert 80 * 2**30 < group.data["need_bytes"] < one


def test_technical_reasons_come_before_constraint_exclusions() -> None:
    # three L40S offers excluded by gpu_types outnumber the two H100 offers that cannot fit
    offers = [
        make_offer("H100-SXM-80GB", 1, instance_type="a-one"),
        make_offer("H100-SXM-80GB", 8, instance_type="b-eight"),
        *(make_offer("L40S-48GB", 1, instance_type=f"l40s-{i}") for i in range(3)),
    ]
    rejected = _recommend(offers, gpu_types=["H100-SXM-80GB"]).rejected
    assert [(g.code, g.count) for g in rejected] == [
        ("insufficient_memory", 2),
        ("gpu_excluded", 3),
    ]


def test_rejection_order_key() -> None:
    assert "insufficient_memory" in TECHNICAL_CODES
    assert "over_budget" not in TECHNICAL_CODES
    ordered = sorted(
        [("over_budget", 9, "A"), ("gpu_excluded", 9, "A"), ("tp_over_pcie", 1, "B")],
        key=lambda g: rejection_order(*g),
    )
    # technical first; among exclusions of equal size, the order checks are applied in
    assert ordered == [("tp_over_pcie", 1, "B"), ("gpu_excluded", 9, "A"), ("over_budget", 9, "A")]


def test_a_limit_group_quotes_and_leads_with_its_cheapest_offer() -> None:
    # 61 minutes on one H100 billed per second: $11.18 at $11/h, $12.20 at $12/h; both over a
    # $5 budget. The cheaper offer ("z-cheap") is the nearest miss though it sorts last.
    offers = [
        make_offer(gpu_count=1, price=12.0, instance_type="a-dear"),
        make_offer(gpu_count=1, price=11.0, instance_type="z-cheap"),
    ]
    result = recommend(
        ARCH, make_request(job(61), budget_usd=5.0), offers, GPUS, providers(), toy_estimate
    )
    [group] = result.rejected
    assert group.code == "over_budget"
    assert group.text == "costs at least $11.18 on 1 × H100-SXM-80GB; budget_usd is $5.00"
    assert group.examples == ["acme z-cheap us-east-1", "acme a-dear us-east-1"]
