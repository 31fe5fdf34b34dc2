"""Training model states: mixed-precision bytes per parameter spelled out, optimizers, ZeRO
stages, expert parallel, CPU offload. Expected values are hand calculations or published
figures (ZeRO paper, DeepSpeed's estimator, transformers docs)."""

from __future__ import annotations

import pytest
from mem_data import GB, arch, bug_case

from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.memory.model_states import (
    adafactor_state_elements,
    gradient_bytes_per_parameter,
    master_weight_bytes_per_parameter,
    model_state_bytes_per_parameter,
    offload_host_bytes,
    optimizer_state_bytes_per_parameter,
    zero3_gathered_bytes,
    zero_shard,
)
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import TrainingWorkload


def _states(b):
    """Weights + gradients + optimizer, without the ZeRO-3 gathered working set."""
    gathered = b.details.get("weights.zero3_gathered_bytes", 0) + b.details.get(
        "gradients.zero3_gathered_bytes", 0
    )
    return b.weights_bytes + b.gradients_bytes + b.optimizer_bytes - gathered


def test_mixed_precision_adamw_is_16_bytes_spelled_out():
    # ZeRO paper section 3.1: fp16 weights 2 + fp16 grads 2 + (fp32 master 4 + m 4 + v 4) = 16
    assert master_weight_bytes_per_parameter("bf16-mixed", True) == 4
    assert gradient_bytes_per_parameter("bf16-mixed", None) == 2
    assert optimizer_state_bytes_per_parameter("adamw", 4) == 8
    assert (
        model_state_bytes_per_parameter(
            precision="fp16-mixed", master_weights_fp32=True, gradient_dtype=None, optimizer="adamw"
        )
        == 2 + 2 + 4 + 8
    )


def test_hf_18_and_deepspeed_20_bytes_are_inputs_not_constants():
    hf = model_state_bytes_per_parameter(
        precision="bf16-mixed", master_weights_fp32=True, gradient_dtype="fp32", optimizer="adamw"
    )
    assert hf == 2 + 4 + 4 + 8  # 6 B weights (4 + 2), 4 B fp32 grads, 8 B Adam (A17)
    deepspeed = model_state_bytes_per_parameter(
        precision="bf16-mixed",
        master_weights_fp32=True,
        gradient_dtype="bf16",
        optimizer="adamw",
        fp32_gradient_copy=True,
    )
    assert deepspeed == 2 + (2 + 4) + 4 + 8  # 16-bit and fp32 grads (stage_1_and_2.py)


def test_precisions_and_optimizers():
    base = {"master_weights_fp32": True, "gradient_dtype": None}
    assert model_state_bytes_per_parameter(precision="fp32", optimizer="adamw", **base) == 4 + 4 + 8
    # pure bf16: bf16 weights, bf16 grads, AdamW moments allocated like the bf16 params
    assert model_state_bytes_per_parameter(precision="bf16", optimizer="adamw", **base) == 2 + 2 + 4
    # mixed without fp32 master weights
    assert (
        model_state_bytes_per_parameter(
            precision="bf16-mixed", master_weights_fp32=False, gradient_dtype=None, optimizer="sgd"
        )
        == 2 + 2 + 4
    )
    assert optimizer_state_bytes_per_parameter("lion", 4) == 4  # momentum only
    assert optimizer_state_bytes_per_parameter("sgd", 4) == 4  # momentum buffer
    # 8-bit AdamW: two 1-byte states + two fp32 absmax per 2048-element block
    assert optimizer_state_bytes_per_parameter("adamw-8bit") == 2 + 2 * 4 / 2048
    # Adafactor: a 4096 x 11008 matrix keeps 4096 + 11008 values, a 4096 vector keeps 4096
    assert adafactor_state_elements(4096 + 11008, 4096) == 19200


def test_zero_stages_shard_the_right_states():
    assert zero_shard(1200, stage=0, applies_from_stage=1, dp=64) == 1200
    assert zero_shard(1200, stage=1, applies_from_stage=1, dp=64) == 19  # ceil(1200 / 64)
    assert zero_shard(1200, stage=1, applies_from_stage=2, dp=64) == 1200  # grads stay at stage 1
    assert zero_shard(1200, stage=3, applies_from_stage=3, dp=4) == 300


def _full(**kw):
    return TrainingWorkload(sequence_length=128, **kw)


def test_zero2_per_gpu_paper_formula_on_a_real_model():
    """ZeRO-2: 2P replicated 16-bit weights + (2 + 12)P / N (paper section 5.2), on Llama-2-7B."""
    a = arch("meta-llama--Llama-2-7b-hf")
    p = a.parameters.total
    b = estimate_memory(a, _full(), ParallelPlan(data_parallel=8, sharding="zero2"))
    assert b.weights_bytes == 2 * p
    assert b.gradients_bytes == -(-2 * p // 8)
    assert b.optimizer_bytes == -(-4 * p // 8) + -(-8 * p // 8)
    assert _states(b) == pytest.approx(2 * p + 14 * p / 8, abs=3)


def test_b11_kind_zero2_deepspeed_and_paper_numbers():
    """B11 (DeepSpeed#5099): 7.0e9 params, ZeRO-2, 8 GPUs: paper 2P + 14P/N = 26.25 GB,
    DeepSpeed 2P + 18P/N = 29.75 GB, never the old 4P + 16P/N = 42 GB. Checked at the term
    level for the case's bare 7.0e9, and through estimate_memory on Mistral-7B's real config."""
    case = bug_case("B11")["expected"]
    p, n = 7.0e9, 8
    paper = 2 * p + (2 + 4 + 8) * p / n
    deepspeed = 2 * p + (2 + 4 + 4 + 8) * p / n
    assert paper / GB == pytest.approx(case["paper_GB"])
    assert deepspeed / GB == pytest.approx(case["deepspeed_GB"])
    a = arch("mistralai--Mistral-7B-v0.1")
    pm = a.parameters.total
    plan = ParallelPlan(data_parallel=8, sharding="zero2")
    assert _states(estimate_memory(a, _full(), plan)) == pytest.approx(2 * pm + 14 * pm / 8, abs=3)
    ds = estimate_memory(a, _full(fp32_gradient_copy=True), plan)
    assert _states(ds) == pytest.approx(2 * pm + 18 * pm / 8, abs=3)
    assert _states(ds) < 4 * pm + 16 * pm / 8  # the pre-fix formula over-counts


def test_b12_kind_70b_full_finetune_needs_15_gpus_of_80gb_for_states():
    """B12 (huggingface/blog#2245): Llama-3.1-70B full FT, bf16 mixed AdamW, ZeRO-3:
    16 B/param x 70.55e9 = 1128.9 GB of states -> 14 GPUs hold 80.6 GB each, 15 hold 75.3."""
    a = arch("meta-llama--Llama-3.1-70B")
    p = a.parameters.total
    assert 16 * p / GB == pytest.approx(bug_case("B12")["expected"]["model_states_GB"], rel=0.001)
    per_gpu = {
        n: _states(estimate_memory(a, _full(), ParallelPlan(data_parallel=n, sharding="zero3")))
        for n in (14, 15)
    }
    assert per_gpu[14] == pytest.approx(16 * p / 14, abs=16)
    assert per_gpu[14] > 80 * GB >= per_gpu[15]
    # the thread's 519 GB / 300 GB readings are far below 16 B/param
    assert 16 * p > 519 * GB > 300 * GB


def test_expert_parallel_divides_routed_experts_not_the_dense_part():
    """Mixtral-8x7B, 8 GPUs of data parallel, ZeRO-1: EP=8 keeps one expert per layer per GPU;
    the dense part (attention, embeddings, norms, routers) stays whole."""
    a = arch("mistralai--Mixtral-8x7B-v0.1")
    routed = 32 * 8 * 3 * 4096 * 14336
    dense = a.parameters.total - routed
    no_ep = estimate_memory(a, _full(), ParallelPlan(data_parallel=8, sharding="zero1"))
    ep = estimate_memory(
        a, _full(), ParallelPlan(data_parallel=8, expert_parallel=8, sharding="zero1")
    )
    assert no_ep.weights_bytes == 2 * (dense + routed)
    assert ep.weights_bytes == 2 * (dense + routed // 8)
    # optimizer + master shard over DP (dense) and expert-DP = 8 / 8 = 1 (routed, already / 8)
    assert ep.optimizer_bytes == -(-12 * dense // 8) + 12 * routed // 8


def test_zero3_gathers_the_largest_module_deepspeed_convention():
    assert zero3_gathered_bytes(32_899_072, weight_bytes=2, gradient_bytes=2, unit="module") == (
        4 * 32_899_072
    )  # DeepSpeed: largest_layer_memory = 4 * largest_layer_params
    # FSDP: current + prefetched block of params, one block of grads
    assert zero3_gathered_bytes(1000, weight_bytes=2, gradient_bytes=2, unit="block") == 6000


def test_offload_host_bytes_deepspeed_conventions():
    # A11: t5-3b 2,851M params, ZeRO-2 offload, 8 GPUs on one node (no zero.Init):
    # max(16 P, 4 x 8 P) x 1.5 = 48 P
    p = 2_851_000_000
    host = offload_host_bytes(16 * p // 8, shard_params_per_gpu=p, gpus_per_node=8, zero_init=False)
    assert host.total_bytes == int(32 * p * 1.5)
    # A13: ZeRO-3 with zero.Init: 16 P x 1.5
    host3 = offload_host_bytes(
        16 * p // 8, shard_params_per_gpu=p // 8, gpus_per_node=8, zero_init=True
    )
    assert host3.total_bytes == int(16 * p * 1.5)


def test_offload_moves_states_to_the_host():
    a = arch("meta-llama--Llama-2-7b-hf")
    p = a.parameters.total
    w = _full(cpu_offload_optimizer=True)
    b = estimate_memory(a, w, ParallelPlan(data_parallel=8, sharding="zero2"))
    assert b.weights_bytes == 2 * p  # the GPU keeps the 16-bit weights
    assert b.gradients_bytes == 0
    assert b.optimizer_bytes == 0
    assert b.host_bytes == int(max(16 * p, 4 * 8 * p) * 1.5)
