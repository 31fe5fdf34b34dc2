"""FLOPs, training step time and serving speed against hand calculations."""

from __future__ import annotations

import pytest
from msgspec import structs

from gpu_advisor.core.planner.flops import (
    decode_flops_per_token,
    matmul_parameters,
    prefill_flops,
    training_flops_per_token,
)
from gpu_advisor.core.planner.hardware import (
    PCIE_GEN4_X16_BYTES_PER_S,
    ComputePath,
    Links,
)
from gpu_advisor.core.planner.performance import (
    DECODE_BANDWIDTH_EFFICIENCY,
    deployment_tokens_per_second,
    estimate_inference,
    estimate_training,
    gradient_sync_bytes,
    max_concurrency,
    ring_allreduce_seconds,
    serving_flops,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

from .fixtures import GIB, GPUS, make_arch

EMBEDDING = 32_000 * 4096
ARCH = make_arch(10**9 + EMBEDDING, layers=32, hidden=4096, heads=32, head_dim=128)
# attention forward per token at s = 2048 with causal halving:
#   2 x (d_qk + d_v) x layers x s / 2 = 2 * 8192 * 32 * 1024
ATTENTION_FORWARD = 2 * 8192 * 32 * 1024  # 536,870,912
H100_BF16 = ComputePath(dtype="bf16", path="bf16", tflops=989.5, emulated=False)
NVLINK = Links(tp_bytes_per_s=450e9, tp_medium="nvlink", dp_bytes_per_s=450e9, dp_medium="nvlink")


def test_matmul_parameters_drop_the_gathered_embedding_only() -> None:
    assert matmul_parameters(ARCH) == 10**9  # untied: the head multiplies, the input gathers


def test_training_flops_per_token() -> None:
    base = TrainingWorkload(sequence_length=2048)
    flops = training_flops_per_token(ARCH, base)
    assert flops.model == 6 * 10**9 + 3 * ATTENTION_FORWARD
    assert flops.executed == flops.model

    full = training_flops_per_token(ARCH, TrainingWorkload(gradient_checkpointing="full"))
    assert full.model == flops.model
    assert full.executed == 8 * 10**9 + 4 * ATTENTION_FORWARD  # forward runs twice

    selective = training_flops_per_token(ARCH, TrainingWorkload(gradient_checkpointing="selective"))
    assert selective.executed == flops.model + ATTENTION_FORWARD

    lora = training_flops_per_token(ARCH, TrainingWorkload(method="lora"))
    assert lora.model == 4 * 10**9 + 3 * ATTENTION_FORWARD  # no weight gradients

    eager = training_flops_per_token(ARCH, TrainingWorkload(flash_attention=False))
    assert eager.model == 6 * 10**9 + 3 * 2 * 8192 * 32 * 2048  # full s x s scores


def test_inference_flops() -> None:
    # decode at 1,000 cached tokens: 2 N + 2 (d_qk + d_v) L ctx
    assert decode_flops_per_token(ARCH, 1000) == 2 * 10**9 + 2 * 8192 * 32 * 1000
    # prefill of 1,000 tokens: (2 N + 2 (d_qk + d_v) L P / 2) P
    assert prefill_flops(ARCH, 1000) == (2 * 10**9 + 2 * 8192 * 32 * 500) * 1000


def test_serving_flops_are_one_requests_constants() -> None:
    # context 1,256 with 512 output tokens: prompt 744, decoding at 744 + 512 / 2 = 1,000
    # cached tokens on average.
    workload = InferenceWorkload(context_length=1256, output_tokens=512, concurrency=4)
    flops = serving_flops(ARCH, workload)
    assert flops.prompt_tokens == 744.0
    assert flops.mean_context_tokens == 1000.0
    assert flops.decode_flops_per_token == 2 * 10**9 + 2 * 8192 * 32 * 1000
    assert flops.prefill_flops == (2 * 10**9 + 2 * 8192 * 32 * 372) * 744
    # passing them in changes nothing (the planner computes them once per request)
    memory = MemoryBreakdown(weights_bytes=2 * 10**9, kv_cache_bytes=GIB, total_bytes=0)
    args = (ARCH, workload, ParallelPlan(), memory, GPUS["H100-SXM-80GB"], H100_BF16, NVLINK)
    for batch in (1, 3):
        assert estimate_inference(
            *args, concurrency_limit=4, efficiency=0.4, batch=batch, flops=flops
        ) == estimate_inference(*args, concurrency_limit=4, efficiency=0.4, batch=batch)


def test_single_gpu_training_step() -> None:
    workload = TrainingWorkload(sequence_length=2048, micro_batch_size=2, tokens=1e9)
    memory = MemoryBreakdown(weights_bytes=2 * 10**9, gradients_bytes=2 * 10**9, total_bytes=0)
    estimate = estimate_training(ARCH, workload, ParallelPlan(), memory, H100_BF16, NVLINK, mfu=0.5)
    per_token = 6 * 10**9 + 3 * ATTENTION_FORWARD
    tokens_per_second = 989.5e12 * 0.5 / per_token
    assert estimate.tokens_per_step == 2 * 2048
    assert estimate.tokens_per_second == pytest.approx(tokens_per_second)
    assert estimate.time_to_result_hours == pytest.approx(1e9 / tokens_per_second / 3600)
    assert estimate.mfu == pytest.approx(0.5)
    assert estimate.dp_comm_seconds == 0.0


def test_full_recomputation_costs_time_and_lowers_reported_mfu() -> None:
    workload = TrainingWorkload(sequence_length=2048, gradient_checkpointing="full")
    memory = MemoryBreakdown(weights_bytes=0, total_bytes=0)
    estimate = estimate_training(ARCH, workload, ParallelPlan(), memory, H100_BF16, NVLINK, mfu=0.5)
    executed = 8 * 10**9 + 4 * ATTENTION_FORWARD
    model = 6 * 10**9 + 3 * ATTENTION_FORWARD
    assert estimate.tokens_per_second == pytest.approx(989.5e12 * 0.5 / executed)
    assert estimate.mfu == pytest.approx(0.5 * model / executed)


def test_gradient_sync_bytes_per_zero_stage() -> None:
    # unsharded gradients G = 1e9 B, weights W = 1e9 B, DP = 4
    plain = MemoryBreakdown(weights_bytes=10**9, gradients_bytes=10**9, total_bytes=0)
    assert gradient_sync_bytes(ParallelPlan(data_parallel=4), plain) == 2 * 3 / 4 * 10**9
    zero2 = MemoryBreakdown(weights_bytes=10**9, gradients_bytes=10**9 // 4, total_bytes=0)
    plan2 = ParallelPlan(data_parallel=4, sharding="zero2")
    assert gradient_sync_bytes(plan2, zero2) == 2 * 3 / 4 * 10**9
    zero3 = MemoryBreakdown(weights_bytes=10**9 // 4, gradients_bytes=10**9 // 4, total_bytes=0)
    plan3 = ParallelPlan(data_parallel=4, sharding="zero3")
    assert gradient_sync_bytes(plan3, zero3) == 3 / 4 * (2 * 10**9 + 10**9)  # 1.5x plain


def test_gradient_traffic_over_pcie_is_exposed_beyond_the_backward_pass() -> None:
    # DP = 8 over PCIe 4.0 (31.5e9 B/s per direction), 16e9 B of bf16 gradients per GPU:
    # all-reduce moves 2 * 7/8 * 16e9 = 28e9 B -> 28e9 / 31.5e9 = 0.889 s per step.
    # Compute per step: 8 x 2,048 tokens x F / (8 x 989.5e12 x 0.5); backward hides 2/3 of it.
    workload = TrainingWorkload(sequence_length=2048)
    memory = MemoryBreakdown(weights_bytes=16 * 10**9, gradients_bytes=16 * 10**9, total_bytes=0)
    pcie = Links(
        tp_bytes_per_s=PCIE_GEN4_X16_BYTES_PER_S,
        tp_medium="pcie",
        dp_bytes_per_s=PCIE_GEN4_X16_BYTES_PER_S,
        dp_medium="pcie",
    )
    plan = ParallelPlan(data_parallel=8)
    estimate = estimate_training(ARCH, workload, plan, memory, H100_BF16, pcie, mfu=0.5)
    per_token = 6 * 10**9 + 3 * ATTENTION_FORWARD
    compute = 8 * 2048 * per_token / (8 * 989.5e12 * 0.5)
    comm = 2 * 7 / 8 * 16e9 / 31.5e9
    assert estimate.dp_comm_seconds == pytest.approx(comm)
    assert estimate.exposed_comm_seconds == pytest.approx(comm - 2 / 3 * compute)
    assert estimate.step_time_seconds == pytest.approx(compute + comm - 2 / 3 * compute)


def test_pipeline_bubble_with_default_accumulation() -> None:
    # PP = 4 without a global batch: 4 x 4 = 16 micro-batches, bubble (4 - 1) / 16.
    workload = TrainingWorkload(sequence_length=2048)
    memory = MemoryBreakdown(weights_bytes=0, total_bytes=0)
    plan = ParallelPlan(pipeline_parallel=4)
    estimate = estimate_training(ARCH, workload, plan, memory, H100_BF16, NVLINK, mfu=0.5)
    assert estimate.accumulation_steps == 16
    assert estimate.bubble_fraction == 3 / 16
    ideal = 16 * 2048 * (6 * 10**9 + 3 * ATTENTION_FORWARD) / (4 * 989.5e12 * 0.5)
    assert estimate.compute_seconds == pytest.approx(ideal * (1 + 3 / 16))


def test_ring_allreduce() -> None:
    assert ring_allreduce_seconds(1e9, 4, 1e9) == pytest.approx(2 * 3 / 4)
    assert ring_allreduce_seconds(1e9, 1, 1e9) == 0.0


def test_max_concurrency_from_the_kv_pool() -> None:
    workload = InferenceWorkload(concurrency=8, context_length=4096)
    one_replica = ParallelPlan()
    # KV of 8 sequences = 4 GiB -> 0.5 GiB each; a 10 GiB pool holds 20 (the usable 80 GiB
    # would hold (80 - 6) / 0.5 = 148 beside the 6 GiB of weights: the pool binds).
    memory = MemoryBreakdown(
        weights_bytes=6 * GIB, kv_cache_bytes=4 * GIB, total_bytes=10 * GIB, kv_pool_bytes=10 * GIB
    )
    assert max_concurrency(memory, workload, one_replica, usable_bytes=80 * GIB) == 20
    # with headroom only 14 GiB usable: (14 - 6) / 0.5 = 16 < 20
    assert max_concurrency(memory, workload, one_replica, usable_bytes=14 * GIB) == 16
    # two replicas (data_parallel 2): the breakdown holds a share of 4 sequences, 1 GiB each
    assert max_concurrency(memory, workload, ParallelPlan(data_parallel=2), 80 * GIB) == 10
    # no engine pool (generic engine): the prefill activations grow with the batch too:
    # 2 GiB for 8 sequences = 0.25 GiB each; usable 20 GiB - 6 GiB of weights = 14 GiB
    # -> 14 / (0.5 + 0.25) = 18.7 -> 18 sequences
    generic = MemoryBreakdown(
        weights_bytes=6 * GIB,
        kv_cache_bytes=4 * GIB,
        activations_bytes=2 * GIB,
        total_bytes=12 * GIB,
    )
    assert max_concurrency(generic, workload, one_replica, usable_bytes=20 * GIB) == 18


def test_deployment_rate_sums_the_busy_replicas() -> None:
    def rate(batch: int) -> float:  # a replica's tokens/s at a batch: 100 x batch^0.5
        return 100.0 * batch**0.5

    # 10 sequences over 4 replicas: 2 replicas serve 3, 2 serve 2
    assert deployment_tokens_per_second(rate, 10, 4) == pytest.approx(
        2 * 100 * 3**0.5 + 2 * 100 * 2**0.5
    )
    # one sequence runs on one replica: 8 replicas are as fast as 1
    assert deployment_tokens_per_second(rate, 1, 8) == deployment_tokens_per_second(rate, 1, 1)
    assert deployment_tokens_per_second(rate, 1, 8) == 100.0
    # 3 sequences on 8 replicas: 3 busy ones
    assert deployment_tokens_per_second(rate, 3, 8) == pytest.approx(300.0)


def test_decode_is_bandwidth_bound_at_batch_one() -> None:
    # 7e9-parameter replica on one H100: 14e9 B of weights, KV 0.5 GiB per 4,096-token sequence.
    # prompt = 4,096 - 256 = 3,840; mean context while decoding = 3,840 + 256 / 2 = 3,968.
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(concurrency=1, context_length=4096, output_tokens=256)
    memory = MemoryBreakdown(weights_bytes=14 * 10**9, kv_cache_bytes=GIB // 2, total_bytes=0)
    estimate = estimate_inference(
        arch,
        workload,
        ParallelPlan(),
        memory,
        GPUS["H100-SXM-80GB"],
        H100_BF16,
        NVLINK,
        concurrency_limit=10,
        efficiency=0.4,
    )
    bandwidth = 3.35e12 * DECODE_BANDWIDTH_EFFICIENCY
    step = (14e9 + GIB / 2 * 3968 / 4096) / bandwidth
    assert estimate.decode_bound == "memory"
    assert estimate.decode_step_seconds == pytest.approx(step)
    prefill = max(prefill_flops(arch, 3840) / (989.5e12 * 0.4), 14e9 / bandwidth)
    assert estimate.time_to_first_token_seconds == pytest.approx(prefill + step)
    assert estimate.tokens_per_second == pytest.approx(256 / (prefill + 256 * step))
    assert estimate.request_latency_seconds == pytest.approx(prefill + 256 * step)


def test_tensor_parallel_decode_pays_two_all_reduces_per_layer_over_nvlink() -> None:
    # The replica of the batch-one test split TP=8 over NVLink: each GPU reads 1/8 of the
    # weights and of the KV cache per step, and every one of the 32 layers runs 2 all-reduces
    # of one token's activations (1 x 4,096 x 2 B = 8,192 B): 9 us of latency each (vLLM's
    # custom all-reduce on H100, sglang PR #2904) plus the ring traffic 2 x 7/8 x 8,192 B at
    # 450 GB/s. Before, NVLink was free: the step was the memory read alone.
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(concurrency=1, context_length=4096, output_tokens=256)
    memory = MemoryBreakdown(weights_bytes=14 * 10**9 // 8, kv_cache_bytes=GIB // 16, total_bytes=0)
    estimate = estimate_inference(
        arch,
        workload,
        ParallelPlan(tensor_parallel=8),
        memory,
        GPUS["H100-SXM-80GB"],
        H100_BF16,
        NVLINK,
        concurrency_limit=10,
        efficiency=0.4,
    )
    bandwidth = 3.35e12 * DECODE_BANDWIDTH_EFFICIENCY
    read = (14e9 / 8 + GIB / 16 * 3968 / 4096) / bandwidth
    all_reduce = 9e-6 + 2 * 7 / 8 * 8192 / 450e9
    assert estimate.decode_step_seconds == pytest.approx(read + 32 * 2 * all_reduce)
    # 64 all-reduces add 0.578 ms to the 0.903 ms read of 1/8 of the weights and KV cache
    assert 32 * 2 * all_reduce == pytest.approx(578.0e-6, rel=1e-3)


def test_moe_decode_reads_only_the_touched_experts() -> None:
    # 8 experts, 2 per token, routed experts = half of all weights. Batch 1 touches
    # 1 - (1 - 2/8)^1 = 0.25 of them: read (0.5 + 0.5 * 0.25) x weights.
    arch = make_arch(
        10 * 10**9, experts=8, experts_per_token=2, routed_expert=5 * 10**9, active=4 * 10**9
    )
    workload = InferenceWorkload(concurrency=1, context_length=1024, output_tokens=24)
    memory = MemoryBreakdown(weights_bytes=20 * 10**9, total_bytes=0)
    estimate = estimate_inference(
        arch,
        workload,
        ParallelPlan(),
        memory,
        GPUS["H100-SXM-80GB"],
        H100_BF16,
        NVLINK,
        concurrency_limit=None,
        efficiency=0.4,
    )
    bandwidth = 3.35e12 * DECODE_BANDWIDTH_EFFICIENCY
    assert estimate.decode_step_seconds == pytest.approx((0.5 + 0.5 * 0.25) * 20e9 / bandwidth)


def test_an_encoder_only_model_encodes_its_input_and_does_not_decode() -> None:
    # BERT-style: no generation. A batch of 32 sequences of the whole 512-token context
    # (output_tokens does not apply) runs one forward pass: 32 x prefill FLOPs of 512 tokens
    # over peak x efficiency, or one read of the weights if that is longer. The rate counts
    # input tokens: 32 x 512 / forward time.
    arch = structs.replace(make_arch(10**9 + EMBEDDING), encoder_only=True)
    workload = InferenceWorkload(concurrency=32, context_length=512, output_tokens=256)
    memory = MemoryBreakdown(weights_bytes=2 * 10**9, total_bytes=0)
    estimate = estimate_inference(
        arch,
        workload,
        ParallelPlan(),
        memory,
        GPUS["H100-SXM-80GB"],
        H100_BF16,
        NVLINK,
        concurrency_limit=None,
        efficiency=0.4,
    )
    bandwidth = 3.35e12 * DECODE_BANDWIDTH_EFFICIENCY
    forward = max(32 * prefill_flops(arch, 512) / (989.5e12 * 0.4), 2e9 / bandwidth)
    assert estimate.batch == 32
    assert estimate.decode_step_seconds == 0.0
    assert estimate.time_to_first_token_seconds == pytest.approx(forward)
    assert estimate.tokens_per_second == pytest.approx(32 * 512 / forward)


def test_a_replica_serves_its_share_of_the_sequences() -> None:
    # 10 sequences on 4 replicas (data_parallel 4): a replica decodes ceil(10 / 4) = 3; the
    # breakdown holds 3 sequences' KV (0.5 GiB each), so each step reads 1.5 GiB of KV x
    # the mean context share 3,968 / 4,096 beside the 14e9 B of weights.
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(concurrency=10, context_length=4096, output_tokens=256)
    memory = MemoryBreakdown(weights_bytes=14 * 10**9, kv_cache_bytes=3 * GIB // 2, total_bytes=0)
    estimate = estimate_inference(
        arch,
        workload,
        ParallelPlan(data_parallel=4),
        memory,
        GPUS["H100-SXM-80GB"],
        H100_BF16,
        NVLINK,
        concurrency_limit=None,
        efficiency=0.4,
    )
    bandwidth = 3.35e12 * DECODE_BANDWIDTH_EFFICIENCY
    assert estimate.batch == 3
    assert estimate.decode_step_seconds == pytest.approx(
        (14e9 + 3 * GIB / 2 * 3968 / 4096) / bandwidth
    )
