"""POST /v1/estimate through the app: the questions people ask, with the arithmetic written out."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

GIB = 2**30
LLAMA_70B_PARAMS = 70_553_706_496  # published total (shared/data/hf-configs/README.md)


def _estimate(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:  # type: ignore[type-arg]
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_kv_bytes_per_token_uses_kv_heads(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-70B"},
        "workload": {"kind": "inference", "context_length": 8192, "concurrency": 16},
    }
    result = _estimate(client, body)
    # 2 (K, V) x 80 layers x 8 KV heads (not 64 attention heads) x 128 head_dim x 2 B (bf16)
    assert result["kv_cache_bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327_680
    memory = result["memory_per_gpu"]
    # One GPU holds every weight: 70.55e9 x 2 B, and 16 sequences x 8192 tokens of KV.
    assert memory["weights_bytes"] >= LLAMA_70B_PARAMS * 2
    assert memory["kv_cache_bytes"] == 16 * 8192 * 327_680
    assert memory["total_bytes"] == sum(
        memory[k]
        for k in (
            "weights_bytes",
            "gradients_bytes",
            "optimizer_bytes",
            "activations_bytes",
            "kv_cache_bytes",
            "overhead_bytes",
        )
    )


def test_min_gpus_per_gpu_type(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-70B"},
        "workload": {"kind": "inference", "context_length": 8192, "concurrency": 16},
    }
    rows = {row["gpu"]: row for row in _estimate(client, body)["min_gpus"]}
    h100 = rows["H100-SXM-80GB"]
    # bf16 weights alone are 141.1e9 B = 131.4 GiB > one H100's 79.6 GiB exposed: >= 2 GPUs;
    # with 16 x 8192 tokens x 320 KiB = 40 GiB of KV the replica needs 4 (TP must divide the
    # 64 heads and the 8 KV heads: 2 x 79.6 = 159 GiB < 131.4 + 40 + overhead).
    assert h100["min_gpus"] >= 2
    assert h100["memory_per_gpu_bytes"] <= h100["memory_exposed_bytes"]
    # A GPU without a bf16 path cannot serve a bf16 model: no count, and the reason says why.
    t4 = rows["T4-16GB"]
    assert t4["min_gpus"] is None
    assert "bf16" in t4["reason"]


def test_hardware_fit_plan_and_limits(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-70B"},
        "workload": {"kind": "inference", "context_length": 8192, "concurrency": 16},
        "hardware": {"gpu": "h100", "gpu_count": 8},
    }
    result = _estimate(client, body)
    assert result["hardware"]["gpu"] == "H100-SXM-80GB"
    assert result["fits"] is True
    plan = result["plan"]
    shards = plan["tensor_parallel"] * plan["pipeline_parallel"]
    # Each GPU of a replica holds 1/(TP x PP) of the 141.1 GB of bf16 weights.
    assert result["memory_per_gpu"]["weights_bytes"] >= LLAMA_70B_PARAMS * 2 / shards
    assert result["performance"]["tokens_per_second"] > 0
    assert result["max_concurrency"] >= 16 // max(1, plan["data_parallel"])
    assert result["max_context_length"] >= 8192


def test_explicit_plan_on_hardware(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-8B"},
        "workload": {"kind": "inference", "context_length": 4096, "concurrency": 1},
        "hardware": {"gpu": "L4", "gpu_count": 2},
        "plan": {"tensor_parallel": 2},
    }
    result = _estimate(client, body)
    # Llama-3.1-8B: 8 KV heads / TP 2 = 4 per GPU: 2 x 32 x 4 x 128 x 2 B = 65,536 B per token.
    assert result["memory_per_gpu"]["kv_cache_bytes"] == 4096 * 65_536
    assert result["plan"]["tensor_parallel"] == 2


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (
            {
                "model": {"preset": "meta-llama/Llama-3.1-8B"},
                "workload": {"kind": "inference"},
                "hardware": {"gpu": "Z9000"},
            },
            422,
            "hardware.gpu",
        ),
        (
            {
                "model": {"preset": "meta-llama/Llama-3.1-8B"},
                "workload": {"kind": "inference"},
                "hardware": {"gpu": "H100", "gpu_count": 4},
                "plan": {"tensor_parallel": 2},
            },
            422,
            "plan",
        ),
        (
            {"model": {"preset": "no-such/model"}, "workload": {"kind": "inference"}},
            422,
            "model.preset",
        ),
        (
            {
                "model": {"config": {"model_type": "llama", "hidden_size": 4096}},
                "workload": {"kind": "inference"},
            },
            422,
            "model.config.",
        ),
        (
            {
                "model": {"preset": "meta-llama/Llama-3.1-8B"},
                "workload": {"kind": "inference", "context_length": 1_000_000_000},
            },
            400,
            "workload.context_length",
        ),
        (
            {
                "model": {"preset": "meta-llama/Llama-3.1-8B"},
                "workload": {"kind": "inference", "colour": "blue"},
            },
            400,
            "workload.colour",
        ),
    ],
)
def test_bad_input_is_a_problem_naming_the_field(
    client: TestClient,  # type: ignore[type-arg]
    body: dict[str, Any],
    status: int,
    field: str,
) -> None:
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == status
    assert any((e["field"] or "").startswith(field) for e in problem["errors"]), problem
