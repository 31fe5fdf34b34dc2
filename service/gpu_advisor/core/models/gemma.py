"""Gemma 2 and Gemma 3 (text, and the multimodal Gemma3ForConditionalGeneration).

Shapes follow transformers 5.24 ``models/gemma2/modeling_gemma2.py`` and
``models/gemma3/modeling_gemma3.py``:

* four RMSNorms of ``hidden`` per layer (input, post-attention, pre- and post-feed-forward) and
  the final norm; Gemma 3 adds per-head ``q_norm`` / ``k_norm`` of ``head_dim``;
* q/k/v/o (biased when ``attention_bias``), a GeGLU MLP gate/up/down;
* embeddings tied to the head by default (``tie_word_embeddings`` defaults to true);
* ``head_dim`` defaults to 256 (both config classes) and usually differs from hidden / heads
  (gemma-2-9b 256 vs 224, gemma-3-27b 128 vs 168).

Sliding windows: an explicit ``layer_types`` wins; else Gemma 2 alternates, sliding on even
layers (``Gemma2Config``: layer ``i`` slides when ``(i + 1) % 2``), and Gemma 3 slides on 5 of
every 6 layers (``sliding_window_pattern`` 6: layer ``i`` is global when ``(i + 1) % 6 == 0``).

Gemma 3 keeps its text model under ``text_config``; missing keys take ``Gemma3TextConfig``'s
defaults (vocab 262,208, hidden 2,304, FFN 9,216, 26 layers, 8 heads, 4 KV heads, head_dim 256,
context 131,072, window 4,096), as transformers does. ``model_type: gemma3`` also carries a
SigLIP vision tower (``vision_config``, ``SiglipVisionConfig`` defaults for missing keys) and the
multimodal projector; they are counted in ``parameters.other`` and excluded from ``active``
(they never see a text token). gemma-3-27b-it: 27,009,346,304 text + 423,060,336 vision =
27,432,406,640, the transformers count.
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture
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
    gated_mlp_linears,
    read_max_positions,
)
from gpu_advisor.core.models.quantization import shipped_quantization
from gpu_advisor.core.models.reader import (
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    ConfigReader,
)

_GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}
"""``Gemma3TextConfig`` defaults (transformers 5.24 ``configuration_gemma3.py``)."""


def _pattern_windows(
    r: ConfigReader, layers: int, window: int, pattern: int
) -> tuple[int | None, ...]:
    from_types = windows_from_layer_types(r, layers, window)
    if from_types is not None:
        return from_types
    return normalise_windows(None if (i + 1) % pattern == 0 else window for i in range(layers))


def siglip_vision_parameters(v: ConfigReader, text_hidden: int) -> int:
    """Parameters of a SigLIP vision tower plus the Gemma 3 multimodal projector.

    SigLIP (transformers ``models/siglip/modeling_siglip.py``): a patch-embedding Conv2d
    (channels x patch^2 x hidden + bias), learned positions ((image / patch)^2 x hidden), per
    layer q/k/v/o with biases, two LayerNorms (weight + bias) and an MLP fc1/fc2 with biases, a
    post-LayerNorm, and, when ``vision_use_head``, the attention-pooling head (probe, a
    ``nn.MultiheadAttention``, a LayerNorm and an MLP). Projector
    (``Gemma3MultiModalProjector``): vision hidden x text hidden plus an RMSNorm of vision
    hidden. Missing keys take ``SiglipVisionConfig`` defaults (768, 3,072, 12 layers, 3
    channels, image 224, patch 16, head on).

    Raises:
        InvalidSpecError: a key out of range (naming its path under ``vision_config``).
    """
    hidden = v.integer("hidden_size", default=768, what="the vision width", maximum=MAX_HIDDEN)
    width = v.integer(
        "intermediate_size", default=3072, what="the vision MLP width", maximum=MAX_INTERMEDIATE
    )
    layers = v.integer(
        "num_hidden_layers", default=12, what="the vision layers", maximum=MAX_LAYERS
    )
    channels = v.integer("num_channels", default=3, what="the image channels", maximum=MAX_HEADS)
    image = v.integer("image_size", default=224, what="the image side in pixels", maximum=100_000)
    patch = v.integer("patch_size", default=16, what="the patch side in pixels", maximum=image)
    positions = (image // patch) ** 2
    if positions > MAX_POSITIONS:
        raise InvalidSpecError(
            f"{v.path('image_size')} / {v.path('patch_size')} gives {positions:,} patches; "
            f"at most {MAX_POSITIONS:,} are allowed.",
            field=v.path("image_size"),
        )
    mlp = (hidden * width + width) + (width * hidden + hidden)
    layer = 4 * (hidden * hidden + hidden) + 2 * (2 * hidden) + mlp
    total = channels * patch * patch * hidden + hidden  # patch embedding (conv weight + bias)
    total += positions * hidden + layers * layer + 2 * hidden  # positions, layers, post-LN
    if v.flag("vision_use_head", default=True):
        attention = (3 * hidden * hidden + 3 * hidden) + (hidden * hidden + hidden)
        total += hidden + attention + 2 * hidden + mlp  # probe, attention, LayerNorm, MLP
    return total + hidden * text_hidden + hidden  # projector weight + RMSNorm


def parse_gemma(r: ConfigReader, family: str, name: str | None) -> Architecture:
    """Parse ``gemma2``, ``gemma3`` (multimodal, ``text_config``) or ``gemma3_text``.

    Raises:
        InvalidSpecError: a missing or invalid key, naming its path.
    """
    vision = 0
    text = r
    if family == "gemma3":
        nested = r.opt_object("text_config")
        if nested is None:
            raise InvalidSpecError(
                f"{r.path('text_config')} is missing; a gemma3 config keeps its language model "
                "there (or send the text config itself with model_type gemma3_text).",
                field=r.path("text_config"),
            )
        text = nested
    gemma3 = family in ("gemma3", "gemma3_text")

    def default(key: str) -> int | None:
        return _GEMMA3_TEXT_DEFAULTS[key] if gemma3 else None

    hidden = text.integer(
        "hidden_size", default=default("hidden_size"), what="the model width", maximum=MAX_HIDDEN
    )
    layers = text.integer(
        "num_hidden_layers",
        default=default("num_hidden_layers"),
        what="the number of transformer layers",
        maximum=MAX_LAYERS,
    )
    intermediate = text.integer(
        "intermediate_size",
        default=default("intermediate_size"),
        what="the MLP width",
        maximum=MAX_INTERMEDIATE,
    )
    vocab = text.integer(
        "vocab_size",
        default=default("vocab_size"),
        what="the number of rows of the token embedding",
        maximum=MAX_VOCAB,
    )
    heads, kv_heads, head_dim = read_attention_heads(
        text,
        hidden,
        heads_default=default("num_attention_heads"),
        kv_default=default("num_key_value_heads"),
        kv_required=True,
        head_dim_default=256,
    )
    tied = text.flag("tie_word_embeddings", default=r.flag("tie_word_embeddings", default=True))
    bias = text.flag("attention_bias", default=False)
    window = read_window(text) or 4096
    if gemma3:
        pattern = text.integer(
            "sliding_window_pattern",
            default=6,
            what="the period of global-attention layers",
            maximum=MAX_LAYERS,
        )
        windows = _pattern_windows(text, layers, window, pattern)
    else:
        windows = _pattern_windows(text, layers, window, 2)
    if family == "gemma3":
        vision_config = r.opt_object("vision_config") or ConfigReader({}, r.path("vision_config"))
        vision = siglip_vision_parameters(vision_config, hidden)
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
        *gated_mlp_linears(hidden=hidden, intermediate=intermediate, layers=layers),
    ]
    norms = 4 * hidden + (2 * head_dim if gemma3 else 0)
    embedding, lm_head = embeddings(hidden, vocab, tied=tied)
    params = count_parameters(
        field=r.field,
        linears=linears,
        embedding=embedding,
        lm_head=lm_head,
        other=norms * layers + hidden + vision,
        not_per_token=vision,
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
        max_position_embeddings=read_max_positions(
            text, default=default("max_position_embeddings")
        ),
        layer_windows=windows,
        shipped_weight_format=quant.weight_format,
        shipped_quantized_modules=quant.modules,
        shipped_group_size=quant.group_size,
        torch_dtype=torch_dtype(r),
        parameters=params,
        linears=tuple(linears),
    )
