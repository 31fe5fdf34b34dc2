"""Model resolution (DESIGN pipeline step 1): presets, Hugging Face configs and bare parameter
counts to an exact :class:`~gpu_advisor.core.architecture.Architecture`. Pure: no I/O."""

from gpu_advisor.core.models.generic import generic_decoder
from gpu_advisor.core.models.parse import parse_hf_config, supported_model_types
from gpu_advisor.core.models.presets import PresetInfo, get_preset, list_presets, preset_config
from gpu_advisor.core.models.resolve import resolve_model

__all__ = [
    "PresetInfo",
    "generic_decoder",
    "get_preset",
    "list_presets",
    "parse_hf_config",
    "preset_config",
    "resolve_model",
    "supported_model_types",
]
