"""docs/accuracy.md is what ``python bench/accuracy_report.py --reuse-harness`` writes from the
committed harness data (which tests/harness/test_measured_memory.py keeps current): the report
cannot drift from the estimator. Slow: it runs accelerate's estimator on the local configs."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ..bench_scripts import load_bench_script

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_committed_accuracy_report_is_current():
    report = load_bench_script("accuracy_report")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = report.render(report.published_rows(), report.bug_rows(), report.harness_rows(True))
    committed = (REPO_ROOT / "docs" / "accuracy.md").read_text()
    assert text == committed, "docs/accuracy.md is stale: run bench/accuracy_report.py"
    assert "**46 of 46 scored cases within their tolerance**" in text
