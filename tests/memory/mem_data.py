"""Shared test data for the memory tests: real configs, presets and reference cases.

Architectures come from the real ``config.json`` files in ``shared/data/hf-configs`` through the
models package's parser (the same code path the service uses), never from hand-built values.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.models import parse_hf_config

REPO_ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30
MIB = 2**20
GB = 10**9


@cache
def shared_dir() -> Path:
    """``shared/`` beside the repository (or above a worktree); ``GPU_ADVISOR_SHARED`` wins."""
    override = os.environ.get("GPU_ADVISOR_SHARED")
    if override:
        return Path(override)
    for parent in REPO_ROOT.parents:
        candidate = parent / "shared"
        if (candidate / "reference-cases").is_dir():
            return candidate
    raise FileNotFoundError(f"no shared/reference-cases above {REPO_ROOT}")


def config(stem: str, **overrides: Any) -> dict[str, Any]:
    """A real config.json (``meta-llama--Llama-3.1-8B``), with optional key overrides."""
    data: dict[str, Any] = json.loads(
        (shared_dir() / "data" / "hf-configs" / f"{stem}.json").read_text()
    )
    data.pop("_note", None)
    data.update(overrides)
    return data


@cache
def arch(stem: str) -> Architecture:
    """The parsed architecture of a real config file."""
    return parse_hf_config(config(stem))


def arch_from(stem: str, **overrides: Any) -> Architecture:
    """A real config with some keys changed (e.g. Llama-2-13B shapes on the Llama-2 file)."""
    return parse_hf_config(config(stem, **overrides))


def published_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(
        (shared_dir() / "reference-cases" / "published_memory_cases.json").read_text()
    )
    return cases


def published_case(case_id: str) -> dict[str, Any]:
    for case in published_cases():
        if case["id"] == case_id:
            return case
    raise KeyError(case_id)


def bug_case(case_id: str) -> dict[str, Any]:
    cases = json.loads((shared_dir() / "reference-cases" / "bug_report_cases.json").read_text())
    for case in cases:
        if case["id"] == case_id:
            return dict(case)
    raise KeyError(case_id)
