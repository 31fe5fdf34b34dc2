"""The target of ``POST /v1/check``: its three forms and their offers in the catalog.

* ``{provider, instance_type}``: that instance type in any region of that provider;
* ``{instance_types}``: any of those instance types on any provider (or on ``provider``);
* ``{gpu, gpu_count, nodes}``: a reference instance like ``/v1/estimate`` plans on
  (:func:`gpu_advisor.core.estimate.reference_offer`: the GPU's own NVLink, InfiniBand between
  nodes), priced as the cheapest catalog offer with that GPU and GPU count -- or, without such
  an offer, with its price unknown.

``nodes`` bounds the nodes (instances) used in every form (:data:`DEFAULT_TARGET_NODES`: 1).
Names are matched case-insensitively; a name that is not in the catalog is a
:class:`~gpu_advisor.core.errors.NotFoundError` with the closest names (``difflib``). Pure.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Final, Literal

import msgspec
from msgspec import Struct

from gpu_advisor.core.errors import InvalidSpecError, NotFoundError, UnknownGpuError
from gpu_advisor.core.estimate import REFERENCE_PROVIDER, check_gpus_per_node, reference_offer
from gpu_advisor.core.gpus import GpuCatalog, resolve_gpu
from gpu_advisor.core.offers import Offer, ProviderInfo
from gpu_advisor.core.planner.index import cluster_network
from gpu_advisor.core.planner.report import describe
from gpu_advisor.core.spec import CheckTarget

TargetForm = Literal["instance_type", "instance_types", "gpu"]
DEFAULT_TARGET_NODES: Final = 1


class TargetInfo(Struct, frozen=True, kw_only=True):
    """The target as resolved against the catalog.

    Attributes:
        form: which form of ``target`` was given.
        description: ``aws p5.48xlarge`` / ``2 nodes × 8 × H100-SXM-80GB`` / a list.
        max_nodes: most nodes (instances) the plan may use.
        offers: catalog offers of the target (gpu form: offers with that GPU and count).
        gpu: the canonical GPU id when the target has one GPU type.
        priced_as: gpu form: the catalog offer whose price and billing rule price the
            reference instance (null: price unknown).
        priced_as_cluster: gpu form with ``nodes`` above 1, when ``priced_as`` has no
            cluster network (it cannot be one node of several): the cheapest offer of the same
            shape that has one, which prices the plans on more than one node (null otherwise).
    """

    form: TargetForm
    description: str
    max_nodes: int
    offers: int
    gpu: str | None = None
    priced_as: Offer | None = None
    priced_as_cluster: Offer | None = None


class ResolvedTarget(Struct, frozen=True, kw_only=True):
    """The offers to plan on and the facts to plan with (not part of the response)."""

    info: TargetInfo
    offers: tuple[Offer, ...]
    providers: dict[str, ProviderInfo] | None = None
    price_known: bool = True


def target_form(target: CheckTarget) -> TargetForm:
    """Which of the three forms ``target`` is.

    Raises:
        InvalidSpecError: naming the field that does not belong, or ``target`` when no form
            is complete.
    """
    forms = (
        "give exactly one of {provider, instance_type}, {gpu, gpu_count, nodes} or {instance_types}"
    )
    if target.gpu is not None:
        for field in ("provider", "instance_type", "instance_types"):
            if getattr(target, field) is not None:
                raise InvalidSpecError(
                    f"{field} cannot be combined with gpu; {forms}", field=f"target.{field}"
                )
        return "gpu"
    if target.gpu_count is not None:
        raise InvalidSpecError(f"gpu_count needs gpu; {forms}", field="target.gpu_count")
    if target.instance_types is not None:
        if target.instance_type is not None:
            raise InvalidSpecError(
                f"instance_type cannot be combined with instance_types; {forms}",
                field="target.instance_type",
            )
        return "instance_types"
    if target.instance_type is not None:
        if target.provider is None:
            raise InvalidSpecError(
                "instance_type needs its provider (or list it in instance_types)",
                field="target.provider",
            )
        return "instance_type"
    raise InvalidSpecError(forms, field="target")


def _folded(text: str) -> str:
    return text.strip().casefold()


def _not_found(kind: str, name: str, known: Sequence[str], field: str) -> NotFoundError:
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; GET /v1/offers lists them"
    return NotFoundError(f"no {kind} {name!r} in the catalog{hint}", field=field)


def _instance_offers(
    offers: Sequence[Offer], provider: str | None, names: Sequence[str], field: str
) -> tuple[Offer, ...]:
    pool = offers
    if provider is not None:
        pool = [o for o in offers if _folded(o.provider) == _folded(provider)]
        if not pool:
            raise _not_found("provider", provider, [o.provider for o in offers], "target.provider")
    found: list[Offer] = []
    for i, name in enumerate(names):
        matched = [o for o in pool if _folded(o.instance_type) == _folded(name)]
        if not matched:
            label = field if len(names) == 1 and field.endswith("instance_type") else f"{field}.{i}"
            kind = f"instance type of {provider}" if provider is not None else "instance type"
            raise _not_found(kind, name, [o.instance_type for o in pool], label)
        found.extend(matched)
    return tuple(found)


def resolve_target(
    target: CheckTarget, offers: Sequence[Offer], gpus: GpuCatalog
) -> ResolvedTarget:
    """The target's offers from the catalog (or the priced reference instance).

    Raises:
        InvalidSpecError: not exactly one form (see :func:`target_form`).
        NotFoundError: an unknown provider (``target.provider``) or instance type
            (``target.instance_type`` / ``target.instance_types.<i>``), with close names.
        UnknownGpuError: an unknown GPU (``target.gpu``).
        InvalidSpecError: more GPUs per node than real nodes hold (``target.gpu_count``).
    """
    form = target_form(target)
    max_nodes = target.nodes or DEFAULT_TARGET_NODES
    match form:
        case "instance_type":
            names = [target.instance_type or ""]
            found = _instance_offers(offers, target.provider, names, "target.instance_type")
            description = f"{found[0].provider} {found[0].instance_type}"
        case "instance_types":
            names = list(target.instance_types or [])
            found = _instance_offers(offers, target.provider, names, "target.instance_types")
            description = ", ".join(dict.fromkeys(o.instance_type for o in found))
            if target.provider is not None:
                description = f"{found[0].provider} {description}"
        case "gpu":
            return _gpu_target(target, offers, gpus, max_nodes)
    gpu_ids = {o.gpu for o in found}
    return ResolvedTarget(
        info=TargetInfo(
            form=form,
            description=description + (f", up to {max_nodes} nodes" if max_nodes > 1 else ""),
            max_nodes=max_nodes,
            offers=len(found),
            gpu=next(iter(gpu_ids)) if len(gpu_ids) == 1 else None,
        ),
        offers=found,
    )


CLUSTER_REGION: Final = "reference-cluster"
"""Region of the reference instance that prices multi-node plans when the cheapest offer of
the target's shape has no cluster network (the one-node reference is ``reference``)."""


def _price_order(offer: Offer) -> tuple[float, str, str, str]:
    return (offer.price_per_hour_usd, offer.provider, offer.instance_type, offer.region)


def _priced(reference: Offer, by: Offer, note: str = "") -> Offer:
    """``reference`` at ``by``'s price and billing rule."""
    return msgspec.structs.replace(
        reference,
        price_per_hour_usd=by.price_per_hour_usd,
        billing_increment_seconds=by.billing_increment_seconds,
        billing_minimum_seconds=by.billing_minimum_seconds,
        source=f"reference priced as {describe(by)}{note}",
    )


def _gpu_target(
    target: CheckTarget, offers: Sequence[Offer], gpus: GpuCatalog, max_nodes: int
) -> ResolvedTarget:
    spec = resolve_gpu(gpus, target.gpu or "")
    if spec is None:
        raise UnknownGpuError(
            f"unknown GPU {target.gpu!r}; GET /v1/gpus lists the GPU ids and aliases",
            field="target.gpu",
        )
    count = target.gpu_count or 1
    check_gpus_per_node(spec, count, "target.gpu_count")
    same = [o for o in offers if o.gpu == spec.id and o.gpu_count == count]
    cheapest = min(same, key=_price_order, default=None)
    cluster_priced: Offer | None = None
    references: tuple[Offer, ...]
    # one node needs no network between nodes: the reference shows none then
    reference = reference_offer(spec, count, clustered=max_nodes > 1)
    if cheapest is None:
        references = (reference,)
    elif max_nodes == 1 or cluster_network(cheapest.network) is not None:
        references = (_priced(reference, cheapest),)
    else:
        # The cheapest offer of this shape cannot be one node of several: a one-node plan is
        # priced on it, a plan on more nodes on the cheapest offer with a cluster network --
        # a price someone sells that cluster at. With none in the catalog, the multi-node
        # price stays the cheapest one, and the reference says so.
        clustered = [o for o in same if cluster_network(o.network) is not None]
        cluster_priced = min(clustered, key=_price_order, default=None)
        if cluster_priced is None:
            note = " (no offer of this shape has a cluster network)"
            references = (_priced(reference, cheapest, note),)
        else:
            single = _priced(reference_offer(spec, count, clustered=False), cheapest)
            multi = _priced(reference, cluster_priced)
            references = (single, msgspec.structs.replace(multi, region=CLUSTER_REGION))
    per_node = f" per node, up to {max_nodes} nodes" if max_nodes > 1 else ""
    return ResolvedTarget(
        info=TargetInfo(
            form="gpu",
            description=f"{count} × {spec.id}{per_node}",
            max_nodes=max_nodes,
            offers=len(same),
            gpu=spec.id,
            priced_as=cheapest,
            priced_as_cluster=cluster_priced,
        ),
        offers=references,
        providers={REFERENCE_PROVIDER.name: REFERENCE_PROVIDER},
        price_known=cheapest is not None,
    )
