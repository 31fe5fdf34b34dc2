"""POST /v1/check through the app: pass, each kind of fail, unknown targets, malformed bodies.

Hand figures used below (sources: shared/data/gpu-specs, DESIGN "Training model states"):

* Llama-3.1-70B has 70,553,706,496 parameters (published total, hf-configs README).
* Mixed-precision AdamW keeps 2 (bf16 weights) + 4 (fp32 master) + 2 (bf16 gradients) +
  8 (fp32 moments) = 16 bytes per parameter; no plan puts less than 16 x N / GPUs on a GPU.
* An H100 SXM 80 GB exposes 81,559 MiB; its dense bf16 peak is 989.5 TFLOPS.
* Training takes at least 6 x N x tokens FLOPs (8 x with full recomputation), so at most
  100 % MFU a run needs at least 6 x N x tokens / 989.5e12 GPU-seconds on H100s.
* aws p5.48xlarge holds 8 of them.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.gate.conftest import FULL_FINETUNE, QLORA, SERVING, load_example

GIB = 2**30
LLAMA_70B = 70_553_706_496
BYTES_PER_PARAM = 2 + 4 + 2 + 8  # bf16 weights, fp32 master, bf16 grads, AdamW m and v
H100_EXPOSED = 81_559 * 2**20
H100_BF16_FLOPS = 989.5e12
TOKENS = 1.0e9  # the full fine-tune example's workload.tokens


def _check(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:  # type: ignore[type-arg]
    response = client.post("/v1/check", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert [c["name"] for c in result["checks"]] == [
        "memory",
        "topology",
        "headroom",
        "budget",
        "deadline",
    ]
    return {c["name"]: c for c in result["checks"]}


def _cheapest_p5_price(client: TestClient) -> float:  # type: ignore[type-arg]
    offers = client.get(
        "/v1/offers", params={"provider": "aws", "gpu": "H100-SXM-80GB", "limit": 500}
    ).json()["offers"]
    prices = [o["price_per_hour_usd"] for o in offers if o["instance_type"] == "p5.48xlarge"]
    assert prices
    return float(min(prices))


def test_full_finetune_example_passes(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    result = _check(client, body)
    assert result["verdict"] == "pass"
    assert result["alternative"] is None
    checks = _by_name(result)
    assert all(c["passed"] is True for c in checks.values())
    estimate = result["estimate"]
    # 16 x 70.55e9 B = 1,128.9 GB of model states: more than one node's 8 x 79.6 GiB, so the
    # plan spans at least 2 of the 4 allowed p5 nodes (16 GPUs: 65.7 GiB each at least).
    assert BYTES_PER_PARAM * LLAMA_70B / 8 > H100_EXPOSED
    assert estimate["nodes"] >= 2
    assert estimate["gpus"] == 8 * estimate["nodes"]
    memory = checks["memory"]["data"]
    assert memory["exposed_bytes"] == H100_EXPOSED
    assert BYTES_PER_PARAM * LLAMA_70B / estimate["gpus"] <= memory["need_bytes"]
    assert memory["need_bytes"] <= H100_EXPOSED * (1 - body["min_headroom_fraction"])
    # The budget check quotes the plan's cost: nodes x instance price x billed hours
    # (AWS bills per second, so billed hours = the run's hours).
    budget = checks["budget"]["data"]
    price = _cheapest_p5_price(client)
    assert budget["price_per_hour_usd"] == pytest.approx(estimate["nodes"] * price)
    assert budget["total_usd"] == pytest.approx(
        budget["price_per_hour_usd"] * budget["billed_hours"]
    )
    assert budget["total_usd"] <= body["budget_usd"]
    deadline = checks["deadline"]["data"]
    assert deadline["hours"] == pytest.approx(estimate["performance"]["time_to_result_hours"])
    assert deadline["hours"] <= body["deadline_hours"]
    assert "per GPU" in checks["memory"]["detail"]
    assert "$" in checks["budget"]["detail"]


def test_memory_fails_on_one_node(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    body["target"]["nodes"] = 1
    result = _check(client, body)
    assert result["verdict"] == "fail"
    checks = _by_name(result)
    memory = checks["memory"]
    assert memory["passed"] is False
    # 16 B x 70.55e9 / 8 GPUs = 131.4 GiB > 79.6 GiB per H100; / 16 GPUs = 65.7 GiB fits:
    # two nodes are needed.
    assert pytest.approx(131.4, abs=0.05) == BYTES_PER_PARAM * LLAMA_70B / 8 / GIB
    assert pytest.approx(65.7, abs=0.05) == BYTES_PER_PARAM * LLAMA_70B / 16 / GIB
    assert memory["data"]["nodes_needed"] == 2
    assert "target.nodes allows 1" in memory["detail"]
    # Nothing fits, so nothing can be timed or priced.
    for name in ("topology", "headroom", "budget", "deadline"):
        assert checks[name]["passed"] is None, name
        assert checks[name]["detail"].startswith("not evaluated")
    assert result["estimate"]["fits"] is False
    assert result["estimate"]["memory_per_gpu"]["total_bytes"] > H100_EXPOSED
    # The alternative fits in memory, within the same budget and deadline.
    alternative = result["alternative"]
    assert alternative is not None
    alt_memory = alternative["memory_per_gpu"]
    assert alt_memory["total_bytes"] <= alternative["offer"]["gpu_memory_exposed_bytes"] * (
        1 - body["min_headroom_fraction"]
    )
    assert alternative["cost"]["total_usd"] <= body["budget_usd"]
    assert alternative["performance"]["time_to_result_hours"] <= body["deadline_hours"]


def test_budget_fails_below_the_gpu_hours_bound(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    body["budget_usd"] = 1000
    result = _check(client, body)
    assert result["verdict"] == "fail"
    checks = _by_name(result)
    assert checks["memory"]["passed"]
    assert checks["topology"]["passed"]
    budget = checks["budget"]
    assert budget["passed"] is False
    assert budget["code"] == "over_budget"
    # Any plan needs >= 6 x 70.55e9 x 1e9 / 989.5e12 s = 118.8 GPU-hours at 100 % MFU; at the
    # cheapest p5 price per GPU-hour that is > $1,000.
    gpu_hours = 6 * LLAMA_70B * TOKENS / H100_BF16_FLOPS / 3600
    assert gpu_hours == pytest.approx(118.8, abs=0.05)
    floor = gpu_hours * _cheapest_p5_price(client) / 8
    assert floor > body["budget_usd"]
    assert budget["data"]["total_usd"] >= floor
    assert budget["data"]["budget_usd"] == 1000
    assert "budget_usd is $1,000.00" in budget["detail"]


def test_deadline_fails_below_the_time_bound(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    body["deadline_hours"] = 2
    result = _check(client, body)
    checks = _by_name(result)
    assert result["verdict"] == "fail"
    deadline = checks["deadline"]
    assert deadline["passed"] is False
    assert deadline["code"] == "past_deadline"
    # At most 4 nodes x 8 = 32 H100s: >= 118.8 GPU-hours / 32 = 3.7 h even at 100 % MFU.
    floor_hours = 6 * LLAMA_70B * TOKENS / (32 * H100_BF16_FLOPS) / 3600
    assert floor_hours == pytest.approx(3.71, abs=0.01)
    assert deadline["data"]["hours"] >= floor_hours > 2
    assert "deadline_hours is 2" in deadline["detail"]
    # The budget is judged without the deadline it cannot meet: still within $6,000.
    assert checks["budget"]["passed"] is True


def test_headroom_fails_when_no_plan_keeps_it_free(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    body["min_headroom_fraction"] = 0.7
    result = _check(client, body)
    checks = _by_name(result)
    assert result["verdict"] == "fail"
    assert checks["memory"]["passed"] is True  # it fits with less headroom
    headroom = checks["headroom"]
    assert headroom["passed"] is False
    # Even spread over all 32 GPUs the model states alone are 16 x 70.55e9 / 32 = 32.9 GiB,
    # above the 30 % of 79.6 GiB = 23.9 GiB that may be used.
    floor = BYTES_PER_PARAM * LLAMA_70B / 32
    assert floor / GIB == pytest.approx(32.85, abs=0.01)
    assert floor > (1 - 0.7) * H100_EXPOSED
    assert headroom["data"]["min_headroom_fraction"] == 0.7
    assert "70 %" in headroom["detail"]


def test_topology_fails_without_a_cluster_network(client: TestClient) -> None:  # type: ignore[type-arg]
    # cudo's 8 x A100 PCIe 80 GB instance has no cluster network. The model states alone are
    # 16 x 70.55e9 / 8 = 131.4 GiB per GPU on one node (> 80.0 GiB exposed: 81,920 MiB) and
    # 65.7 GiB on two: memory would fit 2 of the 4 allowed nodes, the links cannot join them.
    a100_pcie_exposed = 81_920 * 2**20
    assert a100_pcie_exposed < BYTES_PER_PARAM * LLAMA_70B / 8
    assert a100_pcie_exposed > BYTES_PER_PARAM * LLAMA_70B / 16
    body = load_example(FULL_FINETUNE)
    body["target"] = {
        "provider": "cudo",
        "instance_type": "epyc-genoa-a100-pcie_8x96v192gb",
        "nodes": 4,
    }
    result = _check(client, body)
    checks = _by_name(result)
    assert result["verdict"] == "fail"
    assert checks["memory"]["passed"] is True
    assert checks["memory"]["data"]["nodes_needed"] == 2
    topology = checks["topology"]
    assert topology["passed"] is False
    assert topology["code"] == "no_cluster_network"
    assert "no cluster network" in topology["detail"]


def test_topology_fails_on_a_gpu_without_the_dtype(client: TestClient) -> None:  # type: ignore[type-arg]
    # p3.16xlarge: 8 x V100 (Volta, compute capability 7.0) has no bf16 tensor cores.
    body = load_example(FULL_FINETUNE)
    body["target"] = {"provider": "aws", "instance_type": "p3.16xlarge", "nodes": 4}
    checks = _by_name(_check(client, body))
    assert checks["topology"]["passed"] is False
    assert checks["topology"]["code"] == "dtype_unsupported"
    assert "bf16" in checks["topology"]["detail"]
    assert checks["memory"]["passed"] is None  # not sized: the GPU cannot run it at all


def test_gpu_target_is_priced_as_the_cheapest_offer(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(QLORA)
    result = _check(client, body)
    assert result["verdict"] == "pass"
    target = result["target"]
    assert target["form"] == "gpu"
    assert target["gpu"] == "L4-24GB"
    priced = target["priced_as"]
    assert priced["gpu"] == "L4-24GB"
    assert priced["gpu_count"] == 1
    offers = client.get("/v1/offers", params={"gpu": "L4", "limit": 500}).json()["offers"]
    singles = [o["price_per_hour_usd"] for o in offers if o["gpu_count"] == 1]
    assert priced["price_per_hour_usd"] == min(singles)
    cost = result["estimate"]["cost"]
    hours = result["estimate"]["performance"]["time_to_result_hours"]
    increment_h = priced["billing_increment_seconds"] / 3600
    # billed = the run's hours rounded up to the offer's increment, at the offer's price
    assert cost["billed_hours"] == pytest.approx(math.ceil(hours / increment_h) * increment_h)
    assert cost["total_usd"] == pytest.approx(cost["billed_hours"] * priced["price_per_hour_usd"])


def test_gpu_target_without_an_offer_has_no_price(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(QLORA)
    body["target"] = {"gpu": "L4", "gpu_count": 16}  # no catalog instance has 16 x L4
    result = _check(client, body)
    assert result["target"]["priced_as"] is None
    assert result["target"]["offers"] == 0
    budget = _by_name(result)["budget"]
    assert budget["passed"] is None
    assert budget["code"] == "price_unknown"
    assert result["verdict"] == "fail"  # a budget that cannot be checked does not pass
    assert result["estimate"]["cost"] is None
    body.pop("budget_usd")
    result = _check(client, body)
    assert result["verdict"] == "pass"
    assert "price unknown" in _by_name(result)["budget"]["detail"]


def test_serving_example_passes_on_an_allowed_instance(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(SERVING)
    result = _check(client, body)
    assert result["verdict"] == "pass"
    offer = result["estimate"]["offer"]
    assert offer["instance_type"] in body["target"]["instance_types"]
    # KV cache: 2 (K, V) x 80 layers x 8 KV heads x 128 x 2 B = 320 KiB per token; 16
    # sequences of 8,192 tokens = 40 GiB in all, shared by the replicas (data_parallel), each
    # replica's share split over its GPUs (TP x PP).
    kv_total = 2 * 80 * 8 * 128 * 2 * 8192 * 16
    assert kv_total == 40 * GIB
    plan = result["estimate"]["plan"]
    shards = plan["tensor_parallel"] * plan["pipeline_parallel"]
    share = -(-16 // plan["data_parallel"])
    per_gpu = result["estimate"]["memory_per_gpu"]["kv_cache_bytes"]
    assert per_gpu >= kv_total // 16 * share // shards
    assert result["estimate"]["performance"]["sequences_per_replica"] == share
    budget = _by_name(result)["budget"]["data"]
    # serving_hours 24 at the deployment's hourly price; answers round amounts to cents and
    # hourly prices to 1e-4 USD (gpu_advisor.money): 0.005 + 24 x 0.00005 at most apart.
    assert budget["total_usd"] == pytest.approx(
        24 * budget["price_per_hour_usd"], abs=0.005 + 24 * 0.00005
    )


def test_unknown_instance_type_is_404(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    body["target"]["instance_type"] = "p5.48xlarg"
    response = client.post("/v1/check", json=body)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["errors"][0]["field"] == "target.instance_type"
    assert "p5.48xlarge" in problem["detail"]  # the close name is suggested


def test_unknown_provider_and_listed_type_are_404(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    body["target"]["provider"] = "nocloud"
    response = client.post("/v1/check", json=body)
    assert response.status_code == 404
    assert response.json()["errors"][0]["field"] == "target.provider"
    body = load_example(SERVING)
    body["target"]["instance_types"] = ["p5.48xlarge", "no-such-type"]
    response = client.post("/v1/check", json=body)
    assert response.status_code == 404
    assert response.json()["errors"][0]["field"] == "target.instance_types.1"


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        (lambda b: b["workload"].update(sequence_length=0), 400, "workload.sequence_length"),
        (lambda b: b["target"].update(colour="red"), 400, "target.colour"),
        (lambda b: b.update(budget_usd=-5), 400, "budget_usd"),
        (lambda b: b["target"].update(gpu="H100"), 422, "target.provider"),
        (lambda b: b.update(target={}), 422, "target"),
        (lambda b: b.update(target={"gpu_count": 2}), 422, "target.gpu_count"),
        (lambda b: b.update(target={"instance_type": "p5.48xlarge"}), 422, "target.provider"),
        (lambda b: b.update(target={"gpu": "Z9000"}), 422, "target.gpu"),
        (lambda b: b["workload"].pop("tokens"), 422, "budget_usd"),
    ],
)
def test_malformed_requests_are_4xx_naming_the_field(
    client: TestClient,  # type: ignore[type-arg]
    change: Any,
    status: int,
    field: str,
) -> None:
    body = copy.deepcopy(load_example(FULL_FINETUNE))
    change(body)
    response = client.post("/v1/check", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["errors"][0]["field"] == field


def test_deadline_on_serving_is_422(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(SERVING)
    body["deadline_hours"] = 5
    response = client.post("/v1/check", json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "deadline_hours"


def test_extreme_target_sizes_still_answer(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(QLORA)
    body["target"] = {"gpu": "H100", "gpu_count": 16, "nodes": 1024}
    result = _check(client, body)
    assert result["target"]["offers"] == 0  # no 16 x H100 instance: planned, not priced
    assert _by_name(result)["memory"]["passed"] is True


@pytest.mark.parametrize("gpu_count", [17, 100_000])
def test_more_gpus_per_node_than_real_nodes_hold_is_422(
    client: TestClient,  # type: ignore[type-arg]
    gpu_count: int,
) -> None:
    # gpu_count is GPUs per node: HGX/DGX H100 boards hold 8, the HGX-2/DGX-2 class 16.
    body = load_example(QLORA)
    body["target"] = {"gpu": "H100", "gpu_count": gpu_count}
    response = client.post("/v1/check", json=body)
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["field"] == "target.gpu_count"
    assert f"no H100-SXM-80GB node holds {gpu_count:,} (at most 16" in error["message"]


@pytest.mark.parametrize(("gpu", "count"), [("H100", 6), ("L40S", 10), ("RTX4090", 12)])
def test_seventy_b_serving_passes_on_instances_of_six_ten_and_twelve_gpus(
    client: TestClient,  # type: ignore[type-arg]
    gpu: str,
    count: int,
) -> None:
    # The catalog sells these shapes; 141.1e9 B of bf16 weights over 6 / 10 / 12 GPUs is
    # 23.5e9 / 14.1e9 / 11.8e9 B per GPU, below 79.6 / 45.0 / 24.0 GiB, with room for the KV
    # cache of 16 x 8,192 tokens: TP x PP uses them all (PP 3, 5 or 6 stages).
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-70B"},
        "workload": {"kind": "inference", "context_length": 8192, "concurrency": 16},
        "target": {"gpu": gpu, "gpu_count": count},
    }
    result = _check(client, body)
    assert result["verdict"] == "pass", result["checks"]
    plan = result["estimate"]["plan"]
    assert plan["tensor_parallel"] * plan["pipeline_parallel"] * plan["data_parallel"] == count


def test_a_target_short_of_activation_memory_suggests_recomputation_first(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # The QLoRA example without gradient checkpointing (QA's trial): activations of 2,048
    # tokens through 32 layers are kept, so one L4 (22,888 MiB) is short; with recomputation about
    # 2 x s x h bytes per layer stay (2 x 2,048 x 4,096 x 32 = 0.5 GiB): it fits the target,
    # which the first suggestion says -- before any suggestion to buy nodes or other GPUs.
    body = load_example(QLORA)
    body["workload"]["gradient_checkpointing"] = "none"
    body["workload"]["tokens"] = 1e9
    result = _check(client, body)
    assert result["verdict"] == "fail"
    first = result["suggestions"][0]
    assert first["code"] == "enable_checkpointing"
    assert first["data"]["gradient_checkpointing"] in ("selective", "full")
    assert first["data"]["need_bytes"] <= 22_888 * 2**20
    assert first["text"].startswith("set gradient_checkpointing to ")


def test_when_nothing_fits_the_estimate_shows_the_plan_the_memory_check_quotes(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # Full fine-tuning of Llama-3.1-70B on one node of 8 L4: 16 B x 70.55e9 / 8 GPUs =
    # 141e9 B of model states per GPU even fully sharded, far above 22,888 MiB. The memory
    # check quotes its nearest plan and requirement; the estimate shows that same plan.
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-70B"},
        "workload": {"kind": "training", "tokens": 1e9},
        "target": {"gpu": "L4-24GB", "gpu_count": 8},
    }
    result = _check(client, body)
    memory = _by_name(result)["memory"]
    assert memory["passed"] is False
    quoted = memory["data"]["plan"]
    shown = result["estimate"]["plan"]
    assert {k: shown[k] for k in quoted} == quoted
    assert result["estimate"]["memory_per_gpu"]["total_bytes"] == memory["data"]["need_bytes"]
    assert memory["data"]["need_bytes"] >= BYTES_PER_PARAM * LLAMA_70B // 8


def test_training_without_tokens_has_an_hourly_price_and_no_total(client: TestClient) -> None:  # type: ignore[type-arg]
    # Without workload.tokens a run has no duration, so no total cost: the budget check (no
    # budget set) quotes the price per hour instead. It was a 500 (a None total formatted).
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-8B"},
        "workload": {"kind": "training"},
        "target": {"gpu": "H100", "gpu_count": 8},
    }
    result = _check(client, body)
    budget = _by_name(result)["budget"]
    assert budget["passed"] is True
    assert budget["data"]["total_usd"] is None
    price = budget["data"]["price_per_hour_usd"]
    assert price > 0
    assert f"${price:,.2f}/h" in budget["detail"]
    assert "workload.tokens" in budget["detail"]


def _cluster_grade(offer: dict[str, Any]) -> bool:
    network = offer.get("network") or {}
    return bool(
        network.get("cluster_grade")
        and network.get("fabric") in ("infiniband", "efa", "roce")
        and (network.get("gbit_per_s") or 0) > 0
    )


def test_a_multi_node_gpu_target_is_priced_as_an_offer_that_can_be_a_cluster(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # 70B full fine-tune on "4 nodes of 8 x H100-SXM-80GB": it needs more than one node. The
    # cheapest 8 x H100 offer has no cluster network, so a multi-node plan cannot be bought at
    # its price: it is priced as the cheapest 8 x H100 offer that has one (read from
    # /v1/offers here), and the budget check quotes that price.
    body = load_example(FULL_FINETUNE)
    body["target"] = {"gpu": "H100-SXM-80GB", "gpu_count": 8, "nodes": 4}
    body.pop("deadline_hours")
    body["budget_usd"] = 100_000.0
    offers = client.get(
        "/v1/offers", params={"gpu": "H100-SXM-80GB", "min_gpus": 8, "limit": 500}
    ).json()["offers"]
    eight = [o for o in offers if o["gpu_count"] == 8]
    cheapest = min(o["price_per_hour_usd"] for o in eight)
    cluster = min(o["price_per_hour_usd"] for o in eight if _cluster_grade(o))
    assert cheapest < cluster  # the situation this test is about
    result = _check(client, body)
    target = result["target"]
    assert target["priced_as"]["price_per_hour_usd"] == cheapest
    assert target["priced_as_cluster"]["price_per_hour_usd"] == cluster
    assert _cluster_grade(target["priced_as_cluster"])
    plan = result["estimate"]
    assert plan["nodes"] > 1
    assert plan["cost"]["price_per_hour_usd"] == pytest.approx(cluster * plan["nodes"])
    assert "reference priced as" in plan["offer"]["source"]


def test_a_one_node_gpu_target_has_no_network_between_nodes(client: TestClient) -> None:  # type: ignore[type-arg]
    # The 8B QLoRA example on "1 x L4": one node, so the reference instance shows no
    # InfiniBand (it showed 3,200 Gbit/s it could never use).
    body = load_example(QLORA)
    body["target"] = {"gpu": "L4", "gpu_count": 1}
    result = _check(client, body)
    assert result["estimate"]["nodes"] == 1
    assert result["estimate"]["offer"]["network"] is None
