"""Measured truth harness (a): our parameter counts equal transformers' on the meta device, to
the parameter, for every config in shared/data/hf-configs (and the hand-built configs of the
unit tests), and the committed docs/data/meta_param_counts.json is what the harness produces.

Runs bench/harness_param_counts.py's measurement (torch 2.13.0 CPU + transformers from the
``harness`` extra). Slow: it instantiates ~37 models on the meta device (about 10 s).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _harness() -> ModuleType:
    path = REPO_ROOT / "bench" / "harness_param_counts.py"
    spec = importlib.util.spec_from_file_location("harness_param_counts", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured() -> dict:
    harness = _harness()
    return harness.run(harness.shared_dir())


@pytest.mark.slow
def test_every_config_matches_transformers_to_the_parameter(measured):
    rows = measured["results"]
    hf_files = [r for r in rows if not r["config"].startswith("extra:")]
    assert len(hf_files) == 30
    for row in rows:
        expected = row.get("explained_difference", 0)
        assert row["difference"] == expected, row
    explained = [r["config"] for r in rows if "explained_difference" in r]
    assert explained == ["extra:mt0-large-shapes"]
    # transformers 5.x ties T5/mT5 heads whatever the config says: exactly vocab x d_model.
    assert rows[[r["config"] for r in rows].index(explained[0])]["difference"] == 250112 * 1024


@pytest.mark.slow
def test_measured_counts_agree_with_the_folder_counts_file(measured):
    """The folder's transformers_param_counts.json was made with transformers 5.24.0 too."""
    harness = _harness()
    counts_file = harness.shared_dir() / "data" / "hf-configs" / "transformers_param_counts.json"
    published = json.loads(counts_file.read_text())["counts"]
    for row in measured["results"]:
        if row["config"] in published:
            assert row["transformers_parameters"] == published[row["config"]], row["config"]


@pytest.mark.slow
def test_committed_report_data_is_current(measured):
    committed = json.loads((REPO_ROOT / "docs" / "data" / "meta_param_counts.json").read_text())
    assert committed["results"] == measured["results"], (
        "docs/data/meta_param_counts.json is stale: run bench/harness_param_counts.py"
    )
