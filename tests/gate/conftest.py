"""The CI gate's fixtures: the app through Litestar's client, the example specs, the CLI as a
subprocess, and a live server started with ``gpu-advisor serve`` for ``--url``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from gpu_advisor.asgi import build
from gpu_advisor.decoding import load_yaml
from gpu_advisor.settings import Settings
from tests.ops.serving import REPO, base_env, free_port, start, stop, wait_for

EXAMPLES = REPO / "examples" / "check"
FULL_FINETUNE = EXAMPLES / "llama31-70b-full-finetune-p5.yaml"
QLORA = EXAMPLES / "llama31-8b-qlora-l4.json"
SERVING = EXAMPLES / "llama31-70b-serving-allowed.yaml"


def load_example(path: Path) -> dict[str, Any]:
    """An example spec as a dict (YAML is a superset of the JSON ones), read as the CLI reads
    it: YAML 1.2 floats, so ``tokens: 1.0e9`` is a number (PyYAML's YAML 1.1 default reads it
    as the string "1.0e9", which the API rejects)."""
    loaded: dict[str, Any] = load_yaml(path.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:  # type: ignore[type-arg]
    app = build(Settings(rate_limit_per_minute=0, log_level="error"))
    with TestClient(app) as test_client:
        yield test_client


def run_cli(
    args: Sequence[str],
    stdin: bytes | None = None,
    cwd: Path = REPO,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``gpu-advisor ARGS`` as CI runs it: this checkout's code, the embedded defaults (plus
    ``env``)."""
    return subprocess.run(
        ["gpu-advisor", *args],
        input=stdin,
        capture_output=True,
        env=base_env({"GPU_ADVISOR_LOG_LEVEL": "error", **(env or {})}),
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """A live ``gpu-advisor serve --port <free>`` (embedded defaults, bundled catalog)."""
    port = free_port()
    proc = start(
        ["gpu-advisor", "serve", "--port", str(port)],
        base_env({"GPU_ADVISOR_RATE_LIMIT_PER_MINUTE": "0", "GPU_ADVISOR_LOG_LEVEL": "error"}),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/readyz", proc, timeout_s=60.0)
        yield url
    finally:
        stop(proc)
