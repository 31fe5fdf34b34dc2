"""Load provider facts and instance network rules (bundled CSVs with sources) into values.

* ``data/providers.csv`` - billing increment and minimum, spot interruption rate, storage
  price per provider; each row says whether the figure is documented or a conservative
  default, and cites its source URL and the date read.
* ``data/instance_networks.csv`` - intra-node interconnect and cluster network per provider
  and instance-type glob, each row with its source.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from pathlib import Path
from typing import get_args

from gpu_advisor.core.normalize import NetworkRule
from gpu_advisor.core.offers import Fabric, Interconnect, Network, ProviderInfo


def _text(name: str, path: Path | None) -> str:
    if path is not None:
        return path.read_text(encoding="utf-8")
    return resources.files("gpu_advisor.data").joinpath(name).read_text(encoding="utf-8")


def _opt_float(text: str) -> float | None:
    return float(text) if text.strip() else None


def parse_providers(text: str) -> dict[str, ProviderInfo]:
    """providers.csv text -> ProviderInfo by provider id.

    Raises:
        ValueError: a bad number or a duplicate provider.
    """
    out: dict[str, ProviderInfo] = {}
    for row in csv.DictReader(io.StringIO(text)):
        name = row["provider"]
        if name in out:
            raise ValueError(f"providers.csv: duplicate provider {name}")
        out[name] = ProviderInfo(
            name=name,
            billing_increment_seconds=int(row["billing_increment_seconds"]),
            billing_minimum_seconds=int(row["billing_minimum_seconds"]),
            spot_interruptions_per_hour=_opt_float(row["spot_interruptions_per_hour"]),
            storage_price_per_gb_month_usd=_opt_float(row["storage_price_per_gb_month_usd"]),
            source=(
                f"billing: {row['billing_basis']}; spot: {row['spot_basis']}; "
                f"storage: {row['storage_basis']}; {row['source']} (read {row['as_of']})"
            ),
        )
    return out


_INTERCONNECTS = frozenset(get_args(Interconnect))
_FABRICS = frozenset(get_args(Fabric))


def parse_network_rules(text: str) -> tuple[NetworkRule, ...]:
    """instance_networks.csv text -> rules in file order (first match wins).

    Raises:
        ValueError: an unknown interconnect or fabric name.
    """
    rules: list[NetworkRule] = []
    for row in csv.DictReader(io.StringIO(text)):
        interconnect = row["interconnect"].strip() or None
        fabric = row["fabric"].strip() or None
        if interconnect is not None and interconnect not in _INTERCONNECTS:
            raise ValueError(f"instance_networks.csv: unknown interconnect {interconnect}")
        if fabric is not None and fabric not in _FABRICS:
            raise ValueError(f"instance_networks.csv: unknown fabric {fabric}")
        network = (
            Network(
                fabric=fabric,  # type: ignore[arg-type]
                gbit_per_s=float(row["gbit_per_s"]),
                cluster_grade=row["cluster_grade"] == "yes",
            )
            if fabric is not None
            else None
        )
        rules.append(
            NetworkRule(
                provider=row["provider"],
                pattern=row["instance_type_pattern"],
                interconnect=interconnect,  # type: ignore[arg-type]
                network=network,
                source=f"{row['source']} (read {row['as_of']})",
            )
        )
    return tuple(rules)


def load_providers(path: Path | None = None) -> dict[str, ProviderInfo]:
    """Provider billing and risk facts: the bundled ``data/providers.csv`` or ``path``."""
    return parse_providers(_text("providers.csv", path))


def load_network_rules(path: Path | None = None) -> tuple[NetworkRule, ...]:
    """Instance network rules: the bundled ``data/instance_networks.csv`` or ``path``."""
    return parse_network_rules(_text("instance_networks.csv", path))
