"""Earlier decoder families with LayerNorm (weight + bias) and plain (non-gated) MLPs: Falcon,
GPT-2 and OPT.

Falcon (transformers 5.24 ``models/falcon/modeling_falcon.py``; the 2023 ``RefinedWebModel``
revision of falcon-7b uses the legacy keys ``n_head`` / ``n_layer`` / ``n_head_kv``):

* fused ``query_key_value``: hidden -> (2 kv_heads + heads) x head_dim with
  ``new_decoder_architecture`` (Falcon-40B/180B, ``model_type: RefinedWeb``), hidden + 2 x
  head_dim with ``multi_query`` (one shared K/V head: falcon-7b's ``num_kv_heads: 71`` in a dumped
  config is ignored), else 3 x hidden; ``dense`` hidden -> hidden; ``dense_h_to_4h`` /
  ``dense_4h_to_h`` of ``ffn_hidden_size`` (default 4 x hidden); all biased when ``bias``;
* LayerNorms: two per layer (``ln_attn``, ``ln_mlp``) with the new architecture, one
  (``input_layernorm``) for parallel attention, two otherwise; ``ln_f``; head tied by default.

GPT-2 (``models/gpt2/modeling_gpt2.py``): Conv1D ``c_attn`` hidden -> 3 hidden, attention
``c_proj``, MLP ``c_fc`` hidden -> ``n_inner`` (default 4 x hidden) and ``c_proj``, all biased;
``ln_1``, ``ln_2``, ``ln_f``; learned positions ``n_positions`` x hidden; head tied.

OPT (``models/opt/modeling_opt.py``): q/k/v/``out_proj`` and ``fc1`` / ``fc2`` (``ffn_dim``) biased
when ``enable_bias`` (default true); two LayerNorms per layer and a final one (when
``do_layer_norm_before`` and not ``_remove_final_layer_norm``); learned positions with an offset
of 2 rows ((``max_position_embeddings`` + 2) x hidden); ``project_in`` / ``project_out`` when
``word_embed_proj_dim`` differs from hidden; head tied by default.
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture, LinearModule
from gpu_advisor.core.errors import UnsupportedModelError
from gpu_advisor.core.models.common import (
    count_parameters,
    display_name,
    read_attention_heads,
    torch_dtype,
)
from gpu_advisor.core.models.llama_like import read_max_positions
from gpu_advisor.core.models.quantization import shipped_quantization
from gpu_advisor.core.models.reader import (
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    ConfigReader,
)


def _linear(
    name: str, d_in: int, d_out: int, layers: int, *, bias: bool, attention: bool = False
) -> LinearModule:
    return LinearModule(
        name=name,
        in_features=d_in,
        out_features=d_out,
        bias=bias,
        layers=layers,
        attention=attention,
    )


def _plain_architecture(
    r: ConfigReader,
    *,
    family: str,
    name: str | None,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    width: int,
    vocab: int,
    tied: bool,
    max_positions: int | None,
    linears: list[LinearModule],
    embedding: int,
    lm_head: int,
    other: int,
) -> Architecture:
    params = count_parameters(
        field=r.field, linears=linears, embedding=embedding, lm_head=lm_head, other=other
    )
    quant = shipped_quantization(r)
    return Architecture(
        name=display_name(r, name, family),
        family=family,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=hidden // heads,
        intermediate_size=width,
        gated_mlp=False,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=max_positions,
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )


def _vocab(r: ConfigReader) -> int:
    return r.integer(
        "vocab_size", what="the number of rows of the token embedding", maximum=MAX_VOCAB
    )


def parse_falcon(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse ``falcon``, ``RefinedWebModel`` (falcon-7b) or ``RefinedWeb`` (falcon-40b) configs.

    falcon-7b: 6,921,720,704 parameters (its checkpoint index stores the tied head twice:
    14,434,379,520 bytes = 7,217,189,760 bf16 values).

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    legacy_40b = (r.opt_string("model_type") or "").lower() == "refinedweb"
    hidden = r.integer(
        "hidden_size", aliases=("n_embed",), what="the model width", maximum=MAX_HIDDEN
    )
    layers = r.integer(
        "num_hidden_layers", aliases=("n_layer",), what="the number of layers", maximum=MAX_LAYERS
    )
    vocab = _vocab(r)
    new_arch = r.flag("new_decoder_architecture", default=legacy_40b)
    multi_query = r.flag("multi_query", default=True)
    heads, kv_heads, head_dim = read_attention_heads(
        r,
        hidden,
        heads_aliases=("n_head",),
        kv_key="num_kv_heads" if new_arch else None,  # read by the new architecture only
        kv_aliases=("n_head_kv",),
        head_dim_key=None,
    )
    if new_arch:
        qkv_out = (2 * kv_heads + heads) * head_dim
    elif multi_query:
        kv_heads = 1
        qkv_out = hidden + 2 * head_dim
    else:
        kv_heads = heads
        qkv_out = 3 * hidden
    width = r.integer(
        "ffn_hidden_size",
        default=4 * hidden,
        what="the MLP width (default 4 x hidden)",
        maximum=MAX_INTERMEDIATE,
    )
    bias = r.flag("bias", default=False)
    parallel = r.flag("parallel_attn", default=True)
    layer_norms = r.opt_integer(
        "num_ln_in_parallel_attn", what="LayerNorms per parallel block", maximum=2
    )
    if layer_norms is None and new_arch:
        layer_norms = 2
    norms_per_layer = 2 if (not parallel or layer_norms == 2) else 1
    linears = [
        _linear("query_key_value", hidden, qkv_out, layers, bias=bias, attention=True),
        _linear("dense", hidden, hidden, layers, bias=bias, attention=True),
        _linear("dense_h_to_4h", hidden, width, layers, bias=bias),
        _linear("dense_4h_to_h", width, hidden, layers, bias=bias),
    ]
    tied = r.flag("tie_word_embeddings", default=True)
    return _plain_architecture(
        r,
        family=family,
        name=name,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        width=width,
        vocab=vocab,
        tied=tied,
        max_positions=read_max_positions(r),
        linears=linears,
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        other=layers * norms_per_layer * 2 * hidden + 2 * hidden,
    )


def parse_gpt2(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse a ``gpt2`` config. GPT-2 small: 124,439,808 parameters (keras-hub
    ``gpt2_base_en``); GPT-2 XL: 1,557,611,200 (case F09, "1558M").

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
        UnsupportedModelError: ``add_cross_attention`` (encoder-decoder use) is set.
    """
    hidden = r.integer(
        "n_embd", aliases=("hidden_size",), what="the model width", maximum=MAX_HIDDEN
    )
    layers = r.integer(
        "n_layer", aliases=("num_hidden_layers",), what="the number of layers", maximum=MAX_LAYERS
    )
    heads, _, _ = read_attention_heads(
        r,
        hidden,
        heads_key="n_head",
        heads_aliases=("num_attention_heads",),
        kv_key=None,
        head_dim_key=None,
    )
    positions = r.integer(
        "n_positions",
        aliases=("max_position_embeddings",),
        what="the learned positions (context length)",
        maximum=MAX_POSITIONS,
    )
    width = r.integer(
        "n_inner",
        default=4 * hidden,
        what="the MLP width (default 4 x hidden)",
        maximum=MAX_INTERMEDIATE,
    )
    vocab = _vocab(r)
    if r.flag("add_cross_attention", default=False):
        raise UnsupportedModelError(
            f"{r.path('add_cross_attention')} (GPT-2 as an encoder-decoder) is not supported.",
            field=r.path("add_cross_attention"),
        )
    tied = r.flag("tie_word_embeddings", default=True)
    linears = [
        _linear("c_attn", hidden, 3 * hidden, layers, bias=True, attention=True),
        _linear("c_proj", hidden, hidden, layers, bias=True, attention=True),
        _linear("c_fc", hidden, width, layers, bias=True),
        _linear("c_proj", width, hidden, layers, bias=True),
    ]
    return _plain_architecture(
        r,
        family=family,
        name=name,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        width=width,
        vocab=vocab,
        tied=tied,
        max_positions=positions,
        linears=linears,
        embedding=vocab * hidden + positions * hidden,
        lm_head=0 if tied else vocab * hidden,
        other=layers * 2 * (2 * hidden) + 2 * hidden,
    )


def parse_opt(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse an ``opt`` config. OPT-13B: 12,853,473,280 parameters.

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    hidden = r.integer("hidden_size", what="the model width", maximum=MAX_HIDDEN)
    layers = r.integer("num_hidden_layers", what="the number of layers", maximum=MAX_LAYERS)
    heads, _, _ = read_attention_heads(r, hidden, kv_key=None, head_dim_key=None)
    width = r.integer("ffn_dim", what="the MLP width", maximum=MAX_INTERMEDIATE)
    vocab = _vocab(r)
    positions = r.integer(
        "max_position_embeddings",
        what="the learned positions (context length)",
        maximum=MAX_POSITIONS,
    )
    projection = r.integer(
        "word_embed_proj_dim",
        default=hidden,
        what="the token-embedding width",
        maximum=MAX_HIDDEN,
    )
    bias = r.flag("enable_bias", default=True)
    affine = r.flag("layer_norm_elementwise_affine", default=True)
    final_norm = r.flag("do_layer_norm_before", default=True) and not r.flag(
        "_remove_final_layer_norm", default=False
    )
    tied = r.flag("tie_word_embeddings", default=True)
    norm = 2 * hidden if affine else 0
    projections = 2 * hidden * projection if projection != hidden else 0
    linears = [
        *(
            _linear(n, hidden, hidden, layers, bias=bias, attention=True)
            for n in ("q_proj", "k_proj", "v_proj", "out_proj")
        ),
        _linear("fc1", hidden, width, layers, bias=bias),
        _linear("fc2", width, hidden, layers, bias=bias),
    ]
    return _plain_architecture(
        r,
        family=family,
        name=name,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        width=width,
        vocab=vocab,
        tied=tied,
        max_positions=positions,
        linears=linears,
        embedding=vocab * projection + (positions + 2) * hidden,
        lm_head=0 if tied else vocab * projection,
        other=layers * 2 * norm + (norm if final_norm else 0) + projections,
    )
