"""docs/ci.md stays runnable: its CI jobs are valid YAML that run the in-process check on a
spec committed here, post the markdown, and fail the pipeline on fail; every check example
is listed."""

from __future__ import annotations

from typing import Any

import yaml
from markdown_it import MarkdownIt

from tests.gate.conftest import EXAMPLES
from tests.ops.serving import REPO

DOC = REPO / "docs" / "ci.md"


def _yaml_blocks() -> list[dict[Any, Any]]:
    tokens = MarkdownIt("commonmark").parse(DOC.read_text(encoding="utf-8"))
    return [yaml.safe_load(t.content) for t in tokens if t.type == "fence" and t.info == "yaml"]


def test_github_actions_job() -> None:
    workflow = next(b for b in _yaml_blocks() if "jobs" in b)
    job = workflow["jobs"]["gpu-capacity"]
    assert (REPO / job["env"]["SPEC"]).is_file()
    assert workflow["permissions"]["pull-requests"] == "write"
    runs = {step.get("id", step.get("name")): step.get("run", "") for step in job["steps"]}
    assert 'gpu-advisor check "$SPEC"' in runs["gate"]
    assert "--format markdown" in runs["gate"]
    assert "--url" not in runs["gate"]  # in process, no service needed
    comment = runs["Comment on the pull request"]
    assert "gh pr comment" in comment
    assert "--body-file gate.md" in comment
    fail = next(s for s in job["steps"] if s.get("name") == "Fail unless the check passed")
    assert fail["if"] == "steps.gate.outputs.status != '0'"


def test_gitlab_job() -> None:
    pipeline = next(
        b for b in _yaml_blocks() if "gpu-capacity" in b and "script" in b["gpu-capacity"]
    )
    job = pipeline["gpu-capacity"]
    assert (REPO / job["variables"]["SPEC"]).is_file()
    script = "\n".join(job["script"])
    assert 'gpu-advisor check "$SPEC"' in script
    assert "merge_requests/$CI_MERGE_REQUEST_IID/notes" in script
    assert '--data-urlencode "body@gate.md"' in script
    assert 'exit "$status"' in script
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]


def test_every_check_example_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    examples = sorted(p.name for p in EXAMPLES.iterdir())
    assert len(examples) == 3
    assert any(name.endswith(".json") for name in examples)
    assert any(name.endswith(".yaml") for name in examples)
    for name in examples:
        assert f"examples/check/{name}" in text, name
