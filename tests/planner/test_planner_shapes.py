"""Plan shapes on GPU counts that are not powers of two, plans that leave GPUs idle, QLoRA
without tensor or pipeline parallel, and rejections that quote the plan they measured.
Memory comes from ``toy_estimate`` (arithmetic in fixtures.py)."""

from __future__ import annotations

import msgspec

from gpu_advisor.core.planner import recommend
from gpu_advisor.core.planner.topology import divisors, idle_width
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

from .fixtures import GIB, GPUS, INFINIBAND, MIB, make_arch, make_offer, make_request, toy_estimate

H100_EXPOSED = 81_559 * MIB  # 85,520,809,984 B
KV_PER_TOKEN_80_LAYERS = 2 * 80 * 8 * 128 * 2  # (K, V) x layers x KV heads x head_dim x 2 B


def test_divisors_and_idle_widths() -> None:
    assert divisors(12, 12) == [1, 2, 3, 4, 6, 12]
    assert divisors(80, 10) == [1, 2, 4, 5, 8, 10]  # PP at most 10 stages
    assert divisors(7, 7) == [1, 7]
    # plans that leave GPUs idle use the largest power of two below the node's GPU count
    assert [idle_width(g) for g in (1, 2, 3, 6, 8, 10, 12, 16)] == [
        None,
        None,
        2,
        4,
        None,
        8,
        8,
        None,
    ]


def test_six_gpus_serve_a_model_that_needs_three_with_pipeline_stages_of_three() -> None:
    # 80e9 params, 80 layers x 8 KV heads x 128: 327,680 B of KV per token; 16 sequences of
    # 8,192 tokens over the deployment (each replica holds its share, fixtures.py).
    # Replicas of 2 GPUs (TP=2): 3 per instance, 16 / 3 -> 6 sequences each:
    #   160e9 / 2 + 6 x 8192 x 327,680 / 2 + 1 GiB = 89.1e9 B > 85.5e9 B exposed, so 16
    #   sequences need 2 instances of them.
    # Replicas of 3 GPUs (TP must be a power of two: TP=1 x PP=3): 2 per instance, 8 each:
    #   160e9 // 3 + 8 x 8192 x 327,680 // 3 + 1 GiB = 61.6e9 B: fits one instance, which wins
    #   (fewest instances). Powers of two alone offered replicas of 1 or 2 GPUs only.
    arch = make_arch(80 * 10**9, layers=80, hidden=8192, heads=64)
    workload = InferenceWorkload(concurrency=16, context_length=8192)
    offer = make_offer("H100-SXM-80GB", 6)
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)

    [best] = result.recommendations
    plan = best.plan
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel) == (1, 3, 2)
    assert best.nodes == 1
    kv = 8 * 8192 * KV_PER_TOKEN_80_LAYERS  # 8 sequences per replica
    assert kv == 21_474_836_480
    assert best.memory_per_gpu.total_bytes == 160 * 10**9 // 3 + kv // 3 + GIB
    assert best.summary.startswith("6 × H100-SXM-80GB: TP=1, PP=3, DP=2")
    assert not any(r.code == "idle_gpus" for r in best.rationale)


def test_ten_pcie_gpus_use_pipeline_stages_of_five() -> None:
    # 80e9 params on L40S (46,068 MiB = 48.3e9 B exposed), PCIe: TP at most 2. Two replicas
    # of 5 GPUs (TP=1 x PP=5) fill the 10 GPUs, 8 of the 16 sequences each:
    #   160e9 // 5 + 8 x 8,192 x 327,680 // 5 + 1 GiB = 32e9 + 4.29e9 + 1.07e9 = 37.4e9 B:
    #   fits; a replica of 2 (80e9 B of weights per GPU) does not.
    arch = make_arch(80 * 10**9, layers=80, hidden=8192, heads=64)
    workload = InferenceWorkload(concurrency=16, context_length=8192)
    offer = make_offer("L40S-48GB", 10, interconnect="pcie")
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)

    [best] = result.recommendations
    plan = best.plan
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel) == (1, 5, 2)
    kv = 8 * 8192 * KV_PER_TOKEN_80_LAYERS  # 8 of the 16 sequences per replica
    assert best.memory_per_gpu.total_bytes == 160 * 10**9 // 5 + kv // 5 + GIB


def test_where_no_plan_uses_every_gpu_one_leaves_some_idle_and_says_so() -> None:
    # 2 layers: PP <= 2. On 6 GPUs a replica of 6 needs PP 3 or 6, of 3 PP 3: none is
    # possible. 100e9 params: 2 GPUs hold 200e9 / 2 = 100e9 B > 85.5e9 B; a replica of 4
    # (TP=4, a power of two that does not divide 6) holds 200e9 / 4 = 50e9 B + KV
    # (1 x 4,096 x 2 x 2 x 8 x 128 x 2 B = 33,554,432 B) / 4 + 1 GiB: fits, 2 GPUs idle.
    arch = make_arch(100 * 10**9, layers=2)
    workload = InferenceWorkload(concurrency=1, context_length=4096)
    offer = make_offer("H100-SXM-80GB", 6)
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)

    [best] = result.recommendations
    plan = best.plan
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel) == (4, 1, 1)
    assert best.memory_per_gpu.total_bytes == 200 * 10**9 // 4 + 33_554_432 // 4 + GIB
    texts = [r.text for r in best.rationale]
    assert (
        "uses 4 of the 6 H100-SXM-80GB GPUs paid for: 2 sit idle (no plan using all of them fits)"
        in texts
    )
    assert best.cost.price_per_hour_usd == offer.price_per_hour_usd  # the idle GPUs are paid


def test_training_on_six_gpus_without_sharding_uses_three_pipeline_stages() -> None:
    # Full fine-tuning with sharding "none": 2 + 2 + 12 = 16 B per parameter over TP x PP.
    # 25e9 params: TP x PP = 2 holds 16 x 25e9 / 2 = 200e9 B > 85.5e9 B. On 6 GPUs TP is 1
    # or 2 (powers of two dividing 6); PP 3 or 6 (divisors of 6 / TP) brings TP x PP to 6:
    #   16 x 25e9 / 6 = 66.7e9 B + activations 2 GiB / TP + 1 GiB: fits.
    arch = make_arch(25 * 10**9, layers=48)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096, sharding="none")
    offer = make_offer("H100-SXM-80GB", 6)
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)

    [best] = result.recommendations
    plan = best.plan
    assert plan.tensor_parallel * plan.pipeline_parallel == 6
    assert plan.pipeline_parallel in (3, 6)
    params = 25 * 10**9
    mp = 6
    activations = 2 * GIB // plan.tensor_parallel
    expected = 2 * params // mp + 2 * params // mp + 12 * params // mp + activations + GIB
    assert best.memory_per_gpu.total_bytes == expected


def test_qlora_uses_data_parallel_only_where_lora_may_split_the_model() -> None:
    # 6e9 params, sharding "none", toy training states 16 B/param over TP x PP.
    # LoRA (16-bit base): TP x PP = 2 on 2 x H100 holds 16 x 6e9 / 2 = 48e9 B + <= 2 GiB
    #   + 1 GiB: fits.
    # QLoRA (NF4 base): no TP, no PP (bitsandbytes NF4 has no such split in PEFT): one GPU
    #   per rank holds 96e9 B + 2 GiB + 1 GiB > 85.5e9 B: rejected, quoting TP=1, PP=1.
    # QLoRA with the default sharding search may shard ZeRO-3 over DP=2 (FSDP-QLoRA):
    #   96e9 / 2 + 2 GiB + 1 GiB = 51.2e9 B: fits.
    arch = make_arch(6 * 10**9)
    offer = make_offer("H100-SXM-80GB", 2)
    lora = TrainingWorkload(method="lora", tokens=1e9, sharding="none")
    lora_best = recommend(arch, make_request(lora), [offer], GPUS, {}, toy_estimate)
    lora_plan = lora_best.recommendations[0].plan
    assert lora_plan.tensor_parallel * lora_plan.pipeline_parallel == 2

    qlora = TrainingWorkload(method="qlora", tokens=1e9, sharding="none")
    rejected = recommend(arch, make_request(qlora), [offer], GPUS, {}, toy_estimate)
    assert rejected.recommendations == []
    [group] = rejected.rejected
    assert group.code == "insufficient_memory"
    assert group.data["need_bytes"] == 16 * 6 * 10**9 + 2 * GIB + GIB
    assert (group.data["plan"]["tensor_parallel"], group.data["plan"]["pipeline_parallel"]) == (
        1,
        1,
    )

    fsdp = TrainingWorkload(method="qlora", tokens=1e9)
    [best] = recommend(arch, make_request(fsdp), [offer], GPUS, {}, toy_estimate).recommendations
    assert (best.plan.tensor_parallel, best.plan.pipeline_parallel) == (1, 1)
    assert (best.plan.data_parallel, best.plan.sharding) == (2, "zero3")
    assert best.memory_per_gpu.total_bytes == 16 * 6 * 10**9 // 2 + 2 * GIB + GIB


def test_the_rejection_quotes_the_plan_with_the_smallest_requirement() -> None:
    # 400e9 params, 4 layers (PP <= 4), serving on 8 x L40S over PCIe (TP <= 2): the largest
    # replica, TP=2 x PP=4, holds 800e9 / 8 = 100e9 B + KV / 8 + 1 GiB > 48.3e9 B, and no
    # larger replica exists (PP 8 > 4 layers). KV: 4,096 tokens x (2 x 4 x 8 x 128 x 2 B)
    # = 67,108,864 B. The sentence quotes that plan with its numbers.
    arch = make_arch(400 * 10**9, layers=4, hidden=8192, heads=64)
    workload = InferenceWorkload(concurrency=1, context_length=4096)
    offer = make_offer("L40S-48GB", 8, interconnect="pcie")
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)

    [group] = result.rejected
    assert group.code == "insufficient_memory"
    kv = 4096 * 2 * 4 * 8 * 128 * 2
    assert group.data["need_bytes"] == 800 * 10**9 // 8 + kv // 8 + GIB
    assert group.data["plan"] == {
        "tensor_parallel": 2,
        "pipeline_parallel": 4,
        "data_parallel": 1,
        "expert_parallel": 1,
        "sharding": "none",
    }
    # 100e9 + 8,388,608 + 1,073,741,824 = 101,082,130,432 B = 94.1 GiB
    assert group.text == (
        "needs 94.1 GiB per GPU on 8 × L40S-48GB with TP=2, PP=4, DP=1; L40S-48GB exposes 45.0 GiB"
    )


def test_a_multi_node_shortfall_quotes_the_closest_plan_within_the_limit() -> None:
    # 100e9 params full fine-tuning, ZeRO-3: 16 x 100e9 / GPUs. One node of 8: 200e9 B per
    # GPU; two nodes (16 GPUs): 100e9 B (93.1 GiB) > 79.6 GiB; three (24): 66.7e9 B
    # (62.1 GiB) + 2 GiB / 8 + 1 GiB = 63.3 GiB fits -- nodes need not be a power of two.
    # With max_nodes 2 the closest allowed plan is ZeRO-3 over 16 GPUs at TP=8.
    arch = make_arch(100 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    offer = make_offer(network=INFINIBAND)
    result = recommend(arch, make_request(workload, max_nodes=2), [offer], GPUS, {}, toy_estimate)

    [group] = result.rejected
    assert group.code == "over_max_nodes"
    assert group.data["nodes_needed"] == 3
    need = group.data["need_bytes"]
    assert need == 16 * 100 * 10**9 // 16 + 2 * GIB // group.data["plan"]["tensor_parallel"] + GIB
    assert group.text.startswith("needs 3 nodes of 8 × H100-SXM-80GB; max_nodes is 2 (the ")


def test_training_leaves_gpus_idle_only_where_a_wider_tp_is_what_fits() -> None:
    # Activations of 164e9 B / TP (no recomputation, sequence parallel) dominate; states are
    # 16 x 1e9 = 16e9 B over TP x PP (sharding "none"). On 6 GPUs TP is 1 or 2:
    #   TP=2 x PP=3: 16e9 / 6 + 164e9 / 2 + 1 GiB = 85.74e9 B > 85.52e9 B exposed;
    # 4 of the 6 GPUs allow TP=4: 16e9 / 4 + 164e9 / 4 + 1 GiB = 46.07e9 B: fits, 2 idle.
    def heavy(arch, workload, plan, *, capacity_bytes=None):  # type: ignore[no-untyped-def]
        base = toy_estimate(arch, workload, plan, capacity_bytes=capacity_bytes)
        activations = 164 * 10**9 // plan.tensor_parallel
        return msgspec.structs.replace(
            base,
            activations_bytes=activations,
            total_bytes=base.total_bytes - base.activations_bytes + activations,
        )

    arch = make_arch(10**9)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096, sharding="none")
    offer = make_offer("H100-SXM-80GB", 6)
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, heavy)

    [best] = result.recommendations
    plan = best.plan
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel) == (4, 1, 1)
    expected = 16 * 10**9 // 4 + 164 * 10**9 // 4 + GIB
    assert best.memory_per_gpu.total_bytes == expected
    assert (
        "uses 4 of the 6 H100-SXM-80GB GPUs paid for: 2 sit idle (no plan using all of them fits)"
        in [r.text for r in best.rationale]
    )


def test_a_job_that_needs_three_nodes_runs_on_three_not_four() -> None:
    # Same 100e9-parameter job (16 B/param of model states, ZeRO-3 over every GPU):
    #   2 nodes: 1.6e12 / 16 = 100e9 B = 93.1 GiB > 81,559 MiB (79.6 GiB): no fit;
    #   3 nodes: ZeRO-3 1.6e12 / 24 = 66,666,666,666 B + 2 GiB / 8 + 1 GiB = 63.3 GiB fits.
    # The fewest nodes that fit is 3; a power-of-two search would book 4 (32 GPUs), and with
    # max_nodes 3 it would find nothing at all.
    arch = make_arch(100 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    offer = make_offer(network=INFINIBAND)
    for max_nodes in (3, 16):
        request = make_request(workload, max_nodes=max_nodes)
        [best] = recommend(arch, request, [offer], GPUS, {}, toy_estimate).recommendations
        assert (best.nodes, best.gpus) == (3, 24)
        # The fastest shape that fits is TP=4 x PP=3 x DP=2. With ZeRO-1 it would hold
        # 2 x 2P / 12 = 33,333,333,332 B of weights and gradients + AdamW 12P / 12 / 2 = 50e9
        # + 2 GiB / 4 + 1 GiB = 84,943,946,068 B (under 1 % free); FSDP over the 2 data-parallel
        # ranks halves the weights and gradients to 8,333,333,333 B each at the same pace
        # (backward hides the gathers here), leaving 20 % free: the roomier plan is taken.
        plan = best.plan
        assert (plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel) == (4, 3, 2)
        assert plan.sharding == "fsdp"
        need = 2 * 8_333_333_333 + 50 * 10**9 + 2 * GIB // 4 + GIB
        assert best.memory_per_gpu.total_bytes == need == 68_277_279_402
        assert need <= 81_559 * MIB


def test_time_to_result_reaches_max_nodes_when_it_is_not_a_power_of_two() -> None:
    # time_to_result prices more nodes than the fewest that fit (3): the powers of two above
    # it (4, 8) and max_nodes itself (12). More GPUs only shorten the job here, so the
    # fastest is all 12 nodes (96 GPUs), which a power-of-two search (8 at most) never tries.
    arch = make_arch(100 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    offer = make_offer(network=INFINIBAND)
    request = make_request(workload, max_nodes=12, objective="time_to_result")
    [best] = recommend(arch, request, [offer], GPUS, {}, toy_estimate).recommendations
    assert (best.nodes, best.gpus) == (12, 96)


def test_groups_of_one_gpu_count_each_get_their_own_nodes_needed() -> None:
    # The "needs N nodes" probe is shared by groups of one GPU count only where their usable
    # bytes compare alike with every requirement it asked. 100e9 params, ZeRO-3 at TP=8:
    # 16 x 100e9 / (8 n) + 2 GiB / 8 + 1 GiB = 200e9 / n + 1,342,177,280 B per GPU.
    #   H100 (85,520,809,984 B exposed): n = 2 -> 101.3e9 no, n = 3 -> 68.0e9 fits: 3 nodes.
    #   A100 reporting 40 GiB (42,949,672,960 B): n = 4 -> 51.3e9 no, n = 5 -> 41.3e9: 5.
    arch = make_arch(100 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    offers = [
        make_offer("H100-SXM-80GB"),
        make_offer("A100-SXM-80GB", exposed=40 * GIB),
    ]
    result = recommend(arch, make_request(workload), offers, GPUS, {}, toy_estimate)

    needed = {g.data["gpu"]: g.data["nodes_needed"] for g in result.rejected}
    assert {g.code for g in result.rejected} == {"no_cluster_network"}
    assert needed == {"H100-SXM-80GB": 3, "A100-SXM-80GB": 5}
