"""Where the tests' shared reference data lies: ``tests/fixtures/shared`` (a vendored copy of
the project's ``shared/data`` and ``shared/reference-cases``, see its README)."""

from __future__ import annotations

from pathlib import Path

SHARED_DIR = Path(__file__).resolve().parent / "fixtures" / "shared"
DATA_DIR = SHARED_DIR / "data"
HF_CONFIGS_DIR = DATA_DIR / "hf-configs"
SKYPILOT_DIR = DATA_DIR / "skypilot-catalog-v7"
GPU_SPECS_CSV = DATA_DIR / "gpu-specs" / "gpu_specs.csv"
REFERENCE_CASES_DIR = SHARED_DIR / "reference-cases"
