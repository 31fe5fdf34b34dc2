"""gpt-oss (OpenAI, 2025): GQA attention with biases and attention sinks, alternating sliding
windows, MoE in every layer with biased experts and router, experts shipped in MXFP4.

Shapes follow transformers 5.24 ``models/gpt_oss/modeling_gpt_oss.py``:

* q/k/v/o with biases (``attention_bias``, default true); ``sinks``: one learned logit per
  attention head and layer; ``head_dim`` from the config (64, not 2,880 / 64 = 45);
* ``router``: experts x hidden weight plus an experts bias;
* experts (3-D parameters, per expert): ``gate_up_proj`` hidden -> 2 x ``intermediate_size``
  with bias, ``down_proj`` ``intermediate_size`` -> hidden with bias; ``intermediate_size`` is
  the per-expert width;
* two RMSNorms per layer, a final norm, an untied head;
* ``layer_types`` gives each layer ``sliding_attention`` (window ``sliding_window``, 128) or
  ``full_attention``; without it transformers alternates, sliding on even layers.

``quantization_config.quant_method: mxfp4`` covers the routed experts only (attention, router,
embeddings and head are in ``modules_to_not_convert``). gpt-oss-20b: 20,914,757,184 total
(keras-hub ``gpt_oss_20b_en``), "3.6B active"; gpt-oss-120b: 116,829,156,672, "5.1B active".
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture, LinearModule
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models.common import (
    count_parameters,
    display_name,
    normalise_windows,
    read_attention_heads,
    read_window,
    torch_dtype,
    windows_from_layer_types,
)
from gpu_advisor.core.models.llama_like import (
    attention_linears,
    embeddings,
    read_core_shape,
    read_max_positions,
)
from gpu_advisor.core.models.quantization import shipped_quantization
from gpu_advisor.core.models.reader import MAX_EXPERTS, ConfigReader


def parse_gpt_oss(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse a ``gpt_oss`` config.

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    hidden, layers, width, vocab = read_core_shape(r)
    heads, kv_heads, head_dim = read_attention_heads(r, hidden, head_dim_default=64)
    experts = r.integer(
        "num_local_experts", what="the number of routed experts per layer", maximum=MAX_EXPERTS
    )
    per_token = r.integer(
        "num_experts_per_tok",
        aliases=("experts_per_token",),
        what="the routed experts used per token",
        maximum=MAX_EXPERTS,
    )
    if per_token > experts:
        raise InvalidSpecError(
            f"{r.path('num_experts_per_tok')} ({per_token}) exceeds "
            f"{r.path('num_local_experts')} ({experts}).",
            field=r.path("num_experts_per_tok"),
        )
    tied = r.flag("tie_word_embeddings", default=False)
    bias = r.flag("attention_bias", default=True)
    window = read_window(r) or 128
    windows = windows_from_layer_types(r, layers, window)
    if windows is None:
        windows = normalise_windows(window if (i + 1) % 2 else None for i in range(layers))
    linears = [
        *attention_linears(
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            layers=layers,
            qkv_bias=bias,
            o_bias=bias,
        ),
        LinearModule(
            name="gate_up_proj",
            in_features=hidden,
            out_features=2 * width,
            bias=True,
            copies_per_layer=experts,
            layers=layers,
            expert="routed",
        ),
        LinearModule(
            name="down_proj",
            in_features=width,
            out_features=hidden,
            bias=True,
            copies_per_layer=experts,
            layers=layers,
            expert="routed",
        ),
    ]
    router = experts * hidden + experts
    sinks = heads
    embedding, lm_head = embeddings(hidden, vocab, tied=tied)
    params = count_parameters(
        field=r.field,
        linears=linears,
        embedding=embedding,
        lm_head=lm_head,
        other=layers * (2 * hidden + router + sinks) + hidden,
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
        head_dim=head_dim,
        intermediate_size=width,
        gated_mlp=True,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=read_max_positions(r),
        num_experts=experts,
        num_experts_per_token=per_token,
        moe_intermediate_size=width,
        num_moe_layers=layers,
        layer_windows=windows,
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )
