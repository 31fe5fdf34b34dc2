"""Pieces every family parser shares: attention shape checks, parameter accounting, sliding
windows and display names.

Parameter accounting follows DESIGN "Parameters": every ``nn.Linear`` of the blocks is a
:class:`~gpu_advisor.core.architecture.LinearModule`; embeddings, the output head and the rest
(norms, routers, attention sinks, poolers, vision towers) are counted separately, tied weights
once, so that ``total == embedding + lm_head + linear + other`` holds by construction.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu_advisor.core.architecture import LinearModule, ParameterCounts
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models.reader import (
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_TOTAL_PARAMETERS,
    MAX_WINDOW,
    ConfigReader,
)


def read_attention_heads(
    r: ConfigReader,
    hidden_size: int,
    *,
    heads_key: str = "num_attention_heads",
    heads_aliases: tuple[str, ...] = (),
    heads_default: int | None = None,
    kv_key: str | None = "num_key_value_heads",
    kv_aliases: tuple[str, ...] = (),
    kv_default: int | None = None,
    kv_required: bool = False,
    head_dim_key: str | None = "head_dim",
    head_dim_default: int | None = None,
) -> tuple[int, int, int]:
    """Query heads, KV heads and head_dim of a config, checked against each other.

    ``head_dim`` comes from the config when present (DESIGN "Parameters": Qwen3, Gemma and gpt-oss
    state one that differs from hidden / heads); otherwise ``head_dim_default`` when the family's
    transformers config class has one (Qwen3 128, Gemma 256), else ``hidden_size // heads`` and the
    heads must divide the hidden size. KV heads default to ``kv_default`` (or the query heads,
    i.e. multi-head attention, as transformers does; required when ``kv_required``) and must
    divide the query heads (GQA shares each KV head among an equal group of query heads).

    Returns:
        ``(num_attention_heads, num_kv_heads, head_dim)``.

    Raises:
        InvalidSpecError: a missing or out-of-range value, or heads that do not divide.
    """
    heads = r.integer(
        heads_key,
        aliases=heads_aliases,
        default=heads_default,
        what="the number of attention (query) heads per layer",
        maximum=MAX_HEADS,
    )
    kv_heads = heads
    if kv_key is not None:
        kv_heads = r.integer(
            kv_key,
            aliases=kv_aliases,
            default=kv_default if kv_default is not None else None if kv_required else heads,
            what="the number of key/value heads per layer (GQA; equal to the query heads for MHA)",
            maximum=MAX_HEADS,
        )
    if heads % kv_heads != 0 and kv_key is not None:
        raise InvalidSpecError(
            f"{r.path(kv_key)} ({kv_heads}) must divide {r.path(heads_key)} ({heads}): "
            "grouped-query attention shares each key/value head among an equal number of query "
            "heads.",
            field=r.path(kv_key),
        )
    head_dim = None
    if head_dim_key is not None:
        head_dim = r.opt_integer(
            head_dim_key, what="the width of one attention head", maximum=MAX_HEAD_DIM
        )
    if head_dim is None:
        head_dim = head_dim_default
    if head_dim is None:
        if hidden_size % heads != 0:
            raise InvalidSpecError(
                f"{r.path(heads_key)} ({heads}) does not divide the hidden size ({hidden_size}) "
                "and no head_dim is given; set head_dim or fix the head count.",
                field=r.path(heads_key),
            )
        head_dim = hidden_size // heads
    return heads, kv_heads, head_dim


def count_parameters(
    *,
    field: str,
    linears: Iterable[LinearModule],
    embedding: int,
    lm_head: int,
    other: int,
    experts_per_token: int = 0,
    not_per_token: int = 0,
) -> ParameterCounts:
    """Exact parameter accounting from the parts of a model.

    ``active`` (per-token parameters, DESIGN "MoE") = total - routed experts + the
    ``experts_per_token`` share of them - ``not_per_token`` (parts that never see a text token,
    such as a vision tower). Each routed ``LinearModule`` holds ``copies_per_layer`` experts, of
    which ``experts_per_token`` are used per token: its active share is
    ``parameters / copies_per_layer * experts_per_token``, an exact integer.

    Convention: ``active`` includes the input embedding, as the Mixtral figure of reference case
    F07 does (12,879,925,248). DeepSeek ("37B activated", V2-Lite "2.4B") and OpenAI (gpt-oss
    "3.6B / 5.1B active") publish figures without the embedding lookup, which has no FLOPs;
    for those models ``active - embedding`` reproduces the published figure.

    Args:
        field: dotted path of the config, for the size error.
        linears: the linear modules of the blocks.
        embedding: token (and position / token-type) embedding elements.
        lm_head: separate output head elements (0 when tied).
        other: norms, routers, sinks, poolers, vision towers...
        experts_per_token: routed experts used per token (0 for dense models).
        not_per_token: parameters of ``other`` that do not run per text token.

    Raises:
        InvalidSpecError: the total exceeds :data:`MAX_TOTAL_PARAMETERS` (1e14).
    """
    modules = tuple(linears)
    linear = sum(m.parameters for m in modules)
    routed = sum(m.parameters for m in modules if m.expert == "routed")
    routed_active = sum(
        m.parameters // m.copies_per_layer * experts_per_token
        for m in modules
        if m.expert == "routed"
    )
    total = embedding + lm_head + linear + other
    if total > MAX_TOTAL_PARAMETERS:
        raise InvalidSpecError(
            f"{field} describes {total:.3e} parameters, above the {MAX_TOTAL_PARAMETERS:.0e} "
            "limit; check the sizes (hidden_size, num_hidden_layers, intermediate_size, "
            "vocab_size).",
            field=field,
        )
    return ParameterCounts(
        total=total,
        embedding=embedding,
        lm_head=lm_head,
        linear=linear,
        routed_expert=routed,
        other=other,
        active=total - routed + routed_active - not_per_token,
    )


def read_window(r: ConfigReader, key: str = "sliding_window") -> int | None:
    """The sliding-window size in tokens, or None when absent/null.

    Raises:
        InvalidSpecError: not a positive integer.
    """
    return r.opt_integer(key, what="the sliding-window size in tokens", maximum=MAX_WINDOW)


def uniform_windows(num_layers: int, window: int | None) -> tuple[int | None, ...]:
    """Every layer with the same window; ``()`` (all full attention) when there is none."""
    return () if window is None else (window,) * num_layers


def normalise_windows(windows: Iterable[int | None]) -> tuple[int | None, ...]:
    """``()`` when no layer has a window (Architecture's convention), else the tuple."""
    result = tuple(windows)
    return result if any(w is not None for w in result) else ()


def windows_from_layer_types(
    r: ConfigReader, num_layers: int, window: int | None
) -> tuple[int | None, ...] | None:
    """Per-layer windows from a ``layer_types`` list (gpt-oss, newer transformers configs).

    ``"sliding_attention"`` layers get ``window``; ``"full_attention"`` (and other attention
    kinds) attend to the whole context. Returns None when the config has no ``layer_types``.

    Raises:
        InvalidSpecError: not a list of strings, a length other than ``num_layers``, or sliding
            layers without a ``sliding_window``.
    """
    types = r.opt_list("layer_types", max_length=num_layers)
    if types is None:
        return None
    if len(types) != num_layers:
        raise InvalidSpecError(
            f"{r.path('layer_types')} has {len(types)} entries but the model has {num_layers} "
            "layers; give one attention type per layer.",
            field=r.path("layer_types"),
        )
    result: list[int | None] = []
    for index, kind in enumerate(types):
        if not isinstance(kind, str):
            raise InvalidSpecError(
                f"{r.path('layer_types')}[{index}] must be a string such as 'sliding_attention' "
                "or 'full_attention'.",
                field=r.path("layer_types"),
            )
        if kind == "sliding_attention":
            if window is None:
                raise InvalidSpecError(
                    f"{r.path('layer_types')} has sliding_attention layers but "
                    f"{r.path('sliding_window')} is missing; set the window size in tokens.",
                    field=r.path("sliding_window"),
                )
            result.append(window)
        else:
            result.append(None)
    return normalise_windows(result)


def torch_dtype(r: ConfigReader) -> str | None:
    """The declared dtype (``torch_dtype``, or ``dtype`` in transformers 5 configs); None if
    absent or not a string. Informational only: it never shifts sizes (bug B01)."""
    for key in ("torch_dtype", "dtype"):
        value = r.raw(key)
        if isinstance(value, str):
            return value[:40]
    return None


def display_name(r: ConfigReader, name: str | None, family: str) -> str:
    """``name`` if given, else the config's ``_name_or_path``, else its architecture class,
    else the family."""
    if name:
        return name
    value = r.raw("_name_or_path")
    if isinstance(value, str) and value:
        return value[:200]
    architectures = r.raw("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0][:200]
    return family
