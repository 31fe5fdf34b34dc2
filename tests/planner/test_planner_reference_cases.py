"""Reference cases from shared/reference-cases/bug_report_cases.json.

B17 (dstackai/gpuhunt#21, kaito-project/kaito PR #1098): per-GPU memory vs instance total.
  A TP=4 job needing >= 40 GB per GPU: Azure ND96amsr_A100_v4 (8 x A100 80 GB, 640 GB total)
  is eligible; AWS g6.48xlarge (8 x L4, 192 GB total) and g6.12xlarge (4 x L4, 96 GB) are not,
  "a large total on 24 GB cards does not help".
B19 (skypilot-org/skypilot-catalog#44): RunPod RTX A6000 at $0.79 per GPU-hour on demand and
  $0.49 spot: the 4x instance costs $3.16 / $1.96 per hour, the 8x $6.32 / $3.92; a catalog
  showing $0.79 for every size would rank the 8x instance as cheap as the 1x.
"""

from __future__ import annotations

import pytest

from gpu_advisor.core.planner import recommend
from gpu_advisor.core.spec import InferenceWorkload

from .fixtures import GIB, GPUS, make_arch, make_offer, make_request, toy_estimate


def test_b17_per_gpu_memory_decides_not_the_instance_total() -> None:
    # 96e9 params in bf16 = 192e9 B of weights, 20 heads (TP in {1, 2, 4}), 48 layers.
    # TP=4 on A100 80 GB: 192e9 / 4 = 48e9 B (44.7 GiB) + KV + 1 GiB: eligible.
    # 8 x L4: even split 8 ways (TP=2 x PP=4 over PCIe), 192e9 / 8 = 24e9 B = 22.35 GiB of
    # weights alone > 22,888 MiB (22.35 GiB) exposed per L4. 192 GB "total" does not help.
    arch = make_arch(96 * 10**9, layers=48, hidden=5120, heads=20, kv_heads=4)
    workload = InferenceWorkload(concurrency=1, context_length=2048)
    nd96 = make_offer(
        "A100-SXM-80GB", 8, provider="azure", instance_type="Standard_ND96amsr_A100_v4"
    )
    g6_48 = make_offer(
        "L4-24GB", 8, provider="aws", instance_type="g6.48xlarge", interconnect="pcie"
    )
    g6_12 = make_offer(
        "L4-24GB", 4, provider="aws", instance_type="g6.12xlarge", interconnect="pcie"
    )
    result = recommend(arch, make_request(workload), [nd96, g6_48, g6_12], GPUS, {}, toy_estimate)

    assert [r.offer.instance_type for r in result.recommendations] == ["Standard_ND96amsr_A100_v4"]
    best = result.recommendations[0]
    assert best.plan.tensor_parallel == 4
    assert best.memory_per_gpu.weights_bytes == 192 * 10**9 // 4
    # Both L4 instances are turned down and the sentences compare per-GPU figures (22.4 GiB
    # exposed per L4), never the 192 GB / 96 GB instance totals. g6.48xlarge (8 GPUs) would
    # fit across two nodes, which needs a cluster network; g6.12xlarge, across 4 nodes.
    assert {(g.gpu, g.count) for g in result.rejected} == {("L4-24GB", 2)}
    [rejected] = result.rejected
    assert rejected.code == "no_cluster_network"
    assert rejected.data["exposed_bytes"] == 22_888 * 2**20
    assert "L4-24GB exposes 22.4 GiB" in rejected.text
    assert rejected.data["need_bytes"] > 22_888 * 2**20
    assert "192" not in rejected.text


def _a6000(count: int) -> object:
    # Prices per instance-hour = per-GPU price x GPU count (B19 "rule").
    return make_offer(
        "RTXA6000-48GB",
        count,
        provider="runpod",
        instance_type=f"{count}x_A6000",
        interconnect="pcie",
        price=round(0.79 * count, 2),
        spot=round(0.49 * count, 2),
    )


@pytest.mark.parametrize("spot", ["forbid", "only"])
def test_b19_instance_price_scales_with_gpu_count(spot: str) -> None:
    # The job needs 4 x 48 GB: 80e9 params -> 160e9 B of weights; 4 GPUs hold 40e9 B
    # (37.25 GiB) + KV (1 x 4096 x 327,680 B / 4 = 0.31 GiB) + 1 GiB <= 49,140 MiB (48.0 GiB);
    # 2 GPUs would need 74.5 GiB each.
    arch = make_arch(80 * 10**9, layers=80, hidden=8192, heads=64)
    workload = InferenceWorkload(concurrency=1, context_length=4096)
    offers = [_a6000(n) for n in (1, 2, 4, 8)]
    result = recommend(
        arch,
        make_request(workload, objective="price_per_hour", spot=spot),
        offers,
        GPUS,
        {},
        toy_estimate,
    )
    four, eight = result.recommendations
    assert (four.offer.gpu_count, eight.offer.gpu_count) == (4, 8)
    per_gpu = 0.49 if spot == "only" else 0.79
    assert four.cost.price_per_hour_usd == pytest.approx(4 * per_gpu)  # $3.16 / $1.96
    assert eight.cost.price_per_hour_usd == pytest.approx(8 * per_gpu)  # $6.32 / $3.92
    assert four.cost.price_per_gpu_hour_usd == pytest.approx(per_gpu)
    assert eight.cost.price_per_gpu_hour_usd == pytest.approx(per_gpu)
    # The 8x instance runs two 4-GPU replicas; its hourly price is the instance price.
    assert eight.performance.replicas == 2
    # 1x and 2x are turned down: one GPU lacks the memory, two would need a second node.
    assert sorted(e for g in result.rejected for e in g.examples) == [
        "runpod 1x_A6000 us-east-1",
        "runpod 2x_A6000 us-east-1",
    ]
    assert {g.code for g in result.rejected} == {"insufficient_memory", "no_cluster_network"}
    assert four.memory_per_gpu.total_bytes == 40 * 10**9 + 4096 * 327_680 // 4 + GIB
