"""The one-H200 calibration run (``bench/gpu_calibration.py``) reports its figures in the model's
own terms.

The device script cannot import gpu_advisor (the GPU image has no msgspec), so it carries a copy
of the FLOPs formula of ``core/planner/flops.py`` for Llama and its own parameter and KV-cache
counts. Its MFU is only comparable with ``DEFAULT_MFU`` if those are the model's: these tests
hold them equal, for every configuration the script runs, on the real ``config.json`` numbers.
They need no GPU and no torch (the script imports torch inside its functions).

No H200 measurement is committed yet (``bench/results/h200-calibration.json``): the run has not
happened, so nothing here compares predictions with measured speed or memory.
``bench/gpu_calibration_report.py`` prints that comparison once the file exists.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpu_advisor.core.memory.kv_cache import kv_cache_bytes_per_token
from gpu_advisor.core.models.resolve import resolve_model
from gpu_advisor.core.planner.flops import prefill_flops, training_flops_per_token
from gpu_advisor.core.spec import ModelSpec, TrainingWorkload

from ..bench_scripts import load_bench_script
from ..shared_data import HF_CONFIGS_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]


SCRIPT = load_bench_script("gpu_calibration")
REPORT = load_bench_script("gpu_calibration_report")
PLANNED = [
    {k: v for k, v in spec.items() if not k.startswith("_")}
    for spec in SCRIPT.TRAINING_PLAN + SCRIPT.TRAINING_8B + SCRIPT.TRAINING_EXTRA
]


def _config(model: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((HF_CONFIGS_DIR / SCRIPT.MODELS[model]).read_text())
    return config


def _arch(model: str) -> Any:
    return resolve_model(ModelSpec(preset=REPORT.PRESETS[model]))


def test_the_script_reads_the_vendored_configs():
    assert SCRIPT.DEFAULT_CONFIGS == HF_CONFIGS_DIR


@pytest.mark.parametrize("model", sorted(SCRIPT.MODELS))
def test_parameter_count_is_the_models_parsers(model):
    # Llama-3.2-1B ties its head (1,235,814,400), Llama-3.1-8B does not (8,030,261,248)
    assert SCRIPT.llama_parameter_count(_config(model)) == _arch(model).parameters.total


@pytest.mark.parametrize("spec", PLANNED, ids=REPORT.label)
def test_training_flops_per_token_are_flops_py(spec):
    workload = TrainingWorkload(
        method=spec.get("method", "full"),
        sequence_length=spec["sequence_length"],
        micro_batch_size=spec["micro_batch_size"],
        gradient_checkpointing=spec["gradient_checkpointing"],
        flash_attention=True,
    )
    ours = training_flops_per_token(_arch(spec["model"]), workload)
    model, executed = SCRIPT.training_flops_per_token(
        _config(spec["model"]),
        spec["sequence_length"],
        method=spec.get("method", "full"),
        checkpointing=spec["gradient_checkpointing"],
    )
    assert model == pytest.approx(ours.model, rel=1e-12)
    assert executed == pytest.approx(ours.executed, rel=1e-12)


def test_prefill_flops_are_flops_py():
    ours = prefill_flops(_arch("llama-3.1-8b"), REPORT.PREFILL_PROMPT)
    assert SCRIPT.prefill_flops(_config("llama-3.1-8b"), REPORT.PREFILL_PROMPT) == pytest.approx(
        ours, rel=1e-12
    )


def test_kv_bytes_per_token_are_the_estimators():
    # reference case D05: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072
    arch = _arch("llama-3.1-8b")
    assert SCRIPT.kv_bytes_per_token(_config("llama-3.1-8b")) == kv_cache_bytes_per_token(
        arch, element_bytes=2
    )


def test_the_table_peak_is_the_gpu_tables():
    from gpu_advisor.catalog.gpu_table import load_gpu_catalog

    h200 = load_gpu_catalog().by_id["H200-SXM-141GB"]
    assert h200.bf16_dense_tflops == SCRIPT.TABLE_BF16_DENSE_TFLOPS
    assert h200.memory_bandwidth_bytes_per_s == SCRIPT.TABLE_BANDWIDTH_BYTES_PER_S


@pytest.mark.parametrize("spec", PLANNED, ids=REPORT.label)
def test_every_planned_configuration_is_predicted_to_fit_one_h200(spec):
    # the plan runs what the estimator says fits; 8B full fine-tuning without checkpointing is
    # the tight one (137 of 140 GiB), which the run will confirm or refute
    prediction = REPORT.training_prediction(spec)
    assert prediction["fits"]
    assert prediction["step_seconds"] > 0
