"""A generic dense decoder sized to a bare parameter count (``{"parameters": 7e9}``).

The shape heuristic follows the Llama-2 family (Touvron et al. 2023, Table 1 and the released
``config.json`` files; Llama-2-7B: hidden 4,096, 32 layers, 32 heads of 128, FFN 11,008,
vocabulary 32,000, untied head):

* vocabulary 32,000 and an untied output head;
* head_dim 128, multi-head attention (KV heads = query heads, the conservative choice for the
  KV cache: a GQA model needs less);
* a SwiGLU MLP of width ``256 * ceil(8/3 * hidden / 256)`` (Llama's ``multiple_of`` rule:
  4,096 -> 11,008);
* the hidden size from hidden / layers = 128 (Llama-2 7B 4,096 / 32, 13B 5,120 / 40): with
  ~12 hidden^2 parameters per layer a count N gives ``12 hidden^3 / 128 + 2 x 32,000 x hidden
  = N`` (with ``num_layers`` given: ``12 layers hidden^2 + 2 x 32,000 x hidden = N``), rounded
  to a multiple of 128;
* the layer count: what is left after embeddings, divided by one layer at the default width;
* the MLP width: fitted so the layers use up what is left.

Any architecture number in the request (``num_layers``, ``hidden_size``, ...) overrides its
heuristic. The total is always exactly the requested count: the MLP width (or, when the width
is given, the layer count) is fitted, and the remainder below one MLP column is counted in
``parameters.other`` together with the norm weights. The result is marked ``approximate``.
Example: 7e9 gives hidden 4,096, 33 layers, MLP 11,153 (Llama-2-7B: 4,096, 32, 11,008).
"""

from __future__ import annotations

import math
from typing import Final

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.limits import (
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_TOTAL_PARAMETERS,
    MAX_VOCAB,
)
from gpu_advisor.core.models.common import count_parameters
from gpu_advisor.core.models.llama_like import attention_linears, embeddings, gated_mlp_linears
from gpu_advisor.core.spec import MODEL_SHAPE_FIELDS, ModelSpec

DEFAULT_VOCAB: Final = 32_000
"""Llama-2 tokenizer size (``meta-llama/Llama-2-7b-hf`` config.json ``vocab_size``)."""
DEFAULT_HEAD_DIM: Final = 128
"""Llama-2 head width (4,096 / 32)."""
HIDDEN_PER_LAYER: Final = 128
"""Aspect ratio hidden / layers of Llama-2 7B and 13B."""
MLP_MULTIPLE: Final = 256
"""Llama's ``multiple_of`` for the SwiGLU width."""


def _check(value: int | None, field: str, maximum: int) -> int | None:
    if value is not None and not 1 <= value <= maximum:
        raise InvalidSpecError(
            f"{field} must be between 1 and {maximum:,}, got {value:,}.", field=field
        )
    return value


def _default_mlp_width(hidden: int) -> int:
    return MLP_MULTIPLE * math.ceil(8 * hidden / 3 / MLP_MULTIPLE)


def _solve_hidden(total: int, vocab: int, layers: int | None) -> int:
    """Hidden size for ``total`` parameters at ~12 hidden^2 per layer plus 2 x vocab x hidden of
    embeddings: with ``layers`` fixed a quadratic, else with layers = hidden / 128 a cubic."""
    if layers is not None:
        a, b = 12 * layers, 2 * vocab
        hidden = (-b + math.sqrt(b * b + 4 * a * total)) / (2 * a)
    else:
        low, high = 1.0, float(MAX_HIDDEN)
        for _ in range(100):
            mid = (low + high) / 2
            if 12 * mid**3 / HIDDEN_PER_LAYER + 2 * vocab * mid < total:
                low = mid
            else:
                high = mid
        hidden = low
    granule = DEFAULT_HEAD_DIM if hidden >= 4 * DEFAULT_HEAD_DIM else 8
    return min(MAX_HIDDEN, max(granule, granule * round(hidden / granule)))


def _heads_for(hidden: int) -> int:
    """The head count whose width hidden / heads is closest to 128 among divisors of hidden."""
    best = 1
    for k in range(1, math.isqrt(hidden) + 1):
        if hidden % k == 0:
            for heads in (k, hidden // k):
                if abs(math.log(hidden / heads / DEFAULT_HEAD_DIM)) < abs(
                    math.log(hidden / best / DEFAULT_HEAD_DIM)
                ):
                    best = heads
    return best


def _given(spec: ModelSpec, field: str, *names: str) -> list[str]:
    """Dotted paths of the architecture numbers among ``names`` that the request gives."""
    return [f"{field}.{name}" for name in names if getattr(spec, name) is not None]


def _fit_layers(
    spec: ModelSpec,
    *,
    field: str,
    total: int,
    budget: int,
    hidden: int,
    vocab: int,
    attention: int,
    embeddings_count: int,
) -> tuple[int, int]:
    """Layer count and MLP width that spend ``budget`` parameters (the total less embeddings,
    head and final norm) on layers of ``attention`` (+ norms) + 3 x hidden x width each.

    Raises:
        InvalidSpecError: naming the field to change -- the one whose given value makes the
            count impossible (``intermediate_size`` wider than the count allows,
            ``num_layers`` more than it allows), else ``parameters``, with the other fields
            involved and the limit that would fit in the message.
    """
    layers_given, width_given = spec.num_layers, spec.intermediate_size
    if layers_given is not None and width_given is not None:
        # the layers are fully described: a count that cannot hold them is checked against
        # their exact size (``other < 0`` in generic_decoder), naming every field involved
        return layers_given, width_given
    thinnest = attention + 3 * hidden  # one layer with an MLP width of 1
    if budget < thinnest:
        # even one layer of MLP width 1 does not fit: the count against the embeddings and width
        shape = _given(spec, field, "vocab_size", "hidden_size")
        fix = (
            f"lower {' or '.join(shape)}, or raise {field}.parameters"
            if shape
            else f"raise {field}.parameters, or give a smaller vocab_size and hidden_size"
        )
        raise InvalidSpecError(
            f"{field}.parameters ({total:,}) is too small for a decoder with a {vocab:,}-row "
            f"vocabulary and hidden size {hidden:,} (embeddings {embeddings_count:,} plus at "
            f"least one layer of {thinnest:,}); {fix}, or send the config.",
            field=f"{field}.parameters",
        )
    if layers_given is not None and layers_given * thinnest > budget:
        raise InvalidSpecError(
            f"{field}.num_layers ({layers_given:,}) is too many for {field}.parameters "
            f"({total:,}) at hidden size {hidden:,}: each layer needs at least {thinnest:,} "
            f"parameters and {budget:,} are left after the embeddings; use num_layers <= "
            f"{budget // thinnest:,}, or raise parameters.",
            field=f"{field}.num_layers",
        )
    if width_given is not None:
        per_layer = attention + 3 * hidden * width_given
        layers = budget // per_layer
        if layers < 1:
            widest = (budget - attention) // (3 * hidden)
            raise InvalidSpecError(
                f"{field}.intermediate_size ({width_given:,}) is too wide for "
                f"{field}.parameters ({total:,}): one layer at hidden size {hidden:,} would "
                f"hold {per_layer:,} parameters, but {budget:,} are left after the "
                f"embeddings; use intermediate_size <= {widest:,}, or raise parameters.",
                field=f"{field}.intermediate_size",
            )
        if layers > MAX_LAYERS:
            raise InvalidSpecError(
                f"{field}.intermediate_size ({width_given:,}) is so narrow that "
                f"{field}.parameters ({total:,}) needs {layers:,} layers at hidden size "
                f"{hidden:,}, above {MAX_LAYERS:,}; raise intermediate_size or give "
                "num_layers.",
                field=f"{field}.intermediate_size",
            )
        return layers, width_given
    if layers_given is not None:
        width = (budget - layers_given * attention) // (3 * hidden * layers_given)
        if width > MAX_INTERMEDIATE:
            raise InvalidSpecError(
                f"{field}.num_layers ({layers_given:,}) is too few for {field}.parameters "
                f"({total:,}) at hidden size {hidden:,}: the MLP would be {width:,} wide, above "
                f"{MAX_INTERMEDIATE:,}; raise num_layers or hidden_size, or give "
                "intermediate_size.",
                field=f"{field}.num_layers",
            )
        return layers_given, width
    per_layer_default = attention + 3 * hidden * _default_mlp_width(hidden)
    layers = min(max(1, round(budget / per_layer_default)), budget // thinnest, MAX_LAYERS)
    width = (budget - layers * attention) // (3 * hidden * layers)
    if width > MAX_INTERMEDIATE:
        raise InvalidSpecError(
            f"{field}.parameters ({total:,}) needs {layers:,} layers with an MLP width of "
            f"{width:,} at hidden size {hidden:,}, above {MAX_INTERMEDIATE:,}; give a larger "
            "hidden_size, or num_layers and intermediate_size that fit together.",
            field=f"{field}.parameters",
        )
    return layers, width


def generic_decoder(spec: ModelSpec, *, field: str = "model") -> Architecture:
    """A Llama-like dense decoder with exactly ``spec.parameters`` parameters.

    Args:
        spec: a model spec with ``parameters`` and optional architecture numbers.
        field: dotted path of the model spec in the request.

    Returns:
        An architecture with ``approximate=True`` and ``parameters.total`` equal to the
        requested count (rounded to an integer).

    Raises:
        InvalidSpecError: the count is out of range, too small for the (given or default)
            vocabulary and width, or smaller than what the given architecture numbers describe.
    """
    requested = spec.parameters
    if requested is None or not math.isfinite(requested) or requested < 1:
        raise InvalidSpecError(
            f"{field}.parameters must be a positive parameter count.", field=f"{field}.parameters"
        )
    if requested > MAX_TOTAL_PARAMETERS:
        raise InvalidSpecError(
            f"{field}.parameters ({requested:.3e}) is above the {MAX_TOTAL_PARAMETERS:.0e} limit.",
            field=f"{field}.parameters",
        )
    total = round(requested)
    vocab = _check(spec.vocab_size, f"{field}.vocab_size", MAX_VOCAB) or DEFAULT_VOCAB
    layers_given = _check(spec.num_layers, f"{field}.num_layers", MAX_LAYERS)
    hidden_given = _check(spec.hidden_size, f"{field}.hidden_size", MAX_HIDDEN)
    heads_given = _check(spec.num_attention_heads, f"{field}.num_attention_heads", MAX_HEADS)
    kv_given = _check(spec.num_kv_heads, f"{field}.num_kv_heads", MAX_HEADS)
    head_dim_given = _check(spec.head_dim, f"{field}.head_dim", MAX_HEAD_DIM)
    _check(spec.intermediate_size, f"{field}.intermediate_size", MAX_INTERMEDIATE)

    if hidden_given is not None:
        hidden = hidden_given
    elif heads_given is not None and head_dim_given is not None:
        hidden = heads_given * head_dim_given
    else:
        hidden = _solve_hidden(total, vocab, layers_given)
        if heads_given is not None:  # a width the given heads divide
            hidden = heads_given * max(1, round(hidden / heads_given))
    if hidden > MAX_HIDDEN:
        raise InvalidSpecError(
            f"{field}.num_attention_heads x head_dim ({hidden:,}) is above {MAX_HIDDEN:,}.",
            field=f"{field}.num_attention_heads",
        )

    if heads_given is not None:
        heads = heads_given
        if head_dim_given is not None:
            head_dim = head_dim_given
        elif hidden % heads == 0:
            head_dim = hidden // heads
        else:
            raise InvalidSpecError(
                f"{field}.num_attention_heads ({heads}) does not divide the hidden size "
                f"({hidden}); set head_dim or change the head count.",
                field=f"{field}.num_attention_heads",
            )
    elif head_dim_given is not None:
        head_dim = head_dim_given
        heads = max(1, hidden // head_dim)
    else:
        heads = _heads_for(hidden)
        head_dim = hidden // heads
    kv_heads = kv_given if kv_given is not None else heads
    if heads % kv_heads != 0:
        raise InvalidSpecError(
            f"{field}.num_kv_heads ({kv_heads}) must divide the attention heads ({heads}).",
            field=f"{field}.num_kv_heads",
        )

    embedding, lm_head = embeddings(hidden, vocab, tied=False)
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    norms = 2 * hidden
    budget = total - embedding - lm_head - hidden  # minus the final norm
    layers, width = _fit_layers(
        spec,
        field=field,
        total=total,
        budget=budget,
        hidden=hidden,
        vocab=vocab,
        attention=attention + norms,
        embeddings_count=embedding + lm_head,
    )

    linears = [
        *attention_linears(
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            layers=layers,
            qkv_bias=False,
            o_bias=False,
        ),
        *gated_mlp_linears(hidden=hidden, intermediate=width, layers=layers),
    ]
    linear = sum(m.parameters for m in linears)
    other = total - embedding - lm_head - linear
    if other < 0:
        given = _given(spec, field, *MODEL_SHAPE_FIELDS)
        raise InvalidSpecError(
            f"{field}.parameters ({total:,}) is smaller than the {total - other:,} parameters "
            f"that {', '.join(given)} describe; fix the count or those numbers.",
            field=f"{field}.parameters",
        )
    params = count_parameters(
        field=field, linears=linears, embedding=embedding, lm_head=lm_head, other=other
    )
    return Architecture(
        name=f"generic-{total / 1e9:.4g}B",
        family="generic",
        approximate=True,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=width,
        gated_mlp=True,
        vocab_size=vocab,
        tie_word_embeddings=False,
        parameters=params,
        linears=tuple(linears),
    )
