"""The catalog faults of shared/reference-cases/bug_report_cases.json, each as a test of its
whole kind (every GPU / every count / every provider that can carry it), on the normaliser."""

from __future__ import annotations

import pytest

from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.catalog.skypilot import parse_vms_csv
from gpu_advisor.core.gpus import GpuCatalog
from gpu_advisor.core.normalize import NormalizeContext, RawOffer, normalize_offers

MIB = 2**20
GIB = 2**30
GPUS: GpuCatalog = load_gpu_catalog()
CTX = NormalizeContext(gpus=GPUS)


def _norm(rows: list[RawOffer]):  # type: ignore[no-untyped-def]
    return normalize_offers(rows, CTX, source="test", fetched_at="2026-11-30T00:00:00Z")


# --- B16: an 80 GB A100 named "A100" (with the 40 GB part's memory) ---------------------------


@pytest.mark.parametrize(
    ("name", "instance", "memory_mib", "expected"),
    [
        # B16 itself: Lambda gpu_8x_a100_80gb_sxm4, 'A100', 40,960 MiB, $12.00/h
        ("A100", "gpu_8x_a100_80gb_sxm4", 40960, "A100-SXM-80GB"),
        ("A100", "a100-80gb.sxm.8x", None, "A100-SXM-80GB"),  # mithril spelling
        ("A100", "A100_PCIE_80GB", 40960, "A100-PCIE-80GB"),
        ("A100", "p4de.24xlarge", 81920, "A100-SXM-80GB"),  # memory decides
        ("V100", "p3dn.24xlarge", 32768, "V100-SXM-32GB"),  # same kind on V100
        ("H100", "h100-nvl-94gb", 81920, "H100-NVL-94GB"),  # same kind on H100
    ],
)
def test_variant_hidden_by_bare_name(
    name: str, instance: str, memory_mib: int | None, expected: str
) -> None:
    res = _norm(
        [
            RawOffer(
                provider="x",
                instance_type=instance,
                region="r",
                accelerator_name=name,
                accelerator_count=8,
                gpu_memory_mib=memory_mib,
                price_per_hour_usd=12.0,
                hints=(instance,),
            )
        ]
    )
    (offer,) = res.offers
    assert offer.gpu == expected
    spec = GPUS.get(expected)
    assert spec is not None
    assert offer.gpu_memory_bytes == spec.memory_bytes
    if expected == "A100-SXM-80GB" and memory_mib == 40960:
        # expected: 81,920 MiB per GPU, 655,360 MiB total, $1.50 per GPU-hour
        assert offer.gpu_memory_bytes == 81920 * MIB
        assert offer.gpu_memory_bytes * offer.gpu_count == 655360 * MIB
        assert offer.price_per_gpu_hour_usd == 12.0 / 8
        assert res.stats.corrected["memory_contradicts_name"] == 1


# --- B17: per-GPU memory vs instance total ----------------------------------------------------


@pytest.mark.parametrize("count", [2, 4, 8])
@pytest.mark.parametrize(
    ("name", "per_gpu_mib", "expected"),
    [
        ("A100", 81920, "A100-SXM-80GB"),
        ("H100", 81559, "H100-SXM-80GB"),
        ("L4", 22888, "L4-24GB"),
        ("L40S", 46068, "L40S-48GB"),
        ("H200", 143771, "H200-SXM-141GB"),
        ("RTX4090", 24564, "RTX4090-24GB"),
    ],
)
def test_total_stored_as_per_gpu_is_divided(
    name: str, per_gpu_mib: int, expected: str, count: int
) -> None:
    """A source that writes the instance total into the per-GPU field (gpuhunt #21)."""
    res = _norm(
        [
            RawOffer(
                provider="x",
                instance_type=f"{count}x-{name}",
                region="r",
                accelerator_name=name,
                accelerator_count=count,
                gpu_memory_mib=per_gpu_mib * count,  # the fault: total in the per-GPU field
                price_per_hour_usd=1.0 * count,
            )
        ]
    )
    (offer,) = res.offers
    assert offer.gpu == expected
    assert offer.gpu_memory_exposed_bytes <= per_gpu_mib * MIB
    assert res.stats.corrected["memory_total_as_per_gpu"] == 1


def test_g6_48xlarge_is_8_x_24_gb_not_192_gb_per_gpu() -> None:
    """B17's g6.48xlarge: 8 x L4 24 GB -> 24 GB per GPU, 192 GB total: not >= 40 GB per GPU."""
    text = (
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"
        "g6.48xlarge,L4,8.0,192.0,768.0,\"{'Gpus': [{'Name': 'L4', 'Manufacturer': 'NVIDIA', "
        "'Count': 8, 'MemoryInfo': {'SizeInMiB': 22888}}], 'TotalGpuMemoryInMiB': 183104}\","
        "13.35,4.0,us-east-1,use1-az1\n"
    )
    (offer,) = _norm(parse_vms_csv(text, "aws")).offers
    assert offer.gpu_memory_bytes == 24 * GIB  # per GPU, marketed
    assert offer.gpu_memory_bytes * offer.gpu_count == 192 * GIB
    assert offer.gpu_memory_exposed_bytes == 22888 * MIB
    assert not offer.gpu_memory_bytes >= 40 * GIB


# --- B19: price not scaled by GPU count -------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "per_gpu", "per_gpu_spot"),
    [("RTXA6000", 0.79, 0.49), ("H100", 2.69, 1.5), ("L4", 0.43, None)],
)
def test_same_price_for_every_size_is_a_per_gpu_price(
    gpu: str, per_gpu: float, per_gpu_spot: float | None
) -> None:
    rows = [
        RawOffer(
            provider="runpod",
            instance_type=f"{n}x_{gpu}_SECURE",
            region="US",
            accelerator_name=gpu,
            accelerator_count=n,
            price_per_hour_usd=per_gpu,
            spot_price_per_hour_usd=per_gpu_spot,
        )
        for n in (1, 2, 4, 8)
    ]
    res = _norm(rows)
    by_count = {o.gpu_count: o for o in res.offers}
    for n in (1, 2, 4, 8):
        assert by_count[n].price_per_hour_usd == pytest.approx(n * per_gpu)
        if per_gpu_spot is not None:
            assert by_count[n].spot_price_per_hour_usd == pytest.approx(n * per_gpu_spot)
    # B19: 4 x 0.79 = 3.16 on-demand, 4 x 0.49 = 1.96 spot; 8x: 6.32 / 3.92
    if gpu == "RTXA6000":
        assert by_count[4].price_per_hour_usd == pytest.approx(3.16)
        assert by_count[8].spot_price_per_hour_usd == pytest.approx(3.92)
    assert res.stats.corrected["price_not_scaled_by_gpu_count"] == 3


def test_per_gpu_price_basis_is_scaled() -> None:
    (offer,) = _norm(
        [
            RawOffer(
                provider="t",
                instance_type="box",
                region="r",
                accelerator_name="A100-80GB",
                accelerator_count=4,
                price_per_hour_usd=1.5,
                price_basis="gpu",
            )
        ]
    ).offers
    assert offer.price_per_hour_usd == pytest.approx(4 * 1.5)


def test_scaled_prices_are_left_alone() -> None:
    rows = [
        RawOffer(
            provider="runpod",
            instance_type=f"{n}x_A40",
            region="US",
            accelerator_name="A40",
            accelerator_count=n,
            price_per_hour_usd=0.4 * n,
        )
        for n in (1, 2, 4)
    ]
    res = _norm(rows)
    assert "price_not_scaled_by_gpu_count" not in res.stats.corrected
    assert sorted(o.price_per_hour_usd for o in res.offers) == pytest.approx([0.4, 0.8, 1.6])


# --- B21: GCP host-only prices ----------------------------------------------------------------

GCP_HEADER = (
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,"
    "AvailabilityZone,Price,SpotPrice\n"
)


@pytest.mark.parametrize(
    ("host", "acc", "count"),
    [
        ("a2-highgpu-1g", "A100", 1),
        ("a2-ultragpu-8g", "A100-80GB", 8),
        ("a3-highgpu-8g", "H100", 8),
        ("g2-standard-4", "L4", 1),
        ("a3-ultragpu-8g", "H200", 8),
    ],
)
def test_gcp_host_rows_never_priced_alone(host: str, acc: str, count: int) -> None:
    paired = (
        GCP_HEADER
        + f"{host},12.0,85.0,,,,us-central1,us-central1-a,0.94,0.30\n"
        + f",,,{acc},{count},,us-central1,us-central1-a,3.11,1.0\n"
        + f"{host},12.0,85.0,,,,us-central1,us-central1-b,0.94,0.30\n"  # no GPU row in zone b
    )
    res = _norm(parse_vms_csv(paired, "gcp"))
    (offer,) = res.offers
    assert offer.instance_type == host
    assert offer.zones == ("us-central1-a",)
    assert offer.price_per_hour_usd == pytest.approx(0.94 + 3.11)  # host + GPU, never 0.94
    assert offer.spot_price_per_hour_usd == pytest.approx(0.30 + 1.0)
    assert res.stats.dropped["gcp_host_without_gpu_price"] == 1


def test_gcp_gpu_row_without_host_is_dropped() -> None:
    text = GCP_HEADER + ",,,B200,8,,us-central1,us-central1-b,90.216,\n"
    res = _norm(parse_vms_csv(text, "gcp"))
    assert res.offers == ()
    assert res.stats.dropped == {"gcp_gpu_without_host": 1}


def test_gcp_n1_gpu_uses_cheapest_fitting_n1_host() -> None:
    # T4 x1 needs >= 4 vCPUs and >= 16 GiB (4 GiB per vCPU): n1-highmem-4 (26 GiB) qualifies,
    # n1-standard-4 (15 GiB) does not, n1-standard-8 is dearer.
    text = (
        GCP_HEADER
        + "n1-standard-4,4.0,15.0,,,,us-central1,us-central1-a,0.19,0.04\n"
        + "n1-highmem-4,4.0,26.0,,,,us-central1,us-central1-a,0.24,0.05\n"
        + "n1-standard-8,8.0,30.0,,,,us-central1,us-central1-a,0.38,0.08\n"
        + ",,,T4,1,,us-central1,us-central1-a,0.35,0.14\n"
    )
    res = _norm(parse_vms_csv(text, "gcp"))
    (offer,) = res.offers
    assert offer.instance_type == "n1-highmem-4+T4:1"  # the host and what it carries
    assert offer.price_per_hour_usd == pytest.approx(0.24 + 0.35)


# --- other impossible rows --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "reason"),
    [
        (None, "missing_price"),
        (0.0, "nonpositive_price"),
        (-1.0, "nonpositive_price"),
        (float("inf"), "absurd_price"),
        (1e7, "absurd_price"),
    ],
)
def test_unusable_prices_dropped(price: float | None, reason: str) -> None:
    res = _norm(
        [
            RawOffer(
                provider="p",
                instance_type="i",
                region="r",
                accelerator_name="H100",
                accelerator_count=1,
                price_per_hour_usd=price,
            )
        ]
    )
    assert res.offers == ()
    assert res.stats.dropped == {reason: 1}


def test_price_far_below_the_providers_own_prices_is_dropped() -> None:
    rows = [
        RawOffer(
            provider="p",
            instance_type=f"h{i}",
            region="r",
            accelerator_name="H100",
            accelerator_count=8,
            price_per_hour_usd=8 * 2.5 + i * 0.01,
        )
        for i in range(6)
    ]
    # 8 x H100 at 2.69: a per-GPU price stored on an 8-GPU row that the count rule cannot see
    rows.append(
        RawOffer(
            provider="p",
            instance_type="bad",
            region="r",
            accelerator_name="H100",
            accelerator_count=8,
            price_per_hour_usd=2.69,
            ref="p:bad",
        )
    )
    res = _norm(rows)
    assert res.stats.dropped == {"implausible_price": 1}
    assert res.stats.examples["implausible_price"] == ["p:bad"]
    assert all(o.instance_type != "bad" for o in res.offers)


def test_unknown_gpu_kept_and_flagged() -> None:
    res = _norm(
        [
            RawOffer(
                provider="p",
                instance_type="i",
                region="r",
                accelerator_name="A30",
                accelerator_count=2,
                gpu_memory_mib=24576,
                price_per_hour_usd=1.0,
            )
        ]
    )
    (offer,) = res.offers
    assert offer.gpu_known is False
    assert offer.gpu == "A30-24GB"
    assert offer.gpu_memory_bytes == 24 * GIB
    assert res.stats.unknown_gpus == {"A30-24GB": 1}


def test_zones_collapse_to_region_with_cheapest_prices() -> None:
    rows = [
        RawOffer(
            provider="aws",
            instance_type="g6.xlarge",
            region="us-east-1",
            zone=z,
            accelerator_name="L4",
            accelerator_count=1,
            price_per_hour_usd=p,
            spot_price_per_hour_usd=s,
        )
        for z, p, s in [("a", 0.80, 0.40), ("b", 0.81, 0.30), ("c", 0.80, None)]
    ]
    res = _norm(rows)
    (offer,) = res.offers
    assert offer.zones == ("a", "b", "c")
    assert offer.zone is None
    assert offer.price_per_hour_usd == 0.80
    assert offer.spot_price_per_hour_usd == 0.30
    assert res.stats.rows_collapsed == 2
