"""Save the full answers of ``recommend()`` for a varied set of requests, or compare the
current code's answers with a saved set: the check that a speed change moved no answer.

    python bench/answers_diff.py save BEFORE.json       # on the commit before the change
    python bench/answers_diff.py compare BEFORE.json    # after it: exit 1 if any differs

The requests are ``bench_recommend.py``'s five plus 26 that reach other code paths
(optimizer offload, global batch with pipeline stages, MoE, MLA, sliding windows, long
context, fp8 weights and KV, the generic engine, budget, deadline, headroom, max GPUs and
nodes, max price, spot only, filters that leave nothing). Each runs against 20,000
synthetic offers (seed 11) and against the bundled snapshot. It is a development tool, not a
test: its reference is the code's own earlier output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recommend import bundled_offers, cases, synthetic_catalog
from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.catalog.reference import load_providers
from gpu_advisor.core.memory import WorkloadEstimator
from gpu_advisor.core.models.resolve import resolve_model
from gpu_advisor.core.planner import (
    MEMORY_CAPACITY_RULE,
    build_recommendation_index,
    recommend,
)
from gpu_advisor.core.spec import (
    Constraints,
    InferenceWorkload,
    ModelSpec,
    RecommendationRequest,
    TrainingWorkload,
)

L8 = "meta-llama/Llama-3.1-8B"
L70 = "meta-llama/Llama-3.1-70B"
L405 = "meta-llama/Llama-3.1-405B"
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN_MOE = "Qwen/Qwen3-30B-A3B"
GEMMA3 = "google/gemma-3-27b-it"
GPT_OSS = "openai/gpt-oss-120b"


def _request(preset: str, workload: Any, **kwargs: Any) -> RecommendationRequest:
    return RecommendationRequest(model=ModelSpec(preset=preset), workload=workload, **kwargs)


def requests() -> list[tuple[str, RecommendationRequest]]:
    """``bench_recommend``'s cases, then the ones that reach other code paths."""
    train, serve, limits = TrainingWorkload, InferenceWorkload, Constraints
    more = [
        _request(L8, train(tokens=1e9)),
        _request(
            L8,
            train(tokens=1e9, global_batch_size=512, micro_batch_size=2),
            objective="time_to_result",
        ),
        _request(
            L70,
            train(tokens=5e9, global_batch_size=1024, gradient_checkpointing="full"),
            constraints=limits(max_nodes=8),
        ),
        _request(L70, train(method="lora", tokens=1e8, sequence_length=8192)),
        _request(L70, train(method="qlora", tokens=1e8), constraints=limits(spot="only")),
        _request(L70, train(tokens=1e9, cpu_offload_optimizer=True, sharding="zero3")),
        _request(
            L405, train(tokens=1e10), constraints=limits(max_nodes=64), objective="time_to_result"
        ),
        _request(
            L405,
            train(tokens=1e10, gradient_checkpointing="full"),
            constraints=limits(deadline_hours=100.0),
        ),
        _request(MIXTRAL, train(tokens=1e9)),
        _request(MIXTRAL, train(method="lora", tokens=1e8, optimizer="adamw-8bit")),
        _request(QWEN_MOE, train(tokens=1e9, optimizer="adafactor")),
        _request(
            DEEPSEEK,
            train(tokens=1e10, gradient_checkpointing="full"),
            constraints=limits(max_nodes=128),
        ),
        _request(GEMMA3, train(method="lora", tokens=1e8, precision="bf16")),
        _request(L8, train(tokens=1e9), constraints=limits(budget_usd=5.0)),
        _request(L8, train(tokens=1e9), constraints=limits(min_headroom_fraction=0.3, max_gpus=8)),
        _request(L70, serve(context_length=32768, concurrency=64)),
        _request(
            L70,
            serve(weight_dtype="fp8", concurrency=256, target_tokens_per_second=10000.0),
            objective="cost_per_million_tokens",
        ),
        _request(L405, serve(weight_dtype="fp8")),
        _request(DEEPSEEK, serve(concurrency=32)),
        _request(GPT_OSS, serve(concurrency=128), objective="price_per_hour"),
        _request(
            QWEN_MOE, serve(context_length=32768, concurrency=8), constraints=limits(spot="allow")
        ),
        _request(L8, serve(engine="generic", concurrency=1)),
        _request(
            L8,
            serve(concurrency=512, kv_cache_dtype="fp8"),
            constraints=limits(max_price_per_hour_usd=3.0),
        ),
        _request(GEMMA3, serve(context_length=65536, concurrency=4), objective="time_to_result"),
        _request(MIXTRAL, serve(), constraints=limits(regions=["us-east-1"], gpu_types=["H100"])),
        _request(L405, serve(weight_dtype="bf16", concurrency=64), constraints=limits(max_nodes=1)),
    ]
    return [*cases(), *((f"more {i}", r) for i, r in enumerate(more))]


def answers() -> dict[str, Any]:
    """Every request's full answer (or its error) per catalog, as JSON values."""
    gpus = load_gpu_catalog().by_id
    providers = load_providers()
    catalogs = {
        "synthetic": build_recommendation_index(synthetic_catalog(20_000, 11)),
        "bundled": build_recommendation_index(list(bundled_offers())),
    }
    found: dict[str, Any] = {}
    for name, request in requests():
        arch = resolve_model(request.model)
        for label, index in catalogs.items():
            estimator = WorkloadEstimator(arch, request.workload)
            try:
                result = recommend(
                    arch,
                    request,
                    index,
                    gpus,
                    providers,
                    estimator,
                    capacity_rule=MEMORY_CAPACITY_RULE,
                )
                found[f"{name} | {label}"] = json.loads(msgspec.json.encode(result))
            except Exception as error:  # an error is an answer too: it must not change
                found[f"{name} | {label}"] = f"{type(error).__name__}: {error}"
    return found


app = typer.Typer(add_completion=False)


@app.command()
def save(path: Path) -> None:
    """Write the answers to ``path``."""
    found = answers()
    path.write_text(json.dumps(found, sort_keys=True))
    print(f"saved {len(found)} answers to {path}")


@app.command()
def compare(path: Path) -> None:
    """Compare the answers with those saved in ``path``; exit 1 when any differs."""
    saved = json.loads(path.read_text())
    found = answers()
    differ = sorted(k for k in saved.keys() | found.keys() if saved.get(k) != found.get(k))
    if differ:
        print(f"{len(differ)} of {len(saved)} answers differ:", *differ, sep="\n  ")
        raise typer.Exit(1)
    print(f"all {len(saved)} answers identical")


if __name__ == "__main__":
    app()
