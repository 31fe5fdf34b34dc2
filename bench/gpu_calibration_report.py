"""gpu-advisor's predictions for the configurations ``bench/gpu_calibration.py`` measures, and,
given its results file, the measured figures beside them with their ratio.

::

    .venv/bin/python bench/gpu_calibration_report.py [--results bench/results/h200-calibration.json]

Each measured configuration becomes a ``POST /v1/estimate`` request (the workload it ran, plan
TP = PP = DP = 1, hardware one H200), answered in process by the same code as the endpoint. What
is compared:

* training: step time, tokens/s and MFU (the device script computes MFU with a copy of
  ``flops.py``'s formula over the GPU table's 989.5 TFLOP/s, as the model does); memory as
  ``total - CUDA context - fragmentation`` (the live tensors, what ``max_memory_allocated``
  counts) and ``total - CUDA context`` (what the caching allocator reserves,
  ``max_memory_reserved``);
* prefill: time to first token minus one decode step (the model's prefill of the prompt);
* decode: the model's decode step at the batch, against the CUDA-graph replay (the eager figure
  is printed too: it carries Python and launch overhead the model does not describe); memory as
  weights + KV cache + activations against ``max_memory_allocated`` (reference case D11's
  convention).

Without ``--results`` (or when the file is missing) only the predictions are printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "service"))
DEFAULT_RESULTS = REPO_ROOT / "bench" / "results" / "h200-calibration.json"

PRESETS = {"llama-3.2-1b": "meta-llama/Llama-3.2-1B", "llama-3.1-8b": "meta-llama/Llama-3.1-8B"}
HARDWARE = {"gpu": "H200", "gpu_count": 1}
PLAN = {"tensor_parallel": 1, "pipeline_parallel": 1, "data_parallel": 1, "sharding": "none"}
PREFILL_PROMPT = 4096
DECODE_PROMPT, DECODE_NEW = 1024, 32
GIB = 2**30


def load_device_script() -> ModuleType:
    """``bench/gpu_calibration.py`` as a module (its plan of configurations, its formulas)."""
    path = REPO_ROOT / "bench" / "gpu_calibration.py"
    spec = importlib.util.spec_from_file_location("gpu_calibration", path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def training_request(entry: dict[str, Any]) -> dict[str, Any]:
    """The estimate request of one training configuration of the device script."""
    workload: dict[str, Any] = {
        "kind": "training",
        "method": entry.get("method", "full"),
        "sequence_length": entry["sequence_length"],
        "micro_batch_size": entry["micro_batch_size"],
        "gradient_checkpointing": entry["gradient_checkpointing"],
        "flash_attention": True,
    }
    if entry.get("method") == "lora":
        workload["lora_rank"] = entry.get("lora_rank", 16)
    if entry.get("recipe") == "autocast":
        # fp32 parameters + autocast: fp32 weights (the master) and fp32 gradients, autocast's
        # bf16 copies: 2 + 4 + 4 + 8 bytes per parameter (transformers "Model training anatomy")
        workload["gradient_dtype"] = "fp32"
    return {
        "model": {"preset": PRESETS[entry["model"]]},
        "workload": workload,
        "hardware": HARDWARE,
        "plan": PLAN,
    }


def inference_request(prompt: int, output: int, concurrency: int) -> dict[str, Any]:
    """Llama-3.1-8B in bf16 on the generic engine (plain transformers, no vLLM reservation)."""
    return {
        "model": {"preset": PRESETS["llama-3.1-8b"]},
        "workload": {
            "kind": "inference",
            "engine": "generic",
            "weight_dtype": "bf16",
            "kv_cache_dtype": "bf16",
            "context_length": prompt + output,
            "prompt_tokens": prompt,
            "output_tokens": output,
            "concurrency": concurrency,
        },
        "hardware": HARDWARE,
        "plan": PLAN,
    }


def estimate(body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/estimate`` answered in process, as plain JSON types."""
    import msgspec

    from gpu_advisor.advisor import model_summary, resolve_gpu_name
    from gpu_advisor.catalog.gpu_table import load_gpu_catalog
    from gpu_advisor.core.estimate import estimate as answer
    from gpu_advisor.core.models.resolve import resolve_model
    from gpu_advisor.core.spec import EstimateRequest

    request = msgspec.convert(body, EstimateRequest)
    gpus = load_gpu_catalog()
    arch = resolve_model(request.model)
    assert request.hardware is not None
    gpu = resolve_gpu_name(gpus, request.hardware.gpu, "hardware.gpu")
    result: dict[str, Any] = msgspec.to_builtins(
        answer(arch, request, gpus, gpu, model_summary(arch))
    )
    return result


def training_prediction(entry: dict[str, Any]) -> dict[str, Any]:
    """Predicted step time, tokens/s, MFU and memory of one training configuration."""
    answer = estimate(training_request(entry))
    memory, perf = answer["memory_per_gpu"], answer["performance"]
    details = memory["details"]
    context = details.get("overhead.cuda_context_bytes", 0)
    fragmentation = details.get("overhead.fragmentation_bytes", 0)
    return {
        "fits": answer["fits"],
        "step_seconds": perf["step_time_seconds"],
        "tokens_per_second": perf["tokens_per_second"],
        "mfu": perf["mfu"],
        "total_bytes": memory["total_bytes"],
        "allocated_bytes": memory["total_bytes"] - context - fragmentation,
        "reserved_bytes": memory["total_bytes"] - context,
    }


def inference_predictions() -> dict[str, dict[str, Any]]:
    """Prefill (1 x 4096) and decode steps at batch 1 and 32 after a 1,024-token prompt."""
    out: dict[str, dict[str, Any]] = {}
    prefill = estimate(inference_request(PREFILL_PROMPT, 1, 1))["performance"]
    out["prefill"] = {
        "seconds": prefill["time_to_first_token_seconds"] - prefill["step_time_seconds"],
    }
    for batch in (1, 32):
        answer = estimate(inference_request(DECODE_PROMPT, DECODE_NEW, batch))
        memory, perf = answer["memory_per_gpu"], answer["performance"]
        out[f"decode batch {batch}"] = {
            "step_seconds": perf["step_time_seconds"],
            "tokens_per_second": batch / perf["step_time_seconds"],
            "allocated_bytes": memory["weights_bytes"]
            + memory["kv_cache_bytes"]
            + memory["activations_bytes"],
        }
    return out


def label(entry: dict[str, Any]) -> str:
    parts = [
        entry["model"],
        f"s={entry['sequence_length']}",
        f"mb={entry['micro_batch_size']}",
        f"GC={entry['gradient_checkpointing']}",
    ]
    if entry.get("method", "full") != "full":
        parts.append(entry["method"])
    if entry.get("recipe", "master") != "master":
        parts.append(entry["recipe"])
    return " ".join(parts)


def _ratio(measured: float | None, predicted: float | None) -> str:
    if measured is None or predicted in (None, 0):
        return "—"
    assert predicted is not None
    return f"{measured / predicted:.2f}"


def _fmt(value: float | None, scale: float = 1.0, digits: int = 3) -> str:
    return "—" if value is None else f"{value / scale:,.{digits}f}"


def rows(results: dict[str, Any] | None) -> list[list[str]]:
    """Markdown rows: configuration, quantity, predicted, measured, measured / predicted."""
    script = load_device_script()
    planned = script.TRAINING_PLAN + script.TRAINING_8B + script.TRAINING_EXTRA
    measured_training = {label(t): t for t in (results or {}).get("training", [])}
    table: list[list[str]] = []
    for spec in planned:
        entry = {k: v for k, v in spec.items() if not k.startswith("_")}
        name = label(entry)
        pred = training_prediction(entry)
        got = measured_training.get(name, {})
        ok = got.get("status") == "ok"
        step = got.get("step_seconds", {}).get("median") if ok else None
        status = got.get("status", "not run")
        for quantity, p, m, scale, digits in (
            ("step time (s)", pred["step_seconds"], step, 1.0, 3),
            ("tokens/s", pred["tokens_per_second"], got.get("tokens_per_second"), 1.0, 0),
            ("MFU", pred["mfu"], got.get("mfu_table_peak"), 1.0, 3),
            ("allocated (GiB)", pred["allocated_bytes"], got.get("max_memory_allocated"), GIB, 1),
            ("reserved (GiB)", pred["reserved_bytes"], got.get("max_memory_reserved"), GIB, 1),
        ):
            m = m if ok else None
            row = [name, quantity, _fmt(p, scale, digits), _fmt(m, scale, digits), _ratio(m, p)]
            table.append([*row, status])
    measured_inference = (results or {}).get("inference", [])
    infer = inference_predictions()
    prefill = next((i for i in measured_inference if i.get("kind") == "prefill"), {})
    prefill_s = prefill.get("all_logits", {}).get("seconds", {}).get("median")
    table.append(
        [
            "llama-3.1-8b prefill 1 x 4096",
            "prefill (s)",
            _fmt(infer["prefill"]["seconds"], 1.0, 4),
            _fmt(prefill_s, 1.0, 4),
            _ratio(prefill_s, infer["prefill"]["seconds"]),
            prefill.get("status", "not run"),
        ]
    )
    for batch in (1, 32):
        pred = infer[f"decode batch {batch}"]
        for kind in ("decode_cuda_graph", "decode_eager"):
            got = next(
                (
                    i
                    for i in measured_inference
                    if i.get("kind") == kind and i.get("batch") == batch
                ),
                {},
            )
            step = got.get("step_seconds") if got.get("status") == "ok" else None
            name = f"llama-3.1-8b decode b={batch} ({kind.removeprefix('decode_')})"
            table.append(
                [
                    name,
                    "step (ms)",
                    _fmt(pred["step_seconds"], 1e-3, 2),
                    _fmt(step, 1e-3, 2),
                    _ratio(step, pred["step_seconds"]),
                    got.get("status", "not run"),
                ]
            )
            alloc = got.get("max_memory_allocated") if step is not None else None
            table.append(
                [
                    name,
                    "allocated (GiB)",
                    _fmt(pred["allocated_bytes"], GIB, 2),
                    _fmt(alloc, GIB, 2),
                    _ratio(alloc, pred["allocated_bytes"]),
                    got.get("status", "not run"),
                ]
            )
    return table


def render(table: list[list[str]]) -> str:
    head = ["configuration", "quantity", "predicted", "measured", "measured / predicted", "run"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * len(head)) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text()) if args.results.exists() else None
    if results is None:
        print(f"(no results at {args.results}: predictions only)\n")
    sys.stdout.write(render(rows(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
