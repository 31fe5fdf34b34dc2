"""Serving through ``/v1/estimate``, ``/v1/check`` and ``/v1/recommendations``: concurrency is
the deployment's, ``fits`` agrees with the check, an explicit plan gets its speed, contexts stop
at the model's trained length (QA findings 2, 4, 5, 9, 12), arithmetic written out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

GIB = 2**30
LLAMA_8B = {"preset": "meta-llama/Llama-3.1-8B"}
LLAMA_70B = {"preset": "meta-llama/Llama-3.1-70B"}
BERT = {"preset": "google-bert/bert-base-uncased"}
KV_8B = 2 * 32 * 8 * 128 * 2  # 131,072 B per token: 2 (K, V) x layers x KV heads x head_dim x 2
KV_70B = 2 * 80 * 8 * 128 * 2  # 327,680 B per token
CONFIGS = Path(__file__).parents[1] / "fixtures" / "shared" / "data" / "hf-configs"


def _post(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:  # type: ignore[type-arg]
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _codes(reasons: list[dict[str, Any]]) -> list[str]:
    return [r["code"] for r in reasons]


def test_concurrency_is_shared_by_the_plans_replicas(client: TestClient) -> None:  # type: ignore[type-arg]
    # 400 sequences on 6 one-GPU replicas: each holds ceil(400 / 6) = 67, so one GPU's KV is
    # 67 x 4,096 x 131,072 B = 33.5 GiB (15 GiB of weights beside it: fits an H100), not
    # 400 x 0.5 GiB = 200 GiB.
    body = {
        "model": LLAMA_8B,
        "workload": {"kind": "inference", "concurrency": 400},
        "hardware": {"gpu": "H100-SXM-80GB", "gpu_count": 6},
        "plan": {"data_parallel": 6},
    }
    result = _post(client, "/v1/estimate", body)
    memory = result["memory_per_gpu"]
    assert memory["kv_cache_bytes"] == 67 * 4096 * KV_8B
    assert result["fits"] is True
    performance = result["performance"]
    assert performance["replicas"] == 6
    assert performance["sequences_per_replica"] == 67
    # the whole plan holds 6 x floor(pool / 0.5 GiB)
    per_replica = memory["kv_pool_bytes"] // (4096 * KV_8B)
    assert performance["max_concurrency_per_replica"] == per_replica
    assert result["max_concurrency"] == performance["max_concurrency"] == 6 * per_replica


def test_idle_replicas_add_no_throughput(client: TestClient) -> None:  # type: ignore[type-arg]
    # one sequence on 2 x H100: two one-GPU replicas, one of them idle; the rate is one
    # replica's serving one sequence, as on a single H100
    two = _post(
        client,
        "/v1/estimate",
        {
            "model": LLAMA_8B,
            "workload": {"kind": "inference"},
            "hardware": {"gpu": "H100-SXM-80GB", "gpu_count": 2},
        },
    )
    one = _post(
        client,
        "/v1/estimate",
        {
            "model": LLAMA_8B,
            "workload": {"kind": "inference"},
            "hardware": {"gpu": "H100-SXM-80GB"},
        },
    )
    assert two["performance"]["replicas"] == 2
    assert two["performance"]["tokens_per_second"] == one["performance"]["tokens_per_second"]


def test_fits_is_false_when_the_kv_pool_cannot_hold_the_workload(client: TestClient) -> None:  # type: ignore[type-arg]
    # Llama-3.1-70B, 16 sequences of 8,192 tokens on one MI300X: 16 x 8,192 x 327,680 B =
    # 40 GiB of KV; the bf16 weights (131.4 GiB) leave vLLM a smaller pool, 15 sequences:
    # it needs a second GPU. estimate and check agree: does not fit / fail.
    workload = {"kind": "inference", "context_length": 8192, "concurrency": 16}
    result = _post(
        client,
        "/v1/estimate",
        {"model": LLAMA_70B, "workload": workload, "hardware": {"gpu": "MI300X-192GB"}},
    )
    assert 16 * 8192 * KV_70B == 40 * GIB
    assert result["memory_per_gpu"]["kv_cache_bytes"] == 40 * GIB
    pool = result["memory_per_gpu"]["kv_pool_bytes"]
    assert pool < 40 * GIB
    assert result["max_concurrency"] == pool // (8192 * KV_70B) == 15
    assert result["fits"] is False
    assert result["performance"] is None
    assert "over_max_nodes" in _codes(result["notes"])
    [lower] = [n for n in result["notes"] if n["code"] == "lower_concurrency"]
    assert lower["text"].startswith("lower concurrency to at most 15 ")
    check = _post(
        client,
        "/v1/check",
        {
            "model": LLAMA_70B,
            "workload": workload,
            "target": {"gpu": "MI300X-192GB", "gpu_count": 1},
        },
    )
    assert check["verdict"] == "fail"


def test_an_explicit_plan_gets_performance_and_notes(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": LLAMA_70B,
        "workload": {"kind": "inference"},
        "hardware": {"gpu": "H100-SXM-80GB", "gpu_count": 8},
        "plan": {"tensor_parallel": 8},
    }
    result = _post(client, "/v1/estimate", body)
    assert result["fits"] is True
    performance = result["performance"]
    assert performance["tokens_per_second"] > 0
    assert performance["replicas"] == 1
    assert _codes(result["notes"]) == ["plan", "memory_fit", "tp_in_nvlink_domain", "serving_speed"]
    assert result["notes"][0]["text"] == "8 × H100-SXM-80GB: TP=8, PP=1, DP=1"


def test_an_explicit_plan_whose_kv_pool_is_short_does_not_fit(client: TestClient) -> None:  # type: ignore[type-arg]
    # 70B at TP=4 on 4 x H100: 64 sequences x 8,192 tokens x 327,680 B / 4 GPUs = 40 GiB of KV
    # per GPU beside 131.4 / 4 = 32.9 GiB of weights: more than vLLM's pool.
    body = {
        "model": LLAMA_70B,
        "workload": {"kind": "inference", "context_length": 8192, "concurrency": 64},
        "hardware": {"gpu": "H100-SXM-80GB", "gpu_count": 4},
        "plan": {"tensor_parallel": 4},
    }
    result = _post(client, "/v1/estimate", body)
    memory = result["memory_per_gpu"]
    assert memory["kv_cache_bytes"] == 64 * 8192 * KV_70B // 4 == 40 * GIB
    assert memory["kv_pool_bytes"] < 40 * GIB
    assert result["fits"] is False
    assert result["performance"] is None
    [short] = result["notes"]
    assert short["code"] == "kv_pool_short"
    assert short["text"].startswith(
        "the KV cache of 64 sequences of 8,192 tokens per replica needs 40.0 GiB per GPU"
    )


def test_the_longest_context_stops_at_the_trained_context(client: TestClient) -> None:  # type: ignore[type-arg]
    # 8B on an H100: the KV pool alone would hold ~444k tokens of one sequence, but the model
    # was trained for max_position_embeddings = 131,072
    result = _post(
        client,
        "/v1/estimate",
        {
            "model": LLAMA_8B,
            "workload": {"kind": "inference"},
            "hardware": {"gpu": "H100-SXM-80GB"},
        },
    )
    assert result["memory_per_gpu"]["kv_pool_bytes"] // KV_8B > 131_072
    assert result["max_context_length"] == 131_072


@pytest.mark.parametrize(
    ("model", "context", "limit"),
    [
        (LLAMA_8B, 10_485_760, 131_072),
        ({"preset": "google/gemma-2-9b"}, 131_072, 8192),
        (BERT, 100_000, 512),
    ],
)
def test_a_context_beyond_the_model_is_rejected_with_the_limit(
    client: TestClient,  # type: ignore[type-arg]
    model: dict[str, Any],
    context: int,
    limit: int,
) -> None:
    workload = {"kind": "inference", "context_length": context}
    ranked = _post(client, "/v1/recommendations", {"model": model, "workload": workload})
    assert ranked["recommendations"] == []
    assert "context_exceeds_model" in {g["code"] for g in ranked["rejected"]}
    [suggestion] = [s for s in ranked["suggestions"] if s["code"] == "lower_context_length"]
    assert f"to at most {limit:,}," in suggestion["text"]
    on_l4 = _post(
        client,
        "/v1/estimate",
        {"model": model, "workload": workload, "hardware": {"gpu": "L4-24GB"}},
    )
    assert on_l4["fits"] is False
    assert "context_exceeds_model" in _codes(on_l4["notes"])
    alone = _post(client, "/v1/estimate", {"model": model, "workload": workload})
    assert _codes(alone["notes"]) == ["context_exceeds_model"]
    assert f"than the {limit:,} tokens" in alone["notes"][0]["text"]


def test_a_posted_configs_max_position_embeddings_is_the_limit(client: TestClient) -> None:  # type: ignore[type-arg]
    config = json.loads((CONFIGS / "meta-llama--Llama-3.2-1B.json").read_text())
    config["max_position_embeddings"] = 10
    result = _post(
        client,
        "/v1/estimate",
        {"model": {"config": config}, "workload": {"kind": "inference", "context_length": 4096}},
    )
    [note] = result["notes"]
    assert note["code"] == "context_exceeds_model"
    assert note["data"]["max_position_embeddings"] == 10


def test_an_encoder_only_model_reports_encoded_input_not_output(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": BERT,
        "workload": {"kind": "inference", "context_length": 512, "concurrency": 32},
        "hardware": {"gpu": "L4-24GB"},
    }
    result = _post(client, "/v1/estimate", body)
    assert result["fits"] is True
    performance = result["performance"]
    assert performance["step_time_seconds"] == 0.0  # no decode
    # no KV cache bounds it; vLLM's scheduler does: `vllm serve` runs at most 256 sequences
    # at once on a GPU under 70 GiB (EngineArgs.get_batch_defaults; the L4 exposes 22,888 MiB)
    assert performance["max_concurrency"] == 256
    assert result["max_concurrency"] is None  # memory: no KV cache to fill
    assert result["max_context_length"] == 512
    # 32 sequences x 512 input tokens per forward pass
    assert performance["tokens_per_second"] == pytest.approx(
        32 * 512 / performance["time_to_first_token_seconds"]
    )
    [speed] = [n for n in result["notes"] if n["code"] == "serving_speed"]
    assert "input tokens/s encoded" in speed["text"]
    assert "output tokens/s" not in speed["text"]


def test_a_low_gpu_memory_utilization_is_named_as_the_reason_for_tp(client: TestClient) -> None:  # type: ignore[type-arg]
    # Llama-3.1-8B needs 17.1 GiB on one 48 GB GPU (47.2 GiB exposed, the smallest figure a
    # cloud reports for it), but vLLM at gpu_memory_utilization 0.2 reserves
    # 0.2 x 47.2 = 9.4 GiB, less than its 15 GiB of weights: the reason for TP=2 is the
    # reservation, not the model's size.
    body = {
        "model": LLAMA_8B,
        "workload": {"kind": "inference", "gpu_memory_utilization": 0.2},
        "constraints": {"gpu_types": ["RTXA6000-48GB"]},
        "top_k": 1,
    }
    [best] = _post(client, "/v1/recommendations", body)["recommendations"]
    assert best["plan"]["tensor_parallel"] == 2
    codes = _codes(best["rationale"])
    assert "split_for_kv_pool" in codes
    assert "split_to_fit" not in codes
    [note] = [r for r in best["rationale"] if r["code"] == "split_for_kv_pool"]
    exposed = note["data"]["exposed_bytes"]
    assert exposed == best["offer"]["gpu_memory_exposed_bytes"]
    assert note["data"]["reserved_bytes"] == int(0.2 * exposed)
    assert note["data"]["weights_bytes"] > note["data"]["reserved_bytes"]
    assert (
        f"gpu_memory_utilization 0.2 reserves {int(0.2 * exposed) / GIB:.1f} GiB of the "
        f"{exposed / GIB:.1f} GiB exposed and the weights take 15.0 GiB of it"
    ) in note["text"]
    assert "does not fit one GPU" not in best["summary"]


def test_huge_concurrency_suggests_fewer_sequences_not_a_bigger_gpu(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {"model": LLAMA_8B, "workload": {"kind": "inference", "concurrency": 1_000_000}}
    result = _post(client, "/v1/recommendations", body)
    assert result["recommendations"] == []
    codes = _codes(result["suggestions"])
    assert "lower_concurrency" in codes
    assert "larger_gpu" not in codes


def test_output_tokens_do_not_apply_to_an_encoder(client: TestClient) -> None:  # type: ignore[type-arg]
    # A 128-token BERT input with the default output_tokens (256): for a generating model a
    # 422 (no room for a prompt), for an encoder-only model the output does not apply.
    body = {
        "model": BERT,
        "workload": {"kind": "inference", "context_length": 128},
        "hardware": {"gpu": "L4-24GB"},
    }
    result = _post(client, "/v1/estimate", body)
    assert result["fits"] is True
    assert result["performance"]["step_time_seconds"] == 0.0
    decoder = client.post("/v1/estimate", json={**body, "model": LLAMA_8B})
    assert decoder.status_code == 422
    assert decoder.json()["errors"][0]["field"] == "workload.output_tokens"


def test_vllm_runs_at_most_max_num_seqs_sequences_per_replica(client: TestClient) -> None:  # type: ignore[type-arg]
    # Llama-3.2-1B: KV per token 2 x 16 layers x 8 KV heads x 64 x 2 B = 32,768 B, so a
    # 512-token sequence holds 16 MiB and 600 of them 9.4 GiB: with 2.5 GB of weights one
    # L40S (46,068 MiB) holds them all. But `vllm serve` schedules at most 256 sequences at
    # once on a GPU under 70 GiB (EngineArgs.get_batch_defaults), so 600 concurrent sequences
    # need ceil(600 / 256) = 3 replicas; with --max-num-seqs 100, ceil(600 / 100) = 6.
    assert 2 * 16 * 8 * 64 * 2 == 32_768
    for max_num_seqs, replicas in ((None, 3), (100, 6)):
        workload: dict[str, Any] = {"kind": "inference", "context_length": 512, "concurrency": 600}
        if max_num_seqs is not None:
            workload["max_num_seqs"] = max_num_seqs
        body = {
            "model": {"preset": "meta-llama/Llama-3.2-1B"},
            "workload": workload,
            "constraints": {"gpu_types": ["L40S-48GB"]},
            "top_k": 1,
        }
        [best] = _post(client, "/v1/recommendations", body)["recommendations"]
        assert best["performance"]["replicas"] >= replicas
        assert best["performance"]["max_concurrency_per_replica"] == (max_num_seqs or 256)
        [note] = [r for r in best["rationale"] if r["code"] == "engine_max_num_seqs"]
        assert note["data"]["replicas_needed"] == replicas
        assert note["text"] == (
            f"vLLM runs at most {max_num_seqs or 256} sequences per replica (max_num_seqs): "
            f"600 concurrent sequences need at least {replicas} replicas"
        )
    # the generic engine has no scheduler limit: memory alone sets the count (one replica)
    body["workload"] = {
        "kind": "inference",
        "context_length": 512,
        "concurrency": 600,
        "engine": "generic",
    }
    [best] = _post(client, "/v1/recommendations", body)["recommendations"]
    assert best["performance"]["replicas"] == 1
    assert "engine_max_num_seqs" not in _codes(best["rationale"])


def test_a_deployment_too_large_for_the_hardware_shows_its_replica_shape(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # Llama-3.1-70B bf16 (70,553,706,496 parameters: 141.1 GB of weights) serving 16
    # sequences of 8,192 tokens on 2 x H100-SXM-80GB: one replica needs both GPUs (TP=2,
    # 70.6 GB of weights each) and holds 2 sequences, so 16 need 8 such instances. The plan
    # shown is that replica on the hardware -- not TP=1 with all 141 GB on each GPU -- and
    # the note names the field that limits the nodes here, hardware.nodes.
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-70B"},
        "workload": {
            "kind": "inference",
            "weight_dtype": "bf16",
            "context_length": 8192,
            "concurrency": 16,
        },
        "hardware": {"gpu": "H100-SXM-80GB", "gpu_count": 2},
    }
    answer = _post(client, "/v1/estimate", body)
    assert answer["fits"] is False
    plan = answer["plan"]
    assert (plan["tensor_parallel"] * plan["pipeline_parallel"], plan["data_parallel"]) == (2, 1)
    weights = answer["memory_per_gpu"]["weights_bytes"]
    assert weights < 80 * 10**9 < 2 * 70_553_706_496  # a half, not the whole model, per GPU
    [nodes] = [n for n in answer["notes"] if n["code"] == "over_max_nodes"]
    assert nodes["data"]["replica_gpus"] == 2
    assert nodes["text"].endswith("hardware.nodes is 1")
    [lower] = [n for n in answer["notes"] if n["code"] == "lower_concurrency"]
    assert lower["text"].endswith("within hardware.nodes 1)")
    assert "max_nodes" not in " ".join(n["text"] for n in answer["notes"])
