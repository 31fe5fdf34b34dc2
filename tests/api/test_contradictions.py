"""Fields valid alone but contradictory together: a 422 naming the field to change (QA
finding 10; rules and sources in gpu_advisor.core.spec_checks)."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

LLAMA_8B = {"preset": "meta-llama/Llama-3.1-8B"}
ENDPOINTS = ["/v1/estimate", "/v1/recommendations", "/v1/check"]


def _post(client: TestClient, path: str, workload: dict[str, Any]) -> Any:  # type: ignore[type-arg]
    body: dict[str, Any] = {"model": LLAMA_8B, "workload": workload}
    if path == "/v1/check":
        body["target"] = {"gpu": "H100", "gpu_count": 8}
    return client.post(path, json=body)


def _field_error(response: Any) -> tuple[str, str]:
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    return error["field"], error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_prompt_longer_than_the_context(client: TestClient, path: str) -> None:  # type: ignore[type-arg]
    workload = {"kind": "inference", "context_length": 100, "prompt_tokens": 10_485_760}
    field, message = _field_error(_post(client, path, workload))
    assert field == "workload.prompt_tokens"
    assert "prompt_tokens 10,485,760 exceeds context_length 100" in message


def test_prompt_plus_output_longer_than_the_context(client: TestClient) -> None:  # type: ignore[type-arg]
    workload = {
        "kind": "inference",
        "context_length": 4096,
        "prompt_tokens": 4000,
        "output_tokens": 256,
    }
    field, message = _field_error(_post(client, "/v1/estimate", workload))
    assert field == "workload.output_tokens"
    assert "4,000 + output_tokens 256 = 4,256 exceeds context_length 4,096" in message
    # 3840 + 256 = 4096: exactly the context is fine.
    workload["prompt_tokens"] = 3840
    assert _post(client, "/v1/estimate", workload).status_code == 200


@pytest.mark.parametrize("output_tokens", [4096, 5000])
def test_output_that_leaves_no_room_for_a_prompt(
    client: TestClient,  # type: ignore[type-arg]
    output_tokens: int,
) -> None:
    workload = {"kind": "inference", "context_length": 4096, "output_tokens": output_tokens}
    field, _ = _field_error(_post(client, "/v1/estimate", workload))
    assert field == "workload.output_tokens"
    workload["output_tokens"] = 4095  # a one-token prompt
    assert _post(client, "/v1/estimate", workload).status_code == 200


@pytest.mark.parametrize(
    ("micro", "global_batch", "hint"),
    [
        (8, 1, "use 8"),  # smaller than one micro-batch
        (2, 7, "use 6 or 8"),  # 7 = 3 x 2 + 1
    ],
)
def test_global_batch_not_a_multiple_of_the_micro_batch(
    client: TestClient,  # type: ignore[type-arg]
    micro: int,
    global_batch: int,
    hint: str,
) -> None:
    workload = {"kind": "training", "micro_batch_size": micro, "global_batch_size": global_batch}
    field, message = _field_error(_post(client, "/v1/recommendations", workload))
    assert field == "workload.global_batch_size"
    assert hint in message


def test_global_batch_multiple_of_the_micro_batch_is_fine(client: TestClient) -> None:  # type: ignore[type-arg]
    workload = {"kind": "training", "micro_batch_size": 2, "global_batch_size": 8}
    assert _post(client, "/v1/estimate", workload).status_code == 200


def test_lora_rank_above_the_narrowest_targeted_width(client: TestClient) -> None:  # type: ignore[type-arg]
    # Llama-3.1-8B (config.json): hidden 4096, 8 KV heads x head_dim 128 = 1024 -> k_proj and
    # v_proj are 4096 -> 1024, the narrowest of "all-linear": rank <= min(4096, 1024) = 1024.
    workload = {"kind": "training", "method": "lora", "lora_rank": 65_536}
    field, message = _field_error(_post(client, "/v1/estimate", workload))
    assert field == "workload.lora_rank"
    assert "use lora_rank <= 1,024" in message
    workload["lora_rank"] = 1024
    assert _post(client, "/v1/estimate", workload).status_code == 200
    # q_proj alone is 4096 x 4096: rank 2048 is allowed there.
    workload.update(lora_rank=2048, lora_targets=["q_proj"])
    assert _post(client, "/v1/estimate", workload).status_code == 200


def test_full_fine_tuning_ignores_the_lora_fields(client: TestClient) -> None:  # type: ignore[type-arg]
    workload = {"kind": "training", "method": "full", "lora_rank": 65_536, "lora_targets": []}
    assert _post(client, "/v1/estimate", workload).status_code == 200


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_empty_lora_targets(client: TestClient, method: str) -> None:  # type: ignore[type-arg]
    workload = {"kind": "training", "method": method, "lora_targets": []}
    field, message = _field_error(_post(client, "/v1/check", workload))
    assert field == "workload.lora_targets"
    assert "all-linear" in message
