"""Llama-style decoders: Llama 2/3/3.1/3.2, Mistral, Mixtral, Qwen2/2.5, Qwen3, Qwen3-MoE, Phi-3/4.

All share one block (pre-norm RMSNorm, rotary attention with GQA, a gated SwiGLU MLP or MoE of
gated experts) and differ in biases, norms, fused projections, MoE wiring and sliding windows.
Module shapes and names follow the transformers 5.24 model sources
(``models/<family>/modeling_<family>.py``):

* Llama: q/k/v/o biased when ``attention_bias``; gate/up/down biased when ``mlp_bias``.
* Mistral / Mixtral: no biases; ``sliding_window`` on every layer when set (Mistral-7B-v0.1:
  4096). Mixtral experts are ``w1`` (gate), ``w3`` (up), ``w2`` (down) of width
  ``intermediate_size``; router ``gate`` = hidden x ``num_local_experts``, no bias.
* Qwen2 / Qwen3: q/k/v always biased in Qwen2, o not. Sliding windows only when
  ``use_sliding_window`` is true, on layers ``>= max_window_layers`` (Qwen2.5 ships
  ``use_sliding_window: false`` => none); Qwen3-MoE then slides on every layer.
* Qwen3 / Qwen3-MoE: per-head RMSNorm ``q_norm`` and ``k_norm`` (head_dim each); biases when
  ``attention_bias``; ``head_dim`` default 128 (``Qwen3Config``). Qwen3-MoE layer ``i`` is MoE
  unless ``i`` is in ``mlp_only_layers`` or ``(i + 1) % decoder_sparse_step != 0``; experts are
  gate/up/down of width ``moe_intermediate_size``; router ``gate`` = hidden x ``num_experts``.
* Phi-3 / Phi-4: fused ``qkv_proj`` (hidden -> (heads + 2 kv_heads) x head_dim) and
  ``gate_up_proj`` (hidden -> 2 x intermediate), no biases; ``sliding_window`` on every layer
  when set (Phi-3-mini: 2047).

Norm weights: two RMSNorms of ``hidden`` per layer plus the final norm.
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture, ExpertKind, LinearModule
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models.common import (
    count_parameters,
    display_name,
    normalise_windows,
    read_attention_heads,
    read_window,
    torch_dtype,
    uniform_windows,
    windows_from_layer_types,
)
from gpu_advisor.core.models.quantization import shipped_quantization
from gpu_advisor.core.models.reader import (
    MAX_EXPERTS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    ConfigReader,
)


def read_core_shape(
    r: ConfigReader,
    *,
    hidden_aliases: tuple[str, ...] = (),
    layers_aliases: tuple[str, ...] = (),
    intermediate_key: str = "intermediate_size",
    vocab_default: int | None = None,
) -> tuple[int, int, int, int]:
    """``(hidden_size, num_hidden_layers, intermediate_size, vocab_size)`` of a decoder config.

    Raises:
        InvalidSpecError: a key is missing (naming it) or out of range.
    """
    hidden = r.integer(
        "hidden_size", aliases=hidden_aliases, what="the model width", maximum=MAX_HIDDEN
    )
    layers = r.integer(
        "num_hidden_layers",
        aliases=layers_aliases,
        what="the number of transformer layers",
        maximum=MAX_LAYERS,
    )
    intermediate = r.integer(
        intermediate_key, what="the MLP (feed-forward) width", maximum=MAX_INTERMEDIATE
    )
    vocab = r.integer(
        "vocab_size",
        default=vocab_default,
        what="the number of rows of the token embedding",
        maximum=MAX_VOCAB,
    )
    return hidden, layers, intermediate, vocab


def read_max_positions(r: ConfigReader, *, default: int | None = None) -> int | None:
    """The trained context (``max_position_embeddings``), or ``default`` when absent."""
    value = r.opt_integer(
        "max_position_embeddings", what="the trained context in tokens", maximum=MAX_POSITIONS
    )
    return default if value is None else value


def attention_linears(
    *,
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    layers: int,
    qkv_bias: bool,
    o_bias: bool,
    fused_qkv: bool = False,
    names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj"),
) -> list[LinearModule]:
    """q/k/v/o projections of GQA attention (DESIGN "Parameters": q = hidden x heads*head_dim,
    k and v = hidden x kv_heads*head_dim, o = heads*head_dim x hidden), or Phi-3's fused
    ``qkv_proj`` with the same total."""
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    if fused_qkv:
        projections = [
            LinearModule(
                name="qkv_proj",
                in_features=hidden,
                out_features=q_out + 2 * kv_out,
                bias=qkv_bias,
                layers=layers,
                attention=True,
            )
        ]
    else:
        projections = [
            LinearModule(
                name=module_name,
                in_features=hidden,
                out_features=out,
                bias=qkv_bias,
                layers=layers,
                attention=True,
            )
            for module_name, out in zip(names[:3], (q_out, kv_out, kv_out), strict=True)
        ]
    projections.append(
        LinearModule(
            name=names[3],
            in_features=q_out,
            out_features=hidden,
            bias=o_bias,
            layers=layers,
            attention=True,
        )
    )
    return projections


def gated_mlp_linears(
    *,
    hidden: int,
    intermediate: int,
    layers: int,
    bias: bool = False,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
    copies: int = 1,
    expert: ExpertKind = "dense",
    fused_gate_up: bool = False,
) -> list[LinearModule]:
    """A gated (SwiGLU / GeGLU) MLP: gate and up = hidden x intermediate, down = intermediate x
    hidden (DESIGN "Parameters": 3 x hidden x intermediate). ``copies`` > 1 for MoE experts."""
    if fused_gate_up:
        first = [
            LinearModule(
                name="gate_up_proj",
                in_features=hidden,
                out_features=2 * intermediate,
                bias=bias,
                copies_per_layer=copies,
                layers=layers,
                expert=expert,
            )
        ]
    else:
        first = [
            LinearModule(
                name=module_name,
                in_features=hidden,
                out_features=intermediate,
                bias=bias,
                copies_per_layer=copies,
                layers=layers,
                expert=expert,
            )
            for module_name in names[:2]
        ]
    down = LinearModule(
        name=names[2],
        in_features=intermediate,
        out_features=hidden,
        bias=bias,
        copies_per_layer=copies,
        layers=layers,
        expert=expert,
    )
    return [*first, down]


def embeddings(hidden: int, vocab: int, *, tied: bool) -> tuple[int, int]:
    """``(embedding, lm_head)`` elements: vocab x hidden each; the head is 0 when tied (counted
    once, DESIGN "Parameters")."""
    return vocab * hidden, 0 if tied else vocab * hidden


def qwen_windows(r: ConfigReader, layers: int) -> tuple[int | None, ...]:
    """Qwen2/Qwen3 sliding windows (``Qwen2Config.__post_init__``): an explicit ``layer_types``
    wins; else, only when ``use_sliding_window`` is true, layers ``>= max_window_layers`` slide."""
    use = r.flag("use_sliding_window", default=False)
    window = read_window(r) if use else None
    from_types = windows_from_layer_types(r, layers, window)
    if from_types is not None:
        return from_types
    if window is None:
        return ()
    first = r.integer(
        "max_window_layers",
        default=28,
        minimum=0,
        what="the number of bottom layers that use full attention",
        maximum=MAX_LAYERS,
    )
    return normalise_windows(window if i >= first else None for i in range(layers))


def parse_llama_like(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse a dense Llama-like config (``llama``, ``mistral``, ``qwen2``, ``qwen3``, ``phi3``).

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    hidden, layers, intermediate, vocab = read_core_shape(r)
    heads, kv_heads, head_dim = read_attention_heads(
        r, hidden, head_dim_default=128 if family == "qwen3" else None
    )
    tied = r.flag("tie_word_embeddings", default=False)
    attention_bias = r.flag("attention_bias", default=False)
    qkv_bias, o_bias = attention_bias, attention_bias
    mlp_bias = False
    windows: tuple[int | None, ...] = ()
    other_per_layer = 2 * hidden
    match family:
        case "llama":
            mlp_bias = r.flag("mlp_bias", default=False)
        case "mistral":
            qkv_bias = o_bias = False
            windows = uniform_windows(layers, read_window(r))
        case "qwen2":
            qkv_bias, o_bias = True, False
            windows = qwen_windows(r, layers)
        case "qwen3":
            other_per_layer += 2 * head_dim  # q_norm, k_norm
            windows = qwen_windows(r, layers)
        case "phi3":
            qkv_bias = o_bias = False
            windows = uniform_windows(layers, read_window(r))
        case _:  # pragma: no cover - dispatch only sends the families above
            raise InvalidSpecError(f"no Llama-like parser for {family!r}", field=r.field)
    fused = family == "phi3"
    linears = [
        *attention_linears(
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            layers=layers,
            qkv_bias=qkv_bias,
            o_bias=o_bias,
            fused_qkv=fused,
        ),
        *gated_mlp_linears(
            hidden=hidden,
            intermediate=intermediate,
            layers=layers,
            bias=mlp_bias,
            fused_gate_up=fused,
        ),
    ]
    embedding, lm_head = embeddings(hidden, vocab, tied=tied)
    params = count_parameters(
        field=r.field,
        linears=linears,
        embedding=embedding,
        lm_head=lm_head,
        other=other_per_layer * layers + hidden,
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
        intermediate_size=intermediate,
        gated_mlp=True,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=read_max_positions(r),
        layer_windows=windows,
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )


def _moe_layer_indices(r: ConfigReader, layers: int) -> list[int]:
    """Qwen3-MoE's sparse layers (``Qwen3MoeDecoderLayer``): not in ``mlp_only_layers`` and
    ``(i + 1) % decoder_sparse_step == 0``."""
    step = r.integer(
        "decoder_sparse_step",
        default=1,
        what="the interval between MoE layers",
        maximum=MAX_LAYERS,
    )
    dense_only: set[int] = set()
    for index, value in enumerate(r.opt_list("mlp_only_layers", max_length=MAX_LAYERS) or []):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidSpecError(
                f"{r.path('mlp_only_layers')}[{index}] must be a layer index (integer).",
                field=r.path("mlp_only_layers"),
            )
        dense_only.add(value)
    return [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]


def parse_mixtral_like(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse a Mixtral or Qwen3-MoE config: attention as Mistral / Qwen3, MoE MLPs.

    All experts are resident (``parameters.total``); ``parameters.active`` counts
    ``num_experts_per_tok`` of them plus everything else, router included (DESIGN "MoE").
    Mixtral-8x7B: 46,702,792,704 total, 12,879,925,248 active (reference case F07).

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    qwen = family == "qwen3_moe"
    hidden, layers, intermediate, vocab = read_core_shape(r)
    heads, kv_heads, head_dim = read_attention_heads(
        r, hidden, head_dim_default=128 if qwen else None
    )
    tied = r.flag("tie_word_embeddings", default=False)
    experts_key = "num_experts" if qwen else "num_local_experts"
    experts = r.integer(
        experts_key, what="the number of routed experts per MoE layer", maximum=MAX_EXPERTS
    )
    per_token = r.integer(
        "num_experts_per_tok", what="the routed experts used per token", maximum=MAX_EXPERTS
    )
    if per_token > experts:
        raise InvalidSpecError(
            f"{r.path('num_experts_per_tok')} ({per_token}) exceeds {r.path(experts_key)} "
            f"({experts}); a token cannot use more experts than exist.",
            field=r.path("num_experts_per_tok"),
        )
    if qwen:
        expert_width = r.integer(
            "moe_intermediate_size", what="the FFN width of one expert", maximum=MAX_INTERMEDIATE
        )
        moe_layers = len(_moe_layer_indices(r, layers))
        bias = r.flag("attention_bias", default=False)
        # Qwen3MoeConfig has no layer_types: the window, when switched on, is on every layer.
        use_window = r.flag("use_sliding_window", default=False)
        windows = uniform_windows(layers, read_window(r) if use_window else None)
        expert_names = ("gate_proj", "up_proj", "down_proj")
        per_layer_norms = 2 * hidden + 2 * head_dim
    else:
        expert_width = intermediate
        moe_layers = layers
        bias = False
        windows = uniform_windows(layers, read_window(r))
        expert_names = ("w1", "w3", "w2")
        per_layer_norms = 2 * hidden
    dense_layers = layers - moe_layers
    linears = attention_linears(
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        layers=layers,
        qkv_bias=bias,
        o_bias=bias,
    )
    if dense_layers:
        linears += gated_mlp_linears(hidden=hidden, intermediate=intermediate, layers=dense_layers)
    if moe_layers:
        linears += gated_mlp_linears(
            hidden=hidden,
            intermediate=expert_width,
            layers=moe_layers,
            names=expert_names,
            copies=experts,
            expert="routed",
        )
    router = hidden * experts * moe_layers
    embedding, lm_head = embeddings(hidden, vocab, tied=tied)
    params = count_parameters(
        field=r.field,
        linears=linears,
        embedding=embedding,
        lm_head=lm_head,
        other=per_layer_norms * layers + hidden + router,
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
        intermediate_size=intermediate,
        gated_mlp=True,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=read_max_positions(r),
        num_experts=experts,
        num_experts_per_token=per_token,
        moe_intermediate_size=expert_width,
        num_moe_layers=moe_layers,
        layer_windows=windows,
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )
