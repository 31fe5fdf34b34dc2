"""Billing: rounding to the provider's increment, minimum charge, spot risk, checkpoints.

The functions take numpy arrays (one value per offer) as well as plain floats, so the
recommendation prices 50,000 offers with a few vector operations.

Spot: interruptions arrive at a documented rate per instance-hour
(``ProviderInfo.spot_interruptions_per_hour``); a job on ``n`` nodes is interrupted when any
node is, so at ``n`` times the rate. A training job checkpoints every ``tau`` seconds
(Young 1974, "A first order approximation to the optimum checkpoint interval", CACM 17(9):
``tau = sqrt(2 C / lambda)`` for checkpoint write time ``C``) and each interruption loses on
average ``tau / 2`` of work plus the restart time. Expected duration, first order:
``T' = T (1 + C / tau + lambda (tau / 2 + R))``.
"""

from __future__ import annotations

from typing import overload

import numpy as np
from numpy.typing import NDArray

from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan

FloatArray = NDArray[np.float64]

SECONDS_PER_HOUR = 3600.0
HOURS_PER_MONTH = 730.0
"""8,760 hours a year / 12: the month the AWS pricing calculator and GCP billing use."""

SPOT_RESTART_SECONDS = 600.0
"""Time from an interruption to training again: a replacement instance, container start and
checkpoint load. Assumption (10 minutes); providers give notice (AWS: two minutes, "Spot
Instance interruption notices") but publish no restart time."""

CHECKPOINT_WRITE_BYTES_PER_S = 1000.0 * 2**20
"""Checkpoint write bandwidth per node: one EBS gp3 volume's maximum, 1,000 MiB/s (AWS EBS
User Guide, "General Purpose SSD volumes"). Nodes write their shards in parallel."""

DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR = 1.0 / 24.0
"""When a provider publishes no rate: one interruption per 24 hours, the hard limit on a GCP
preemptible VM's life ("Compute Engine always stops preemptible instances after they run for
24 hours", GCP docs, "Preemptible VM instances")."""


@overload
def billed_seconds(
    duration_seconds: float, increment_seconds: float, minimum_seconds: float
) -> float: ...
@overload
def billed_seconds(
    duration_seconds: FloatArray,
    increment_seconds: FloatArray | float,
    minimum_seconds: FloatArray | float,
) -> FloatArray: ...
def billed_seconds(
    duration_seconds: FloatArray | float,
    increment_seconds: FloatArray | float,
    minimum_seconds: FloatArray | float,
) -> FloatArray | float:
    """Seconds billed: the duration rounded up to the increment, at least the minimum.

    Args:
        duration_seconds: run time (seconds); NaN stays NaN.
        increment_seconds: billing granularity (1 = per second, 60 = per minute, 3600 = hourly);
            values below 1 are taken as 1.
        minimum_seconds: least charge of a launch.

    A nanosecond-scale tolerance keeps float noise (``3660.0000000001 s``) from adding an
    increment.
    """
    increment = np.maximum(increment_seconds, 1.0)
    rounded = np.ceil(np.asarray(duration_seconds, dtype=np.float64) / increment - 1e-9) * increment
    result = np.maximum(rounded, minimum_seconds)
    if isinstance(duration_seconds, np.ndarray):
        return np.asarray(result, dtype=np.float64)
    return float(result)


@overload
def spot_training_seconds(
    base_seconds: float, interruptions_per_hour: float, checkpoint_write_seconds: float
) -> tuple[float, float]: ...
@overload
def spot_training_seconds(
    base_seconds: FloatArray,
    interruptions_per_hour: FloatArray,
    checkpoint_write_seconds: FloatArray,
) -> tuple[FloatArray, FloatArray]: ...
def spot_training_seconds(
    base_seconds: FloatArray | float,
    interruptions_per_hour: FloatArray | float,
    checkpoint_write_seconds: FloatArray | float,
) -> tuple[FloatArray, FloatArray] | tuple[float, float]:
    """Expected duration of a training job on spot capacity and its expected interruptions.

    Args:
        base_seconds: uninterrupted duration.
        interruptions_per_hour: rate for the whole job (per-node rate x nodes).
        checkpoint_write_seconds: time to write one checkpoint (at least 1 s is assumed).

    Returns:
        ``(expected_seconds, expected_interruptions)`` (see the module docstring; a job shorter
        than the Young interval never checkpoints and loses half of itself on average).
    """
    rate = np.asarray(interruptions_per_hour, dtype=np.float64) / SECONDS_PER_HOUR
    base = np.asarray(base_seconds, dtype=np.float64)
    write = np.maximum(np.asarray(checkpoint_write_seconds, dtype=np.float64), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        interval = np.sqrt(2.0 * write / rate)
        checkpoints = interval < base
        lost = np.where(checkpoints, interval / 2.0, base / 2.0)
        overhead = np.where(checkpoints, write / interval, 0.0)
        factor = 1.0 + overhead + rate * (lost + SPOT_RESTART_SECONDS)
        factor = np.where(rate > 0, factor, 1.0)
    expected = base * factor
    interruptions = rate * expected
    if isinstance(base_seconds, np.ndarray):
        return expected, interruptions
    return float(expected), float(interruptions)


@overload
def spot_serving_seconds(
    base_seconds: float, interruptions_per_hour: float
) -> tuple[float, float]: ...
@overload
def spot_serving_seconds(
    base_seconds: FloatArray, interruptions_per_hour: FloatArray
) -> tuple[FloatArray, FloatArray]: ...
def spot_serving_seconds(
    base_seconds: FloatArray | float, interruptions_per_hour: FloatArray | float
) -> tuple[FloatArray, FloatArray] | tuple[float, float]:
    """Billed time of a spot deployment: each interruption adds a restart (model load) on a
    replacement instance. Returns ``(expected_seconds, expected_interruptions)``."""
    rate = np.asarray(interruptions_per_hour, dtype=np.float64) / SECONDS_PER_HOUR
    base = np.asarray(base_seconds, dtype=np.float64)
    interruptions = rate * base
    expected = base + interruptions * SPOT_RESTART_SECONDS
    if isinstance(base_seconds, np.ndarray):
        return expected, interruptions
    return float(expected), float(interruptions)


def checkpoint_bytes(plan: ParallelPlan, memory: MemoryBreakdown, *, adapters_only: bool) -> int:
    """Bytes of one checkpoint: the model states being saved, summed over GPUs once.

    Weights and optimizer state (fp32 master copy included where the estimator counts it
    there) of one model replica: the per-GPU terms times TP x PP, times DP for the terms ZeRO
    shards (optimizer from stage 1, weights from stage 3). LoRA / QLoRA save the adapters and
    their optimizer state only (the frozen base is not written); the adapter weights are
    counted through the optimizer bytes. Expert-parallel replicas are not deduplicated.
    """
    model_parallel = plan.tensor_parallel * plan.pipeline_parallel
    d = plan.data_parallel
    optimizer = memory.optimizer_bytes * model_parallel * (d if plan.sharding != "none" else 1)
    if adapters_only:
        return int(optimizer)
    weights_sharded = plan.sharding in ("zero3", "fsdp")
    weights = memory.weights_bytes * model_parallel * (d if weights_sharded else 1)
    return int(weights + optimizer)


def checkpoint_write_seconds(checkpoint: float, nodes: int) -> float:
    """Time to write one checkpoint, nodes writing their shards in parallel."""
    return checkpoint / (CHECKPOINT_WRITE_BYTES_PER_S * max(nodes, 1))


def checkpoint_storage_usd(checkpoint: float, price_per_gb_month_usd: float, hours: float) -> float:
    """Cost of keeping one checkpoint (GB = 10**9 bytes) for ``hours``."""
    return checkpoint / 1e9 * price_per_gb_month_usd * hours / HOURS_PER_MONTH


def cost_per_million_tokens(
    price_per_hour_usd: FloatArray, tokens_per_second: FloatArray
) -> FloatArray:
    """USD per million tokens at a deployment's hourly price and token rate."""
    return price_per_hour_usd / (tokens_per_second * SECONDS_PER_HOUR) * 1e6
