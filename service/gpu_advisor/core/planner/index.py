"""A columnar, read-only view of a catalog's offers, built once per catalog version.

Recommending over 50,000 offers in a few milliseconds rules out Python work per offer on each
request: the index groups identical offers (same GPU, count, exposed memory, interconnect and
cluster network -- :class:`~gpu_advisor.core.planner.topology.GroupKey`) so the plan search
runs once per group, and keeps prices, billing rules and names as numpy arrays so each request
prices every offer with a few vector operations. Building it is pure; callers that serve many
requests (the HTTP layer) build it once per catalog version and pass it to ``recommend``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np
from msgspec import structs
from numpy.typing import NDArray

from gpu_advisor.core.offers import Network, Offer
from gpu_advisor.core.planner.topology import GroupKey

CLUSTER_FABRICS = frozenset({"infiniband", "efa", "roce"})
"""Fabrics multi-node training can use (DESIGN "Topology and performance")."""


def cluster_network(network: Network | None) -> Network | None:
    """The offer's network when it is cluster-grade (InfiniBand / EFA / RoCE, flagged
    cluster-grade, with a bandwidth), else None."""
    if (
        network is None
        or not network.cluster_grade
        or network.fabric not in CLUSTER_FABRICS
        or network.gbit_per_s <= 0
    ):
        return None
    return network


def exposed_by_gpu(offers: Iterable[Offer]) -> dict[str, int]:
    """The smallest exposed memory per GPU any of ``offers`` reports, by canonical GPU id.

    Clouds report one GPU model's memory differently (AWS an L40S as 45,776 MiB where the
    driver total is 46,068 MiB; a cloud with ECC on an RTX A6000 as 48,384 MiB): the smallest
    figure is the conservative one (the normaliser believes a smaller cloud figure too,
    :mod:`gpu_advisor.core.normalize`)."""
    found: dict[str, int] = {}
    for offer in offers:
        known = found.get(offer.gpu)
        if known is None or offer.gpu_memory_exposed_bytes < known:
            found[offer.gpu] = offer.gpu_memory_exposed_bytes
    return found


def with_exposed(offers: Iterable[Offer], exposed: Mapping[str, int]) -> tuple[Offer, ...]:
    """``offers`` with each GPU's exposed memory set to ``exposed[gpu]`` (where given), so an
    answer plans -- and quotes -- one figure per GPU."""
    return tuple(
        structs.replace(o, gpu_memory_exposed_bytes=exposed[o.gpu])
        if o.gpu in exposed and exposed[o.gpu] != o.gpu_memory_exposed_bytes
        else o
        for o in offers
    )


def group_key(offer: Offer) -> GroupKey:
    """The planning group of one offer."""
    network = cluster_network(offer.network)
    return GroupKey(
        gpu=offer.gpu,
        gpu_count=offer.gpu_count,
        memory_exposed_bytes=offer.gpu_memory_exposed_bytes,
        interconnect=offer.interconnect,
        network_fabric=network.fabric if network else None,
        network_gbit_per_s=network.gbit_per_s if network else None,
    )


def _codes(values: Sequence[str]) -> tuple[tuple[str, ...], NDArray[np.intp]]:
    names = tuple(sorted(set(values)))
    lookup = {name: i for i, name in enumerate(names)}
    return names, _frozen(
        np.fromiter((lookup[v] for v in values), dtype=np.intp, count=len(values))
    )


_A = TypeVar("_A", bound=np.ndarray)


def _frozen(array: _A) -> _A:
    """Mark ``array`` read-only: the index is shared between requests."""
    array.flags.writeable = False
    return array


class RecommendationIndex:
    """Offers as columns; every array has one entry per offer, in ``offers`` order.

    Attributes:
        offers: the offers, each GPU's exposed memory set to the smallest figure any offer of
            that GPU reports (:func:`exposed_by_gpu`): one figure per GPU in an answer.
        groups: distinct planning groups; ``group_of[i]`` is offer ``i``'s group.
        gpus / gpu_code: distinct canonical GPU ids and each offer's position in them.
        providers / provider_code, regions / region_code: likewise.
        price_per_hour_usd: on-demand instance price.
        spot_price_per_hour_usd: spot instance price, NaN where none.
        vcpus_per_gpu: host vCPUs per GPU.
        name_rank: position of (provider, instance_type, region, zone) in sorted order: the
            final, deterministic tie-break; ``by_name`` lists offer positions in that order,
            ``gpu_code_by_name`` / ``group_by_name`` their GPU codes and planning groups.
        choice_code: each offer's (provider, instance_type) as a small int: offers with the
            same code are the same choice in different regions or zones.
        class_of: each offer's pricing class -- offers with the same group, provider and billing
            rule differ only in price, so the plan option that serves an objective best is
            the same for all of them; ``class_group`` / ``class_provider`` /
            ``class_increment_seconds`` / ``class_minimum_seconds`` describe each class.
    """

    __slots__ = (
        "by_name",
        "choice_code",
        "class_group",
        "class_increment_seconds",
        "class_minimum_seconds",
        "class_of",
        "class_provider",
        "gpu_code",
        "gpu_code_by_name",
        "gpus",
        "group_by_name",
        "group_of",
        "groups",
        "name_rank",
        "offers",
        "price_per_hour_usd",
        "provider_code",
        "providers",
        "region_code",
        "regions",
        "spot_price_per_hour_usd",
        "vcpus_per_gpu",
    )

    def __init__(self, offers: Sequence[Offer]) -> None:
        # one exposed-memory figure per GPU in every answer (the smallest any offer reports)
        self.offers: tuple[Offer, ...] = with_exposed(offers, exposed_by_gpu(offers))
        keys = [group_key(o) for o in self.offers]
        group_ids: dict[GroupKey, int] = {}
        for key in keys:
            group_ids.setdefault(key, len(group_ids))
        self.groups: tuple[GroupKey, ...] = tuple(group_ids)
        n = len(self.offers)
        self.group_of = _frozen(np.fromiter((group_ids[k] for k in keys), dtype=np.intp, count=n))
        self.gpus, self.gpu_code = _codes([o.gpu for o in self.offers])
        self.providers, self.provider_code = _codes([o.provider for o in self.offers])
        self.regions, self.region_code = _codes([o.region for o in self.offers])
        self.price_per_hour_usd = _frozen(
            np.array([o.price_per_hour_usd for o in self.offers], dtype=np.float64)
        )
        self.spot_price_per_hour_usd = _frozen(
            np.array(
                [
                    o.spot_price_per_hour_usd if o.spot_price_per_hour_usd else np.nan
                    for o in self.offers
                ],
                dtype=np.float64,
            )
        )
        self.vcpus_per_gpu = _frozen(
            np.array([o.vcpus / max(o.gpu_count, 1) for o in self.offers], dtype=np.float64)
        )
        class_ids: dict[tuple[int, int, int, int], int] = {}
        class_keys = [
            (
                int(self.group_of[i]),
                int(self.provider_code[i]),
                self.offers[i].billing_increment_seconds,
                self.offers[i].billing_minimum_seconds,
            )
            for i in range(n)
        ]
        for class_key in class_keys:
            class_ids.setdefault(class_key, len(class_ids))
        self.class_of = _frozen(
            np.fromiter((class_ids[c] for c in class_keys), dtype=np.intp, count=n)
        )
        rows = list(class_ids)
        self.class_group = _frozen(np.array([r[0] for r in rows], dtype=np.intp))
        self.class_provider = _frozen(np.array([r[1] for r in rows], dtype=np.intp))
        self.class_increment_seconds = _frozen(np.array([r[2] for r in rows], dtype=np.float64))
        self.class_minimum_seconds = _frozen(np.array([r[3] for r in rows], dtype=np.float64))
        names = sorted(
            range(n),
            key=lambda i: (
                self.offers[i].provider,
                self.offers[i].instance_type,
                self.offers[i].region,
                self.offers[i].zone or "",
            ),
        )
        by_name = np.asarray(names, dtype=np.intp)
        rank = np.empty(n, dtype=np.int64)
        rank[by_name] = np.arange(n, dtype=np.int64)
        self.name_rank = _frozen(rank)
        self.by_name = _frozen(by_name)
        self.gpu_code_by_name = _frozen(self.gpu_code[by_name])
        self.group_by_name = _frozen(self.group_of[by_name])
        _, choices = _codes([f"{o.provider}\0{o.instance_type}" for o in self.offers])
        self.choice_code = _frozen(choices.astype(np.int64))

    def __len__(self) -> int:
        return len(self.offers)


def build_recommendation_index(offers: Sequence[Offer]) -> RecommendationIndex:
    """Index ``offers`` (pure; O(n log n)). Build once per catalog version and reuse."""
    return RecommendationIndex(offers)
