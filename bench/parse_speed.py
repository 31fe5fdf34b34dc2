"""How fast model resolution answers: every hf-configs file, every preset, bare counts, and a
worst case (10,000 layers with per-layer ``layer_types``).

Usage: ``.venv/bin/python bench/parse_speed.py`` (prints microseconds per call, best of 5).
"""

from __future__ import annotations

import json
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "service"))

from gpu_advisor.core.models import list_presets, parse_hf_config, resolve_model  # noqa: E402
from gpu_advisor.core.spec import ModelSpec  # noqa: E402


def _shared() -> Path:
    """The vendored copy of ``shared/`` in ``tests/fixtures/shared`` (see its README)."""
    return Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "shared"


def _best_us(statement: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(statement, number=number, repeat=5)) / number * 1e6


def main() -> None:
    folder = _shared() / "data" / "hf-configs"
    configs = {
        p.stem: json.loads(p.read_text())
        for p in sorted(folder.glob("*.json"))
        if p.stem != "transformers_param_counts"
    }
    worst = 0.0
    for stem, config in configs.items():
        micros = _best_us(lambda c=config: parse_hf_config(c), 200)
        worst = max(worst, micros)
        print(f"{micros:8.1f} us  parse {stem}")
    print(f"{worst:8.1f} us  slowest real config")
    ids = [p.id for p in list_presets()]
    micros = _best_us(lambda: [resolve_model(ModelSpec(preset=i)) for i in ids], 200) / len(ids)
    print(f"{micros:8.1f} us  resolve a preset (mean over {len(ids)})")
    for count in (7e9, 1e14):
        micros = _best_us(lambda n=count: resolve_model(ModelSpec(parameters=n)), 200)
        print(f"{micros:8.1f} us  resolve parameters={count:.0e}")
    huge = configs["openai--gpt-oss-20b"] | {
        "num_hidden_layers": 10_000,
        "layer_types": ["sliding_attention", "full_attention"] * 5_000,
    }
    micros = _best_us(lambda: parse_hf_config(huge), 20)
    print(f"{micros:8.1f} us  parse gpt-oss with 10,000 layers (worst accepted size)")


if __name__ == "__main__":
    main()
