"""Build the bundled offers snapshot from a SkyPilot catalog v7 folder.

Usage::

    python scripts/build_offers_snapshot.py [--catalog DIR] [--out-dir DIR] [--as-of DATE]

Reads every ``<cloud>/vms.csv`` (and ``v6-fallback/<cloud>/vms.csv``) under ``--catalog``
(default ``shared/data/skypilot-catalog-v7``), normalises all rows with the service's own
normaliser (``gpu_advisor.core.normalize``, the GPU table, ``providers.csv`` and
``instance_networks.csv``) and writes:

* ``service/gpu_advisor/data/offers.csv`` - the normalised offers (``source`` column
  ``skypilot-catalog-v7``; ``fetched_at`` = the catalog's collection date);
* ``service/gpu_advisor/data/offers.meta.json`` - the date, the upstream, and the
  normaliser's counts (rows, offers, drops and corrections per reason).

Every GPU in the snapshot must have a row in the GPU table (issue 2 item 5): offers of a GPU
without cited specs are dropped with reason ``gpu_spec_unknown`` and listed per GPU id in the
meta file (live sources keep such offers, flagged ``gpu_known=False``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "service"))

from gpu_advisor.catalog.gpu_table import load_gpu_catalog  # noqa: E402
from gpu_advisor.catalog.offers_csv import encode_offers_csv  # noqa: E402
from gpu_advisor.catalog.reference import load_network_rules, load_providers  # noqa: E402
from gpu_advisor.catalog.skypilot import parse_vms_csv  # noqa: E402
from gpu_advisor.core.normalize import (  # noqa: E402
    NormalizeContext,
    RawOffer,
    drop_unknown_gpus,
    normalize_offers,
)

CATALOG_DEFAULT = ROOT / "tests" / "fixtures" / "shared" / "data" / "skypilot-catalog-v7"
SOURCE = "skypilot-catalog-v7"


def main() -> None:
    parser = argparse.ArgumentParser(description="Build data/offers.csv from SkyPilot v7")
    parser.add_argument("--catalog", type=Path, default=CATALOG_DEFAULT)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "service/gpu_advisor/data")
    parser.add_argument("--as-of", default="2026-11-30")
    args = parser.parse_args()
    files = sorted(args.catalog.glob("*/vms.csv")) + sorted(
        args.catalog.glob("v6-fallback/*/vms.csv")
    )
    rows: list[RawOffer] = []
    for path in files:
        cloud = path.parent.name
        rel = path.relative_to(args.catalog).as_posix()
        rows.extend(parse_vms_csv(path.read_text(encoding="utf-8"), cloud, path=rel))
    ctx = NormalizeContext(
        gpus=load_gpu_catalog(), providers=load_providers(), networks=load_network_rules()
    )
    fetched_at = f"{args.as_of}T00:00:00Z"
    result, unknown = drop_unknown_gpus(
        normalize_offers(rows, ctx, source=SOURCE, fetched_at=fetched_at)
    )
    (args.out_dir / "offers.csv").write_text(encode_offers_csv(result.offers), encoding="utf-8")
    meta = {
        "as_of": args.as_of,
        "fetched_at": fetched_at,
        "source": SOURCE,
        "upstream": "github.com/skypilot-org/skypilot-catalog catalogs/v7 (v6 for fallbacks)",
        "files": [p.relative_to(args.catalog).as_posix() for p in files],
        "stats": {
            "rows_in": result.stats.rows_in,
            "offers_out": result.stats.offers_out,
            "rows_collapsed": result.stats.rows_collapsed,
            "dropped": result.stats.dropped,
            "corrected": result.stats.corrected,
            "unknown_gpus": result.stats.unknown_gpus,
            "examples": result.stats.examples,
        },
        # offers dropped because the GPU table has no cited specs for their GPU, per GPU id
        "gpu_spec_unknown": unknown,
    }
    (args.out_dir / "offers.meta.json").write_text(
        json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    print(f"{len(result.offers)} offers from {len(files)} files -> {args.out_dir}")


if __name__ == "__main__":
    main()
