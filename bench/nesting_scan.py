"""How long the request-depth guard takes on 1 MiB bodies (the default body limit), from a
normal request to the adversarial cases.

Usage: ``.venv/bin/python bench/nesting_scan.py`` (milliseconds per call, best of 5).
"""

from __future__ import annotations

import sys
import timeit
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "service"))

from gpu_advisor.nesting import json_too_deep  # noqa: E402

MIB = 2**20


def _best_ms(statement: Callable[[], object], number: int = 3) -> float:
    return min(timeit.repeat(statement, number=number, repeat=5)) / number * 1e3


def main() -> None:
    normal = b'{"model":{"preset":"meta-llama/Llama-3.1-8B"},"workload":{"kind":"inference"}}'
    cases = {
        "normal request": normal,
        "1 MiB of [ (too deep at once)": b"[" * MIB,
        "1000-deep config": b'{"model":{"config":' + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b"}}",
        "1 MiB flat lists, deep at the end": b"["
        + b"[]," * (MIB // 3 - 30)
        + b"[" * 40
        + b"]" * 40
        + b"]",
        "1 MiB of objects (shallow)": b"[" + b'{"a":[1]},' * (MIB // 10 - 1) + b"1]",
        "1 MiB of escaped quotes": b'"' + b'\\"' * (MIB // 2),
    }
    for name, data in cases.items():
        path = json_too_deep(data)
        verdict = "ok" if path is None else f"too deep at {path[:24]}..."
        ms = _best_ms(lambda d=data: json_too_deep(d))
        print(f"{name:36} {len(data) / MIB:5.2f} MiB {ms:8.2f} ms  {verdict}")


if __name__ == "__main__":
    main()
