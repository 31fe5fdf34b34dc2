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
    layer_shares,
    shard_params,
    stage_range,
    stage_ranges,
    uniform_stack,
)
from gpu_advisor.core.memory.parts import RememberedParts
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


def test_layer_shares_of_llama_3_1_8b_by_hand():
    # config.json: hidden 4096, 32 heads, 8 KV heads x 128, intermediate 14336, 32 layers, no
    # bias. Per layer q, o 4096 x 4096; k, v 4096 x 1024; gate, up, down 4096 x 14336: at TP 2
    # each is halved (8 KV heads split over 2 ranks)
    a = arch("meta-llama--Llama-3.1-8B")
    per_layer = (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) // 2
    (share,) = layer_shares(a, 2, 1)  # every module in every layer: one group
    assert (share.low, share.high) == (0, 32)
    assert share.dense_linear == per_layer == 109_051_904
    assert share.dense_linear_rows == (2 * 4096 + 2 * 1024 + 2 * 14336 + 4096) // 2
    assert share.matrix_count == 7
    assert share.largest_module == 4096 * 14336 // 2
    assert share.routed_linear == share.bias == 0
    # PP 4: stage 1 holds layers 8..15, so 8 layers of the group (no embedding, no head)
    shard = shard_params(a, ParallelPlan(tensor_parallel=2, pipeline_parallel=4), 1)
    assert shard.layers == 8
    assert shard.dense_linear == 8 * per_layer
    assert shard.matrix_count == 8 * 7


def _per_module(stem: str, plan: ParallelPlan, stage: int) -> tuple[int, ...]:
    """Block-linear counts of one stage summed module by module (the ungrouped sum): weight
    elements of each module's copies on one TP/EP rank (MLA's down projections whole on
    every TP rank), times the layers of its range that the stage holds; matrices with the
    embedding on the first stage and the untied head on the last."""
    a = arch(stem)
    pp = plan.pipeline_parallel
    start, end = stage_range(a.num_layers, pp, stage)
    dense = routed = 0
    matrices = (stage == 0) + (stage == pp - 1)
    for module in a.linears:
        low = a.num_layers - module.layers if module.expert != "dense" else 0
        high = low + module.layers
        n = max(0, min(high, end) - max(low, start))
        t = 1 if module.name in ("q_a_proj", "kv_a_proj_with_mqa") else plan.tensor_parallel
        if module.expert == "routed":
            copies = module.copies_per_layer // plan.expert_parallel
            routed += module.in_features * module.out_features // t * copies * n
        else:
            copies = module.copies_per_layer
            dense += module.in_features * module.out_features // t * copies * n
        matrices += copies * n
    return dense, routed, matrices


@pytest.mark.parametrize("pp", [1, 2, 8])
@pytest.mark.parametrize(("tp", "ep"), [(1, 1), (2, 4), (4, 8)])
def test_shard_params_sums_modules_of_different_layer_ranges(pp, tp, ep):
    # DeepSeek-V3: attention in all 61 layers, a dense MLP in the first 3
    # (first_k_dense_replace), shared and 256 routed experts in the last 58: three groups
    a = arch("deepseek-ai--DeepSeek-V3")
    assert sorted((s.low, s.high) for s in layer_shares(a, tp, ep)) == [(0, 3), (0, 61), (3, 61)]
    plan = ParallelPlan(tensor_parallel=tp, pipeline_parallel=pp, expert_parallel=ep)
    for stage in range(pp):
        shard = shard_params(a, plan, stage)
        found = (shard.dense_linear, shard.routed_linear, shard.matrix_count)
        assert found == _per_module("deepseek-ai--DeepSeek-V3", plan, stage)


def test_remembered_shards_are_keyed_by_tp_and_ep():
    # one RememberedParts asked about plans that share all but TP or EP: each answer is the
    # fresh shard_params, and the answers differ (a key missing TP or EP would repeat one)
    a = arch("mistralai--Mixtral-8x7B-v0.1")
    parts = RememberedParts(a)
    plans = [
        ParallelPlan(tensor_parallel=2, pipeline_parallel=4, expert_parallel=1),
        ParallelPlan(tensor_parallel=2, pipeline_parallel=4, expert_parallel=2),
        ParallelPlan(tensor_parallel=4, pipeline_parallel=4, expert_parallel=2),
        ParallelPlan(tensor_parallel=4, pipeline_parallel=2, expert_parallel=2),
    ]
    seen = []
    for plan in plans:
        for stage in range(plan.pipeline_parallel):
            shard = parts.shard(a, plan, stage)
            assert shard == shard_params(a, plan, stage)
            seen.append(shard)
    # EP 2 halves the routed experts of a stage, TP 4 halves them again
    assert seen[4].routed_linear * 2 == seen[0].routed_linear
    assert seen[8].routed_linear * 2 == seen[4].routed_linear
    assert seen[12].layers == 16
