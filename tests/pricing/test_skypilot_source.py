"""The skypilot source against a local HTTP server serving shared/data/skypilot-catalog-v7.

Every expected number below is derived from the CSV files with the csv module and a few lines
of plain logic in this file - never by calling the normaliser.
"""

from __future__ import annotations

import asyncio
import csv
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import pytest

from gpu_advisor.catalog.config import DEFAULT_SKYPILOT_CLOUDS, CatalogConfig
from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.catalog.http import make_client
from gpu_advisor.catalog.reference import load_network_rules, load_providers
from gpu_advisor.catalog.sources import SkyPilotSource, SourceResult
from gpu_advisor.core.normalize import NormalizeContext

from .conftest import SKYPILOT_DIR, CountingServer


def _rows(cloud: str) -> list[dict[str, str]]:
    with (SKYPILOT_DIR / cloud / "vms.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def _num(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def _fetch(server: CountingServer) -> SourceResult:
    async def run() -> SourceResult:
        config = CatalogConfig(sources=("skypilot",), skypilot_url=server.url)
        ctx = NormalizeContext(
            gpus=load_gpu_catalog(), providers=load_providers(), networks=load_network_rules()
        )
        async with make_client(config) as client:
            return await SkyPilotSource(config, client, ctx).fetch()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def result() -> SourceResult:
    server = CountingServer(SKYPILOT_DIR).start()
    try:
        return _fetch(server)
    finally:
        server.stop()


NON_GCP = [c for c in DEFAULT_SKYPILOT_CLOUDS if c != "gcp"]


def test_one_request_per_cloud(skypilot_server: CountingServer) -> None:
    _fetch(skypilot_server)
    assert sorted(skypilot_server.requests) == sorted(
        f"/{c}/vms.csv" for c in DEFAULT_SKYPILOT_CLOUDS
    )
    assert set(skypilot_server.requests.values()) == {1}


def test_every_row_is_an_offer_or_dropped_with_a_reason(result: SourceResult) -> None:
    stats = result.stats
    # rows_in: one per file row, except GCP where combined host+GPU rows replace paired rows.
    non_gcp_rows = sum(len(_rows(c)) for c in NON_GCP)
    gcp_offer_rows = sum(1 for o in result.offers if o.provider == "gcp")
    assert stats.rows_in >= non_gcp_rows + gcp_offer_rows
    used = stats.rows_in - sum(stats.dropped.values())
    # every row that is not dropped ends in exactly one offer (possibly shared by zone rows)
    assert used == stats.offers_out + stats.rows_collapsed


def test_cpu_rows_dropped_per_provider(result: SourceResult) -> None:
    expected_cpu = 0
    for cloud in NON_GCP:
        for row in _rows(cloud):
            count = _num(row.get("AcceleratorCount"))
            if not row.get("AcceleratorName") or not count:
                expected_cpu += 1
    gcp = _rows("gcp")
    # GCP: host rows of non-GPU families (A2/A3/A4/G2 host rows are paired or dropped apart)
    gcp_cpu = sum(
        1
        for r in gcp
        if r["InstanceType"] and not r["InstanceType"].startswith(("a2-", "a3-", "a4-", "g2-"))
    )
    assert result.stats.dropped["no_gpu"] == expected_cpu + gcp_cpu


def test_tpu_rows_dropped(result: SourceResult) -> None:
    tpu = sum(1 for r in _rows("gcp") if r["AcceleratorName"].lower().startswith("tpu"))
    assert tpu == 1584
    assert result.stats.dropped["tpu"] == tpu


def test_missing_on_demand_price_dropped(result: SourceResult) -> None:
    # AWS p5e.48xlarge rows carry no Price (README "Missing or placeholder prices")
    aws_missing = sum(1 for r in _rows("aws") if r["AcceleratorName"] and not r["Price"])
    other_missing = sum(
        1
        for c in NON_GCP
        if c != "aws"
        for r in _rows(c)
        if r.get("AcceleratorName") and _num(r.get("AcceleratorCount")) and not r.get("Price")
    )
    assert aws_missing > 0
    assert result.stats.dropped["missing_price"] == aws_missing + other_missing
    assert not any(o.instance_type == "p5e.48xlarge" for o in result.offers)


def test_offers_per_provider(result: SourceResult) -> None:
    by_provider = Counter(o.provider for o in result.offers)
    for cloud in NON_GCP:
        keys = {
            (r["InstanceType"], " ".join(r["Region"].split()), _num(r["AcceleratorCount"]))
            for r in _rows(cloud)
            if r.get("AcceleratorName") and _num(r.get("AcceleratorCount")) and _num(r.get("Price"))
        }
        assert by_provider[cloud] == len(keys), cloud


def test_spot_placeholders_and_inversions_corrected(result: SourceResult) -> None:
    placeholder = above = equal = 0
    for cloud in NON_GCP:
        for r in _rows(cloud):
            price, spot = _num(r.get("Price")), _num(r.get("SpotPrice"))
            if not r.get("AcceleratorName") or not _num(r.get("AcceleratorCount")):
                continue
            if price is None or spot is None:
                continue
            if spot >= 99_999 or spot <= 0:
                placeholder += 1  # primeintellect 99999999, vast 0.00
            elif spot > price:
                above += 1
            elif spot == price:
                equal += 1
    corrected = result.stats.corrected
    assert corrected["spot_placeholder"] == placeholder
    # GCP combined rows add their own inversions (host+GPU spot above host+GPU price)
    assert corrected["spot_above_on_demand"] >= above
    assert corrected["spot_equals_on_demand"] >= equal
    for o in result.offers:
        if o.spot_price_per_hour_usd is not None:
            assert 0 < o.spot_price_per_hour_usd < o.price_per_hour_usd


def test_gcp_prices_are_host_plus_gpu(result: SourceResult) -> None:
    """B21 kind: every GCP GPU offer = host VM + accelerator rows of the same zone."""
    rows = _rows("gcp")
    host: dict[tuple[str, str], float] = {}
    acc: dict[tuple[str, str, int], float] = {}
    for r in rows:
        price = _num(r["Price"])
        if price is None:
            continue
        if r["InstanceType"]:
            host[(r["AvailabilityZone"], r["InstanceType"])] = price
        elif not r["AcceleratorName"].startswith("tpu"):
            acc[
                (r["AvailabilityZone"], r["AcceleratorName"], int(float(r["AcceleratorCount"])))
            ] = price
    host_only_prices = set(host.values())
    gcp = [o for o in result.offers if o.provider == "gcp"]
    assert len(gcp) > 100
    for o in gcp:
        # an N1 host carrying attached GPUs is named "<host>+<accelerator>:<count>"
        machine = o.instance_type.split("+")[0]
        candidates = [
            host[(z, machine)] + p
            for z in o.zones
            for (az, _name, count), p in acc.items()
            if az == z and count == o.gpu_count and (z, machine) in host
        ]
        assert any(abs(c - o.price_per_hour_usd) < 1e-6 for c in candidates), o
        assert o.price_per_hour_usd not in host_only_prices
    a2 = next(o for o in gcp if o.instance_type == "a2-highgpu-1g" and o.region == "us-central1")
    assert a2.price_per_hour_usd == pytest.approx(0.73948 + 2.93391)  # 3.67339, B21's 3.673


def test_skypilot_url_may_be_a_directory() -> None:
    async def run() -> SourceResult:
        config = CatalogConfig(
            sources=("skypilot",), skypilot_url=str(SKYPILOT_DIR), skypilot_clouds=("lambda",)
        )
        ctx = NormalizeContext(gpus=load_gpu_catalog())
        async with httpx.AsyncClient() as client:
            return await SkyPilotSource(config, client, ctx).fetch()

    res = asyncio.run(run())
    gpu_rows = [r for r in _rows("lambda") if r["AcceleratorName"]]
    regions = defaultdict(set)
    for r in gpu_rows:
        regions[r["InstanceType"]].add(r["Region"])
    assert len(res.offers) == sum(len(v) for v in regions.values())
    assert Path(res.provenance.origins[0]).name == "vms.csv"
