"""Sentences rendered from reason codes carry the numbers."""

from __future__ import annotations

from gpu_advisor.core.planner.explain import REJECTION_CODES, render
from gpu_advisor.core.results import Reason

GIB = 2**30


def test_memory_fit_sentence() -> None:
    reason = Reason(
        code="memory_fit",
        data={
            "total_bytes": int(61.2 * GIB),
            "usable_bytes": 81_559 * 2**20,
            "capacity_bytes": 81_559 * 2**20,
            "headroom_fraction": 0.23,
        },
    )
    assert render(reason) == "61.2 GiB of 79.6 GiB usable per GPU (23 % headroom)"


def test_training_and_billing_sentences() -> None:
    assert (
        render(
            Reason(
                code="training_time",
                data={"hours": 3.1, "mfu": 0.41, "tokens_per_second": 52_000.0},
            )
        )
        == "3.10 h at 41 % MFU (52,000 tokens/s)"
    )
    assert (
        render(
            Reason(
                code="billing",
                data={
                    "total_usd": 76.8,
                    "billed_hours": 1.28,
                    "price_per_hour_usd": 60.0,
                    "increment_seconds": 60,
                },
            )
        )
        == "$76.80 in total: 1.28 h billed per minute at $60.00/h"
    )


def test_plan_sentence() -> None:
    data = {
        "gpus": 8,
        "gpu": "H100-SXM-80GB",
        "nodes": 1,
        "tensor_parallel": 8,
        "pipeline_parallel": 1,
        "data_parallel": 1,
        "expert_parallel": 1,
        "sharding": "none",
    }
    assert render(Reason(code="plan", data=data)) == "8 × H100-SXM-80GB: TP=8, PP=1, DP=1"


def test_insufficient_memory_sentence() -> None:
    data = {
        "gpu": "A100-PCIE-40GB",
        "need_bytes": int(46.2 * GIB),
        "usable_bytes": int(39.4 * GIB),
        "exposed_bytes": int(39.4 * GIB),
        "gpu_count": 1,
    }
    assert (
        render(Reason(code="insufficient_memory", data=data))
        == "needs 46.2 GiB per GPU on 1 × A100-PCIE-40GB; A100-PCIE-40GB exposes 39.4 GiB"
    )


def test_every_rejection_code_renders_a_sentence() -> None:
    sample = {
        "gpu": "X",
        "provider": "p",
        "region": "r",
        "dtype": "bf16",
        "needs": "Ampere",
        "gpus_needed": 16,
        "max_gpus": 8,
        "nodes_needed": 2,
        "max_nodes": 1,
        "gpu_count": 8,
        "max_tensor_parallel": 2,
        "need_bytes": GIB,
        "usable_bytes": GIB,
        "exposed_bytes": GIB,
        "kv_pool_bytes": GIB,
        "sequence_bytes": GIB,
        "context_length": 8192,
        "price_per_hour_usd": 1.0,
        "max_price_per_hour_usd": 0.5,
        "hours": 2.0,
        "deadline_hours": 1.0,
        "total_usd": 10.0,
        "budget_usd": 5.0,
        "model": "m",
        "max_position_embeddings": 4096,
        "replica_gpus": 1,
        "target_tokens_per_second": 1000.0,
        "concurrency": 1,
        "sequence_tokens_per_second": 100.0,
        "concurrency_needed": 10,
    }
    for code in REJECTION_CODES:
        text = render(Reason(code=code, data=sample))
        assert text != code
        assert text


def test_billing_sentence_says_total_and_cadence() -> None:
    def billing(total, hours, price, increment):  # type: ignore[no-untyped-def]
        data = {
            "total_usd": total,
            "billed_hours": hours,
            "price_per_hour_usd": price,
            "increment_seconds": increment,
        }
        return render(Reason(code="billing", data=data))

    # 23 whole hours at $36.00/h = $828.00: a total, not a price per hour
    assert billing(828.0, 23.0, 36.0, 3600) == "$828.00 in total: 23 h billed hourly at $36.00/h"
    # 61 minutes per second at $11/h: 61 / 60 h = 1.0167 h, $11.18
    assert (
        billing(11 * 61 / 60, 61 / 60, 11.0, 1)
        == "$11.18 in total: 1.02 h billed per second at $11.00/h"
    )
    # no token count: no total, only the rate and the cadence
    assert billing(None, None, 36.0, 60) == "$36.00/h, billed per minute"


def test_tp_for_throughput_says_what_it_is_compared_with() -> None:
    # The comparison is with smaller replicas on the same paid instances (two 1-GPU replicas
    # sharing the sequences), not with a different one-GPU instance.
    reason = Reason(
        code="tp_for_throughput",
        data={
            "replica_gpus": 2,
            "smallest_replica_gpus": 1,
            "tokens_per_second_per_gpu": 94.0,
            "smallest_tokens_per_second_per_gpu": 67.0,
        },
    )
    assert render(reason) == (
        "2 GPUs per replica for throughput: 94 tokens/s per GPU vs 67 with 1 GPU per replica "
        "on the same instances"
    )


def test_an_empty_kv_pool_says_what_filled_the_reservation() -> None:
    data = {
        "gpu": "RTXA6000-48GB",
        "gpu_count": 2,
        "kv_pool_bytes": 0,
        "sequence_bytes": 256 * 2**20,
        "context_length": 4096,
        "weights_bytes": int(43.5 * GIB),
        "reserved_bytes": int(42.5 * GIB),
        "gpu_memory_utilization": 0.9,
        "exposed_bytes": int(47.2 * GIB),
    }
    assert render(Reason(code="kv_pool_too_small", data=data)) == (
        "the KV pool of 0.0 GiB per GPU on 2 × RTXA6000-48GB holds no 4,096-token sequence "
        "(0.2 GiB each): gpu_memory_utilization 0.9 reserves 42.5 GiB of the 47.2 GiB exposed; "
        "the weights (43.5 GiB), the activation peak and the engine's overhead leave no room "
        "for the cache"
    )
    # a pool that exists but is too small needs no more words
    small = {**data, "kv_pool_bytes": int(0.1 * GIB)}
    assert render(Reason(code="kv_pool_too_small", data=small)).endswith("(0.2 GiB each)")


def test_no_cluster_network_quotes_the_one_instance_miss_after_the_nodes_needed() -> None:
    # 70B full fine-tuning on 2 x H100 per instance: ZeRO-3 over 2 GPUs keeps 16 x 70.55e9 / 2
    # = 564e9 B per GPU; without a cluster network that one instance is all the offer allows.
    data = {
        "gpu": "H100-SXM-80GB",
        "gpu_count": 2,
        "nodes_needed": 8,
        "exposed_bytes": 81_559 * 2**20,
        "need_bytes": int(535.3 * GIB),
        "plan": {
            "tensor_parallel": 2,
            "pipeline_parallel": 1,
            "data_parallel": 1,
            "expert_parallel": 1,
            "sharding": "zero3",
        },
    }
    assert render(Reason(code="no_cluster_network", data=data)) == (
        "needs 8 nodes of 2 × H100-SXM-80GB, but the offer has no cluster network (InfiniBand, "
        "EFA or RoCE); on one instance the closest plan, TP=2, PP=1, DP=1, ZeRO-3, needs "
        "535.3 GiB per GPU; H100-SXM-80GB exposes 79.6 GiB"
    )
