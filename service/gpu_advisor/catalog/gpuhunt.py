"""dstack gpuhunt catalog (a zip of per-provider CSVs) -> :class:`RawOffer` rows.

Format (``dstackai/gpuhunt`` ``src/gpuhunt/_internal/models.py``, ``RawCatalogItem``): one
CSV per provider named ``<provider>.csv`` with columns ``instance_name, location, price,
cpu, memory, gpu_count, gpu_name, gpu_memory, spot`` (others ignored). ``price`` is USD per
instance-hour, ``memory`` is host RAM in GB, ``gpu_memory`` is GB per GPU, ``spot`` is
``True``/``False``: the on-demand and the spot price of one instance are two rows, which are
joined here into one row with both prices. Rows with ``gpu_count`` 0 are CPU rows.
"""

from __future__ import annotations

import csv
import io
import math
import zipfile

from gpu_advisor.core.normalize import RawOffer

REQUIRED_COLUMNS = frozenset({"instance_name", "location", "price", "gpu_count", "gpu_name"})


class GpuhuntFormatError(ValueError):
    """Not a gpuhunt catalog zip (bad zip, missing columns, too large when unpacked)."""


def _num(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def parse_gpuhunt_zip(data: bytes, *, max_unpacked_bytes: int) -> list[RawOffer]:
    """Parse a gpuhunt catalog zip.

    Raises:
        GpuhuntFormatError: not a zip, a member CSV without the required columns, or members
            that would unpack to more than ``max_unpacked_bytes`` (zip-bomb guard).
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise GpuhuntFormatError(f"not a zip file: {exc}") from exc
    members = [i for i in archive.infolist() if i.filename.endswith(".csv") and not i.is_dir()]
    if not members:
        raise GpuhuntFormatError("zip holds no <provider>.csv")
    if sum(i.file_size for i in members) > max_unpacked_bytes:
        raise GpuhuntFormatError("catalog unpacks to more than the size limit")
    out: list[RawOffer] = []
    for info in members:
        provider = info.filename.rsplit("/", 1)[-1].removesuffix(".csv").lower()
        try:
            text = archive.read(info).decode("utf-8")
        except (zipfile.BadZipFile, UnicodeDecodeError, OSError) as exc:
            raise GpuhuntFormatError(f"{info.filename}: {exc}") from exc
        reader = csv.DictReader(io.StringIO(text))
        missing = REQUIRED_COLUMNS - set(reader.fieldnames or ())
        if missing:
            raise GpuhuntFormatError(f"{info.filename} lacks columns {sorted(missing)}")
        first: dict[tuple[str, str, str, str], tuple[dict[str, str], str]] = {}
        on_demand: dict[tuple[str, str, str, str], float | None] = {}
        spot_prices: dict[tuple[str, str, str, str], float | None] = {}
        for line, row in enumerate(reader, start=2):
            key = (
                row["instance_name"],
                row["location"],
                row.get("gpu_name", ""),
                row.get("gpu_count", ""),
            )
            first.setdefault(key, (row, f"gpuhunt:{info.filename}:{line}"))
            price = _num(row.get("price"))
            if (row.get("spot") or "").strip().lower() == "true":
                spot_prices[key] = price
            else:
                on_demand[key] = price
        for key, (row, ref) in first.items():
            gpu_mem_gb = _num(row.get("gpu_memory"))
            price = on_demand.get(key)
            spot = spot_prices.get(key)
            out.append(
                RawOffer(
                    provider=provider,
                    instance_type=row["instance_name"],
                    region=row["location"] or "unknown",
                    accelerator_name=row.get("gpu_name") or None,
                    accelerator_count=_num(row.get("gpu_count")),
                    gpu_memory_mib=round(gpu_mem_gb * 1024) if gpu_mem_gb else None,
                    vcpus=_num(row.get("cpu")),
                    ram_gib=_num(row.get("memory")),
                    price_per_hour_usd=price,
                    spot_price_per_hour_usd=spot,
                    hints=(row["instance_name"],),
                    ref=ref,
                )
            )
    return out
