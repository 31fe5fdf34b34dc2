"""dstack gpuhunt catalog (a zip of per-provider CSVs) -> :class:`RawOffer` rows.

Format, as dstack publishes it (``dstackai/gpuhunt``):

* ``.github/workflows/catalogs.yml`` (job "Publish catalogs"): ``date +%Y%m%d > version`` then
  ``zip catalog.zip *.csv version`` - one ``<provider>.csv`` per provider at the zip's root
  (``aws``, ``azure``, ``cudo``, ``datacrunch``, ``gcp``, ``lambdalabs``, ``runpod`` ...) and a
  ``version`` file holding the catalog date;
* ``src/gpuhunt/_internal/storage.py`` ``dump``: each CSV is ``csv.DictWriter`` over the
  fields of ``RawCatalogItem`` (``src/gpuhunt/_internal/models.py``) in declaration order:
  ``instance_name, location, price, cpu, memory, gpu_count, gpu_name, gpu_memory, spot,
  disk_size, gpu_vendor, flags, cpu_arch, provider_data`` (older catalogs stop earlier; the
  columns after ``spot`` are optional here);
* units (``CatalogItem`` docstring): ``price`` USD per hour, ``memory`` GB of RAM,
  ``gpu_memory`` GB per GPU, ``spot`` ``True``/``False``. The on-demand and the spot price of
  one instance are two rows; they are joined here into one row with both prices;
* ``gpu_count`` 0 / no ``gpu_name``: a CPU row. TPUs: ``gpu_vendor`` ``google``, or (older
  catalogs) a ``tpu-`` name prefix (``RawCatalogItem._process_gpu_vendor``);
* ``flags`` (space-separated): offers that older dstack versions must not see, e.g.
  ``runpod-cluster`` for RunPod Instant Cluster offers (``src/gpuhunt/providers/runpod.py``),
  which share instance name and location with the ordinary pod offers. A flagged row is kept
  as its own offer, its instance type suffixed `` (flag ...)`` (parentheses, so that network
  rules in ``instance_networks.csv`` can match it with a plain glob).

Provider file names are gpuhunt's; the ones that differ from this service's provider ids
(SkyPilot's) are renamed: ``lambdalabs`` -> ``lambda``, ``vastai`` -> ``vast``,
``digitalocean`` -> ``do``.
"""

from __future__ import annotations

import csv
import io
import math
import re
import zipfile

from msgspec import Struct

from gpu_advisor.core.normalize import RawOffer

REQUIRED_COLUMNS = frozenset({"instance_name", "location", "price", "gpu_count", "gpu_name"})
PROVIDER_IDS = {"lambdalabs": "lambda", "vastai": "vast", "digitalocean": "do"}
_VERSION = re.compile(r"^\d{8}$")
_Key = tuple[str, str, str, str, str]  # instance_name, location, gpu_name, gpu_count, flags


class GpuhuntFormatError(ValueError):
    """Not a gpuhunt catalog zip (bad zip, missing columns, too large when unpacked)."""


class GpuhuntCatalog(Struct, frozen=True, kw_only=True):
    """A parsed catalog zip: the rows and the ``version`` file's date (``YYYY-MM-DD``)."""

    rows: tuple[RawOffer, ...]
    version: str | None = None
    providers: tuple[str, ...] = ()


def _num(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _version(archive: zipfile.ZipFile) -> str | None:
    try:
        text = archive.read("version").decode("ascii").strip()
    except (KeyError, UnicodeDecodeError, zipfile.BadZipFile, OSError):
        return None
    return f"{text[:4]}-{text[4:6]}-{text[6:]}" if _VERSION.match(text) else None


def parse_gpuhunt_zip(data: bytes, *, max_unpacked_bytes: int) -> GpuhuntCatalog:
    """Parse a gpuhunt catalog zip.

    Raises:
        GpuhuntFormatError: not a zip, a member CSV without the required columns or with a
            row of more fields than its header, or members that would unpack to more than
            ``max_unpacked_bytes`` (zip-bomb guard).
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise GpuhuntFormatError(f"not a zip file: {exc}") from exc
    members = [i for i in archive.infolist() if i.filename.endswith(".csv") and not i.is_dir()]
    if not members:
        raise GpuhuntFormatError("zip holds no <provider>.csv")
    if sum(i.file_size for i in archive.infolist()) > max_unpacked_bytes:
        raise GpuhuntFormatError("catalog unpacks to more than the size limit")
    out: list[RawOffer] = []
    providers: list[str] = []
    for info in members:
        name = info.filename.rsplit("/", 1)[-1].removesuffix(".csv").lower()
        provider = PROVIDER_IDS.get(name, name)
        providers.append(provider)
        try:
            text = archive.read(info).decode("utf-8")
        except (zipfile.BadZipFile, UnicodeDecodeError, OSError) as exc:
            raise GpuhuntFormatError(f"{info.filename}: {exc}") from exc
        out.extend(_parse_member(text, provider, info.filename))
    return GpuhuntCatalog(rows=tuple(out), version=_version(archive), providers=tuple(providers))


def _parse_member(text: str, provider: str, filename: str) -> list[RawOffer]:
    reader = csv.DictReader(io.StringIO(text))
    missing = REQUIRED_COLUMNS - set(reader.fieldnames or ())
    if missing:
        raise GpuhuntFormatError(f"{filename} lacks columns {sorted(missing)}")
    first: dict[_Key, tuple[dict[str, str], str]] = {}
    on_demand: dict[_Key, float | None] = {}
    spot_prices: dict[_Key, float | None] = {}
    try:
        for line, row in enumerate(reader, start=2):
            if None in row:
                raise GpuhuntFormatError(f"{filename}:{line}: more fields than the header")
            flags = " ".join(sorted((row.get("flags") or "").split()))
            key = (row["instance_name"], row["location"], row["gpu_name"], row["gpu_count"], flags)
            first.setdefault(key, (row, f"gpuhunt:{filename}:{line}"))
            price = _num(row.get("price"))
            if (row.get("spot") or "").strip().lower() == "true":
                spot_prices[key] = price
            else:
                on_demand[key] = price
    except csv.Error as exc:
        raise GpuhuntFormatError(f"{filename}: {exc}") from exc
    out: list[RawOffer] = []
    for key, (row, ref) in first.items():
        gpu_name = row.get("gpu_name") or ""
        vendor = (row.get("gpu_vendor") or "").strip().lower()
        tpu = vendor == "google" or gpu_name.lower().startswith("tpu-")
        gpu_mem_gb = _num(row.get("gpu_memory"))
        flags = key[4]
        instance = row["instance_name"]
        out.append(
            RawOffer(
                provider=provider,
                instance_type=f"{instance} ({flags})" if flags else instance,
                region=row["location"] or "unknown",
                accelerator_name=gpu_name or None,
                accelerator_count=_num(row.get("gpu_count")),
                gpu_memory_mib=round(gpu_mem_gb * 1024) if gpu_mem_gb else None,
                vcpus=_num(row.get("cpu")),
                ram_gib=_num(row.get("memory")),
                price_per_hour_usd=on_demand.get(key),
                spot_price_per_hour_usd=spot_prices.get(key),
                hints=(row["instance_name"],),
                drop_reason="tpu" if tpu and gpu_name else None,
                ref=ref,
            )
        )
    return out
