"""Refresh the README's excerpt of the answer to its curl example.

Usage::

    python scripts/readme_excerpt.py

Answers ``examples/mixtral-8x7b-serving.json`` in process (bundled catalog, as ``make serve``
starts) and rewrites the JSON block after "An excerpt of the real answer" with the same keys it
shows: the model, the first recommendation, two rejected groups and the catalog block.
``tests/api/test_acceptance.py::test_readme_excerpt_is_the_real_answer`` fails until the
excerpt matches the real answer again.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "service"))

from gpu_advisor.asgi import build_advisor  # noqa: E402
from gpu_advisor.core.spec import RecommendationRequest  # noqa: E402
from gpu_advisor.settings import Settings  # noqa: E402

README = ROOT / "README.md"
EXAMPLE = ROOT / "examples" / "mixtral-8x7b-serving.json"
MARKER = "An excerpt of the real answer"
REJECTED = ("L4-24GB", "H100-SXM-80GB")


async def answer() -> dict[str, Any]:
    catalog, advisor = build_advisor(Settings())
    await catalog.start()
    try:
        request = msgspec.json.decode(EXAMPLE.read_bytes(), type=RecommendationRequest)
        found: dict[str, Any] = msgspec.to_builtins(await advisor.recommend(request))
        return found
    finally:
        await catalog.close()


def excerpt(d: dict[str, Any]) -> dict[str, Any]:
    first = d["recommendations"][0]
    offer = first["offer"]
    return {
        "model": {k: d["model"][k] for k in ("name", "total_parameters", "active_parameters")},
        "recommendations": [
            {
                "rank": first["rank"],
                "offer": {
                    k: offer[k]
                    for k in (
                        "provider",
                        "instance_type",
                        "region",
                        "gpu",
                        "gpu_count",
                        "price_per_hour_usd",
                        "interconnect",
                    )
                },
                "plan": {
                    k: first["plan"][k]
                    for k in ("tensor_parallel", "pipeline_parallel", "data_parallel")
                },
                "memory_per_gpu": {
                    k: first["memory_per_gpu"][k]
                    for k in ("weights_bytes", "kv_cache_bytes", "total_bytes", "capacity_bytes")
                },
                "summary": first["summary"],
                "...": "...",
            }
        ],
        "rejected": [
            {k: g[k] for k in ("code", "gpu", "count", "text")}
            for g in (
                next(
                    g
                    for g in d["rejected"]
                    if g["code"] == "insufficient_memory" and g.get("gpu") == gpu
                )
                for gpu in REJECTED
            )
        ],
        "catalog": {"version": d["catalog"]["version"], "sources": d["catalog"]["sources"]},
    }


def main() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("```json\n", text.index(MARKER)) + len("```json\n")
    end = text.index("```", start)
    block = json.dumps(excerpt(asyncio.run(answer())), indent=2, ensure_ascii=False) + "\n"
    README.write_text(text[:start] + block + text[end:], encoding="utf-8")
    print(f"rewrote the excerpt in {README}")


if __name__ == "__main__":
    main()
