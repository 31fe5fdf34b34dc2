"""Pipeline stages and layer kinds: which layers a stage holds, counted by hand from real
configs; which stages can be the most loaded."""

from __future__ import annotations

import pytest
from mem_data import arch

from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.memory import parts as parts_module
from gpu_advisor.core.memory.activation_stages import layer_kinds
from gpu_advisor.core.memory.activations import LayerKind
from gpu_advisor.core.memory.layout import (
    heaviest_stage_candidates,
    stage_range,
    stage_ranges,
    uniform_stack,
)
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

DENSE = LayerKind(stack="decoder")
MOE = LayerKind(stack="decoder", moe=True)


def test_stage_range_gives_the_first_stages_the_remainder():
    # 62 layers over 4 stages: 62 = 4 x 15 + 2, so stages 0 and 1 take 16, stages 2 and 3 take 15
    assert [stage_range(62, 4, s) for s in range(4)] == [(0, 16), (16, 32), (32, 47), (47, 62)]
    for total in (1, 7, 32, 61, 80, 126):
        for pp in range(1, total + 1):
            assert [stage_range(total, pp, s) for s in range(pp)] == stage_ranges(total, pp)


def test_layer_kinds_dense_first_layers_of_deepseek_v3():
    a = arch("deepseek-ai--DeepSeek-V3")
    # first_k_dense_replace = 3: layers 0-2 dense, 3-60 MoE (61 layers)
    assert layer_kinds(a, (0, 16), 4096) == [(DENSE, 3), (MOE, 16 - 3)]
    assert layer_kinds(a, (16, 32), 4096) == [(MOE, 16)]
    assert layer_kinds(a, (0, 61), 4096) == [(DENSE, 3), (MOE, 58)]


def test_layer_kinds_sliding_window_layers_of_gemma_2():
    a = arch("google--gemma-2-9b")
    # sliding_window 4096 on even layers, full attention on odd layers
    windowed = LayerKind(stack="decoder", windowed=True)
    # layers 0..4: 0, 2, 4 windowed (window 4096 < 8192 tokens), 1, 3 full
    assert layer_kinds(a, (0, 5), 8192) == [(windowed, 3), (DENSE, 2)]
    # layers 3..6: 4, 6 windowed; 3, 5 full -- listed in the order of their first layer
    assert layer_kinds(a, (3, 7), 8192) == [(DENSE, 2), (windowed, 2)]
    # a window as long as the sequence masks nothing: every layer is a full-attention layer
    assert layer_kinds(a, (0, 5), 4096) == [(DENSE, 5)]


def test_layer_kinds_encoder_then_decoder_of_t5():
    a = arch("google-t5--t5-base")
    # 12 encoder layers (stack indices 0-11) then 12 decoder layers with cross-attention
    cross = LayerKind(stack="decoder", cross_attention=True)
    assert layer_kinds(a, (10, 14), 512) == [(LayerKind(stack="encoder"), 2), (cross, 2)]
    assert layer_kinds(a, (12, 24), 512) == [(cross, 12)]


def test_heaviest_stage_candidates_on_a_uniform_stack():
    a = arch("meta-llama--Llama-3.1-70B")
    assert uniform_stack(a)
    # 80 layers over 16 stages: 5 each; stages 1..14 alike, so 1 stands for them
    assert heaviest_stage_candidates(a, 16) == [0, 1, 15]
    # 80 over 64: stages 0-15 take 2 layers, 16-63 take 1: first middle stage of each size
    assert heaviest_stage_candidates(a, 64) == [0, 1, 16, 63]
    assert heaviest_stage_candidates(a, 3) == [0, 1, 2]


def test_every_stage_counts_where_layers_differ():
    # dense-first MoE layers, sliding-window layers, encoder + decoder: positions matter
    for stem in ("deepseek-ai--DeepSeek-V3", "google--gemma-2-9b", "google-t5--t5-base"):
        a = arch(stem)
        assert not uniform_stack(a)
        assert heaviest_stage_candidates(a, 8) == list(range(8))


@pytest.mark.parametrize(
    "workload",
    [
        TrainingWorkload(sequence_length=4096, micro_batch_size=2),
        TrainingWorkload(method="lora", global_batch_size=64),
        InferenceWorkload(context_length=8192, concurrency=8),
    ],
)
@pytest.mark.parametrize("pp", [5, 16, 32, 64])
def test_evaluating_only_the_heaviest_stages_keeps_the_breakdown(workload, pp, monkeypatch):
    a = arch("meta-llama--Llama-3.1-70B")
    plan = ParallelPlan(tensor_parallel=2, pipeline_parallel=pp, data_parallel=2)
    fast = estimate_memory(a, workload, plan, capacity_bytes=80 * 2**30)
    monkeypatch.setattr(parts_module, "heaviest_stage_candidates", lambda _arch, n: list(range(n)))
    assert fast == estimate_memory(a, workload, plan, capacity_bytes=80 * 2**30)
