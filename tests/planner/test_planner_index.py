"""The offer index groups interchangeable offers and orders names deterministically."""

from __future__ import annotations

import re

from gpu_advisor.core.offers import Network
from gpu_advisor.core.planner import recommend
from gpu_advisor.core.planner.index import build_recommendation_index
from gpu_advisor.core.spec import InferenceWorkload

from .fixtures import (
    GPUS,
    INFINIBAND,
    MIB,
    make_arch,
    make_offer,
    make_request,
    toy_estimate,
)


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


def test_one_exposed_memory_figure_per_gpu_in_an_answer() -> None:
    # AWS reports an L40S as 45,776 MiB (44.7 GiB), other clouds as the driver's 46,068 MiB
    # (45.0 GiB): every L40S offer of the answer is planned and quoted with the smaller.
    # 24e9 params: one GPU needs 48e9 B (44.7 GiB) of weights + 1.25 GiB of KV + 1 GiB
    # (toy estimator) > 44.7 GiB: the single L40S offers are rejected, the pair serves TP=2.
    aws = make_offer("L40S-48GB", 1, provider="aws", interconnect="pcie", exposed=45_776 * MIB)
    other = make_offer("L40S-48GB", 1, provider="other", interconnect="pcie")
    pair = make_offer("L40S-48GB", 2, provider="other", interconnect="pcie")
    assert other.gpu_memory_exposed_bytes == 46_068 * MIB
    index = build_recommendation_index([aws, other, pair])
    assert {o.gpu_memory_exposed_bytes for o in index.offers} == {45_776 * MIB}
    arch = make_arch(24 * 10**9, layers=40)
    workload = InferenceWorkload(context_length=8192)
    result = recommend(arch, make_request(workload), index, GPUS, {}, toy_estimate)
    [best] = result.recommendations
    assert best.offer.gpu_memory_exposed_bytes == 45_776 * MIB
    texts = [r.text for r in best.rationale] + [g.text for g in result.rejected]
    quoted = {m for t in texts for m in re.findall(r"(\d+\.\d) GiB (?:usable|exposes)", t)}
    quoted |= {m for t in texts for m in re.findall(r"exposes (\d+\.\d) GiB", t)}
    assert quoted == {"44.7"}
