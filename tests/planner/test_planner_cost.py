"""Billing arithmetic, spot expectation and checkpoint sizes, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu_advisor.core.planner.cost import (
    billed_seconds,
    checkpoint_bytes,
    checkpoint_storage_usd,
    cost_per_million_tokens,
    spot_serving_seconds,
    spot_training_seconds,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan


@pytest.mark.parametrize(
    ("duration", "increment", "minimum", "billed"),
    [
        (3660.0, 3600, 0, 7200.0),  # 61 minutes, hourly: 2 h
        (3660.0, 60, 0, 3660.0),  # per minute: exactly 61 minutes
        (3661.0, 60, 0, 3720.0),  # one second over: 62 minutes
        (3660.0, 1, 0, 3660.0),
        (30.0, 1, 60, 60.0),  # minimum charge of one minute
        (0.4, 0, 0, 1.0),  # an increment below one second is taken as one second
    ],
)
def test_billed_seconds(duration: float, increment: int, minimum: int, billed: float) -> None:
    assert billed_seconds(duration, float(increment), float(minimum)) == billed


def test_billed_seconds_vectorised_and_nan() -> None:
    out = billed_seconds(np.array([3660.0, np.nan]), np.array([3600.0, 1.0]), 0.0)
    assert out[0] == 7200.0
    assert math.isnan(out[1])


def test_spot_training_matches_young_first_order_formula() -> None:
    # 10 h job, 2 interruptions/h, 20 s checkpoint writes, 600 s restarts:
    # tau = sqrt(2 * 20 / (2 / 3600)) = sqrt(72,000) = 268.3 s
    # factor = 1 + 20 / tau + (2 / 3600) * (tau / 2 + 600)
    tau = math.sqrt(2 * 20 / (2 / 3600))
    factor = 1 + 20 / tau + (2 / 3600) * (tau / 2 + 600)
    expected, interruptions = spot_training_seconds(36_000.0, 2.0, 20.0)
    assert expected == pytest.approx(36_000 * factor)
    assert interruptions == pytest.approx(2 / 3600 * 36_000 * factor)


def test_spot_without_interruptions_changes_nothing() -> None:
    assert spot_training_seconds(3600.0, 0.0, 20.0) == (3600.0, 0.0)


def test_short_spot_job_never_checkpoints() -> None:
    # 100 s job, tau = 268 s > 100 s: an interruption loses 50 s on average plus the restart.
    expected, _ = spot_training_seconds(100.0, 2.0, 20.0)
    assert expected == pytest.approx(100 * (1 + 2 / 3600 * (50 + 600)))


def test_spot_serving_adds_restarts() -> None:
    # 24 h at 0.1/h: 2.4 interruptions x 600 s of reload.
    expected, interruptions = spot_serving_seconds(86_400.0, 0.1)
    assert interruptions == pytest.approx(2.4)
    assert expected == pytest.approx(86_400 + 2.4 * 600)


def test_checkpoint_bytes_count_each_shard_once() -> None:
    # TP=2 x PP=2 x DP=4, ZeRO-3: per GPU 1e9 B of weights and 6e9 B of optimizer state,
    # sharded 16 ways -> (1e9 + 6e9) x 16.
    memory = MemoryBreakdown(weights_bytes=10**9, optimizer_bytes=6 * 10**9, total_bytes=0)
    plan = ParallelPlan(tensor_parallel=2, pipeline_parallel=2, data_parallel=4, sharding="zero3")
    assert checkpoint_bytes(plan, memory, adapters_only=False) == 7 * 10**9 * 16
    # no ZeRO: the replica's states once, TP x PP = 4 shards
    plain = ParallelPlan(tensor_parallel=2, pipeline_parallel=2, data_parallel=4)
    assert checkpoint_bytes(plain, memory, adapters_only=False) == 7 * 10**9 * 4
    # ZeRO-1: optimizer over all 16, weights over TP x PP
    zero1 = ParallelPlan(tensor_parallel=2, pipeline_parallel=2, data_parallel=4, sharding="zero1")
    assert checkpoint_bytes(zero1, memory, adapters_only=False) == 4 * 10**9 + 6 * 10**9 * 16
    # LoRA: adapters and their optimizer state only
    assert checkpoint_bytes(plain, memory, adapters_only=True) == 6 * 10**9 * 4


def test_checkpoint_storage_cost() -> None:
    # 1 TB (10**12 B) at $0.023 per GB-month for a 730-hour month: $23.00
    assert checkpoint_storage_usd(10**12, 0.023, 730.0) == pytest.approx(23.0)


def test_cost_per_million_tokens() -> None:
    # $36/h at 10,000 tokens/s: 36,000,000 tokens per hour -> $1.00 per million
    assert cost_per_million_tokens(np.array(36.0), np.array(10_000.0)) == pytest.approx(1.0)
