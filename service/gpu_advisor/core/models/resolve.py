"""``resolve_model``: DESIGN pipeline step 1, a model spec to an exact architecture."""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models.generic import generic_decoder
from gpu_advisor.core.models.parse import parse_hf_config
from gpu_advisor.core.models.presets import get_preset
from gpu_advisor.core.spec import MODEL_SHAPE_FIELDS, ModelSpec


def resolve_model(spec: ModelSpec, *, field: str = "model") -> Architecture:
    """Resolve ``{"preset": id}``, ``{"config": {...}}`` or ``{"parameters": N, ...}``.

    Exactly one of ``preset``, ``config`` and ``parameters`` must be given. The optional
    architecture numbers (``num_layers``, ``hidden_size``, ...) refine a bare parameter count
    only; a preset or a config fixes the architecture itself.

    Args:
        spec: the request's model spec.
        field: dotted path of the spec in the request.

    Returns:
        The exact architecture (``approximate=True`` for a bare parameter count, see
        :func:`~gpu_advisor.core.models.generic.generic_decoder`).

    Raises:
        InvalidSpecError: none or several of preset/config/parameters (field ``model``),
            architecture numbers next to a preset or config, or any parser error.
        UnknownPresetError: an unknown preset id.
        UnsupportedModelError: a config of an unsupported family.
    """
    given = [
        key
        for key, value in (
            ("preset", spec.preset),
            ("config", spec.config),
            ("parameters", spec.parameters),
        )
        if value is not None
    ]
    if len(given) != 1:
        found = f"got {', '.join(given)}" if given else "got none"
        raise InvalidSpecError(
            f"{field} needs exactly one of preset, config or parameters ({found}).", field=field
        )
    if spec.parameters is None:
        for key in MODEL_SHAPE_FIELDS:
            if getattr(spec, key) is not None:
                raise InvalidSpecError(
                    f"{field}.{key} refines a bare parameter count only; a {given[0]} already "
                    "fixes the architecture. Remove it, or send parameters instead.",
                    field=f"{field}.{key}",
                )
    if spec.preset is not None:
        return get_preset(spec.preset, field=f"{field}.preset")
    if spec.config is not None:
        return parse_hf_config(spec.config, field=f"{field}.config")
    return generic_decoder(spec, field=field)
