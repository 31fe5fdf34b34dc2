"""The table source (an operator's CSV or YAML of offers: on-prem, reserved, negotiated) from
real files; malformed files keep the last good catalog and the status says why."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.catalog.http import make_client
from gpu_advisor.catalog.reference import load_network_rules, load_providers
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.catalog.sources import SourceResult, TableSource
from gpu_advisor.core.normalize import NormalizeContext
from gpu_advisor.core.offers import Offer

GIB = 2**30

CSV_TEXT = """\
provider,instance_type,region,zone,gpu,gpu_count,price_per_hour_usd,price_per_gpu_hour_usd,\
spot_price_per_hour_usd,gpu_memory_gib,vcpus,ram_gib,interconnect,network_fabric,\
network_gbit_per_s,billing_increment_seconds,billing_minimum_seconds
onprem,dgx-h100,eu-central,rack-7,H100,8,,2.0,,,224,2048,nvswitch,infiniband,3200,3600,3600
reserved,a100-box,us-east,,A100-80GB,4,9.6,,4.8,,64,512,nvlink,,,60,60
onprem,mi355x-node,eu-central,,MI355X,8,30,,,288,192,3072,,roce,3200,3600,86400
"""

YAML_TEXT = """\
offers:
  - provider: onprem
    instance_type: dgx-h100
    region: eu-central
    zone: rack-7
    gpu: H100
    gpu_count: 8
    price_per_gpu_hour_usd: 2.0
    vcpus: 224
    ram_gib: 2048
    interconnect: nvswitch
    network_fabric: infiniband
    network_gbit_per_s: 3200
    billing_increment_seconds: 3600
    billing_minimum_seconds: 3600
  - provider: reserved
    instance_type: a100-box
    region: us-east
    gpu: A100-80GB
    gpu_count: 4
    price_per_hour_usd: 9.6
    spot_price_per_hour_usd: 4.8
    vcpus: 64
    ram_gib: 512
    interconnect: nvlink
    billing_increment_seconds: 60
    billing_minimum_seconds: 60
  - provider: onprem
    instance_type: mi355x-node
    region: eu-central
    gpu: MI355X
    gpu_count: 8
    price_per_hour_usd: 30
    gpu_memory_gib: 288
    vcpus: 192
    ram_gib: 3072
    network_fabric: roce
    network_gbit_per_s: 3200
    billing_increment_seconds: 3600
    billing_minimum_seconds: 86400
"""


def _config(path: Path, **kw: object) -> CatalogConfig:
    return CatalogConfig(
        sources=("table",),
        table_path=str(path),
        revalidate_interval_seconds=3600.0,
        **kw,  # type: ignore[arg-type]
    )


def _fetch(path: Path) -> SourceResult:
    async def run() -> SourceResult:
        config = _config(path)
        ctx = NormalizeContext(
            gpus=load_gpu_catalog(), providers=load_providers(), networks=load_network_rules()
        )
        async with make_client(config) as client:
            return await TableSource(config, client, ctx).fetch()

    return asyncio.run(run())


def _by_type(offers: tuple[Offer, ...]) -> dict[str, Offer]:
    return {o.instance_type: o for o in offers}


@pytest.fixture(params=["csv", "yaml", "yml"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / f"offers.{request.param}"
    path.write_text(CSV_TEXT if request.param == "csv" else YAML_TEXT, encoding="utf-8")
    return path


def test_rows_become_offers(table: Path) -> None:
    res = _fetch(table)
    assert res.stats.rows_in == 3
    assert res.stats.dropped == {}
    offers = _by_type(res.offers)
    dgx = offers["dgx-h100"]
    assert dgx.gpu == "H100-SXM-80GB"  # alias "H100"
    assert dgx.price_per_hour_usd == 8 * 2.0  # price per GPU-hour x 8 GPUs
    assert res.stats.corrected["price_per_gpu_scaled"] == 1
    assert dgx.zone == "rack-7"
    assert dgx.interconnect == "nvswitch"
    assert dgx.network is not None
    assert (dgx.network.fabric, dgx.network.gbit_per_s, dgx.network.cluster_grade) == (
        "infiniband",
        3200,
        True,
    )
    assert (dgx.billing_increment_seconds, dgx.billing_minimum_seconds) == (3600, 3600)
    assert dgx.ram_bytes == 2048 * GIB
    box = offers["a100-box"]
    assert box.gpu == "A100-SXM-80GB"  # "A100-80GB" -> the SXM part (DESIGN)
    assert (box.price_per_hour_usd, box.spot_price_per_hour_usd) == (9.6, 4.8)
    assert box.network is None
    mi = offers["mi355x-node"]
    assert (mi.gpu, mi.gpu_known) == ("MI355X-288GB", False)  # kept, flagged
    assert mi.gpu_memory_bytes == 288 * GIB
    assert res.stats.unknown_gpus == {"MI355X-288GB": 1}
    assert all(o.source == "table" for o in res.offers)
    assert res.provenance.origins == (str(table),)


def test_yaml_plain_list_equals_mapping_form(tmp_path: Path) -> None:
    mapping = tmp_path / "a.yaml"
    mapping.write_text(YAML_TEXT, encoding="utf-8")
    plain = tmp_path / "b.yaml"
    plain.write_text(textwrap.dedent(YAML_TEXT.removeprefix("offers:\n")), encoding="utf-8")
    a, b = _fetch(mapping), _fetch(plain)
    assert [o.instance_type for o in a.offers] == [o.instance_type for o in b.offers]
    assert [o.price_per_hour_usd for o in a.offers] == [o.price_per_hour_usd for o in b.offers]


HEADER = CSV_TEXT.splitlines(keepends=True)[0]
GOOD_ROW = "reserved,a100-box,us-east,,A100-80GB,4,9.6,,4.8,,64,512,nvlink,,,60,60\n"

MALFORMED: list[tuple[str, str, str]] = [
    ("csv", "", "no header row"),
    ("csv", HEADER + GOOD_ROW.replace("9.6", "cheap"), "table row 1"),
    ("csv", HEADER.replace("gpu,", "colour,") + GOOD_ROW, "unknown field `colour`"),
    ("csv", "provider,instance_type,region,gpu_count\nx,y,z,1\n", "missing required field `gpu`"),
    ("csv", HEADER + GOOD_ROW + GOOD_ROW[:30] + "\n", "fewer fields than the header"),
    ("csv", HEADER + GOOD_ROW.replace("us-east", "us,east"), "more fields than the header"),
    ("csv", HEADER + GOOD_ROW.replace("nvlink", "infiniband"), "unknown interconnect"),
    ("csv", HEADER + GOOD_ROW.replace(",,,60,60", ",tokenring,100,60,60"), "network_fabric"),
    ("yaml", "offers: [provider: x\n", "table unreadable"),
    ("yaml", "just a string\n", "must be a list"),
    ("yaml", "- 1\n- 2\n", "table row 1: not a mapping"),
    ("yaml", "", "must be a list"),
]


@pytest.mark.parametrize(("suffix", "text", "reason"), MALFORMED)
@pytest.mark.anyio
async def test_malformed_file_keeps_last_good_and_says_why(
    tmp_path: Path, suffix: str, text: str, reason: str
) -> None:
    path = tmp_path / f"offers.{suffix}"
    path.write_text(CSV_TEXT if suffix == "csv" else YAML_TEXT, encoding="utf-8")
    service = CatalogService(_config(path))
    await service.start()
    try:
        first = await service.refresh(force=True)
        assert first.fetched == ("table",)
        good = await service.snapshot()
        assert {o.instance_type for o in good.offers} == {"dgx-h100", "a100-box", "mi355x-node"}

        path.write_text(text, encoding="utf-8")
        outcome = await service.refresh(force=True)
        assert reason in outcome.failed["table"]
        after = await service.snapshot()
        assert after.offers == good.offers
        (status,) = after.sources
        assert status.name == "table"
        assert status.stale is True
        assert reason in (status.last_error or "")
        assert status.offers == 3

        path.write_text(CSV_TEXT if suffix == "csv" else YAML_TEXT, encoding="utf-8")
        fixed = await service.refresh(force=True)  # a fixed file is taken at once
        assert fixed.fetched == ("table",)
        (status,) = (await service.snapshot()).sources
        assert status.last_error is None
        assert status.stale is False
    finally:
        await service.close()


@pytest.mark.anyio
async def test_missing_or_undecodable_file(tmp_path: Path) -> None:
    path = tmp_path / "offers.csv"
    path.write_text(CSV_TEXT, encoding="utf-8")
    service = CatalogService(_config(path))
    await service.start()
    try:
        await service.refresh(force=True)
        good = await service.snapshot()
        path.write_bytes(b"provider,instance_type\n\xff\xfe\n")
        outcome = await service.refresh(force=True)
        assert "can't decode" in outcome.failed["table"]
        path.unlink()
        outcome = await service.refresh(force=True)
        assert "No such file" in outcome.failed["table"]
        assert (await service.snapshot()).offers == good.offers
    finally:
        await service.close()
