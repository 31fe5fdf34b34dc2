"""Timings of ``POST /v1/check`` (Advisor.check) and of the in-process CLI.

Usage: ``.venv/bin/python bench/bench_check.py`` -- prints the slowest of five runs per case:
the three committed examples, a failing target (its alternative searches the whole catalog),
and the largest targets the schema accepts (16 GPUs per node x 1,024 nodes; 100 allowed
instance types; 1e14 parameters), then the wall time of ``gpu-advisor check`` as a process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "service"))

import yaml  # noqa: E402

from gpu_advisor.asgi import build_advisor  # noqa: E402
from gpu_advisor.core.spec import CheckRequest  # noqa: E402
from gpu_advisor.decoding import decode_document  # noqa: E402
from gpu_advisor.settings import Settings  # noqa: E402

EXAMPLES = ROOT / "examples" / "check"


def _example(name: str, **changes: Any) -> CheckRequest:
    path = EXAMPLES / name
    body = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in changes.items():
        body[key] = value
    return decode_document(yaml.safe_dump(body).encode(), CheckRequest, "spec.yaml")


async def _timings() -> None:
    catalog, advisor = build_advisor(Settings())
    await catalog.start()
    snapshot = await catalog.snapshot()
    types = sorted({o.instance_type for o in snapshot.offers})[:100]
    full = "llama31-70b-full-finetune-p5.yaml"
    cases = {
        "example: 70B full fine-tune on p5": _example(full),
        "example: 8B QLoRA on 1 x L4": _example("llama31-8b-qlora-l4.json"),
        "example: 70B serving on allowed types": _example("llama31-70b-serving-allowed.yaml"),
        "fail on 1 node (+ alternative)": _example(
            full, target={"provider": "aws", "instance_type": "p5.48xlarge"}
        ),
        "p5 up to 1,024 nodes": _example(
            full, target={"provider": "aws", "instance_type": "p5.48xlarge", "nodes": 1024}
        ),
        "16 H100 per node x 1,024 nodes": _example(
            full, target={"gpu": "H100", "gpu_count": 16, "nodes": 1024}
        ),
        "100 allowed instance types": _example(full, target={"instance_types": types}),
        "1e14 parameters": _example(
            full, model={"parameters": 1e14}, target={"gpu": "H100", "gpu_count": 8, "nodes": 1024}
        ),
    }
    await advisor.check(cases["example: 8B QLoRA on 1 x L4"])  # build the planner index once
    for name, request in cases.items():
        times = []
        for _ in range(5):
            start = time.perf_counter()
            answer = await advisor.check(request)
            times.append(time.perf_counter() - start)
        print(f"{name:42s} {max(times) * 1000:8.1f} ms  {answer.verdict}")
    await catalog.close()


def main() -> int:
    asyncio.run(_timings())
    env = {**os.environ, "PYTHONPATH": str(ROOT / "service")}
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_advisor.cli",
            "check",
            str(EXAMPLES / "llama31-8b-qlora-l4.json"),
        ],
        env=env,
        capture_output=True,
        check=False,
    )
    elapsed_ms = (time.perf_counter() - start) * 1000
    print(f"{'gpu-advisor check (a process, in process)':42s} {elapsed_ms:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
