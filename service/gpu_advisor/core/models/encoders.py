"""Encoder-only and encoder-decoder families: BERT and T5 (mT5).

BERT (transformers 5.24 ``models/bert/modeling_bert.py``), counted as ``BertModel`` with its
pooler and without a pre-training or MLM head, whatever ``architectures`` says (the keras-hub
and accelerate figures count it that way): word, position (``max_position_embeddings``) and
token-type (``type_vocab_size``) embeddings and their LayerNorm; per layer ``query``, ``key``,
``value`` and the attention output ``dense``, the ``intermediate`` ``dense`` and the output
``dense``, all biased, and two LayerNorms; the pooler's ``dense`` (hidden x hidden + bias) in
``parameters.other``. bert-base-uncased: 109,482,240 (keras-hub ``bert_base_en_uncased``).

T5 (``models/t5/modeling_t5.py``): a shared embedding (``vocab_size`` x ``d_model``); encoder
layers with self-attention ``q``/``k``/``v``/``o`` (``d_model`` -> ``num_heads x d_kv``, no
biases) and a feed-forward ``wi``/``wo`` of ``d_ff`` (``wi_0``/``wi_1``/``wo`` when
``feed_forward_proj`` is ``gated-*``, as in T5 v1.1 and mT5); decoder layers add
cross-attention (a second q/k/v/o); one RMS-style LayerNorm (weight only) per sub-layer plus a
final one per stack; relative-position buckets (``relative_attention_num_buckets`` x heads) in
the first layer of each stack; an output head unless ``tie_word_embeddings`` (default true;
mT5 unties it). t5-base: 222,903,552 (keras-hub ``t5_base_multi``).
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture, LinearModule, StackKind
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
    MAX_HEAD_DIM,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    ConfigReader,
)


def _linear(
    name: str,
    d_in: int,
    d_out: int,
    layers: int,
    *,
    bias: bool,
    stack: StackKind,
    attention: bool = False,
    copies: int = 1,
) -> LinearModule:
    return LinearModule(
        name=name,
        in_features=d_in,
        out_features=d_out,
        bias=bias,
        copies_per_layer=copies,
        layers=layers,
        stack=stack,
        attention=attention,
    )


def parse_bert(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse a ``bert`` config as ``BertModel`` (encoder + pooler).

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
        UnsupportedModelError: a relative ``position_embedding_type``.
    """
    hidden = r.integer("hidden_size", what="the model width", maximum=MAX_HIDDEN)
    layers = r.integer("num_hidden_layers", what="the number of layers", maximum=MAX_LAYERS)
    heads, _, head_dim = read_attention_heads(r, hidden, kv_key=None, head_dim_key=None)
    width = r.integer("intermediate_size", what="the MLP width", maximum=MAX_INTERMEDIATE)
    vocab = r.integer("vocab_size", what="the number of token embeddings", maximum=MAX_VOCAB)
    positions = r.integer(
        "max_position_embeddings",
        default=512,
        what="the learned positions",
        maximum=MAX_POSITIONS,
    )
    token_types = r.integer(
        "type_vocab_size", default=2, minimum=0, what="the token-type rows", maximum=MAX_VOCAB
    )
    position_type = r.opt_string("position_embedding_type") or "absolute"
    if position_type != "absolute":
        raise UnsupportedModelError(
            f"{r.path('position_embedding_type')} {position_type[:40]!r} is not supported; only "
            "'absolute' position embeddings are.",
            field=r.path("position_embedding_type"),
        )
    linears = [
        *(
            _linear(n, hidden, hidden, layers, bias=True, stack="encoder", attention=True)
            for n in ("query", "key", "value", "dense")
        ),
        _linear("dense", hidden, width, layers, bias=True, stack="encoder"),
        _linear("dense", width, hidden, layers, bias=True, stack="encoder"),
    ]
    embedding = (vocab + positions + token_types) * hidden
    norms = 2 * hidden + layers * 2 * (2 * hidden)  # embedding LN + two LNs per layer
    pooler = hidden * hidden + hidden
    params = count_parameters(
        field=r.field, linears=linears, embedding=embedding, lm_head=0, other=norms + pooler
    )
    quant = shipped_quantization(r)
    return Architecture(
        name=display_name(r, name, family),
        family=family,
        num_layers=layers,
        encoder_only=True,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=head_dim,
        intermediate_size=width,
        gated_mlp=False,
        vocab_size=vocab,
        tie_word_embeddings=r.flag("tie_word_embeddings", default=True),
        max_position_embeddings=positions,
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )


def _t5_stack(
    stack: StackKind, *, d_model: int, inner: int, width: int, layers: int, gated: bool
) -> list[LinearModule]:
    attention_copies = 2 if stack == "decoder" else 1  # decoder: self- and cross-attention
    modules = [
        _linear(
            n,
            d_model,
            inner,
            layers,
            bias=False,
            stack=stack,
            attention=True,
            copies=attention_copies,
        )
        for n in ("q", "k", "v")
    ]
    modules.append(
        _linear(
            "o",
            inner,
            d_model,
            layers,
            bias=False,
            stack=stack,
            attention=True,
            copies=attention_copies,
        )
    )
    up_names = ("wi_0", "wi_1") if gated else ("wi",)
    modules += [_linear(n, d_model, width, layers, bias=False, stack=stack) for n in up_names]
    modules.append(_linear("wo", width, d_model, layers, bias=False, stack=stack))
    return modules


def parse_t5(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse a ``t5`` / ``mt5`` config (``T5ForConditionalGeneration``).

    mt0-large (mT5-large, case F13): 1,229,581,312 parameters.

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    d_model = r.integer(
        "d_model", aliases=("hidden_size",), what="the model width", maximum=MAX_HIDDEN
    )
    encoder_layers = r.integer(
        "num_layers", what="the number of encoder layers", maximum=MAX_LAYERS
    )
    decoder_layers = r.integer(
        "num_decoder_layers",
        default=encoder_layers,
        what="the number of decoder layers (default num_layers)",
        maximum=MAX_LAYERS,
    )
    heads = r.integer(
        "num_heads",
        aliases=("num_attention_heads",),
        what="the attention heads",
        maximum=MAX_LAYERS,
    )
    head_dim = r.integer("d_kv", what="the width of one attention head", maximum=MAX_HEAD_DIM)
    width = r.integer("d_ff", what="the feed-forward width", maximum=MAX_INTERMEDIATE)
    vocab = r.integer("vocab_size", what="the number of token embeddings", maximum=MAX_VOCAB)
    buckets = r.integer(
        "relative_attention_num_buckets",
        default=32,
        what="the relative-position buckets",
        maximum=MAX_POSITIONS,
    )
    projection = r.opt_string("feed_forward_proj") or "relu"
    gated = projection.startswith("gated-")
    tied = r.flag("tie_word_embeddings", default=True)
    inner = heads * head_dim
    linears = [
        *_t5_stack(
            "encoder", d_model=d_model, inner=inner, width=width, layers=encoder_layers, gated=gated
        ),
        *_t5_stack(
            "decoder", d_model=d_model, inner=inner, width=width, layers=decoder_layers, gated=gated
        ),
    ]
    norms = encoder_layers * 2 * d_model + d_model + decoder_layers * 3 * d_model + d_model
    relative = 2 * buckets * heads  # first layer of each stack
    embedding = vocab * d_model
    params = count_parameters(
        field=r.field,
        linears=linears,
        embedding=embedding,
        lm_head=0 if tied else embedding,
        other=norms + relative,
    )
    quant = shipped_quantization(r)
    return Architecture(
        name=display_name(r, name, family),
        family=family,
        num_layers=decoder_layers,
        num_encoder_layers=encoder_layers,
        hidden_size=d_model,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=head_dim,
        intermediate_size=width,
        gated_mlp=gated,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=read_max_positions(r),
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )
