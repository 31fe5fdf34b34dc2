"""Worst-case timings of the memory estimator (every call must answer well under a second).

Usage: ``.venv/bin/python bench/bench_memory.py`` -- prints the slowest of five runs per call
for the largest inputs the request schema accepts (10^14 parameters over 10,000 layers, 1,024
pipeline stages, 10M-token contexts, a million sequences).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from gpu_advisor.core.memory import (
    estimate_memory,
    max_concurrency,
    max_context_length,
)
from gpu_advisor.core.models import generic_decoder, resolve_model
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, ModelSpec, TrainingWorkload


def worst(call: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return max(times)


def main() -> int:
    huge = generic_decoder(ModelSpec(parameters=1e14, num_layers=10_000))
    llama = resolve_model(ModelSpec(preset="meta-llama/Llama-3.1-70B"))
    deep_pp = ParallelPlan(pipeline_parallel=1024)
    cases: dict[str, Callable[[], object]] = {
        "training, 1e14 params, PP 1024, ZeRO-3 over 100k GPUs": lambda: estimate_memory(
            huge,
            TrainingWorkload(sequence_length=10_485_760, micro_batch_size=65_536),
            ParallelPlan(pipeline_parallel=1024, data_parallel=100_000, sharding="zero3"),
        ),
        "serving, 1e14 params, PP 1024, 1M x 10M tokens": lambda: estimate_memory(
            huge,
            InferenceWorkload(context_length=10_485_760, concurrency=1_000_000),
            deep_pp,
            capacity_bytes=2**40,
        ),
        "max_context_length, 1e14 params, PP 1024": lambda: max_context_length(
            huge, InferenceWorkload(), deep_pp, capacity_bytes=2**40
        ),
        "max_concurrency, 1e14 params, PP 1024, generic": lambda: max_concurrency(
            huge, InferenceWorkload(engine="generic"), deep_pp, capacity_bytes=2**40
        ),
        "typical: Llama-3.1-70B TP 8 serving": lambda: estimate_memory(
            llama, InferenceWorkload(), ParallelPlan(tensor_parallel=8), capacity_bytes=80 * 2**30
        ),
    }
    for name, call in cases.items():
        print(f"{worst(call) * 1000:9.2f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
