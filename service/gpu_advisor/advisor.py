"""The application service: one place that answers the main questions for every front end.

The HTTP handlers and the in-process CLI both call :class:`Advisor`, so an answer is the same
value whichever way it is asked for (and encodes to the same JSON). It joins the catalog (an
adapter with a cache) to the pure core: resolve the model, resolve GPU names, rank offers.
Every answer leaves here with its USD amounts rounded (:func:`gpu_advisor.money.round_money`:
cents for amounts, 1e-4 for per-hour and per-million-token rates); the core computes with exact
floats.
"""

from __future__ import annotations

import asyncio
import difflib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from gpu_advisor.catalog.service import CatalogService, CatalogSnapshot
from gpu_advisor.collector import collector_paused
from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.check import CheckResponse, evaluate_check, resolve_target
from gpu_advisor.core.errors import InvalidSpecError, UnknownGpuError
from gpu_advisor.core.estimate import EstimateResponse, estimate
from gpu_advisor.core.gpus import (
    GpuCatalog,
    GpuSpec,
    matching_variants,
    resolve_gpu,
    resolve_gpu_detailed,
)
from gpu_advisor.core.memory import WorkloadEstimator
from gpu_advisor.core.models import resolve_model
from gpu_advisor.core.offers import ProviderInfo
from gpu_advisor.core.planner import (
    MEMORY_CAPACITY_RULE,
    RecommendationIndex,
    build_recommendation_index,
    recommend,
)
from gpu_advisor.core.results import (
    CatalogInfo,
    ModelSummary,
    Reason,
    RecommendationResponse,
    SourceFreshness,
)
from gpu_advisor.core.spec import (
    CheckRequest,
    Constraints,
    EstimateRequest,
    RecommendationRequest,
)
from gpu_advisor.core.spec_checks import check_workload
from gpu_advisor.money import round_money
from gpu_advisor.observer import NULL_OBSERVER, AnswerObserver


def model_summary(arch: Architecture) -> ModelSummary:
    """The resolved architecture's headline numbers, as every answer reports them."""
    return ModelSummary(
        name=arch.name,
        family=arch.family,
        approximate=arch.approximate,
        total_parameters=arch.parameters.total,
        active_parameters=arch.parameters.active,
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        num_attention_heads=arch.num_attention_heads,
        num_kv_heads=arch.num_kv_heads,
        head_dim=arch.head_dim,
        vocab_size=arch.vocab_size,
        num_experts=arch.num_experts,
        num_experts_per_token=arch.num_experts_per_token,
    )


def catalog_info(snapshot: CatalogSnapshot, *, degraded: bool | None = None) -> CatalogInfo:
    """The catalog block of every answer: version (content hash), per-source freshness, and
    whether the shared cache is degraded (``degraded``: the service's live flag, else the
    snapshot's)."""
    return CatalogInfo(
        version=snapshot.version,
        sources=[
            SourceFreshness(name=s.name, fetched_at=s.fetched_at, stale=s.stale, offers=s.offers)
            for s in snapshot.sources
        ],
        degraded=snapshot.degraded if degraded is None else degraded,
    )


def resolve_gpu_name(gpus: GpuCatalog, name: str, field: str) -> GpuSpec:
    """An alias (``"H100"``, ``"a100-80gb"``) -> its spec; an unknown name is a 422.

    Raises:
        UnknownGpuError: naming ``field`` (GET /v1/gpus lists the known GPUs).
    """
    spec = resolve_gpu(gpus, name)
    if spec is None:
        raise UnknownGpuError(
            f"unknown GPU {name!r}; GET /v1/gpus lists the GPU ids and aliases", field=field
        )
    return spec


def gpu_filter_ids(gpus: GpuCatalog, name: str, field: str) -> list[str]:
    """The canonical ids a GPU name selects in a filter: a family name every variant
    (``"A100"`` -> SXM/PCIe x 40/80 GB), a specific name its variant(s)
    (:func:`~gpu_advisor.core.gpus.matching_variants`).

    Raises:
        UnknownGpuError: no known GPU matches, naming ``field``.
    """
    specs = matching_variants(gpus, name)
    if not specs:
        raise UnknownGpuError(
            f"unknown GPU {name!r}; GET /v1/gpus lists the GPU ids and aliases", field=field
        )
    return [spec.id for spec in specs]


def resolve_gpu_names(gpus: GpuCatalog, names: list[str] | None, field: str) -> list[str] | None:
    """Filter names (``"H100"``, ``"a100-80gb"``) -> the canonical ids they select, each once,
    in the order given; an unknown name is a 422.

    Raises:
        UnknownGpuError: naming ``<field>.<index>`` (GET /v1/gpus lists the known GPUs).
    """
    if names is None:
        return None
    ids: dict[str, None] = {}
    for i, name in enumerate(names):
        ids.update(dict.fromkeys(gpu_filter_ids(gpus, name, f"{field}.{i}")))
    return list(ids)


def check_filter_names(
    names: list[str] | None, known: Iterable[str], field: str, *, kind: str, list_known: bool
) -> None:
    """A name filter (``constraints.providers``, ``constraints.regions``) may name only values
    that can select something; names compare case-insensitively, as the filter applies them.
    A typo would otherwise exclude every offer of the value meant, silently.

    Args:
        names: the filter as sent (None: no filter).
        known: the values that can be named.
        field: the filter's dotted path, for the error.
        kind: what a value is (``provider``), for the message.
        list_known: list every known value in the message (a short list); else only the
            closest ones (:func:`difflib.get_close_matches`).

    Raises:
        InvalidSpecError: naming ``<field>.<index>`` of the first unknown value (422).
    """
    if names is None:
        return
    spelled: dict[str, str] = {}  # lower case -> the spelling the table or catalog uses
    for value in known:
        spelled.setdefault(value.lower(), value)
    allowed = sorted(spelled)
    for i, name in enumerate(names):
        if name.lower() in spelled:
            continue
        close = difflib.get_close_matches(name.lower(), allowed, n=3)
        # quoted: a region may hold commas of its own (vast.ai's "Texas, US, NA")
        hint = f"; did you mean {' or '.join(repr(spelled[c]) for c in close)}?" if close else ""
        if list_known:
            listing = f"; known {kind}s: {', '.join(spelled[a] for a in allowed)}"
        else:
            listing = f"; no offer in the catalog is in this {kind}"
        raise InvalidSpecError(f"unknown {kind} {name!r}{listing}{hint}", field=f"{field}.{i}")


def default_variant_note(gpus: GpuCatalog, name: str, field: str) -> Reason | None:
    """A note when one GPU of a several-variant family was asked for by its family name
    (``hardware.gpu: "H100"``) and the default variant was taken; None when the name pinned
    the variant."""
    resolution = resolve_gpu_detailed(gpus, name)
    chosen = resolution.spec
    if chosen is None or resolution.basis != "default":
        return None
    others = [spec.id for spec in matching_variants(gpus, name) if spec.id != chosen.id]
    if not others:
        return None
    return Reason(
        code="gpu_default_variant",
        data={"field": field, "name": name, "gpu": chosen.id, "others": others},
        text=(
            f"{field} {name!r} taken as {chosen.id}, its default variant; "
            f"name one of {', '.join(others)} for another"
        ),
    )


ANSWER_CACHE_ENTRIES = 256
"""Answers kept per process. An entry (answer struct and JSON body) measured about 116 KiB
for bench_http's five requests over the bundled catalog (tracemalloc: 61 KiB + 55 KiB), so
256 entries take up to about 30 MiB."""

_JSON = msgspec.json.Encoder()

AnswerT = TypeVar("AnswerT", RecommendationResponse, EstimateResponse, CheckResponse)


class CachedAnswer(Generic[AnswerT]):
    """One answer of the core and its JSON body, encoded once per catalog block.

    The catalog block (version, per-source freshness, degraded flag) is the live part of an
    answer: a repeated request gets the block of the moment. The body is re-encoded only when
    that block's JSON differs from the one the kept body carries (a refresh, a source going
    stale, the shared cache degrading), so a repeated request is served without encoding its
    tens of KB again -- the largest share of a cache hit's cost (``bench/bench_edge.py``).
    Mutated only on the event loop, between awaits.
    """

    __slots__ = ("_body_json", "_catalog_json", "answer")
    answer: AnswerT
    _catalog_json: bytes | None
    _body_json: bytes | None

    def __init__(self, answer: AnswerT) -> None:
        self.answer = answer
        self._catalog_json = None
        self._body_json = None

    def value(self, catalog: CatalogInfo | None) -> AnswerT:
        """The answer carrying ``catalog`` (None: an answer without a catalog block)."""
        answer = self.answer
        if catalog is None or getattr(answer, "catalog", None) == catalog:
            return answer
        return msgspec.structs.replace(answer, catalog=catalog)

    def json(self, catalog: CatalogInfo | None) -> bytes:
        """The JSON body of :meth:`value` (``catalog`` as there); the same bytes as encoding
        :meth:`value` with msgspec, as Litestar would."""
        catalog_json = _JSON.encode(catalog) if catalog is not None else b""
        if self._body_json is None or catalog_json != self._catalog_json:
            self._body_json = _JSON.encode(self.value(catalog))
            self._catalog_json = catalog_json
        return self._body_json


@dataclass(frozen=True, slots=True)
class ServedAnswer(Generic[AnswerT]):
    """An answer as the advisor serves it: the (possibly cached) answer of the core and the
    live catalog block it is served with (None for answers without one: ``/v1/estimate``)."""

    cached: CachedAnswer[AnswerT]
    catalog: CatalogInfo | None

    def value(self) -> AnswerT:
        """The answer struct (what the CLI renders and the text table is built from)."""
        return self.cached.value(self.catalog)

    def json(self) -> bytes:
        """The answer's JSON body (``application/json``), encoded at most once per catalog
        block for a cached answer."""
        return self.cached.json(self.catalog)


CacheKey = tuple[str, str, bytes]
"""(endpoint: ``recommendations``, ``estimate`` or ``check``, as the metrics label it; catalog
version; the request's canonical JSON)."""


class AnswerCache:
    """The last answers of the pure core, keyed by what determines them.

    The core is deterministic: the same request against the same catalog version (content
    hash) gives the same answer, so a repeated request -- a CI pipeline re-checking the spec it
    committed, a dashboard polling -- is answered without planning again. Keys are the request's
    canonical JSON bytes plus the catalog version; a new catalog version misses by construction.
    Least recently used entries are dropped first. Each entry keeps its JSON body
    (:class:`CachedAnswer`).
    """

    def __init__(self, max_entries: int = ANSWER_CACHE_ENTRIES) -> None:
        self._max = max_entries
        self._entries: OrderedDict[CacheKey, CachedAnswer[Any]] = OrderedDict()

    def get(self, key: CacheKey) -> CachedAnswer[Any] | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: CacheKey, answer: AnswerT) -> CachedAnswer[AnswerT]:
        entry = CachedAnswer(answer)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return entry


class Advisor:
    """Answers recommendation requests against the live catalog.

    Args:
        catalog: the pricing catalog service (started and closed by the app's lifespan).
        providers: billing and spot facts per provider (default: the catalog's).
        answer_cache_entries: answers kept per process (0 switches the cache off).
        pause_collector: run each planning call with Python's cyclic garbage collector
            paused (:func:`gpu_advisor.collector.collector_paused`).
        observer: told whether each request was answered from the answer cache (the
            service's metrics; nothing by default).
    """

    def __init__(
        self,
        catalog: CatalogService,
        providers: Mapping[str, ProviderInfo] | None = None,
        *,
        answer_cache_entries: int = ANSWER_CACHE_ENTRIES,
        pause_collector: bool = True,
        observer: AnswerObserver = NULL_OBSERVER,
    ) -> None:
        self._pause_collector = pause_collector
        self._observer = observer
        self._answers = AnswerCache(answer_cache_entries) if answer_cache_entries > 0 else None
        self.catalog = catalog
        self.gpus = catalog.gpus
        self.providers = dict(providers) if providers is not None else dict(catalog.providers)
        # The planner's index of the catalog, rebuilt once per catalog version (content hash)
        # and shared by all requests; a lock makes concurrent first requests build it once.
        self._index: tuple[str, RecommendationIndex] | None = None
        self._index_lock = asyncio.Lock()

    async def _planner_index(self) -> tuple[CatalogSnapshot, RecommendationIndex]:
        snapshot = await self.catalog.snapshot()
        cached = self._index
        if cached is not None and cached[0] == snapshot.version:
            return snapshot, cached[1]
        async with self._index_lock:
            cached = self._index
            if cached is None or cached[0] != snapshot.version:
                index = await asyncio.to_thread(build_recommendation_index, snapshot.offers)
                cached = (snapshot.version, index)
                self._index = cached
        return snapshot, cached[1]

    def _catalog_block(self, snapshot: CatalogSnapshot) -> CatalogInfo:
        # Freshness and the degraded flag are live: never served from the answer cache.
        return catalog_info(snapshot, degraded=self.catalog.cache_degraded)

    def _remembered(self, key: CacheKey) -> CachedAnswer[Any] | None:
        if self._answers is None:
            return None
        found = self._answers.get(key)
        self._observer.answer_cache(key[0], hit=found is not None)
        return found

    def _remember(self, key: CacheKey, answer: AnswerT) -> CachedAnswer[AnswerT]:
        if self._answers is not None:
            return self._answers.put(key, answer)
        return CachedAnswer(answer)

    def _canonical_constraints(
        self, constraints: Constraints, index: RecommendationIndex
    ) -> Constraints:
        # Providers: the provider table's (billing facts) or an offer's; regions: an offer's
        # (the catalog is the only list of regions there is).
        check_filter_names(
            constraints.providers,
            [*self.providers, *index.providers],
            "constraints.providers",
            kind="provider",
            list_known=True,
        )
        check_filter_names(
            constraints.regions,
            index.regions,
            "constraints.regions",
            kind="region",
            list_known=False,
        )
        gpu_types = resolve_gpu_names(self.gpus, constraints.gpu_types, "constraints.gpu_types")
        if gpu_types == constraints.gpu_types:
            return constraints
        return msgspec.structs.replace(constraints, gpu_types=gpu_types)

    async def recommend(self, request: RecommendationRequest) -> RecommendationResponse:
        """POST /v1/recommendations: ranked, priced, explained offers for a workload.

        Raises:
            InvalidSpecError: the model, workload or constraints cannot be answered (422).
        """
        return (await self.serve_recommendation(request)).value()

    async def serve_recommendation(
        self, request: RecommendationRequest
    ) -> ServedAnswer[RecommendationResponse]:
        """:meth:`recommend`'s answer as served over HTTP (struct or JSON body).

        Raises:
            InvalidSpecError: as :meth:`recommend`.
        """
        snapshot, index = await self._planner_index()
        catalog = self._catalog_block(snapshot)
        key = ("recommendations", snapshot.version, _JSON.encode(request))
        cached = self._remembered(key)
        if cached is None:
            cached = self._remember(key, self.plan_recommendation(request, snapshot, index))
        return ServedAnswer(cached, catalog)

    def plan_recommendation(
        self, request: RecommendationRequest, snapshot: CatalogSnapshot, index: RecommendationIndex
    ) -> RecommendationResponse:
        """The answer of ``request`` against ``snapshot`` (planned, never from the answer
        cache): the synchronous work of :meth:`recommend`, run with the cyclic collector
        paused when the advisor is configured so.

        Raises:
            InvalidSpecError: as :meth:`recommend`.
        """
        arch = resolve_model(request.model)
        check_workload(arch, request.workload)
        constraints = self._canonical_constraints(request.constraints, index)
        if constraints is not request.constraints:
            request = msgspec.structs.replace(request, constraints=constraints)
        with collector_paused(self._pause_collector):
            result = recommend(
                arch,
                request,
                index,
                self.gpus.by_id,
                self.providers,
                WorkloadEstimator(arch, request.workload),
                capacity_rule=MEMORY_CAPACITY_RULE,
            )
        answer = RecommendationResponse(
            model=model_summary(arch),
            objective=result.objective,
            recommendations=result.recommendations,
            rejected=result.rejected,
            pareto=result.pareto,
            catalog=self._catalog_block(snapshot),
            suggestions=result.suggestions,
            candidates_considered=result.candidates_considered,
        )
        return round_money(answer)

    async def estimate(self, request: EstimateRequest) -> EstimateResponse:
        """POST /v1/estimate: the per-GPU breakdown, fit, speed and GPU counts of a workload.

        Raises:
            InvalidSpecError: the model, workload, hardware or plan cannot be answered (422).
        """
        return (await self.serve_estimate(request)).value()

    async def serve_estimate(self, request: EstimateRequest) -> ServedAnswer[EstimateResponse]:
        """:meth:`estimate`'s answer as served over HTTP (struct or JSON body).

        Raises:
            InvalidSpecError: as :meth:`estimate`.
        """
        # An estimate depends on the request and the GPU table only, not on prices.
        key = ("estimate", "", _JSON.encode(request))
        cached = self._remembered(key)
        if cached is None:
            cached = self._remember(key, self._plan_estimate(request))
        return ServedAnswer(cached, None)

    def _plan_estimate(self, request: EstimateRequest) -> EstimateResponse:
        arch = resolve_model(request.model)
        check_workload(arch, request.workload)
        gpu = (
            resolve_gpu_name(self.gpus, request.hardware.gpu, "hardware.gpu")
            if request.hardware is not None
            else None
        )
        with collector_paused(self._pause_collector):
            answer = estimate(arch, request, self.gpus, gpu, model_summary(arch))
        if request.hardware is not None:
            note = default_variant_note(self.gpus, request.hardware.gpu, "hardware.gpu")
            if note is not None:
                answer = msgspec.structs.replace(answer, notes=[note, *answer.notes])
        return round_money(answer)

    async def check(self, request: CheckRequest) -> CheckResponse:
        """POST /v1/check: pass or fail of a workload on a target, check by check.

        Raises:
            InvalidSpecError: the model, workload or target cannot be answered (422).
            NotFoundError: the target's provider or instance type is not in the catalog (404).
        """
        return (await self.serve_check(request)).value()

    async def serve_check(self, request: CheckRequest) -> ServedAnswer[CheckResponse]:
        """:meth:`check`'s answer as served over HTTP (struct or JSON body).

        Raises:
            InvalidSpecError, NotFoundError: as :meth:`check`.
        """
        snapshot, index = await self._planner_index()
        catalog = self._catalog_block(snapshot)
        key = ("check", snapshot.version, _JSON.encode(request))
        cached = self._remembered(key)
        if cached is None:
            cached = self._remember(key, self._plan_check(request, snapshot, index, catalog))
        return ServedAnswer(cached, catalog)

    def _plan_check(
        self,
        request: CheckRequest,
        snapshot: CatalogSnapshot,
        index: RecommendationIndex,
        catalog: CatalogInfo,
    ) -> CheckResponse:
        arch = resolve_model(request.model)
        check_workload(arch, request.workload)
        target = resolve_target(request.target, snapshot.offers, self.gpus)
        with collector_paused(self._pause_collector):
            outcome = evaluate_check(
                arch,
                request,
                target,
                index,
                self.gpus.by_id,
                self.providers,
                WorkloadEstimator(arch, request.workload),
                capacity_rule=MEMORY_CAPACITY_RULE,
            )
        answer = CheckResponse(
            verdict=outcome.verdict,
            model=model_summary(arch),
            target=outcome.target,
            checks=outcome.checks,
            estimate=outcome.estimate,
            catalog=catalog,
            alternative=outcome.alternative,
            suggestions=outcome.suggestions,
        )
        return round_money(answer)
