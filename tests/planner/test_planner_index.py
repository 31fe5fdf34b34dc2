"""The offer index groups interchangeable offers and orders names deterministically."""

from __future__ import annotations

from gpu_advisor.core.offers import Network
from gpu_advisor.core.planner.index import build_recommendation_index

from .fixtures import INFINIBAND, make_offer


def test_groups_ignore_price_and_region_but_not_the_network() -> None:
    offers = [
        make_offer(price=10.0, region="a"),
        make_offer(price=12.0, region="b", provider="other"),
        make_offer(network=INFINIBAND),
        # Ethernet is not a cluster fabric: planned like no network at all
        make_offer(network=Network(fabric="ethernet", gbit_per_s=100.0)),
        make_offer("L4-24GB", 1, interconnect="pcie"),
    ]
    index = build_recommendation_index(offers)
    assert len(index.groups) == 3
    assert index.group_of.tolist() == [0, 0, 1, 0, 2]
    assert index.groups[1].network_gbit_per_s == 3200.0


def test_name_rank_is_provider_instance_region_order() -> None:
    offers = [
        make_offer(provider="b", instance_type="x", region="r1"),
        make_offer(provider="a", instance_type="y", region="r2"),
        make_offer(provider="a", instance_type="y", region="r1"),
    ]
    index = build_recommendation_index(offers)
    assert index.name_rank.tolist() == [2, 1, 0]
    assert not index.price_per_hour_usd.flags.writeable
