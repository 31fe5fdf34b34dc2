"""DeepSeek-V2 / V3: multi-head latent attention (MLA), dense-first layers, routed + shared
experts.

Shapes follow DeepSeek's ``modeling_deepseek.py`` (shipped with the checkpoints) and
transformers 5.24 ``models/deepseek_v3/modeling_deepseek_v3.py``:

* MLA per layer (DeepSeek-V2 paper, section 2.1.2): ``q_a_proj`` hidden -> ``q_lora_rank``,
  ``q_a_layernorm``, ``q_b_proj`` ``q_lora_rank`` -> heads x (``qk_nope_head_dim`` +
  ``qk_rope_head_dim``) (or one ``q_proj`` when ``q_lora_rank`` is null, V2-Lite);
  ``kv_a_proj_with_mqa`` hidden -> ``kv_lora_rank`` + ``qk_rope_head_dim``, ``kv_a_layernorm``,
  ``kv_b_proj`` ``kv_lora_rank`` -> heads x (``qk_nope_head_dim`` + ``v_head_dim``); ``o_proj``
  heads x ``v_head_dim`` -> hidden. q_a / kv_a / o biased when ``attention_bias``.
* Layer ``i`` is MoE when ``n_routed_experts`` is set, ``i >= first_k_dense_replace`` and
  ``i % moe_layer_freq == 0``; other layers have a dense gate/up/down MLP of
  ``intermediate_size``. An MoE layer has ``n_routed_experts`` experts of
  ``moe_intermediate_size``, ``n_shared_experts`` always-active experts fused into one MLP of
  width ``moe_intermediate_size x n_shared_experts``, and a router of experts x hidden.
* The router's ``e_score_correction_bias`` (V3) is a buffer in transformers, not a parameter,
  and is not counted (58 x 256 fp32 values in V3).
* The multi-token-prediction module (``num_nextn_predict_layers``) ships in the V3 checkpoint
  but is not part of the main model and is not counted: DeepSeek publishes 671B total / 37B
  activated; the Hub's 685B includes the MTP module (DeepSeek-V3 technical report, section 2.2).

``head_dim`` is the query/key head width ``qk_nope_head_dim + qk_rope_head_dim`` (192 in V3);
the KV cache holds ``kv_lora_rank + qk_rope_head_dim`` values per token and layer (``mla``).
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture, LinearModule, MlaDims
from gpu_advisor.core.models.common import (
    count_parameters,
    display_name,
    read_attention_heads,
    torch_dtype,
)
from gpu_advisor.core.models.llama_like import (
    embeddings,
    gated_mlp_linears,
    read_core_shape,
    read_max_positions,
)
from gpu_advisor.core.models.quantization import shipped_quantization
from gpu_advisor.core.models.reader import (
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    ConfigReader,
)


def _mla(r: ConfigReader) -> MlaDims:
    def dim(key: str, what: str) -> int:
        return r.integer(key, what=what, maximum=MAX_HEAD_DIM)

    return MlaDims(
        q_lora_rank=r.opt_integer(
            "q_lora_rank",
            what="the query compression rank (null: no compression)",
            maximum=MAX_HIDDEN,
        ),
        kv_lora_rank=r.integer(
            "kv_lora_rank", what="the key/value latent width (MLA)", maximum=MAX_HIDDEN
        ),
        qk_nope_head_dim=dim("qk_nope_head_dim", "the non-rotary part of a query/key head"),
        qk_rope_head_dim=dim("qk_rope_head_dim", "the rotary part of a query/key head"),
        v_head_dim=dim("v_head_dim", "the width of a value head"),
    )


def _mla_linears(
    mla: MlaDims, *, hidden: int, heads: int, layers: int, bias: bool
) -> list[LinearModule]:
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim

    def attn(name: str, d_in: int, d_out: int, biased: bool = False) -> LinearModule:
        return LinearModule(
            name=name,
            in_features=d_in,
            out_features=d_out,
            bias=biased,
            layers=layers,
            attention=True,
        )

    if mla.q_lora_rank is None:
        query = [attn("q_proj", hidden, heads * qk_head)]
    else:
        query = [
            attn("q_a_proj", hidden, mla.q_lora_rank, bias),
            attn("q_b_proj", mla.q_lora_rank, heads * qk_head),
        ]
    return [
        *query,
        attn("kv_a_proj_with_mqa", hidden, mla.kv_lora_rank + mla.qk_rope_head_dim, bias),
        attn("kv_b_proj", mla.kv_lora_rank, heads * (mla.qk_nope_head_dim + mla.v_head_dim)),
        attn("o_proj", heads * mla.v_head_dim, hidden, bias),
    ]


def parse_deepseek(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse a ``deepseek_v2`` / ``deepseek_v3`` config.

    DeepSeek-V3: 671,026,404,352 parameters (transformers' count; "671B"), 37.5B active.

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    hidden, layers, intermediate, vocab = read_core_shape(r)
    mla = _mla(r)
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    heads, kv_heads, _ = read_attention_heads(
        r, hidden, head_dim_key=None, head_dim_default=qk_head
    )
    tied = r.flag("tie_word_embeddings", default=False)
    bias = r.flag("attention_bias", default=False)
    experts = r.opt_integer(
        "n_routed_experts", what="the routed experts per MoE layer", maximum=MAX_EXPERTS
    )
    per_token = shared = expert_width = moe_layers = 0
    if experts is not None:
        per_token = r.integer(
            "num_experts_per_tok", what="the routed experts used per token", maximum=experts
        )
        shared = r.integer(
            "n_shared_experts",
            default=0,
            minimum=0,
            what="the always-active shared experts",
            maximum=MAX_EXPERTS,
        )
        expert_width = r.integer(
            "moe_intermediate_size", what="the FFN width of one expert", maximum=MAX_INTERMEDIATE
        )
        first_dense = r.integer(
            "first_k_dense_replace",
            default=0,
            minimum=0,
            what="the number of leading dense layers",
            maximum=MAX_LAYERS,
        )
        frequency = r.integer(
            "moe_layer_freq", default=1, what="the interval between MoE layers", maximum=MAX_LAYERS
        )
        moe_layers = sum(1 for i in range(first_dense, layers) if i % frequency == 0)
    dense_layers = layers - moe_layers
    linears = _mla_linears(mla, hidden=hidden, heads=heads, layers=layers, bias=bias)
    if dense_layers:
        linears += gated_mlp_linears(hidden=hidden, intermediate=intermediate, layers=dense_layers)
    router = 0
    if moe_layers and experts is not None:
        linears += gated_mlp_linears(
            hidden=hidden,
            intermediate=expert_width,
            layers=moe_layers,
            copies=experts,
            expert="routed",
        )
        if shared:
            linears += gated_mlp_linears(
                hidden=hidden,
                intermediate=expert_width * shared,
                layers=moe_layers,
                expert="shared",
            )
        router = experts * hidden * moe_layers
    q_norm = mla.q_lora_rank or 0
    norms = layers * (2 * hidden + q_norm + mla.kv_lora_rank) + hidden
    embedding, lm_head = embeddings(hidden, vocab, tied=tied)
    params = count_parameters(
        field=r.field,
        linears=linears,
        embedding=embedding,
        lm_head=lm_head,
        other=norms + router,
        experts_per_token=per_token,
    )
    quant = shipped_quantization(r)
    return Architecture(
        name=display_name(r, name, family),
        family=family,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=qk_head,
        intermediate_size=intermediate,
        gated_mlp=True,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=read_max_positions(r),
        num_experts=experts or 0,
        num_experts_per_token=per_token,
        num_shared_experts=shared,
        moe_intermediate_size=expert_width,
        num_moe_layers=moe_layers,
        mla=mla,
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )
