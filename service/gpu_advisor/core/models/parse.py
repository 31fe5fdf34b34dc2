"""``parse_hf_config``: a Hugging Face ``config.json`` object to an exact Architecture.

Dispatch is on ``model_type`` (case-insensitive), falling back to the first entry of
``architectures`` when ``model_type`` is absent. Each family has its own parser module; all
of them read through :class:`~gpu_advisor.core.models.reader.ConfigReader`, so bad input
becomes an :class:`~gpu_advisor.core.errors.InvalidSpecError` naming the key, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError, UnsupportedModelError
from gpu_advisor.core.models.classic import parse_falcon, parse_gpt2, parse_opt
from gpu_advisor.core.models.deepseek import parse_deepseek
from gpu_advisor.core.models.encoders import parse_bert, parse_t5
from gpu_advisor.core.models.gemma import parse_gemma
from gpu_advisor.core.models.gpt_oss import parse_gpt_oss
from gpu_advisor.core.models.llama_like import parse_llama_like, parse_mixtral_like
from gpu_advisor.core.models.reader import ConfigReader, show_value
from gpu_advisor.core.models.rope import check_nested_rope_scaling

Parser = Callable[[ConfigReader, str, str | None], Architecture]

_PARSERS: Final[Mapping[str, tuple[str, Parser]]] = {
    "llama": ("llama", parse_llama_like),
    "mistral": ("mistral", parse_llama_like),
    "qwen2": ("qwen2", parse_llama_like),
    "qwen3": ("qwen3", parse_llama_like),
    "phi3": ("phi3", parse_llama_like),
    "mixtral": ("mixtral", parse_mixtral_like),
    "qwen3_moe": ("qwen3_moe", parse_mixtral_like),
    "gemma2": ("gemma2", parse_gemma),
    "gemma3": ("gemma3", parse_gemma),
    "gemma3_text": ("gemma3_text", parse_gemma),
    "deepseek_v2": ("deepseek_v2", parse_deepseek),
    "deepseek_v3": ("deepseek_v3", parse_deepseek),
    "gpt_oss": ("gpt_oss", parse_gpt_oss),
    "falcon": ("falcon", parse_falcon),
    "refinedwebmodel": ("falcon", parse_falcon),
    "refinedweb": ("falcon", parse_falcon),
    "gpt2": ("gpt2", parse_gpt2),
    "opt": ("opt", parse_opt),
    "bert": ("bert", parse_bert),
    "t5": ("t5", parse_t5),
    "mt5": ("t5", parse_t5),
}
"""``model_type`` (lower case) -> (family, parser)."""

_ARCHITECTURES: Final[Mapping[str, str]] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForConditionalGeneration": "gemma3",
    "Gemma3ForCausalLM": "gemma3_text",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss",
    "FalconForCausalLM": "falcon",
    "RWForCausalLM": "refinedwebmodel",
    "GPT2LMHeadModel": "gpt2",
    "OPTForCausalLM": "opt",
    "BertModel": "bert",
    "BertForMaskedLM": "bert",
    "BertForPreTraining": "bert",
    "T5ForConditionalGeneration": "t5",
    "MT5ForConditionalGeneration": "mt5",
}
"""``architectures[0]`` -> ``model_type``, used when a config has no ``model_type``."""


def supported_model_types() -> list[str]:
    """The ``model_type`` values :func:`parse_hf_config` accepts, sorted."""
    return sorted(_PARSERS)


def _model_type(r: ConfigReader) -> str:
    model_type = r.opt_string("model_type")
    if model_type is not None:
        return model_type.lower()
    architectures = r.opt_list("architectures", max_length=100)
    if architectures:
        first = architectures[0]
        if isinstance(first, str) and first in _ARCHITECTURES:
            return _ARCHITECTURES[first]
        raise UnsupportedModelError(
            f"{r.path('model_type')} is missing and {r.path('architectures')} "
            f"({show_value(first)}) is not a supported class; set model_type to one of "
            f"{', '.join(supported_model_types())}.",
            field=r.path("model_type"),
        )
    raise UnsupportedModelError(
        f"{r.path('model_type')} is missing; set it to the config's model family, one of "
        f"{', '.join(supported_model_types())}.",
        field=r.path("model_type"),
    )


def parse_hf_config(
    config: dict[str, Any], *, name: str | None = None, field: str = "model.config"
) -> Architecture:
    """Turn a Hugging Face ``config.json`` object into an exact :class:`Architecture`.

    Args:
        config: the decoded ``config.json`` (untrusted: any JSON value is handled).
        name: display name; default ``_name_or_path``, else the architecture class.
        field: dotted path of ``config`` in the request, prefixed to every error path.

    Returns:
        The architecture with exact parameter counts (DESIGN "Parameters"), the linear modules
        of the blocks, per-layer sliding windows and the shipped weight format.

    Raises:
        UnsupportedModelError: a ``model_type`` (or ``architectures`` class) that no parser
            handles; the message lists the supported ones.
        InvalidSpecError: a missing key, a value of the wrong type, a non-dividing head count,
            an absurd size, a ``quantization_config`` the estimator cannot size
            (:mod:`.quantization`) or a malformed ``rope_scaling`` (:mod:`.rope`); ``field`` is
            the key's dotted path.
    """
    if not isinstance(config, Mapping):
        raise InvalidSpecError(
            f"{field} must be a JSON object (a Hugging Face config.json).", field=field
        )
    r = ConfigReader(config, field)
    model_type = _model_type(r)
    entry = _PARSERS.get(model_type)
    if entry is None:
        raise UnsupportedModelError(
            f"{r.path('model_type')} {show_value(model_type)} is not supported; supported "
            f"families: {', '.join(supported_model_types())}. Send the parameter count instead "
            "(model.parameters) for an approximate answer.",
            field=r.path("model_type"),
        )
    family, parser = entry
    check_nested_rope_scaling(r)
    arch = parser(r, family, name)
    if arch.shipped_quantized_modules == "routed-experts" and arch.parameters.routed_expert == 0:
        field = r.path("quantization_config.quant_method")
        raise InvalidSpecError(
            f"{field} {show_value(arch.shipped_weight_format)} quantises routed experts only "
            "(the gpt-oss layout) and this model has none; remove quantization_config and set "
            "workload.weight_dtype instead.",
            field=field,
        )
    return arch
