"""The bundled snapshot has specs for every GPU it offers (issue 2 item 5); GPUs without cited
specs are dropped from it with ``gpu_spec_unknown`` - and only from it."""

from __future__ import annotations

import csv
import json
import re
from importlib import resources

from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.catalog.sources import BundledSource
from gpu_advisor.core.normalize import (
    NormalizeContext,
    RawOffer,
    drop_unknown_gpus,
    normalize_offers,
)

from .conftest import SKYPILOT_DIR

GPUS = load_gpu_catalog()
META = json.loads(resources.files("gpu_advisor.data").joinpath("offers.meta.json").read_text())


def _source_keys(names: set[str]) -> set[tuple[str, str, str]]:
    """(cloud, instance type, region) of priced GPU rows whose accelerator name, compacted,
    is one of ``names`` - read from the SkyPilot files with the csv module only."""
    keys: set[tuple[str, str, str]] = set()
    for path in [*SKYPILOT_DIR.glob("*/vms.csv"), *SKYPILOT_DIR.glob("v6-fallback/*/vms.csv")]:
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                name = re.sub(r"[^A-Z0-9]", "", (row.get("AcceleratorName") or "").upper())
                count = float(row.get("AcceleratorCount") or 0)
                if name in names and row.get("Price") and count > 0:
                    region = " ".join(row["Region"].split())
                    keys.add((path.parent.name, row["InstanceType"], region))
    return keys


def test_every_bundled_gpu_is_in_the_table() -> None:
    offers = BundledSource().load().offers
    assert offers
    assert all(o.gpu_known for o in offers)
    assert {o.gpu for o in offers} <= set(GPUS.ids())


def test_dropped_gpus_are_recorded_per_id() -> None:
    unknown: dict[str, int] = META["gpu_spec_unknown"]
    assert META["stats"]["dropped"]["gpu_spec_unknown"] == sum(unknown.values())
    assert META["stats"]["unknown_gpus"] == {}
    for gpu_id in unknown:
        assert GPUS.get(gpu_id) is None
    # RTX A5000: spelled "A5000" (shadeform, primeintellect) and "RTXA5000" (runpod, cudo,
    # vast) upstream; one id, every priced region of every such instance type dropped.
    assert unknown["RTXA5000-24GB"] == len(_source_keys({"A5000", "RTXA5000"})) == 75
    assert "A5000" not in unknown
    assert "RTXA5000" not in unknown


def test_rtx_a4000_kept_under_one_id_from_every_provider() -> None:
    offers = [o for o in BundledSource().load().offers if o.gpu == "RTXA4000-16GB"]
    expected = _source_keys({"A4000", "RTXA4000"})
    assert len(offers) == len(expected) == 63
    assert {o.provider for o in offers} == {c for c, _, _ in expected}


def _raw(provider: str, name: str, memory_mib: int | None, instance: str) -> RawOffer:
    return RawOffer(
        provider=provider,
        instance_type=instance,
        region="r",
        accelerator_name=name,
        accelerator_count=1,
        gpu_memory_mib=memory_mib,
        price_per_hour_usd=0.3,
    )


def test_live_sources_keep_unknown_gpus_under_one_spelling() -> None:
    ctx = NormalizeContext(gpus=GPUS)
    res = normalize_offers(
        [
            _raw("shadeform", "A5000", None, "a"),  # no size: takes the batch's only size
            _raw("runpod", "RTXA5000", 24576, "b"),
            _raw("vast", "RTX A2000", 6144, "c"),
            _raw("vast", "RTX A2000", 12288, "d"),
            _raw("shadeform", "A2000", None, "e"),  # two sizes seen: stays as named
        ],
        ctx,
        source="skypilot",
        fetched_at="2026-11-30T00:00:00Z",
    )
    gpus = {o.instance_type: (o.gpu, o.gpu_known, o.gpu_memory_bytes) for o in res.offers}
    assert gpus == {
        "a": ("RTXA5000-24GB", False, 24 * 2**30),
        "b": ("RTXA5000-24GB", False, 24 * 2**30),
        "c": ("RTXA2000-6GB", False, 6 * 2**30),
        "d": ("RTXA2000-12GB", False, 12 * 2**30),
        "e": ("RTXA2000", False, 0),
    }
    assert res.stats.corrected["gpu_id_size_from_batch"] == 1
    assert res.stats.unknown_gpus == {
        "RTXA2000": 1,
        "RTXA2000-12GB": 1,
        "RTXA2000-6GB": 1,
        "RTXA5000-24GB": 2,
    }
    assert "gpu_spec_unknown" not in res.stats.dropped  # live sources never drop them

    bundled, dropped = drop_unknown_gpus(res)
    assert bundled.offers == ()
    assert dropped == res.stats.unknown_gpus
    assert bundled.stats.dropped["gpu_spec_unknown"] == 5
    assert bundled.stats.offers_out == 0
    assert len(bundled.stats.examples["gpu_spec_unknown"]) == 3


def test_a_gpu_cloud_with_multi_node_clusters_is_bundled() -> None:
    """Issue: at least one GPU cloud other than AWS/GCP offers cluster-grade networking."""
    offers = BundledSource().load().offers
    clouds = {
        o.provider
        for o in offers
        if o.network is not None and o.network.cluster_grade and o.provider not in {"aws", "gcp"}
    }
    assert "nebius" in clouds
    # Nebius GPU clusters: InfiniBand on gpu-h100-sxm / gpu-h200-sxm 8-GPU presets, 8 HCAs of
    # NDR 400 Gb/s = 3,200 Gbit/s per host (instance_networks.csv, SkyPilot nebius_infiniband)
    eight = [o for o in offers if o.provider == "nebius" and o.gpu_count == 8]
    assert eight
    for o in eight:
        assert o.network is not None
        assert (o.network.fabric, o.network.gbit_per_s) == ("infiniband", 8 * 400)
    # single-GPU presets cannot join a GPU cluster: no cluster network
    assert all(o.network is None for o in offers if o.provider == "nebius" and o.gpu_count == 1)


def test_every_offer_has_its_own_identity() -> None:
    # (provider, instance type, region) names one offer: a /v1/check target or an operator
    # reading the answer must be able to tell two offers apart. GCP attaches T4, V100, P100
    # and P4 to N1 machine types, so "n1-highmem-8" alone would name both 2 x T4 and 1 x V100
    # in one region; the offer is named with what it carries ("n1-highmem-8+T4:2").
    offers = BundledSource().load().offers
    keys = [(o.provider, o.instance_type, o.region) for o in offers]
    assert len(keys) == len(set(keys))
    n1 = [o for o in offers if o.provider == "gcp" and o.instance_type.startswith("n1-")]
    assert n1
    for offer in n1:
        _host, carried = offer.instance_type.split("+")
        accelerator, count = carried.split(":")
        assert int(count) == offer.gpu_count
        assert accelerator.upper() in offer.gpu.replace("-", "")
