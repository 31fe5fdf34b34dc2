"""The gpuhunt source against a local HTTP server serving a catalog zip built here.

The zip follows dstack's published format (``dstackai/gpuhunt``): ``zip catalog.zip *.csv
version`` (``.github/workflows/catalogs.yml``), each CSV written by ``csv.DictWriter`` over the
``RawCatalogItem`` fields in declaration order (``src/gpuhunt/_internal/models.py``,
``src/gpuhunt/_internal/storage.py``): on-demand and spot prices of one instance are separate
rows (``spot`` True/False), ``memory``/``gpu_memory`` in GB, ``flags`` space-separated,
``provider_data`` JSON. ``lambdalabs.csv`` uses the older, shorter header (no ``flags``,
``cpu_arch``, ``provider_data``), as catalogs written before those fields did.

Expected numbers are written out from the rows below, not taken from the code.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.catalog.http import make_client
from gpu_advisor.catalog.reference import load_network_rules, load_providers
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.catalog.sources import GpuhuntSource, SourceError, SourceResult
from gpu_advisor.core.normalize import NormalizeContext

from .conftest import CountingServer

GIB = 2**30
FIELDS = [
    "instance_name",
    "location",
    "price",
    "cpu",
    "memory",
    "gpu_count",
    "gpu_name",
    "gpu_memory",
    "spot",
    "disk_size",
    "gpu_vendor",
    "flags",
    "cpu_arch",
    "provider_data",
]
OLD_FIELDS = FIELDS[:11]  # up to gpu_vendor


def _row(
    name: str,
    location: str,
    price: float,
    cpu: int,
    memory: float,
    count: int,
    gpu: str | None,
    gpu_memory: float | None,
    spot: bool,
    vendor: str | None = "nvidia",
    flags: str = "",
    provider_data: dict[str, object] | None = None,
) -> dict[str, object]:
    return {
        "instance_name": name,
        "location": location,
        "price": price,
        "cpu": cpu,
        "memory": memory,
        "gpu_count": count,
        "gpu_name": gpu,
        "gpu_memory": gpu_memory,
        "spot": spot,  # DictWriter writes True/False, as gpuhunt's dump does
        "disk_size": None,
        "gpu_vendor": vendor if gpu else None,
        "flags": flags,
        "cpu_arch": "x86",
        "provider_data": json.dumps(provider_data or {}),
    }


AWS = [
    _row("p5.48xlarge", "us-east-1", 98.32, 192, 2048.0, 8, "H100", 80.0, False),
    _row("p5.48xlarge", "us-east-1", 41.23, 192, 2048.0, 8, "H100", 80.0, True),
    _row("p5.48xlarge", "us-west-2", 98.32, 192, 2048.0, 8, "H100", 80.0, False),
    _row("g5.xlarge", "us-east-1", 1.006, 4, 16.0, 1, "A10G", 24.0, False),
    _row("g5.xlarge", "us-east-1", 0.4025, 4, 16.0, 1, "A10G", 24.0, True),
    _row("m5.large", "us-east-1", 0.096, 2, 8.0, 0, None, None, False),  # CPU row
    _row("p4d.24xlarge", "us-east-2", 12.5, 96, 1152.0, 8, "A100", 40.0, True),  # spot only
]
GCP = [
    _row("a2-highgpu-1g", "us-central1-a", 3.67, 12, 85.0, 1, "A100", 40.0, False),
    _row("g2-standard-4", "us-central1-a", 0.71, 4, 16.0, 1, "L4", 24.0, False),
    _row("g2-standard-4", "us-central1-a", 0.28, 4, 16.0, 1, "L4", 24.0, True),
    # TPUs: a current row (vendor google) and an older one (tpu- prefix, no vendor)
    _row("v5litepod-8", "us-west4-a", 9.6, 224, 192.0, 8, "v5litepod", 16.0, False, "google"),
    _row("tpu-v3-8", "us-central1-a", 8.0, 96, 340.0, 8, "tpu-v3", 16.0, False, None),
]
LAMBDA = [
    _row("gpu_1x_a10", "us-west-1", 0.75, 30, 200.0, 1, "A10", 24.0, False),
    _row("gpu_8x_h100_sxm5", "us-east-3", 23.92, 208, 1800.0, 8, "H100", 80.0, False),
]
RUNPOD_H100 = "NVIDIA H100 80GB HBM3"
RUNPOD = [
    _row(RUNPOD_H100, "EU-RO-1", 2.69, 24, 125.0, 1, "H100", 80.0, False),
    _row(RUNPOD_H100, "EU-RO-1", 1.75, 24, 125.0, 1, "H100", 80.0, True),
    _row(RUNPOD_H100, "EU-RO-1", 8 * 2.69, 128, 1000.0, 8, "H100", 80.0, False),
    # the Instant Cluster offer of the same GPU, location and count (runpod.py
    # _fetch_cluster_offers: flags ["runpod-cluster"], pod_counts 2..8)
    _row(
        RUNPOD_H100,
        "EU-RO-1",
        8 * 2.99,
        128,
        1000.0,
        8,
        "H100",
        80.0,
        False,
        flags="runpod-cluster",
        provider_data={"pod_counts": list(range(2, 9))},
    ),
    _row("NVIDIA H100 NVL", "US-KS-2", 2.59, 16, 94.0, 1, "H100NVL", 94.0, False),
    _row("NVIDIA GeForce RTX 3050", "CZ", 0.11, 8, 16.0, 1, "RTX3050", 8.0, False),  # unknown
]
VERSION = "20261130"


def _csv(rows: list[dict[str, object]], fields: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _zip(members: dict[str, str | bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return buf.getvalue()


CATALOG = _zip(
    {
        "aws.csv": _csv(AWS, FIELDS),
        "gcp.csv": _csv(GCP, FIELDS),
        "lambdalabs.csv": _csv(LAMBDA, OLD_FIELDS),
        "runpod.csv": _csv(RUNPOD, FIELDS),
        "version": VERSION + "\n",
    }
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[CountingServer]:
    (tmp_path / "catalog.zip").write_bytes(CATALOG)
    s = CountingServer(tmp_path).start()
    yield s
    s.stop()


def _config(url: str, **kw: object) -> CatalogConfig:
    return CatalogConfig(
        sources=("gpuhunt",),
        gpuhunt_url=url,
        http_retries=0,
        http_read_timeout_seconds=0.5,
        revalidate_interval_seconds=3600.0,
        **kw,  # type: ignore[arg-type]
    )


def _fetch(config: CatalogConfig) -> SourceResult:
    async def run() -> SourceResult:
        ctx = NormalizeContext(
            gpus=load_gpu_catalog(), providers=load_providers(), networks=load_network_rules()
        )
        async with make_client(config) as client:
            return await GpuhuntSource(config, client, ctx).fetch()

    return asyncio.run(run())


@pytest.fixture
def result(server: CountingServer) -> SourceResult:
    return _fetch(_config(f"{server.url}/catalog.zip"))


def test_one_request_and_provenance(server: CountingServer, result: SourceResult) -> None:
    assert server.requests == Counter({"/catalog.zip": 1})
    assert result.provenance.origins == (f"{server.url}/catalog.zip",)
    assert result.provenance.upstream_as_of == "2026-11-30"  # the zip's version file


def test_rows_offers_and_drops(result: SourceResult) -> None:
    stats = result.stats
    # rows_in counts joined instances: AWS p5 us-east-1 (od+spot), p5 us-west-2, g5 (od+spot),
    # m5, p4d = 5; GCP a2, g2 (od+spot), two TPUs = 4; Lambda 2; RunPod: H100 x1 (od+spot),
    # H100 x8, H100 x8 cluster, H100 NVL, RTX 3050 = 5.
    assert stats.rows_in == 5 + 4 + 2 + 5
    assert stats.dropped == {"no_gpu": 1, "tpu": 2, "missing_price": 1}  # m5; TPUs; p4d
    assert stats.offers_out == len(result.offers) == 16 - 4
    assert Counter(o.provider for o in result.offers) == {
        "aws": 3,
        "gcp": 2,
        "lambda": 2,  # lambdalabs.csv -> this service's provider id
        "runpod": 5,
    }


def test_prices_joined_from_on_demand_and_spot_rows(result: SourceResult) -> None:
    by_key = {(o.provider, o.instance_type, o.region, o.gpu_count): o for o in result.offers}
    p5 = by_key[("aws", "p5.48xlarge", "us-east-1", 8)]
    assert (p5.price_per_hour_usd, p5.spot_price_per_hour_usd) == (98.32, 41.23)
    assert by_key[("aws", "p5.48xlarge", "us-west-2", 8)].spot_price_per_hour_usd is None
    g5 = by_key[("aws", "g5.xlarge", "us-east-1", 1)]
    assert (g5.price_per_hour_usd, g5.spot_price_per_hour_usd) == (1.006, 0.4025)
    assert g5.ram_bytes == 16 * GIB
    assert g5.vcpus == 4
    one = by_key[("runpod", RUNPOD_H100, "EU-RO-1", 1)]
    assert (one.price_per_hour_usd, one.spot_price_per_hour_usd) == (2.69, 1.75)


def test_cluster_offer_kept_apart_from_the_pod_offer(result: SourceResult) -> None:
    eight = [
        o
        for o in result.offers
        if o.provider == "runpod" and o.gpu_count == 8 and o.region == "EU-RO-1"
    ]
    prices = {o.instance_type: o.price_per_hour_usd for o in eight}
    assert prices == {
        RUNPOD_H100: pytest.approx(8 * 2.69),
        f"{RUNPOD_H100} (runpod-cluster)": pytest.approx(8 * 2.99),
    }


def test_instant_cluster_offer_carries_the_cluster_network(result: SourceResult) -> None:
    by_type = {
        o.instance_type: o
        for o in result.offers
        if o.provider == "runpod" and o.gpu_count == 8 and o.region == "EU-RO-1"
    }
    cluster = by_type[f"{RUNPOD_H100} (runpod-cluster)"]
    assert cluster.network is not None
    # runpod/docs instant-clusters.mdx: "Most clusters include 3200 Gbps networking"
    assert (cluster.network.gbit_per_s, cluster.network.cluster_grade) == (3200, True)
    assert by_type[RUNPOD_H100].network is None  # an ordinary pod is not in a cluster


def test_gpus_resolved_and_unknown_flagged(result: SourceResult) -> None:
    gpus = {(o.provider, o.instance_type): (o.gpu, o.gpu_known) for o in result.offers}
    assert gpus[("aws", "p5.48xlarge")] == ("H100-SXM-80GB", True)
    assert gpus[("aws", "g5.xlarge")] == ("A10G-24GB", True)
    assert gpus[("gcp", "a2-highgpu-1g")] == ("A100-SXM-40GB", True)
    assert gpus[("lambda", "gpu_1x_a10")] == ("A10-24GB", True)
    assert gpus[("runpod", "NVIDIA H100 NVL")] == ("H100-NVL-94GB", True)  # "H100NVL"
    # not in the GPU table: kept, flagged, id from name and memory
    assert gpus[("runpod", "NVIDIA GeForce RTX 3050")] == ("RTX3050-8GB", False)
    assert result.stats.unknown_gpus == {"RTX3050-8GB": 1}


def test_billing_and_network_from_reference_data(result: SourceResult) -> None:
    p5 = next(o for o in result.offers if o.instance_type == "p5.48xlarge")
    assert p5.network is not None
    assert (p5.network.fabric, p5.network.gbit_per_s) == ("efa", 3200)
    lam = next(o for o in result.offers if o.provider == "lambda")
    # providers.csv: Lambda bills per minute (the renamed provider id finds its row)
    assert (lam.billing_increment_seconds, lam.billing_minimum_seconds) == (60, 60)


def test_a_local_file_works_too(tmp_path: Path) -> None:
    path = tmp_path / "catalog.zip"
    path.write_bytes(CATALOG)
    res = _fetch(_config(str(path)))
    assert len(res.offers) == 12


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"PK\x03\x04 truncated", "not a zip"),
        (CATALOG[: len(CATALOG) // 2], "not a zip"),
        (_zip({"aws.csv": "instance_name,price\nx,1\n"}), "lacks columns"),
        (_zip({"version": VERSION}), "no <provider>.csv"),
        (_zip({"aws.csv": _csv(AWS, FIELDS) + "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p\n"}), "more fields"),
        (_zip({"aws.csv": b"instance_name,location\n\xff\xfe,x\n"}), "can't decode"),
    ],
)
def test_malformed_catalogs_are_source_errors(tmp_path: Path, body: bytes, reason: str) -> None:
    path = tmp_path / "catalog.zip"
    path.write_bytes(body)
    with pytest.raises(SourceError, match=reason):
        _fetch(_config(str(path)))


def test_zip_bomb_guard(tmp_path: Path) -> None:
    path = tmp_path / "catalog.zip"
    path.write_bytes(_zip({"aws.csv": _csv(AWS, FIELDS) + "\n" * 200_000}))
    with pytest.raises(SourceError, match="size limit"):
        _fetch(_config(str(path), max_response_bytes=100_000))


@pytest.mark.anyio
async def test_bad_catalog_keeps_last_good(server: CountingServer) -> None:
    service = CatalogService(_config(f"{server.url}/catalog.zip"))
    await service.start()
    try:
        first = await service.refresh(force=True)
        assert first.fetched == ("gpuhunt",)
        good = await service.snapshot()
        assert len(good.offers) == 12
        server.override = b"<html>maintenance</html>"
        outcome = await service.refresh(force=True)
        assert "not a zip" in outcome.failed["gpuhunt"]
        after = await service.snapshot()
        assert after.offers == good.offers
        (status,) = after.sources
        assert status.stale is True
        assert "not a zip" in (status.last_error or "")
    finally:
        server.override = None
        await service.close()
