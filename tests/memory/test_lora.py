"""LoRA and QLoRA: adapter counts (published), frozen base, QLoRA quantises every base linear,
adapter states, the ordering QLoRA < LoRA < full."""

from __future__ import annotations

import pytest
from mem_data import GB, arch, published_case

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.memory.formats import NF4, elements_bytes
from gpu_advisor.core.memory.lora import adapter_counts, adapter_parameters
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import TrainingWorkload


def test_e15_q_v_rank_8_on_llama2_7b():
    """E15 (Raschka): 32 layers x 2 modules x 8 x (4096 + 4096) = 4,194,304."""
    counts = adapter_counts(arch("meta-llama--Llama-2-7b-hf"), ["q_proj", "v_proj"], 8)
    assert counts.total == 32 * 2 * 8 * (4096 + 4096) == 4_194_304
    assert counts.total == published_case("E15")["value"]


def test_e17_rank_256_all_layers_with_head():
    """E17: r = 256 on every block linear and the head (Lit-GPT 'all layers'):
    per layer 4 x 256 x (4096 + 4096) + 2 x 256 x (4096 + 11008) + 256 x (11008 + 4096),
    x 32 layers, + 256 x (4096 + 32000) for lm_head = 648,871,936."""
    counts = adapter_counts(arch("meta-llama--Llama-2-7b-hf"), ["all-linear", "lm_head"], 256)
    per_layer = 4 * 256 * 8192 + 2 * 256 * (4096 + 11008) + 256 * (11008 + 4096)
    assert counts.dense == 32 * per_layer
    assert counts.head == adapter_parameters(4096, 32000, 256)
    assert counts.total == 648_871_936
    assert counts.total == published_case("E17")["secondary_values"]["trainable_params"]


def test_all_linear_covers_routed_experts_and_not_the_head():
    a = arch("mistralai--Mixtral-8x7B-v0.1")
    counts = adapter_counts(a, ["all-linear"], 8)
    assert counts.head == 0
    assert counts.routed == 32 * 8 * (8 * (4096 + 14336) * 2 + 8 * (14336 + 4096))


def test_unknown_target_names_the_field_and_the_choices():
    with pytest.raises(InvalidSpecError) as err:
        adapter_counts(arch("meta-llama--Llama-3.1-8B"), ["q_proj", "query"], 8)
    assert err.value.field == "workload.lora_targets.1"
    assert "q_proj" in err.value.message


def _train(method, **kw):
    return TrainingWorkload(
        method=method, sequence_length=2048, gradient_checkpointing="full", **kw
    )


def test_lora_freezes_the_base_and_trains_adapters_in_fp32():
    a = arch("meta-llama--Llama-3.1-8B")
    b = estimate_memory(a, _train("lora", lora_rank=16), ParallelPlan())
    n = adapter_counts(a, ["all-linear"], 16).total
    assert n == 32 * 16 * (
        2 * (4096 + 4096) + 2 * (4096 + 1024) + 2 * (4096 + 14336) + (14336 + 4096)
    )
    assert b.details["weights.frozen_base_bytes"] == 2 * a.parameters.total  # bf16 base
    assert b.weights_bytes == 2 * a.parameters.total + 4 * n  # + fp32 adapters (PEFT default)
    assert b.gradients_bytes == 4 * n  # adapter gradients only
    assert b.optimizer_bytes == 8 * n  # AdamW moments of the adapters, no master copy


def test_qlora_quantises_every_base_linear_not_only_the_targeted_ones():
    """Fault kind: QLoRA quantising only the LoRA-wrapped linears. With adapters on q_proj and
    v_proj only, every block linear is still NF4 (bitsandbytes replaces all nn.Linear but the
    head); embeddings, head and norms stay 16-bit."""
    a = arch("meta-llama--Llama-3.1-8B")
    p = a.parameters
    narrow = estimate_memory(a, _train("qlora", lora_targets=["q_proj", "v_proj"]), ParallelPlan())
    wide = estimate_memory(a, _train("qlora"), ParallelPlan())
    base = elements_bytes(p.linear, NF4) + 2 * (p.embedding + p.lm_head + p.other)
    assert narrow.details["weights.frozen_base_bytes"] == base
    assert wide.details["weights.frozen_base_bytes"] == base
    assert base / GB == pytest.approx(6_979_321_856 * 4.127 / 8 / 1e9 + 2 * 1.0509, abs=0.01)


def test_ordering_qlora_lora_full_on_the_same_workload():
    a = arch("meta-llama--Llama-3.1-8B")
    q = estimate_memory(a, _train("qlora"), ParallelPlan()).total_bytes
    lo = estimate_memory(a, _train("lora"), ParallelPlan()).total_bytes
    full = estimate_memory(a, _train("full"), ParallelPlan()).total_bytes
    assert q < lo < full


def test_qlora_llama_8b_fits_one_24gb_gpu_at_2048():
    """Issue 2 acceptance: Llama-3.1-8B QLoRA, s 2048, micro-batch 1, full checkpointing fits a
    24 GB GPU (an L4 exposes 22,888 MiB)."""
    b = estimate_memory(arch("meta-llama--Llama-3.1-8B"), _train("qlora"), ParallelPlan())
    assert b.total_bytes < 22_888 * 2**20
