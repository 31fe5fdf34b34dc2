"""``GET /v1/models``: the built-in model presets (ids, aliases and architecture numbers)."""

from __future__ import annotations

from litestar import get
from msgspec import Struct

from gpu_advisor.api.problems import problem_responses
from gpu_advisor.core.models import PresetInfo, list_presets


class ModelList(Struct, frozen=True, kw_only=True):
    """The presets a request can name in ``model.preset`` (ids resolve case-insensitively)."""

    models: list[PresetInfo]


@get(
    "/v1/models",
    sync_to_thread=False,
    tags=["models"],
    summary="Model presets",
    responses=problem_responses(429),
)
def list_models() -> ModelList:
    """Every preset with its total and active parameter counts and main shape numbers."""
    return ModelList(models=list_presets())


MODEL_ROUTES = [list_models]
