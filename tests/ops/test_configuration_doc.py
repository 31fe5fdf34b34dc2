"""docs/configuration.md lists every variable with its default, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from gpu_advisor.settings import VARIABLES, Settings, default_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
ROW = re.compile(r"^\|\s*`(?P<name>[A-Z_]+)`\s*\|\s*`(?P<default>[^`]*)`\s*\|", re.M)


def documented() -> dict[str, str]:
    section = DOC.read_text(encoding="utf-8").split("## Variables", 1)[1].split("\n## ", 1)[0]
    return {m["name"]: m["default"] for m in ROW.finditer(section)}


def test_every_settings_field_has_exactly_one_variable() -> None:
    fields = {f.name for f in msgspec.structs.fields(Settings)}
    assert sorted(v.field for v in VARIABLES) == sorted(fields)


def test_doc_lists_every_variable_and_no_other() -> None:
    assert set(documented()) == {v.name for v in VARIABLES}


def test_doc_defaults_match_the_settings() -> None:
    doc = documented()
    assert {v.name: default_text(v) for v in VARIABLES} == doc
    # and the rendering itself is right for a few kinds of value:
    assert doc["GPU_ADVISOR_PORT"] == "8000"
    assert doc["GPU_ADVISOR_SOURCES"] == "bundled"
    assert doc["REDIS_URL"] == "(unset)"
