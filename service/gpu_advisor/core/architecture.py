"""The resolved architecture of a model: the numbers every later step of the pipeline uses.

An :class:`Architecture` is built by :mod:`gpu_advisor.core.models` from a preset, a Hugging
Face ``config.json`` or a bare parameter count (DESIGN pipeline step 1). It carries the shape
numbers (for KV cache, activations and FLOPs), an exact parameter accounting
(:class:`ParameterCounts`) and the list of linear modules of the transformer blocks
(:class:`LinearModule`), which quantisation, LoRA targeting and tensor/expert parallel split use.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

ExpertKind = Literal["dense", "routed", "shared"]
StackKind = Literal["decoder", "encoder"]


class LinearModule(Struct, frozen=True, kw_only=True):
    """One kind of ``nn.Linear`` inside the transformer blocks.

    Attributes:
        name: Hugging Face module name (``q_proj``, ``gate_proj``, ``c_attn``, ``wi``...), the
            name LoRA ``target_modules`` match.
        in_features: input width (elements).
        out_features: output width (elements).
        bias: whether the module carries a bias vector of ``out_features`` elements.
        copies_per_layer: instances per layer that has it (routed experts: the expert count).
        layers: number of layers that have this module.
        expert: ``dense`` for attention and dense MLPs, ``routed`` for routed MoE experts,
            ``shared`` for always-active shared experts.
        stack: ``decoder`` or ``encoder`` (encoder-decoder and encoder-only families).
        attention: True for attention projections (q/k/v/o and MLA projections).
    """

    name: str
    in_features: int
    out_features: int
    bias: bool = False
    copies_per_layer: int = 1
    layers: int
    expert: ExpertKind = "dense"
    stack: StackKind = "decoder"
    attention: bool = False

    @property
    def weight_parameters(self) -> int:
        """Weight elements over all copies and layers."""
        return self.in_features * self.out_features * self.copies_per_layer * self.layers

    @property
    def bias_parameters(self) -> int:
        """Bias elements over all copies and layers (0 without bias)."""
        return self.out_features * self.copies_per_layer * self.layers if self.bias else 0

    @property
    def parameters(self) -> int:
        return self.weight_parameters + self.bias_parameters


class ParameterCounts(Struct, frozen=True, kw_only=True):
    """Exact parameter accounting (elements, not bytes). Tied weights are counted once.

    Invariant: ``total == embedding + lm_head + linear + other``.

    Attributes:
        total: all parameters resident in memory (all experts of an MoE).
        embedding: token embeddings plus learned position / token-type embeddings.
        lm_head: separate output projection; 0 when ``tie_word_embeddings``.
        linear: every ``LinearModule`` of the blocks, weights and biases.
        routed_expert: the part of ``linear`` (and router-free expert params) in routed experts.
        other: norms, routers, attention sinks, relative position biases, poolers...
        active: parameters used per token (routed experts counted ``experts_per_token`` times
            out of ``num_experts``); equals ``total`` for dense models. Drives FLOPs only.
    """

    total: int
    embedding: int
    lm_head: int
    linear: int
    routed_expert: int = 0
    other: int
    active: int


class MlaDims(Struct, frozen=True, kw_only=True):
    """Multi-head latent attention (DeepSeek-V2/V3, ``config.json`` keys of the same names)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


class Architecture(Struct, frozen=True, kw_only=True):
    """A model's architecture, exact enough for memory, KV cache and FLOPs.

    Attributes:
        name: display name (preset id or ``_name_or_path``).
        family: parser family (``llama``, ``mixtral``, ``qwen3_moe``, ``gemma3``,
            ``deepseek_v3``, ``gpt_oss``, ``falcon``, ``gpt2``, ``opt``, ``bert``, ``t5``...).
        approximate: True when built from a bare parameter count.
        num_layers: decoder layers (encoder layers for encoder-only models).
        num_encoder_layers: encoder layers of an encoder-decoder model, else 0.
        encoder_only: BERT-style models (no KV cache, no generation).
        hidden_size: model width h.
        num_attention_heads: query heads a.
        num_kv_heads: key/value heads (1 for MQA, == heads for MHA).
        head_dim: per-head width; from the config when given, else hidden / heads.
        intermediate_size: dense FFN width.
        gated_mlp: SwiGLU/GeGLU (three matrices) vs plain (two).
        vocab_size: rows of the embedding table (padded size as in the config).
        tie_word_embeddings: output head shares the embedding matrix.
        max_position_embeddings: trained context, if stated.
        num_experts: routed experts per MoE layer (0 for dense).
        num_experts_per_token: routed experts active per token.
        num_shared_experts: always-active shared experts per MoE layer.
        moe_intermediate_size: FFN width of one expert.
        num_moe_layers: layers whose FFN is MoE (others dense).
        mla: latent-attention dimensions, or None.
        layer_windows: per decoder layer, the sliding-window size in tokens or None for full
            attention; empty when every layer attends to the full context.
        shipped_weight_format: quantised format the checkpoint ships in (``fp8`` for DeepSeek-V3,
            ``mxfp4`` for gpt-oss experts), or None.
        shipped_quantized_modules: which modules that format covers: ``all-linear`` or
            ``routed-experts``.
        shipped_group_size: input weights per scale of a GPTQ/AWQ format (``int2`` ..
            ``int8``; ``-1`` = one group per output channel); None for every other format.
        torch_dtype: the config's declared dtype (informational; never shifts sizes).
        parameters: exact parameter accounting.
        linears: the linear modules of the blocks.
    """

    name: str
    family: str
    approximate: bool = False
    num_layers: int
    num_encoder_layers: int = 0
    encoder_only: bool = False
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None = None
    num_experts: int = 0
    num_experts_per_token: int = 0
    num_shared_experts: int = 0
    moe_intermediate_size: int = 0
    num_moe_layers: int = 0
    mla: MlaDims | None = None
    layer_windows: tuple[int | None, ...] = ()
    shipped_weight_format: str | None = None
    shipped_quantized_modules: Literal["all-linear", "routed-experts"] | None = None
    shipped_group_size: int | None = None
    torch_dtype: str | None = None
    parameters: ParameterCounts
    linears: tuple[LinearModule, ...] = ()

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0
