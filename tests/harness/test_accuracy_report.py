"""docs/accuracy.md is what ``python bench/accuracy_report.py --reuse-harness`` writes from the
committed harness data (which tests/harness/test_measured_memory.py keeps current): the report
cannot drift from the estimator. Slow: it runs accelerate's estimator on the local configs."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_committed_accuracy_report_is_current():
    path = REPO_ROOT / "bench" / "accuracy_report.py"
    spec = importlib.util.spec_from_file_location("accuracy_report", path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    report = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = report
    spec.loader.exec_module(report)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = report.render(report.published_rows(), report.bug_rows(), report.harness_rows(True))
    committed = (REPO_ROOT / "docs" / "accuracy.md").read_text()
    assert text == committed, "docs/accuracy.md is stale: run bench/accuracy_report.py"
    assert "**46 of 46 scored cases within their tolerance**" in text
