"""Where the shared test data lies, and loaders for it (tests only; the core does no I/O).

The data is the vendored copy in ``tests/fixtures/shared`` (see its README), so a clean clone
needs nothing beside the repository. ``GPU_ADVISOR_SHARED`` points the tests at another copy.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from tests.shared_data import SHARED_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]


@cache
def shared_dir() -> Path:
    """The ``shared/`` folder holding ``data/hf-configs`` and ``reference-cases``."""
    override = os.environ.get("GPU_ADVISOR_SHARED")
    return Path(override) if override else SHARED_DIR


def hf_configs_dir() -> Path:
    return shared_dir() / "data" / "hf-configs"


def hf_config_stems() -> list[str]:
    """File stems (``meta-llama--Llama-3.1-8B``) of every config in the folder."""
    return sorted(
        p.stem for p in hf_configs_dir().glob("*.json") if p.stem != "transformers_param_counts"
    )


def load_hf_config(stem: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((hf_configs_dir() / f"{stem}.json").read_text())
    return data


def transformers_counts() -> dict[str, int]:
    """Totals measured with transformers 5.24.0 on the meta device (README of the folder)."""
    data = json.loads((hf_configs_dir() / "transformers_param_counts.json").read_text())
    return {k: int(v) for k, v in data["counts"].items()}


def _case(file_name: str, case_id: str) -> dict[str, Any]:
    for case in json.loads((shared_dir() / "reference-cases" / file_name).read_text()):
        if case["id"] == case_id:
            return dict(case)
    raise KeyError(f"{case_id} not in {file_name}")


def published_case(case_id: str) -> dict[str, Any]:
    """One case of ``reference-cases/published_memory_cases.json`` (F01, ...)."""
    return _case("published_memory_cases.json", case_id)


def bug_case(case_id: str) -> dict[str, Any]:
    """One case of ``reference-cases/bug_report_cases.json`` (B02, ...)."""
    return _case("bug_report_cases.json", case_id)
