"""POST /v1/estimate through the app: the questions people ask, with the arithmetic written out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.shared_data import HF_CONFIGS_DIR

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
                "plan": {"tensor_parallel": 4, "data_parallel": 2},  # 8 GPUs on 4
            },
            422,
            "plan",
        ),
        (
            {
                "model": {"preset": "meta-llama/Llama-3.1-8B"},
                "workload": {"kind": "inference"},
                "hardware": {"gpu": "H100", "gpu_count": 8, "nodes": 2},
                "plan": {"tensor_parallel": 16},  # TP across two nodes
            },
            422,
            "plan.tensor_parallel",
        ),
        (
            {
                "model": {"preset": "meta-llama/Llama-3.1-8B"},
                "workload": {"kind": "inference"},
                "hardware": {"gpu": "H100", "gpu_count": 100_000},  # GPUs per node
            },
            422,
            "hardware.gpu_count",
        ),
        (
            {
                "model": {"preset": "meta-llama/Llama-3.1-8B"},
                "workload": {"kind": "training", "method": "qlora"},
                "hardware": {"gpu": "RTX4090", "gpu_count": 2},
                "plan": {"tensor_parallel": 2},  # NF4 base: DDP or FSDP-QLoRA only
            },
            422,
            "plan.tensor_parallel",
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


# --- plans on GPU counts that are not powers of two (QA finding 3) -------------------------

SERVING_70B = {
    "model": {"preset": "meta-llama/Llama-3.1-70B"},
    "workload": {"kind": "inference", "context_length": 8192, "concurrency": 16},
}


@pytest.mark.parametrize(("gpu", "count"), [("H100", 6), ("L40S", 10), ("RTX4090", 12)])
def test_seventy_b_serves_on_gpu_counts_that_are_not_powers_of_two(
    client: TestClient,  # type: ignore[type-arg]
    gpu: str,
    count: int,
) -> None:
    # bf16 weights 2 x 70.55e9 = 141.1e9 B: 6 x 79.6 GiB, 10 x 45.0 GiB and 12 x 24.0 GiB all
    # hold them once split over every GPU (PP need not be a power of two: 3, 5, 6 stages).
    result = _estimate(client, {**SERVING_70B, "hardware": {"gpu": gpu, "gpu_count": count}})
    assert result["fits"] is True
    plan = result["plan"]
    used = plan["tensor_parallel"] * plan["pipeline_parallel"] * plan["data_parallel"]
    assert used == count
    memory = result["memory_per_gpu"]
    replica = plan["tensor_parallel"] * plan["pipeline_parallel"]
    assert memory["weights_bytes"] >= 2 * LLAMA_70B_PARAMS // replica
    assert memory["total_bytes"] <= result["hardware"]["memory_exposed_bytes"]


def test_when_nothing_fits_the_plan_shown_is_the_one_the_note_measures(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # 2 x L4 (22,888 MiB each) cannot hold 141.1e9 B of weights. The note quotes the widest
    # replica the two GPUs allow (TP x PP = 2) measured with one sequence, the least any
    # deployment of it needs; the answer shows that replica as the hardware runs it (one
    # replica holding all 16 sequences), so its memory is at least the note's figure.
    body = {**SERVING_70B, "hardware": {"gpu": "L4-24GB", "gpu_count": 2}}
    result = _estimate(client, body)
    assert result["fits"] is False
    # (more nodes would fit, but the hardware is one node: over_max_nodes, with the closest plan)
    [note] = [n for n in result["notes"] if "plan" in n["data"]]
    quoted = note["data"]["plan"]
    shown = result["plan"]
    assert (shown["tensor_parallel"], shown["pipeline_parallel"]) == (
        quoted["tensor_parallel"],
        quoted["pipeline_parallel"],
    )
    assert quoted["tensor_parallel"] * quoted["pipeline_parallel"] == 2
    assert shown["data_parallel"] == 1  # one replica of 2 GPUs fills the hardware
    assert note["data"]["need_bytes"] <= result["memory_per_gpu"]["total_bytes"]
    assert note["data"]["need_bytes"] >= 2 * LLAMA_70B_PARAMS // 2  # bf16 weights / 2 GPUs
    assert "with one sequence per replica" in note["text"]


def test_an_explicit_plan_may_leave_gpus_idle_and_is_told_so(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    body = {
        **SERVING_70B,
        "hardware": {"gpu": "H100-SXM-80GB", "gpu_count": 6},
        "plan": {"tensor_parallel": 4},
    }
    result = _estimate(client, body)
    assert result["plan"]["tensor_parallel"] == 4
    assert "uses 4 of the 6 H100-SXM-80GB GPUs paid for: 2 sit idle" in [
        n["text"] for n in result["notes"]
    ]


def test_tp16_on_sixteen_h100_is_not_inside_one_nvlink_domain(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    body = {
        **SERVING_70B,
        "hardware": {"gpu": "H100-SXM-80GB", "gpu_count": 16},
        "plan": {"tensor_parallel": 16},
    }
    result = _estimate(client, body)
    assert (
        "TP=16 reaches beyond one NVLink domain (8 GPUs of H100-SXM-80GB): its all-reduces "
        "between the domains cross PCIe"
    ) in [n["text"] for n in result["notes"]]


@pytest.mark.parametrize(
    ("gpu", "preset", "interconnect", "fabric"),
    [
        # 141.1e9 B of 70B weights need 2 Gaudi 2 (96 GiB); 811.7e9 B of 405B need 5+ MI300X
        ("Gaudi2", "meta-llama/Llama-3.1-70B", "roce", "RoCE"),
        ("MI300X", "meta-llama/Llama-3.1-405B", "infinity-fabric", "Infinity Fabric"),
    ],
)
def test_reference_hardware_names_the_vendors_interconnect(
    client: TestClient,  # type: ignore[type-arg]
    gpu: str,
    preset: str,
    interconnect: str,
    fabric: str,
) -> None:
    body = {
        "model": {"preset": preset},
        "workload": {"kind": "inference", "context_length": 4096, "concurrency": 1},
        "hardware": {"gpu": gpu, "gpu_count": 8},
    }
    result = _estimate(client, body)
    assert result["hardware"]["interconnect"] == interconnect
    texts = [n["text"] for n in result["notes"]]
    assert any(f"inside one {fabric} domain" in t for t in texts), texts
    assert not any("NVLink" in t for t in texts)


def test_min_gpus_counts_nodes_one_by_one_not_in_powers_of_two(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # Llama 3.1 405B full fine-tuning, ZeRO-3: 16 B per parameter of model states sharded
    # over every GPU. On 8 x H100 SXM nodes (81,559 MiB = 85,520,809,984 B per GPU) the states
    # alone need n >= 16 P / (8 x 85,520,809,984) = 9.49 nodes, so at least 10; activations
    # and overhead take what is left, so 10 or 11 -- never the 16 a power-of-two search
    # would round up to. min_gpus is a whole number of 8-GPU nodes (clusters are built of
    # full nodes: the smaller reference instances have no cluster network).
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-405B"},
        "workload": {
            "kind": "training",
            "method": "full",
            "sharding": "zero3",
            "sequence_length": 4096,
            "gradient_checkpointing": "full",
            "tokens": 1e9,
        },
    }
    result = _estimate(client, body)
    params = result["model"]["total_parameters"]
    assert params == 405_853_388_800  # hf-configs README: the published total
    exposed = 81_559 * 2**20
    states_nodes = -(-16 * params // (8 * exposed))
    assert states_nodes == 10
    [h100] = [r for r in result["min_gpus"] if r["gpu"] == "H100-SXM-80GB"]
    assert states_nodes <= h100["nodes"] <= states_nodes + 1
    assert h100["min_gpus"] == 8 * h100["nodes"]
    assert h100["memory_per_gpu_bytes"] <= exposed
    for row in result["min_gpus"]:
        if row["min_gpus"] is not None and row["nodes"] > 1:
            assert row["min_gpus"] == 8 * row["nodes"], row


def test_min_gpus_fills_eight_gpu_nodes_before_adding_nodes(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # Reference offers hold 1, 2, 4 or 8 GPUs per node at $1 per GPU-hour, so 8 GPUs cost the
    # same on one node or on eight; the tie goes to fewer nodes: ceil(min_gpus / 8) nodes.
    # Full fine-tuning keeps 16 B per parameter (ZeRO-3 shards them over every GPU):
    # 16 x 70.55e9 = 1.129e12 B, so no GPU type needs fewer than 8 GPUs of <= 141 GiB.
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-70B"},
        "workload": {"kind": "training", "method": "full", "sharding": "zero3", "tokens": 1e9},
    }
    rows = [r for r in _estimate(client, body)["min_gpus"] if r["min_gpus"] is not None]
    assert rows
    for row in rows:
        assert row["nodes"] == -(-row["min_gpus"] // 8), row
    by_gpu = {r["gpu"]: r for r in rows}
    # B200 (180 GiB): 4 GPUs would hold 282e9 B each, 8 hold 141e9 B (131 GiB): one node.
    # H100 (79.6 GiB): 8 hold 141e9 B (too much), 16 hold 70.5e9 B (65.7 GiB): two nodes.
    assert (by_gpu["B200-180GB"]["min_gpus"], by_gpu["B200-180GB"]["nodes"]) == (8, 1)
    assert (by_gpu["H100-SXM-80GB"]["min_gpus"], by_gpu["H100-SXM-80GB"]["nodes"]) == (16, 2)


def test_an_explicit_plan_gets_the_same_warnings_as_a_chosen_one(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # DeepSeek-V3 with ZeRO-3 over 10 x 8 H200 at TP=8 (tests/api/test_acceptance.py has the
    # arithmetic: ~0.4 s of compute against seconds of parameter all-gathers per step): the
    # plan the caller names is warned about as the planner's own would be.
    body = {
        "model": {"preset": "deepseek-ai/DeepSeek-V3"},
        "workload": {
            "kind": "training",
            "method": "full",
            "sequence_length": 4096,
            "gradient_checkpointing": "full",
            "tokens": 1e9,
        },
        "hardware": {"gpu": "H200", "gpu_count": 8, "nodes": 10},
        "plan": {"tensor_parallel": 8, "data_parallel": 10, "sharding": "zero3"},
    }
    result = _estimate(client, body)
    assert result["fits"] is True
    [bound] = [n for n in result["notes"] if n["code"] == "communication_bound"]
    assert bound["data"]["compute_seconds"] < 0.5 * bound["data"]["step_time_seconds"]


def _llama_config(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(
        (HF_CONFIGS_DIR / "meta-llama--Llama-3.1-8B.json").read_text()
    )
    return config | changes


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"quantization_config": {"quant_method": "gptq", "bits": "four"}}, "bits"),
        ({"quantization_config": {"quant_method": "gptq", "bits": 5}}, "bits"),
        ({"quantization_config": {"quant_method": "zzz"}}, "quant_method"),
        ({"rope_scaling": "yarn"}, None),
        ({"rope_scaling": {"rope_type": "llama3", "factor": "8"}}, "factor"),
    ],
)
def test_config_the_estimator_cannot_honour_is_a_422_naming_the_key(
    client: TestClient,  # type: ignore[type-arg]
    changes: dict[str, Any],
    field: str | None,
) -> None:
    # The tester's cases: each one used to answer 200 with 16.06 GB of bf16 weights.
    body = {"model": {"config": _llama_config(**changes)}, "workload": {"kind": "inference"}}
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    key = "quantization_config" if "quantization_config" in changes else "rope_scaling"
    assert error["field"] == ".".join(filter(None, ["model.config", key, field]))


def test_gptq_3bit_config_is_sized_as_shipped(client: TestClient) -> None:  # type: ignore[type-arg]
    quant = {"quant_method": "gptq", "bits": 3, "group_size": 128}
    body = {
        "model": {"config": _llama_config(quantization_config=quant)},
        "workload": {"kind": "inference"},
    }
    weights = _estimate(client, body)["memory_per_gpu"]["weights_bytes"]
    # 6,979,321,856 block-linear weights x (3 bits + (16-bit scale + 3-bit zero) / 128) / 8
    # = 2,746,744,832 B, plus the bf16 embedding, head and norms (2 x 1,050,939,392 B).
    assert weights == 2_746_744_832 + 2 * 1_050_939_392
