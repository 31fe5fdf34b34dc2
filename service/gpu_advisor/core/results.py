"""Result values of the domain core; they are also the response schema (DESIGN "API").

Bytes are ``int``; prices are USD; durations are hours unless the name says otherwise.
Sentences are never built here: rationale and rejections carry reason codes with numbers,
rendered to text in :mod:`gpu_advisor.core.explain`.
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct

from gpu_advisor.core.offers import Offer
from gpu_advisor.core.spec import Sharding


class ParallelPlan(Struct, frozen=True, kw_only=True):
    """How the work is split. GPUs used = tensor_parallel * pipeline_parallel * data_parallel;
    expert_parallel splits routed experts inside the data-parallel (x tensor) group."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    expert_parallel: int = 1
    sharding: Sharding = "none"
    sequence_parallel: bool = False

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel


class MemoryBreakdown(Struct, frozen=True, kw_only=True):
    """Memory per GPU, in bytes, term by term (the requirement, not an engine's reservation).

    ``total_bytes`` = weights + gradients + optimizer + activations + kv_cache + overhead.
    ``capacity_bytes`` is the GPU's exposed memory (0 when no GPU is given) and
    ``headroom_fraction`` = 1 - total / capacity (negative when it does not fit).
    ``host_bytes`` is CPU memory per node used by offload (optimizer state on the host).
    For a vLLM-style engine, ``engine_reserved_bytes`` = gpu_memory_utilization * capacity and
    ``kv_pool_bytes`` is what the engine would leave for KV cache.
    """

    weights_bytes: int
    gradients_bytes: int = 0
    optimizer_bytes: int = 0
    activations_bytes: int = 0
    kv_cache_bytes: int = 0
    overhead_bytes: int = 0
    total_bytes: int
    capacity_bytes: int = 0
    headroom_fraction: float | None = None
    host_bytes: int = 0
    engine_reserved_bytes: int | None = None
    kv_pool_bytes: int | None = None
    details: dict[str, int] = {}


class Performance(Struct, frozen=True, kw_only=True):
    """Speed of a plan.

    Serving: ``tokens_per_second`` is the whole deployment's output tokens per second (an
    encoder-only model's: input tokens encoded per second), summed over its ``replicas``,
    each serving its share of the workload's ``concurrency`` (``sequences_per_replica``);
    ``max_concurrency`` is the most full-context sequences the deployment runs at once
    (``replicas x max_concurrency_per_replica``): what each replica's memory holds, at most
    its engine's ``max_num_seqs`` (vLLM).
    """

    tokens_per_second: float
    time_to_result_hours: float | None = None
    mfu: float | None = None
    max_concurrency: int | None = None
    time_to_first_token_seconds: float | None = None
    replicas: int = 1
    step_time_seconds: float | None = None
    request_latency_seconds: float | None = None
    max_concurrency_per_replica: int | None = None
    sequences_per_replica: int | None = None


class Cost(Struct, frozen=True, kw_only=True):
    price_per_hour_usd: float
    billed_hours: float | None = None
    total_usd: float | None = None
    per_million_tokens_usd: float | None = None
    spot: bool = False
    expected_interruptions: float | None = None
    price_per_gpu_hour_usd: float | None = None
    checkpoint_bytes: int | None = None
    checkpoint_storage_usd: float | None = None


class Reason(Struct, frozen=True, kw_only=True):
    """A reason code with the numbers behind it; ``text`` is rendered from them."""

    code: str
    data: dict[str, Any] = {}
    text: str = ""


class ModelSummary(Struct, frozen=True, kw_only=True):
    name: str
    family: str
    approximate: bool
    total_parameters: int
    active_parameters: int
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    num_experts: int = 0
    num_experts_per_token: int = 0


class RegionPrice(Struct, frozen=True, kw_only=True):
    """Another region (or zone) offering the same instance type in the same market.

    Attributes:
        region / zone: where.
        price_per_hour_usd: on-demand instance price there.
        spot_price_per_hour_usd: spot instance price there (None: no spot market).
        total_usd: the whole job's cost there in the recommendation's market (None without a
            token count).
    """

    region: str
    zone: str | None = None
    price_per_hour_usd: float
    spot_price_per_hour_usd: float | None = None
    total_usd: float | None = None


class Recommendation(Struct, frozen=True, kw_only=True):
    """One distinct choice: an instance type of a provider in one market (on-demand or spot),
    in its best region.

    Attributes:
        summary: the rationale in one sentence.
        rationale: the reasons, each with its numbers and sentence.
        other_regions: the next best regions offering the same instance type in the same
            market, best first (capped); ``other_regions_count`` counts them all.
    """

    rank: int
    offer: Offer
    nodes: int
    gpus: int
    spot: bool
    plan: ParallelPlan
    memory_per_gpu: MemoryBreakdown
    performance: Performance
    cost: Cost
    summary: str = ""
    rationale: list[Reason]
    warnings: list[Reason] = []
    other_regions: list[RegionPrice] = []
    other_regions_count: int = 0


class RejectedGroup(Struct, frozen=True, kw_only=True):
    """Offers rejected for the same reason on the same GPU type."""

    code: str
    gpu: str
    count: int
    text: str
    data: dict[str, Any] = {}
    examples: list[str] = []


class SourceFreshness(Struct, frozen=True, kw_only=True):
    name: str
    fetched_at: str | None
    stale: bool
    offers: int


class CatalogInfo(Struct, frozen=True, kw_only=True):
    version: str
    sources: list[SourceFreshness]
    degraded: bool = False


class Suggestion(Struct, frozen=True, kw_only=True):
    code: str
    text: str
    data: dict[str, Any] = {}


class ParetoPoint(Struct, frozen=True, kw_only=True):
    rank: int | None
    provider: str
    instance_type: str
    region: str
    gpus: int
    total_usd: float
    time_to_result_hours: float
    spot: bool = False
    equivalent_offers: int = 1
    latency_seconds: float | None = None


class RecommendationResponse(Struct, frozen=True, kw_only=True):
    model: ModelSummary
    objective: str
    recommendations: list[Recommendation]
    rejected: list[RejectedGroup]
    pareto: list[ParetoPoint]
    catalog: CatalogInfo
    suggestions: list[Suggestion] = []
    candidates_considered: int = 0


Verdict = Literal["pass", "fail"]
