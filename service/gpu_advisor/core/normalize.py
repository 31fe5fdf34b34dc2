"""Pricing normalisation: provider rows -> canonical :class:`~gpu_advisor.core.offers.Offer` s.

Pure functions over values (no I/O). Every source adapter turns its format into
:class:`RawOffer` rows with the source's own semantics already applied (e.g. GCP host VM +
accelerator rows combined by the SkyPilot adapter); this module then, row by row:

1. drops rows that are not GPU offers, with a reason: ``no_gpu`` (CPU rows), ``tpu``,
   ``bad_gpu_count``;
2. drops rows whose price is unusable: ``missing_price``, ``nonpositive_price``,
   ``absurd_price`` (not finite or above 10,000 USD/h - no single instance costs that);
3. resolves the GPU (:func:`~gpu_advisor.core.gpus.resolve_gpu_detailed`): name, aliases,
   variant from name / instance-type hints / reported memory. The reported per-GPU memory is
   checked against the variant; a size that only fits after dividing by the GPU count is an
   instance total stored as per-GPU (dstack/gpuhunt #21) and is corrected
   (``memory_total_as_per_gpu``); a size that contradicts an explicit name is overruled by
   the name (``memory_contradicts_name``, skypilot-catalog PR #15); a size that fits no
   variant (host RAM in the GPU field) is ignored (``memory_implausible_ignored``). Unknown
   GPUs are kept with ``gpu_known=False``; one spelling per unknown model
   (:func:`~gpu_advisor.core.gpus.unknown_model_key`), and a name without a size takes the
   batch's only size for that model (``gpu_id_size_from_batch``);
4. scales per-GPU prices to per-instance prices when the source says they are per GPU
   (``price_per_gpu_scaled``);
5. cleans spot prices: placeholders (>= 99,999 or <= 0, e.g. primeintellect 99999999 and
   vast 0.00) -> None (``spot_placeholder``); spot above on-demand -> None
   (``spot_above_on_demand``); spot equal to on-demand -> None (``spot_equals_on_demand``,
   SkyPilot catalog README "Missing or placeholder prices").

Then over the whole batch:

6. rows of the same provider, instance type, region, GPU and count are collapsed into one
   offer per region (zones listed, cheapest on-demand and cheapest spot kept; exact duplicate
   rows collapse the same way). Counted as ``rows_collapsed``, not as drops;
7. instance prices that do not scale with GPU count (every size of one family at the same
   price, skypilot-catalog PR #44) are per-GPU prices and are multiplied by the count
   (``price_not_scaled_by_gpu_count``);
8. prices far below any plausible price for the GPU are dropped (``implausible_price``): an
   on-demand price per GPU-hour below 1/5 of the same provider's median for that GPU (at
   least 5 rows of that GPU at that provider); spot prices per GPU-hour below 1/20 of that
   median are removed (``spot_implausible``). The provider's own median is the reference
   because prices for one GPU differ across providers by more than 10x (V100: about 0.2 USD
   per GPU-hour on marketplaces, about 3 on hyperscalers, SkyPilot catalog v7), while one
   provider's prices for one GPU stay within 2x across regions (GCP asia-south1 is about half
   of other regions); 1/5 keeps those and catches a per-GPU price stored on an 8-GPU row.

Every drop and correction is counted per reason in :class:`SourceStats` with up to
``EXAMPLES_PER_REASON`` examples.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Literal

from msgspec import Struct, structs

from gpu_advisor.core.gpus import MIB, GpuCatalog, GpuSpec, memory_matches, resolve_gpu_detailed
from gpu_advisor.core.offers import Interconnect, Network, Offer, ProviderInfo

EXAMPLES_PER_REASON = 3
MAX_PRICE_PER_HOUR_USD = 10_000.0
SPOT_PLACEHOLDER_MIN_USD = 99_999.0
IMPLAUSIBLE_ON_DEMAND_FRACTION = 0.2
IMPLAUSIBLE_SPOT_FRACTION = 0.05
MIN_OFFERS_FOR_MEDIAN = 5
MAX_GPU_COUNT = 1024

# Conservative billing for a provider with no documented rule: whole hours, one hour minimum.
DEFAULT_BILLING_INCREMENT_SECONDS = 3600
DEFAULT_BILLING_MINIMUM_SECONDS = 3600

PriceBasis = Literal["instance", "gpu"]


class RawOffer(Struct, frozen=True, kw_only=True):
    """One source row before normalisation.

    Attributes:
        provider: provider id (``aws``, ``gcp``, ``lambda``...).
        instance_type: the provider's instance name.
        region / zone: location; zone None where the source has none.
        accelerator_name: the GPU name as the source spells it (None/"" for CPU rows).
        accelerator_count: GPUs per instance as given (may be fractional or 0 in bad rows).
        gpu_memory_mib: per-GPU memory as the source claims it, MiB (None when absent or 0).
        gpu_memory_mib_is_total: the source documents that field as the instance total
            (vast, primeintellect); it is divided by the count (``memory_total_as_per_gpu``).
        vcpus / ram_gib: host CPU and RAM (GiB) per instance.
        price_per_hour_usd / spot_price_per_hour_usd: USD per hour, per instance unless
            ``price_basis`` is ``gpu``.
        hints: strings that may carry GPU form/memory tokens (instance names, upstream ids).
        interconnect / network: explicit values from sources that carry them (table source).
        billing_increment_seconds / billing_minimum_seconds: explicit billing (table source).
        drop_reason: set by an adapter for a row it recognised as unusable
            (``gcp_host_without_gpu_price``); the row is counted as dropped for that reason.
        ref: where the row came from (``aws/vms.csv:12``), for examples in the stats.
    """

    provider: str
    instance_type: str
    region: str
    zone: str | None = None
    accelerator_name: str | None = None
    accelerator_count: float | None = None
    gpu_memory_mib: int | None = None
    gpu_memory_mib_is_total: bool = False
    vcpus: float | None = None
    ram_gib: float | None = None
    price_per_hour_usd: float | None = None
    spot_price_per_hour_usd: float | None = None
    price_basis: PriceBasis = "instance"
    hints: tuple[str, ...] = ()
    interconnect: Interconnect | None = None
    network: Network | None = None
    billing_increment_seconds: int | None = None
    billing_minimum_seconds: int | None = None
    drop_reason: str | None = None
    ref: str = ""


class NetworkRule(Struct, frozen=True, kw_only=True):
    """Intra-node interconnect and cluster network for instance types matching a pattern.

    Attributes:
        provider: provider id.
        pattern: shell-style glob over the instance type, case-insensitive (``p5*.48xlarge``).
        interconnect: the GPU-to-GPU link inside the node, or None to keep the default.
        network: the cluster fabric between nodes, or None (no cluster-grade network).
        source: URL and date of the document that states it.
    """

    provider: str
    pattern: str
    interconnect: Interconnect | None = None
    network: Network | None = None
    source: str = ""


class SourceStats(Struct, frozen=True, kw_only=True):
    """What normalisation did to one source's rows.

    Attributes:
        rows_in: rows read.
        offers_out: offers produced (after collapsing zones).
        rows_collapsed: rows merged into another row's offer (zones, exact duplicates).
        dropped: rows dropped, per reason code.
        corrected: corrections applied, per reason code (a row may have several).
        unknown_gpus: offers kept with ``gpu_known=False``, per GPU id.
        examples: up to ``EXAMPLES_PER_REASON`` row references per reason code.
    """

    rows_in: int = 0
    offers_out: int = 0
    rows_collapsed: int = 0
    dropped: dict[str, int] = {}
    corrected: dict[str, int] = {}
    unknown_gpus: dict[str, int] = {}
    examples: dict[str, list[str]] = {}


class NormalizedCatalog(Struct, frozen=True, kw_only=True):
    """The result of normalising one source: offers (sorted, stable) and what was done."""

    offers: tuple[Offer, ...]
    stats: SourceStats


class NormalizeContext(Struct, frozen=True, kw_only=True):
    """Reference data the normaliser needs (all values, loaded by adapters)."""

    gpus: GpuCatalog
    providers: Mapping[str, ProviderInfo] = {}
    networks: tuple[NetworkRule, ...] = ()


class _Tally:
    """Mutable counters used while one batch is normalised (local to one call)."""

    def __init__(self) -> None:
        self.dropped: Counter[str] = Counter()
        self.corrected: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)

    def _example(self, reason: str, ref: str) -> None:
        if ref and len(self.examples[reason]) < EXAMPLES_PER_REASON:
            self.examples[reason].append(ref)

    def drop(self, reason: str, ref: str) -> None:
        self.dropped[reason] += 1
        self._example(reason, ref)

    def correct(self, reason: str, ref: str) -> None:
        self.corrected[reason] += 1
        self._example(reason, ref)


# --- interconnect and billing ----------------------------------------------------------------

_NVSWITCH_FAMILIES = frozenset({"H100", "H200", "B200", "B300", "GB200"})


def default_interconnect(spec: GpuSpec | None, gpu_count: int) -> Interconnect:
    """The intra-node GPU link assumed when no instance rule says otherwise.

    One GPU: ``none``. SXM Hopper/Blackwell boards (HGX H100/H200/B200) connect all GPUs
    through NVSwitch (NVIDIA HGX datasheets); A100 SXM: NVSwitch on 8/16-GPU boards, direct
    NVLink on 4-GPU boards (NVIDIA A100 datasheet, HGX A100 4-/8-GPU); V100 SXM2: NVLink
    hybrid cube-mesh. H100 NVL: NVLink bridges join pairs only (gpu-specs README), so
    only a 2-GPU instance is one NVLink domain. AMD OAM parts: Infinity Fabric. Intel Gaudi:
    ``roce`` (its integrated RoCE ports link the accelerators of a server). PCIe cards
    (including those with optional 2-way bridges, which clouds do not guarantee): ``pcie``.
    """
    if gpu_count <= 1:
        return "none"
    if spec is None:
        return "unknown"
    if spec.vendor == "amd" and spec.form_factor == "oam":
        return "infinity-fabric"
    if spec.vendor == "intel":
        return "roce"  # Gaudi: integrated RoCE v2 ports, all-to-all inside the server
    if spec.form_factor in ("sxm", "superchip"):
        if spec.family in _NVSWITCH_FAMILIES:
            return "nvswitch"
        if spec.family == "A100":
            return "nvswitch" if gpu_count >= 8 else "nvlink"
        return "nvlink"
    if spec.form_factor == "nvl":
        return "nvlink" if gpu_count == 2 else "pcie"
    if spec.vendor == "nvidia":
        return "pcie"
    return "unknown"


def match_network_rule(
    rules: Sequence[NetworkRule], provider: str, instance_type: str
) -> NetworkRule | None:
    """The first rule of this provider whose glob matches the instance type (case-insensitive)."""
    name = instance_type.lower()
    for rule in rules:
        if rule.provider == provider and fnmatchcase(name, rule.pattern.lower()):
            return rule
    return None


# --- row normalisation -----------------------------------------------------------------------


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


class _Row(Struct, kw_only=True):
    """A row after per-row normalisation, before collapsing (internal)."""

    raw: RawOffer
    gpu: str
    gpu_known: bool
    spec: GpuSpec | None
    gpu_count: int
    memory_bytes: int
    exposed_bytes: int
    price: float
    spot: float | None


def _resolve_memory(
    ctx: NormalizeContext, raw: RawOffer, name: str, count: int, tally: _Tally
) -> tuple[GpuSpec | None, str, int | None]:
    """Resolve the GPU and the usable per-GPU reported memory (MiB) for a row."""
    reported = raw.gpu_memory_mib if raw.gpu_memory_mib and raw.gpu_memory_mib > 0 else None
    if reported is not None and raw.gpu_memory_mib_is_total and count > 1:
        reported //= count
        tally.correct("memory_total_as_per_gpu", raw.ref)
    res = resolve_gpu_detailed(ctx.gpus, name, reported, raw.hints)
    if res.spec is None:
        # Unknown model: its memory cannot be validated; the source's per-GPU claim is kept.
        return None, res.canonical_id, reported
    if res.basis == "memory":
        tally.correct("gpu_variant_from_memory", raw.ref)
    elif res.basis == "hint":
        tally.correct("gpu_variant_from_instance_name", raw.ref)
    elif res.basis == "default" and len(ctx.gpus.variants(res.spec.family)) > 1:
        tally.correct("gpu_variant_assumed_default", raw.ref)
    if "memory_matches_no_variant" in res.conflicts and reported is not None:
        per_gpu = reported // count if count > 1 and reported % count == 0 else None
        if per_gpu is not None and any(
            memory_matches(v, per_gpu) for v in ctx.gpus.variants(res.spec.family)
        ):
            again = resolve_gpu_detailed(ctx.gpus, name, per_gpu, raw.hints)
            if again.spec is not None and not again.conflicts:
                tally.correct("memory_total_as_per_gpu", raw.ref)
                return again.spec, again.canonical_id, per_gpu
        tally.correct("memory_implausible_ignored", raw.ref)
        return res.spec, res.canonical_id, None
    if "memory_contradicts_name" in res.conflicts:
        tally.correct("memory_contradicts_name", raw.ref)
        return res.spec, res.canonical_id, None
    return res.spec, res.canonical_id, reported


def _normalise_row(ctx: NormalizeContext, raw: RawOffer, tally: _Tally) -> _Row | None:
    if raw.drop_reason:
        tally.drop(raw.drop_reason, raw.ref)
        return None
    name = (raw.accelerator_name or "").strip()
    count_raw = raw.accelerator_count
    if not name or count_raw is None or count_raw == 0:
        tally.drop("no_gpu", raw.ref)
        return None
    if name.lower().startswith("tpu"):
        tally.drop("tpu", raw.ref)
        return None
    if not math.isfinite(count_raw) or count_raw < 0 or count_raw != int(count_raw):
        tally.drop("bad_gpu_count", raw.ref)
        return None
    count = int(count_raw)
    if count > MAX_GPU_COUNT:
        tally.drop("bad_gpu_count", raw.ref)
        return None
    price = raw.price_per_hour_usd
    if price is None or math.isnan(price):
        tally.drop("missing_price", raw.ref)
        return None
    if price <= 0:
        tally.drop("nonpositive_price", raw.ref)
        return None
    if not math.isfinite(price) or price > MAX_PRICE_PER_HOUR_USD:
        tally.drop("absurd_price", raw.ref)
        return None
    spec, gpu_id, reported_mib = _resolve_memory(ctx, raw, name, count, tally)
    if spec is None:
        tally.unknown[gpu_id] += 1
        mem_gb_match = re.search(r"-(\d+)GB$", gpu_id)
        memory_bytes = int(mem_gb_match.group(1)) * 2**30 if mem_gb_match else 0
        exposed = reported_mib * MIB if reported_mib else memory_bytes
    else:
        memory_bytes = spec.memory_bytes
        exposed = spec.memory_exposed_bytes
        if reported_mib is not None and reported_mib * MIB < exposed:
            # A cloud that reports less than the table (AWS L40S 45,776 MiB) is believed:
            # fit checks use the smaller, more conservative figure.
            exposed = reported_mib * MIB
    spot = _finite(raw.spot_price_per_hour_usd)
    if raw.price_basis == "gpu":
        price = price * count
        spot = spot * count if spot is not None else None
        tally.correct("price_per_gpu_scaled", raw.ref)
    if spot is not None:
        if spot >= SPOT_PLACEHOLDER_MIN_USD or spot <= 0:
            tally.correct("spot_placeholder", raw.ref)
            spot = None
        elif spot > price:
            tally.correct("spot_above_on_demand", raw.ref)
            spot = None
        elif spot == price:
            tally.correct("spot_equals_on_demand", raw.ref)
            spot = None
    return _Row(
        raw=raw,
        gpu=gpu_id,
        gpu_known=spec is not None,
        spec=spec,
        gpu_count=count,
        memory_bytes=memory_bytes,
        exposed_bytes=exposed,
        price=price,
        spot=spot,
    )


# --- batch steps -----------------------------------------------------------------------------

_COUNT_TOKEN = re.compile(r"\d+\s*x|x\s*\d+|\d+gpu|\d+-gpu", re.IGNORECASE)


def _size_family(instance_type: str) -> str:
    """The instance type with its GPU-count token blanked (``2x_A100_SECURE`` -> ``Nx_...``)."""
    return _COUNT_TOKEN.sub("N", instance_type)


_SIZED_ID = re.compile(r"^(.+)-(\d+)GB$")


def _unify_unknown_ids(rows: list[_Row], tally: _Tally) -> None:
    """An unknown GPU named without a size (shadeform "A5000") takes the size the same model
    has elsewhere in the batch ("RTXA5000-24GB") when that size is the only one seen; with
    two or more sizes (RTX A2000 6 GB and 12 GB) it stays as named
    (``gpu_id_size_from_batch``)."""
    sizes: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        sized = _SIZED_ID.match(row.gpu)
        if not row.gpu_known and sized is not None:
            sizes[sized.group(1)].add(row.gpu)
    for row in rows:
        if row.gpu_known or _SIZED_ID.match(row.gpu):
            continue
        seen = sizes.get(row.gpu, set())
        if len(seen) == 1:
            row.gpu = next(iter(seen))
            sized = _SIZED_ID.match(row.gpu)
            if sized is not None and not row.memory_bytes:
                row.memory_bytes = int(sized.group(2)) * 2**30
                row.exposed_bytes = row.exposed_bytes or row.memory_bytes
            tally.correct("gpu_id_size_from_batch", row.raw.ref)


def _scale_unscaled_prices(rows: list[_Row], tally: _Tally) -> None:
    """Step 7: one price for every size of a family means the price is per GPU."""
    groups: dict[tuple[str, str, str, str], list[_Row]] = defaultdict(list)
    for row in rows:
        key = (row.raw.provider, row.raw.region, row.gpu, _size_family(row.raw.instance_type))
        groups[key].append(row)
    for group in groups.values():
        counts = {r.gpu_count for r in group}
        prices = {r.price for r in group}
        if len(counts) >= 2 and len(prices) == 1:
            for row in group:
                if row.gpu_count > 1:
                    row.price *= row.gpu_count
                    if row.spot is not None:
                        row.spot *= row.gpu_count
                    tally.correct("price_not_scaled_by_gpu_count", row.raw.ref)


def _drop_implausible(rows: list[_Row], tally: _Tally) -> list[_Row]:
    """Step 8: prices far below the batch median for that GPU."""
    per_gpu: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.gpu_known:
            per_gpu[(row.raw.provider, row.gpu)].append(row.price / row.gpu_count)
    medians = {
        key: statistics.median(values)
        for key, values in per_gpu.items()
        if len(values) >= MIN_OFFERS_FOR_MEDIAN
    }
    kept: list[_Row] = []
    for row in rows:
        median = medians.get((row.raw.provider, row.gpu))
        if median is not None:
            if row.price / row.gpu_count < IMPLAUSIBLE_ON_DEMAND_FRACTION * median:
                tally.drop("implausible_price", row.raw.ref)
                continue
            if row.spot is not None and row.spot / row.gpu_count < (
                IMPLAUSIBLE_SPOT_FRACTION * median
            ):
                tally.correct("spot_implausible", row.raw.ref)
                row.spot = None
        kept.append(row)
    return kept


def _to_offer(ctx: NormalizeContext, rows: list[_Row], source: str, fetched_at: str) -> Offer:
    first = rows[0]
    raw = first.raw
    zones = tuple(sorted({r.raw.zone for r in rows if r.raw.zone}))
    price = min(r.price for r in rows)
    spots = [r.spot for r in rows if r.spot is not None]
    spot = min(spots) if spots else None
    provider = ctx.providers.get(raw.provider)
    rule = match_network_rule(ctx.networks, raw.provider, raw.instance_type)
    interconnect = raw.interconnect or (rule.interconnect if rule else None)
    network = raw.network or (rule.network if rule else None)
    increment = raw.billing_increment_seconds or (
        provider.billing_increment_seconds if provider else DEFAULT_BILLING_INCREMENT_SECONDS
    )
    minimum = raw.billing_minimum_seconds
    if minimum is None:
        minimum = provider.billing_minimum_seconds if provider else DEFAULT_BILLING_MINIMUM_SECONDS
    return Offer(
        provider=raw.provider,
        instance_type=raw.instance_type,
        region=raw.region,
        zone=zones[0] if len(zones) == 1 else None,
        zones=zones,
        gpu=first.gpu,
        gpu_known=first.gpu_known,
        gpu_count=first.gpu_count,
        gpu_memory_bytes=first.memory_bytes,
        gpu_memory_exposed_bytes=min(r.exposed_bytes for r in rows),
        vcpus=float(raw.vcpus or 0.0),
        ram_bytes=round((raw.ram_gib or 0.0) * 2**30),
        price_per_hour_usd=round(price, 6),
        spot_price_per_hour_usd=round(spot, 6) if spot is not None else None,
        interconnect=interconnect or default_interconnect(first.spec, first.gpu_count),
        network=network,
        billing_increment_seconds=increment,
        billing_minimum_seconds=minimum,
        source=source,
        fetched_at=fetched_at,
    )


def offer_sort_key(offer: Offer) -> tuple[str, str, str, str, int]:
    """The stable order offers are kept in (provider, region, instance type, GPU, count)."""
    return (offer.provider, offer.region, offer.instance_type, offer.gpu, offer.gpu_count)


def normalize_offers(
    rows: Iterable[RawOffer], ctx: NormalizeContext, *, source: str, fetched_at: str
) -> NormalizedCatalog:
    """Normalise one source's rows into offers, counting every drop and correction.

    Args:
        rows: the source's rows (see :class:`RawOffer`).
        ctx: GPU table, provider billing facts and instance network rules.
        source: source name stamped on each offer (``skypilot``, ``bundled``...).
        fetched_at: ISO-8601 UTC time the rows were fetched, stamped on each offer.

    Returns:
        Offers sorted by :func:`offer_sort_key` and the :class:`SourceStats`.
    """
    tally = _Tally()
    rows_in = 0
    normalised: list[_Row] = []
    for raw in rows:
        rows_in += 1
        row = _normalise_row(ctx, raw, tally)
        if row is not None:
            normalised.append(row)
    _unify_unknown_ids(normalised, tally)
    _scale_unscaled_prices(normalised, tally)
    normalised = _drop_implausible(normalised, tally)
    groups: dict[tuple[str, str, str, str, int], list[_Row]] = defaultdict(list)
    for row in normalised:
        key = (row.raw.provider, row.raw.instance_type, row.raw.region, row.gpu, row.gpu_count)
        groups[key].append(row)
    offers = sorted(
        (_to_offer(ctx, group, source, fetched_at) for group in groups.values()),
        key=offer_sort_key,
    )
    unknown: Counter[str] = Counter(o.gpu for o in offers if not o.gpu_known)
    stats = SourceStats(
        rows_in=rows_in,
        offers_out=len(offers),
        rows_collapsed=len(normalised) - len(groups),
        dropped=dict(sorted(tally.dropped.items())),
        corrected=dict(sorted(tally.corrected.items())),
        unknown_gpus=dict(sorted(unknown.items())),
        examples={k: list(v) for k, v in sorted(tally.examples.items())},
    )
    return NormalizedCatalog(offers=tuple(offers), stats=stats)


def drop_unknown_gpus(
    catalog: NormalizedCatalog, reason: str = "gpu_spec_unknown"
) -> tuple[NormalizedCatalog, dict[str, int]]:
    """Remove the offers of GPUs the table lacks, counting them under ``reason``.

    Only for the bundled snapshot, whose GPUs must all have specs (issue 2 item 5); live
    sources keep unknown GPUs flagged ``gpu_known=False``. Counted per offer (rows are
    already collapsed), with up to ``EXAMPLES_PER_REASON`` examples.

    Returns:
        The catalog without those offers, and the dropped offers per GPU id.
    """
    dropped = Counter(o.gpu for o in catalog.offers if not o.gpu_known)
    if not dropped:
        return catalog, {}
    kept = tuple(o for o in catalog.offers if o.gpu_known)
    stats = catalog.stats
    examples = dict(stats.examples)
    examples[reason] = [
        f"{o.provider}/{o.instance_type} ({o.gpu})" for o in catalog.offers if not o.gpu_known
    ][:EXAMPLES_PER_REASON]
    stats = structs.replace(
        stats,
        offers_out=len(kept),
        dropped=dict(sorted({**stats.dropped, reason: sum(dropped.values())}.items())),
        unknown_gpus={},
        examples=dict(sorted(examples.items())),
    )
    return NormalizedCatalog(offers=kept, stats=stats), dict(sorted(dropped.items()))


def restamp(offers: Iterable[Offer], **changes: object) -> tuple[Offer, ...]:
    """Copies of offers with fields replaced (e.g. ``source=...``, ``fetched_at=...``)."""
    return tuple(structs.replace(o, **changes) for o in offers)
