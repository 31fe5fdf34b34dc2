"""Which parameters one GPU holds under a parallel plan (before ZeRO/FSDP sharding).

The heaviest GPU of a plan is a GPU of one pipeline stage, one tensor-parallel rank and one
expert-parallel rank. This module splits the architecture's exact parameter accounting
(:class:`~gpu_advisor.core.architecture.ParameterCounts` and the block linears) over those three
dimensions; ZeRO/FSDP sharding over data parallel is applied later, per training state.

Conventions (sources):

* Pipeline parallel splits the layer stack (encoder layers first, then decoder layers) into
  contiguous stages; when the layers do not divide evenly the first stages take one more layer.
  The token embedding lives on the first stage and the output head on the last; with tied
  embeddings and PP > 1 the last stage holds its own copy of the embedding matrix for the output
  layer (Megatron-LM ``LanguageModule.setup_embeddings_and_output_layer``).
* Tensor parallel splits every block linear and the vocabulary-parallel embedding/head by t
  (Megatron-LM ``ColumnParallelLinear``/``RowParallelLinear``/``VocabParallelEmbedding``; Shoeybi
  et al. 2019, section 3). K/V projections are replicated when t exceeds the KV heads: each rank
  holds max(1, kv_heads / t) KV heads (vLLM ``QKVParallelLinear`` ``num_kv_head_replicas``).
  MLA's low-rank down projections (``q_a_proj``, ``kv_a_proj_with_mqa``) are replicated (vLLM
  ``deepseek_v2.py`` builds them as ``ReplicatedLinear``). Norms and routers are replicated.
* Expert parallel splits the routed experts of each MoE layer over ``expert_parallel`` ranks carved
  out of the data-parallel group, and each expert is further split by t (Megatron-Core MoE with
  ``expert_tensor_parallel_size`` = ``tensor_model_parallel_size``). Serving a model with vLLM's
  TP + EP over t GPUs holds the same bytes as TP = t here.
* Modules present in fewer layers than the stack (dense-first layers of DeepSeek-V3, dense FFNs of
  MoE models) are placed as the configs place them: routed/shared experts in the last layers,
  dense FFNs in the first layers.
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture, LinearModule
from gpu_advisor.core.results import ParallelPlan

REPLICATED_UNDER_TP = frozenset({"q_a_proj", "kv_a_proj_with_mqa"})
"""Block linears vLLM/SGLang keep whole on every tensor-parallel rank (MLA down projections)."""


class ShardParams(Struct, frozen=True, kw_only=True):
    """Parameter elements on one GPU of one pipeline stage (one TP rank, one EP rank).

    Attributes:
        stage: pipeline stage index (0-based).
        layers: transformer layers on this stage.
        embedding: token/position embedding elements (vocab-parallel over TP).
        lm_head: output head elements (untied head, or the tied copy on the last stage).
        dense_linear: weight elements of the non-routed block linears (attention, dense FFN,
            shared experts), the part quantised formats apply to.
        dense_linear_rows: output channels of those matrices (for per-channel scales).
        routed_linear: weight elements of routed experts on this GPU.
        routed_linear_rows: output channels of those matrices.
        bias: bias elements of all block linears on this GPU.
        routed_bias: the routed-expert part of ``bias``.
        other: norms, routers, sinks... (replicated over TP).
        factored_elements: sum over every matrix on this GPU of (rows + cols), the size of
            Adafactor's factored second moment (Shazeer & Stern 2018, section 3).
        matrix_count: matrices counted in ``factored_elements``.
        largest_module: elements of the largest single module on this GPU (DeepSpeed's
            "largest layer", the unit ZeRO-3 gathers).
        block_params: elements of one transformer block on this GPU (the FSDP wrap unit).
    """

    stage: int
    layers: int
    embedding: int
    lm_head: int
    dense_linear: int
    dense_linear_rows: int
    routed_linear: int
    routed_linear_rows: int
    bias: int
    routed_bias: int
    other: int
    factored_elements: int
    matrix_count: int
    largest_module: int
    block_params: int

    @property
    def total(self) -> int:
        """All parameter elements on this GPU."""
        return (
            self.embedding
            + self.lm_head
            + self.dense_linear
            + self.routed_linear
            + self.bias
            + self.other
        )

    @property
    def routed(self) -> int:
        """Routed-expert elements (weights and biases) on this GPU."""
        return self.routed_linear + self.routed_bias

    @property
    def non_routed(self) -> int:
        """Everything but the routed experts."""
        return self.total - self.routed


def stack_layers(arch: Architecture) -> tuple[int, int]:
    """(encoder layers, decoder layers) of the stack that pipeline parallel splits."""
    if arch.encoder_only:
        return arch.num_layers, 0
    return arch.num_encoder_layers, arch.num_layers


def stage_ranges(total_layers: int, pipeline_parallel: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) layer ranges of each stage; the first stages take the remainder.

    Example: 62 layers over 4 stages -> sizes 16, 16, 15, 15.
    """
    base, extra = divmod(total_layers, pipeline_parallel)
    ranges = []
    start = 0
    for stage in range(pipeline_parallel):
        size = base + (1 if stage < extra else 0)
        ranges.append((start, start + size))
        start += size
    return ranges


def stage_range(total_layers: int, pipeline_parallel: int, stage: int) -> tuple[int, int]:
    """The [start, end) layer range of one stage: ``stage_ranges(...)[stage]`` in O(1).

    Example: 62 layers over 4 stages, stage 2 -> (32, 47).
    """
    base, extra = divmod(total_layers, pipeline_parallel)
    start = stage * base + min(stage, extra)
    return start, start + base + (1 if stage < extra else 0)


def _module_range(
    module: LinearModule, encoder_layers: int, decoder_layers: int
) -> tuple[int, int]:
    """The [start, end) layer indices (in the whole stack) holding ``module``."""
    if module.stack == "encoder":
        offset, length = 0, encoder_layers if encoder_layers else decoder_layers
    else:
        offset, length = encoder_layers, decoder_layers
    n = min(module.layers, length)
    if n >= length:
        return offset, offset + length
    if module.expert in ("routed", "shared"):
        return offset + length - n, offset + length
    return offset, offset + n


def uniform_stack(arch: Architecture) -> bool:
    """Every layer of the stack is alike: one stack (no encoder-decoder), no sliding-window
    layers, every MoE layer or none, and every block linear in every layer. Pipeline stages
    with the same layer count, other than the first and the last, then hold the same
    parameters, KV cache and per-layer activations."""
    enc, dec = stack_layers(arch)
    if (enc and dec) or arch.layer_windows:
        return False
    if arch.is_moe and 0 < arch.num_moe_layers < arch.num_layers:
        return False
    everything = (0, enc + dec)
    return all(_module_range(m, enc, dec) == everything for m in arch.linears)


def heaviest_stage_candidates(arch: Architecture, pipeline_parallel: int) -> list[int]:
    """Pipeline stages among which the most loaded one is, ascending.

    All stages in general. On a :func:`uniform_stack`, a middle stage (neither first nor last)
    holds what an earlier middle stage of the same layer count holds, and no more activations
    (1F1B keeps fewer micro-batches in flight on later stages): of the middle stages only the
    first of each layer count can be the heaviest, so the search over stages -- where the first
    of equal totals wins -- takes the first stage, at most two middle stages and the last.
    """
    pp = pipeline_parallel
    if pp <= 3 or not uniform_stack(arch):
        return list(range(pp))
    enc, dec = stack_layers(arch)
    sizes: set[int] = set()
    stages = [0]
    for stage in range(1, pp - 1):
        start, end = stage_range(enc + dec, pp, stage)
        if end - start not in sizes:
            sizes.add(end - start)
            stages.append(stage)
        if len(sizes) == 2:
            break
    stages.append(pp - 1)
    return stages


def _tp_divisor_elements(module: LinearModule, arch: Architecture, tp: int) -> tuple[int, int]:
    """(weight elements, output rows) of ONE copy of ``module`` on one TP rank."""
    weight = module.in_features * module.out_features
    rows = module.out_features
    if tp == 1:
        return weight, rows
    if module.name in REPLICATED_UNDER_TP:
        return weight, rows
    kv_width = arch.num_kv_heads * arch.head_dim
    if (
        module.attention
        and arch.mla is None
        and arch.num_kv_heads < arch.num_attention_heads
        and tp > arch.num_kv_heads
    ):
        q_width = arch.num_attention_heads * arch.head_dim
        kv_per_rank = max(1, arch.num_kv_heads // tp) * arch.head_dim
        if module.out_features == kv_width:
            # k or v projection: replicated once TP exceeds the KV heads.
            return module.in_features * kv_per_rank, kv_per_rank
        if module.out_features == q_width + 2 * kv_width:
            # fused qkv: the q part splits, the k/v parts replicate.
            q_rows = q_width // tp
            rows_per_rank = q_rows + 2 * kv_per_rank
            return module.in_features * rows_per_rank, rows_per_rank
    return -(-weight // tp), -(-rows // tp)


class LayerShare(Struct, frozen=True, kw_only=True):
    """The block linears of one layer range on one GPU (one TP rank, one EP rank): elements
    per layer of the range, summed over the modules that span exactly that range.

    Attributes:
        low: first layer (in the whole stack) holding these modules.
        high: one past the last.
        dense_linear: non-routed weight elements per layer.
        dense_linear_rows: their output channels per layer.
        routed_linear: routed-expert weight elements per layer (this EP rank's experts).
        routed_linear_rows: their output channels per layer.
        bias: bias elements per layer.
        routed_bias: the routed-expert part of ``bias``.
        factored_elements: rows + cols of every matrix, per layer.
        matrix_count: matrices per layer.
        largest_module: the largest gathered unit among the modules (elements).
        block_params: elements of these modules in one layer (weights and biases).
    """

    low: int
    high: int
    dense_linear: int = 0
    dense_linear_rows: int = 0
    routed_linear: int = 0
    routed_linear_rows: int = 0
    bias: int = 0
    routed_bias: int = 0
    factored_elements: int = 0
    matrix_count: int = 0
    largest_module: int = 0
    block_params: int = 0


def layer_shares(
    arch: Architecture, tensor_parallel: int, expert_parallel: int
) -> tuple[LayerShare, ...]:
    """The block linears on one GPU of TP ``tensor_parallel`` and EP ``expert_parallel``,
    grouped by the layer range holding them (one group on a :func:`uniform_stack`).

    Every count :func:`shard_params` sums over the modules of a stage is the modules'
    elements per layer times the layers the stage holds of their range, so it sums these
    groups instead (the same integers); the stage then decides only how many layers of each
    range it holds. Depends on TP and EP alone, not on PP or the stage.
    """
    tp, ep = tensor_parallel, expert_parallel
    enc, dec = stack_layers(arch)
    groups: dict[tuple[int, int], dict[str, int]] = {}
    for module in arch.linears:
        group = groups.setdefault(_module_range(module, enc, dec), dict.fromkeys(_SHARE_FIELDS, 0))
        w_one, rows_one = _tp_divisor_elements(module, arch, tp)
        copies = module.copies_per_layer
        is_routed = module.expert == "routed"
        if is_routed:
            copies = -(-copies // ep)
        weight = w_one * copies
        rows = rows_one * copies
        b = rows if module.bias else 0
        if is_routed:
            group["routed_linear"] += weight
            group["routed_linear_rows"] += rows
            group["routed_bias"] += b
        else:
            group["dense_linear"] += weight
            group["dense_linear_rows"] += rows
        group["bias"] += b
        cols_one = -(-w_one // rows_one) if rows_one else 0
        group["factored_elements"] += (rows_one + cols_one) * copies
        group["matrix_count"] += copies
        module_elems = w_one * copies + (rows_one * copies if module.bias else 0)
        # Routed experts are one fused module per layer in transformers >= 5 (3-D expert
        # weights), so the whole layer's experts are gathered together under ZeRO-3.
        unit = module_elems if is_routed else module_elems // copies
        group["largest_module"] = max(group["largest_module"], unit)
        group["block_params"] += module_elems
    return tuple(LayerShare(low=low, high=high, **fields) for (low, high), fields in groups.items())


_SHARE_FIELDS = (
    "dense_linear",
    "dense_linear_rows",
    "routed_linear",
    "routed_linear_rows",
    "bias",
    "routed_bias",
    "factored_elements",
    "matrix_count",
    "largest_module",
    "block_params",
)


def shard_params(
    arch: Architecture,
    plan: ParallelPlan,
    stage: int,
    *,
    shares: tuple[LayerShare, ...] | None = None,
) -> ShardParams:
    """The parameters one GPU of pipeline stage ``stage`` holds under ``plan``.

    Args:
        arch: the resolved architecture.
        plan: the parallel plan (TP, PP, EP used here; DP sharding is applied per state later).
        stage: 0 <= stage < plan.pipeline_parallel.
        shares: :func:`layer_shares` of ``arch`` at the plan's TP and EP when the caller has
            them (computed here otherwise).

    Returns:
        Element counts (not bytes) per category; see :class:`ShardParams`.
    """
    tp = plan.tensor_parallel
    pp = plan.pipeline_parallel
    if shares is None:
        shares = layer_shares(arch, tp, plan.expert_parallel)
    enc, dec = stack_layers(arch)
    total_layers = enc + dec
    start, end = stage_range(total_layers, pp, stage)
    layers_here = end - start
    first, last = stage == 0, stage == pp - 1

    counts = arch.parameters
    embedding = -(-counts.embedding // tp) if first else 0
    lm_head = 0
    if last:
        if counts.lm_head:
            lm_head = -(-counts.lm_head // tp)
        elif pp > 1 and arch.tie_word_embeddings and not arch.encoder_only:
            lm_head = -(-counts.embedding // tp)

    dense = dense_rows = routed = routed_rows = bias = routed_bias = 0
    factored = matrices = 0
    largest = 0
    block = 0
    for share in shares:
        n_layers = min(share.high, end) - max(share.low, start)
        if n_layers <= 0:
            continue
        dense += share.dense_linear * n_layers
        dense_rows += share.dense_linear_rows * n_layers
        routed += share.routed_linear * n_layers
        routed_rows += share.routed_linear_rows * n_layers
        bias += share.bias * n_layers
        routed_bias += share.routed_bias * n_layers
        factored += share.factored_elements * n_layers
        matrices += share.matrix_count * n_layers
        largest = max(largest, share.largest_module)
        block += share.block_params

    if not arch.linears and counts.linear:
        # A bare parameter count (approximate architecture) without module list: spread the
        # linear parameters evenly over the layers.
        dense = -(-counts.linear * layers_here // (max(total_layers, 1) * tp))
        block = -(-counts.linear // (max(total_layers, 1) * tp))
        largest = block
    other_total = counts.other
    other = other_total * layers_here // total_layers if total_layers else other_total
    block += other_total // total_layers if total_layers else 0
    if embedding:
        vocab_rows = -(-arch.vocab_size // tp)
        factored += vocab_rows + arch.hidden_size
        matrices += 1
        largest = max(largest, embedding)
    if lm_head:
        factored += -(-arch.vocab_size // tp) + arch.hidden_size
        matrices += 1
        largest = max(largest, lm_head)

    return ShardParams(
        stage=stage,
        layers=layers_here,
        embedding=embedding,
        lm_head=lm_head,
        dense_linear=dense,
        dense_linear_rows=dense_rows,
        routed_linear=routed,
        routed_linear_rows=routed_rows,
        bias=bias,
        routed_bias=routed_bias,
        other=other,
        factored_elements=factored,
        matrix_count=matrices,
        largest_module=largest,
        block_params=block,
    )
