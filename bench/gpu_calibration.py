"""One-GPU calibration run: what a real GPU does, for comparison with gpu-advisor's model.

gpu-advisor predicts training step time / MFU from FLOPs (``core/planner/flops.py``,
``DEFAULT_MFU`` 0.40) and serving prefill / decode speed from compute and memory bandwidth
(``core/planner/performance.py``, ``DECODE_BANDWIDTH_EFFICIENCY`` 0.6), and per-GPU memory from
``core/memory``. None of that had been measured on real hardware. This script measures, on one
GPU, in this order (each part guarded: an error or an out-of-memory in one part is recorded and
the next part runs; the results file is rewritten after every measurement, so a run killed at
its time limit still returns what it finished):

1. ``matmul``: an 8192^3 bf16 matrix product (random data), TFLOP/s, against the GPU table's
   dense bf16 peak (989.5 TFLOP/s for H200-SXM-141GB in ``service/gpu_advisor/data/gpus.csv``).
2. ``bandwidth``: a 4 GiB device-to-device copy (bytes read + written per second) and a 4 GiB
   read-only reduction, against the table's 4.8 TB/s.
3. ``training``: Llama models built with transformers ``LlamaForCausalLM`` from the real
   ``config.json`` numbers of Llama-3.2-1B and Llama-3.1-8B (random init: no download), SDPA
   attention, random tokens, full-vocabulary cross-entropy (``labels=input_ids``). The mixed
   precision is gpu-advisor's default ``TrainingWorkload`` (``precision="bf16-mixed"``,
   ``master_weights_fp32=True``, gradients in bf16, AdamW): bf16 parameters and gradients, an
   fp32 master copy and fp32 AdamW moments held by :class:`MasterAdamW` (2 + 2 + 4 + 8 = 16 bytes
   per parameter, the ZeRO paper's layout). Optional extra rows: the Hugging Face Trainer recipe
   (fp32 parameters + bf16 autocast + fused ``torch.optim.AdamW``, gpu-advisor's
   ``gradient_dtype="fp32"``) and LoRA (PEFT, r=16, all linear layers, bf16 base). Per
   configuration: warm-up steps, then timed steps (``torch.cuda.synchronize`` around each);
   median step time, forward+backward and optimizer time apart (CUDA events), tokens/s, MFU with
   gpu-advisor's own FLOPs formula (:func:`training_flops_per_token`, a copy of ``flops.py``'s
   for Llama, checked against it by ``tests/planner/test_h200_calibration.py``), and
   ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` over the timed steps.
4. ``inference`` (Llama-3.1-8B, bf16 weights): prefill of 1 x 4096 tokens (all logits, as
   gpu-advisor's ``prefill_flops`` counts, and the last token's only, as serving engines do);
   decode steps at batch 1 and 32 after a 1,024-token prompt with a ``StaticCache`` of 1,056
   positions (prompt + 32 generated tokens), eagerly (Python and launch overhead included) and
   replayed as one CUDA graph per step (what serving engines do: the bandwidth-bound figure).

Run it on the device machine (the workplace's ``nvidia-h200`` image: python3 with torch 2.11
CUDA 13, transformers 5.17, peft; no network) from the repository root::

    PYTHONUNBUFFERED=1 timeout 400 python3 bench/gpu_calibration.py --out "$OUT"

It reads ``meta-llama--Llama-3.2-1B.json`` and ``meta-llama--Llama-3.1-8B.json`` from
``--configs`` (default ``tests/fixtures/shared/data/hf-configs``, the vendored copy of
``shared/data/hf-configs``), writes ``OUT/h200-calibration.json`` (commit it as
``bench/results/h200-calibration.json``) and keeps to ``--budget-s`` seconds of wall time
(default 330), skipping what would not fit. Locally, ``--tiny`` runs every part but the CUDA
graph on CPU with shrunken configs in a few seconds (a dry run of the code paths, not a
measurement). ``bench/gpu_calibration_report.py`` puts a results file next to
gpu-advisor's predictions.

This file imports neither gpu_advisor nor msgspec (the device image has neither); torch,
transformers and peft are imported inside the functions, so the tests can import the FLOPs
formula without them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import inspect
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = REPO_ROOT / "tests" / "fixtures" / "shared" / "data" / "hf-configs"
RESULTS_NAME = "h200-calibration.json"
SCHEMA = 1

TABLE_BF16_DENSE_TFLOPS = 989.5
"""H200-SXM-141GB bf16 dense peak in service/gpu_advisor/data/gpus.csv (the MFU denominator)."""
TABLE_BANDWIDTH_BYTES_PER_S = 4.8e12
"""H200-SXM-141GB memory bandwidth in the same table (4,800 GB/s)."""

MODELS = {
    "llama-3.2-1b": "meta-llama--Llama-3.2-1B.json",
    "llama-3.1-8b": "meta-llama--Llama-3.1-8B.json",
}

TINY_SHAPES = {
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 1000,
    "bos_token_id": None,
    "eos_token_id": None,
}


# --- gpu-advisor's FLOPs formula (core/planner/flops.py), for a Llama config -----------------


def llama_parameter_count(cfg: dict[str, Any]) -> int:
    """Parameters of ``LlamaForCausalLM`` for ``cfg`` (a tied head counted once)."""
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    d = cfg.get("head_dim") or h // heads
    ffn = cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    attn = h * heads * d * 2 + h * kv * d * 2  # q, o and k, v
    if cfg.get("attention_bias"):
        attn += heads * d + 2 * kv * d + h
    mlp = 3 * h * ffn + (2 * ffn + h if cfg.get("mlp_bias") else 0)
    layer = attn + mlp + 2 * h  # two RMSNorms
    head = 0 if cfg.get("tie_word_embeddings") else vocab * h
    return vocab * h + cfg["num_hidden_layers"] * layer + h + head


def matmul_parameters(cfg: dict[str, Any]) -> int:
    """Parameters that multiply per token: all but the input embedding's gather (a tied head
    still multiplies, so it stays) -- ``flops.matmul_parameters``."""
    total = llama_parameter_count(cfg)
    return (
        total if cfg.get("tie_word_embeddings") else total - cfg["vocab_size"] * cfg["hidden_size"]
    )


def attention_width(cfg: dict[str, Any]) -> int:
    """Query-key width = value width summed over heads (``flops.attention_widths``)."""
    heads = cfg["num_attention_heads"]
    return int(heads * (cfg.get("head_dim") or cfg["hidden_size"] // heads))


def training_flops_per_token(
    cfg: dict[str, Any], sequence_length: int, *, method: str = "full", checkpointing: str = "none"
) -> tuple[float, float]:
    """(model FLOPs, executed FLOPs) per trained token, ``flops.training_flops_per_token`` with
    FlashAttention-style causal skipping (SDPA's flash kernel): ``6 N`` (LoRA ``4 N``) plus
    ``3 x 2 (d_qk + d_v) L s / 2``; full recomputation repeats the forward pass."""
    width = attention_width(cfg)
    attended = cfg["num_hidden_layers"] * sequence_length / 2.0
    attention_forward = 2.0 * (width + width) * attended
    dense_forward = 2.0 * matmul_parameters(cfg)
    dense_backward = dense_forward * (1.0 if method in ("lora", "qlora") else 2.0)
    model = dense_forward + dense_backward + 3.0 * attention_forward
    recompute = {"full": dense_forward + attention_forward, "selective": attention_forward}
    return model, model + recompute.get(checkpointing, 0.0)


def prefill_flops(cfg: dict[str, Any], prompt_tokens: int) -> float:
    """Forward FLOPs of one prompt (``flops.prefill_flops``): ``2 N P`` + causal attention."""
    width = attention_width(cfg)
    attended = cfg["num_hidden_layers"] * prompt_tokens / 2.0
    return (2.0 * matmul_parameters(cfg) + 2.0 * (width + width) * attended) * prompt_tokens


def kv_bytes_per_token(cfg: dict[str, Any], element_bytes: int = 2) -> int:
    """K and V of every layer for one token."""
    heads = cfg["num_attention_heads"]
    d = cfg.get("head_dim") or cfg["hidden_size"] // heads
    kv = cfg.get("num_key_value_heads") or heads
    return int(2 * cfg["num_hidden_layers"] * kv * d * element_bytes)


# --- run bookkeeping -------------------------------------------------------------------------


class Run:
    """The results document, rewritten to ``path`` after every measurement, and the budget."""

    def __init__(self, path: Path, budget_s: float) -> None:
        self.path = path
        self.start = time.monotonic()
        self.budget_s = budget_s
        self.doc: dict[str, Any] = {
            "schema": SCHEMA,
            "script": "bench/gpu_calibration.py",
            "started_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "table_reference": {
                "gpu": "H200-SXM-141GB",
                "bf16_dense_tflops": TABLE_BF16_DENSE_TFLOPS,
                "memory_bandwidth_bytes_per_s": TABLE_BANDWIDTH_BYTES_PER_S,
                "source": "service/gpu_advisor/data/gpus.csv",
            },
            "training": [],
            "inference": [],
        }

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def save(self) -> None:
        self.doc["wall_seconds"] = round(self.elapsed(), 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, sort_keys=False) + "\n")
        tmp.replace(self.path)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _error(exc: BaseException) -> dict[str, Any]:
    oom = type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()
    return {
        "status": "oom" if oom else "error",
        "error": f"{type(exc).__name__}: {str(exc)[:600]}",
        "traceback_tail": traceback.format_exc()[-1500:],
    }


class Device:
    """CUDA when present (synchronize, events, memory statistics), else CPU (dry run)."""

    def __init__(self, torch: Any, tiny: bool) -> None:
        self.torch = torch
        self.cuda = torch.cuda.is_available() and not tiny
        self.name = "cuda" if self.cuda else "cpu"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def clean(self) -> None:
        gc.collect()
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()

    def reset_peak(self) -> None:
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()

    def memory(self) -> dict[str, int | None]:
        if not self.cuda:
            return {"max_memory_allocated": None, "max_memory_reserved": None}
        free, total = self.torch.cuda.mem_get_info()
        return {
            "max_memory_allocated": int(self.torch.cuda.max_memory_allocated()),
            "max_memory_reserved": int(self.torch.cuda.max_memory_reserved()),
            "memory_allocated_now": int(self.torch.cuda.memory_allocated()),
            "memory_reserved_now": int(self.torch.cuda.memory_reserved()),
            "device_used_now": int(total - free),
        }

    @contextlib.contextmanager
    def timed(self) -> Iterator[list[float]]:
        """Wall seconds of the block, synchronized at both ends (appended to the list)."""
        out: list[float] = []
        self.sync()
        t0 = time.perf_counter()
        yield out
        self.sync()
        out.append(time.perf_counter() - t0)

    def event(self) -> Any:
        if not self.cuda:
            return None
        e = self.torch.cuda.Event(enable_timing=True)
        e.record()
        return e


def elapsed_s(a: Any, b: Any) -> float | None:
    return None if a is None or b is None else a.elapsed_time(b) / 1000.0


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": [round(v, 6) for v in values],
    }


# --- environment -----------------------------------------------------------------------------


def environment(torch: Any, dev: Device) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "hostname": platform.node(),
    }
    for name in ("transformers", "peft"):
        try:
            env[name] = __import__(name).__version__
        except Exception as exc:
            env[name] = f"unavailable: {exc}"
    if dev.cuda:
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu_name=props.name,
            multiprocessors=props.multi_processor_count,
            total_memory_bytes=int(props.total_memory),
            capability=f"{props.major}.{props.minor}",
        )
        env["nvidia_smi"] = nvidia_smi()
    return env


def nvidia_smi() -> dict[str, str] | str:
    fields = (
        "name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,clocks.max.sm,"
        "clocks.max.mem,power.draw,power.limit,temperature.gpu,persistence_mode"
    )
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.strip()
    except Exception as exc:
        return f"unavailable: {exc}"
    return dict(zip(fields.split(","), (v.strip() for v in out.split(",")), strict=False))


# --- 1. matmul, 2. bandwidth -----------------------------------------------------------------


def measure_matmul(torch: Any, dev: Device, n: int, repeats: int) -> dict[str, Any]:
    a = torch.randn(n, n, device=dev.name, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev.name, dtype=torch.bfloat16)
    for _ in range(3):
        torch.mm(a, b)
    times = []
    for _ in range(repeats):
        with dev.timed() as t:
            torch.mm(a, b)
        times += t
    flops = 2.0 * n**3
    s = summary(times)
    tflops = flops / s["median"] / 1e12
    return {
        "status": "ok",
        "n": n,
        "dtype": "bf16",
        "seconds": s,
        "tflops_median": tflops,
        "tflops_best": flops / s["min"] / 1e12,
        "fraction_of_table_peak": tflops / TABLE_BF16_DENSE_TFLOPS,
        "nvidia_smi_after": nvidia_smi() if dev.cuda else None,
    }


def measure_bandwidth(torch: Any, dev: Device, nbytes: int, repeats: int) -> dict[str, Any]:
    src = torch.empty(nbytes // 2, device=dev.name, dtype=torch.bfloat16).normal_()
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
        src.sum(dtype=torch.float32)
    copy_t, read_t = [], []
    for _ in range(repeats):
        with dev.timed() as t:
            dst.copy_(src)
        copy_t += t
        with dev.timed() as t:
            src.sum(dtype=torch.float32)
        read_t += t
    copy_bw = 2 * nbytes / statistics.median(copy_t)
    read_bw = nbytes / statistics.median(read_t)
    return {
        "status": "ok",
        "bytes": nbytes,
        "copy_seconds": summary(copy_t),
        "copy_bytes_per_s_read_plus_written": copy_bw,
        "read_seconds": summary(read_t),
        "read_bytes_per_s": read_bw,
        "copy_fraction_of_table": copy_bw / TABLE_BANDWIDTH_BYTES_PER_S,
        "read_fraction_of_table": read_bw / TABLE_BANDWIDTH_BYTES_PER_S,
    }


# --- models ----------------------------------------------------------------------------------


def load_config(configs: Path, model: str, tiny: bool) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((configs / MODELS[model]).read_text())
    if tiny:
        cfg.update(TINY_SHAPES)
    return cfg


def build_model(torch: Any, dev: Device, cfg: dict[str, Any], dtype: Any) -> Any:
    """``LlamaForCausalLM`` of ``cfg`` with random weights, built on the device, SDPA."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig.from_dict(dict(cfg))
    config.use_cache = False
    with torch.device(dev.name):
        model = LlamaForCausalLM._from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model


def unique_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


class MasterAdamW:
    """AdamW on fp32 master weights for bf16 parameters and bf16 gradients.

    gpu-advisor's default mixed precision (2 B bf16 weights + 2 B bf16 gradients + 4 B fp32
    master + 8 B fp32 moments per parameter; DeepSpeed / Megatron keep this layout, PyTorch has
    no built-in optimizer for it). The update walks the parameters in slices of at most
    ``chunk`` elements with ``torch._foreach`` kernels, so its fp32 temporaries (the upcast
    gradient and the denominator) stay under ``8 x chunk`` bytes; each slice's master is copied
    back to the bf16 parameter.
    """

    def __init__(
        self,
        torch: Any,
        params: list[Any],
        *,
        lr: float = 1e-5,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        weight_decay: float = 0.1,
        chunk: int = 1 << 26,
    ) -> None:
        self.torch = torch
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.params = [p for p in params if p.requires_grad]
        self.master = [p.detach().float() for p in self.params]
        self.exp_avg = [torch.zeros_like(m) for m in self.master]
        self.exp_avg_sq = [torch.zeros_like(m) for m in self.master]
        self.steps = 0
        self.slices: list[list[tuple[int, int, int]]] = []  # groups of (param, start, stop)
        group: list[tuple[int, int, int]] = []
        size = 0
        for i, p in enumerate(self.params):
            n = p.numel()
            for start in range(0, n, chunk):
                stop = min(n, start + chunk)
                group.append((i, start, stop))
                size += stop - start
                if size >= chunk:
                    self.slices.append(group)
                    group, size = [], 0
        if group:
            self.slices.append(group)

    def state_bytes(self) -> int:
        return sum(4 * m.numel() * 3 for m in self.master)

    def step(self) -> None:
        torch = self.torch
        self.steps += 1
        b1, b2 = self.betas
        bc1 = 1.0 - b1**self.steps
        bc2 = 1.0 - b2**self.steps
        with torch.no_grad():
            for group in self.slices:
                flat = [(self.params[i], i, a, b) for i, a, b in group]
                p_ = [p.detach().view(-1)[a:b] for p, _, a, b in flat]
                g_ = [p.grad.reshape(-1)[a:b].float() for p, _, a, b in flat]
                w_ = [self.master[i].view(-1)[a:b] for _, i, a, b in flat]
                m_ = [self.exp_avg[i].view(-1)[a:b] for _, i, a, b in flat]
                v_ = [self.exp_avg_sq[i].view(-1)[a:b] for _, i, a, b in flat]
                torch._foreach_lerp_(m_, g_, 1.0 - b1)
                torch._foreach_mul_(v_, b2)
                torch._foreach_addcmul_(v_, g_, g_, 1.0 - b2)
                del g_
                denom = torch._foreach_sqrt(v_)
                torch._foreach_div_(denom, math.sqrt(bc2))
                torch._foreach_add_(denom, self.eps)
                torch._foreach_mul_(w_, 1.0 - self.lr * self.wd)
                torch._foreach_addcdiv_(w_, m_, denom, -self.lr / bc1)
                del denom
                for p, w in zip(p_, w_, strict=True):
                    p.copy_(w)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


# --- 3. training -----------------------------------------------------------------------------


def measure_training(
    torch: Any,
    dev: Device,
    cfg: dict[str, Any],
    spec: dict[str, Any],
    *,
    warmup: int,
    steps: int,
    step_cap_s: float,
) -> dict[str, Any]:
    """One training configuration; ``spec``: model, sequence_length, micro_batch_size,
    gradient_checkpointing (none|full), method (full|lora), recipe (master|autocast)."""
    seq, mb = spec["sequence_length"], spec["micro_batch_size"]
    recipe, method = spec.get("recipe", "master"), spec.get("method", "full")
    dtype = torch.float32 if recipe == "autocast" else torch.bfloat16
    model = build_model(torch, dev, cfg, dtype)
    params_total = unique_parameters(model)
    if spec["gradient_checkpointing"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    trainable = params_total
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=spec.get("lora_rank", 16),
            lora_alpha=2 * spec.get("lora_rank", 16),
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer: Any
    if recipe == "master" and method == "full":
        optimizer = MasterAdamW(torch, params)
        optimizer_desc = "MasterAdamW: bf16 params/grads, fp32 master + fp32 moments"
    else:
        fused = dev.cuda
        optimizer = torch.optim.AdamW(
            params, lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1, fused=fused
        )
        optimizer_desc = f"torch.optim.AdamW(fused={fused}) on {params[0].dtype} trainables"
    generator = torch.Generator(device=dev.name).manual_seed(0)
    ids = torch.randint(0, cfg["vocab_size"], (mb, seq), device=dev.name, generator=generator)
    autocast = (
        torch.autocast(device_type=dev.name, dtype=torch.bfloat16)
        if recipe == "autocast"
        else contextlib.nullcontext()
    )
    model_flops, executed_flops = training_flops_per_token(
        cfg, seq, method=method, checkpointing=spec["gradient_checkpointing"]
    )
    walls: list[float] = []
    fwd_bwd: list[float] = []
    opt_s: list[float] = []
    losses: list[float] = []
    for i in range(warmup + steps):
        if i == warmup:
            dev.reset_peak()
        with dev.timed() as wall:
            e0 = dev.event()
            with autocast:
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            e1 = dev.event()
            optimizer.step()
            optimizer.zero_grad()
            e2 = dev.event()
        losses.append(float(loss.detach()))
        del loss
        if i >= warmup:
            walls += wall
            fb, op = elapsed_s(e0, e1), elapsed_s(e1, e2)
            if fb is not None and op is not None:
                fwd_bwd.append(fb)
                opt_s.append(op)
        log(f"  step {i}: {wall[0]:.4f} s")
        if wall[0] > step_cap_s and i + 1 >= min(warmup + 1, warmup + steps):
            log(f"  step over {step_cap_s} s: stopping this configuration")
            break
    memory = dev.memory()
    tokens = mb * seq
    result: dict[str, Any] = {
        "status": "ok" if walls else "no timed step",
        **spec,
        "recipe_description": (
            "fp32 parameters + torch.autocast(bf16) (Hugging Face Trainer bf16=True)"
            if recipe == "autocast"
            else "bf16 parameters and gradients, fp32 master weights and AdamW moments"
        ),
        "optimizer": optimizer_desc,
        "attention": "sdpa",
        "parameters": params_total,
        "parameters_formula": llama_parameter_count(cfg),
        "trainable_parameters": trainable,
        "tokens_per_step": tokens,
        "model_flops_per_token": model_flops,
        "executed_flops_per_token": executed_flops,
        "warmup_steps": warmup,
        "losses": [round(v, 4) for v in losses],
        **memory,
    }
    if walls:
        step = statistics.median(walls)
        result.update(
            step_seconds=summary(walls),
            tokens_per_second=tokens / step,
            mfu_table_peak=tokens / step * model_flops / (TABLE_BF16_DENSE_TFLOPS * 1e12),
            hfu_table_peak=tokens / step * executed_flops / (TABLE_BF16_DENSE_TFLOPS * 1e12),
        )
    if fwd_bwd:
        fb = statistics.median(fwd_bwd)
        result.update(
            forward_backward_seconds=summary(fwd_bwd),
            optimizer_seconds=summary(opt_s),
            mfu_forward_backward_table_peak=tokens
            / fb
            * model_flops
            / (TABLE_BF16_DENSE_TFLOPS * 1e12),
        )
    return result


# --- 4. inference ----------------------------------------------------------------------------


def cache_keyword(model: Any) -> str:
    """transformers 5.17 names the cache argument ``past_key_values``, later 5.x ``cache``."""
    names = inspect.signature(model.forward).parameters
    return "past_key_values" if "past_key_values" in names else "cache"


def measure_prefill(
    torch: Any, dev: Device, model: Any, cfg: dict[str, Any], prompt: int, repeats: int
) -> dict[str, Any]:
    ids = torch.randint(0, cfg["vocab_size"], (1, prompt), device=dev.name)
    out: dict[str, Any] = {
        "status": "ok",
        "kind": "prefill",
        "batch": 1,
        "prompt_tokens": prompt,
        "flops": prefill_flops(cfg, prompt),
    }
    for label, keep in (("all_logits", 0), ("last_logits", 1)):
        dev.reset_peak()
        with torch.inference_mode():
            for _ in range(2):
                model(input_ids=ids, use_cache=False, logits_to_keep=keep)
            times = []
            for _ in range(repeats):
                with dev.timed() as t:
                    model(input_ids=ids, use_cache=False, logits_to_keep=keep)
                times += t
        s = summary(times)
        out[label] = {
            "seconds": s,
            "tflops": out["flops"] / s["median"] / 1e12,
            "fraction_of_table_peak": out["flops"] / s["median"] / 1e12 / TABLE_BF16_DENSE_TFLOPS,
            **dev.memory(),
        }
    return out


def measure_decode(
    torch: Any,
    dev: Device,
    model: Any,
    cfg: dict[str, Any],
    *,
    batch: int,
    prompt: int,
    new_tokens: int,
    graph: bool,
) -> dict[str, Any]:
    """Decode steps after a ``prompt``-token prefill of ``batch`` sequences into a StaticCache of
    ``prompt + new_tokens`` positions: eager (each step a Python forward call), or one CUDA
    graph captured for a step and replayed (``graph``)."""
    from transformers import StaticCache

    kw = cache_keyword(model)
    max_len = prompt + new_tokens
    cache = StaticCache(config=model.config, max_cache_len=max_len)
    ids = torch.randint(0, cfg["vocab_size"], (batch, prompt), device=dev.name)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    kv_full = kv_bytes_per_token(cfg) * max_len * batch

    def prefill() -> Any:
        cache.reset()
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1, **{kw: cache})
        return out.logits[:, -1:].argmax(-1)

    def step(tok: Any) -> Any:
        out = model(input_ids=tok, use_cache=True, **{kw: cache})
        return out.logits[:, -1:].argmax(-1)

    result: dict[str, Any] = {
        "kind": "decode_cuda_graph" if graph else "decode_eager",
        "batch": batch,
        "prompt_tokens": prompt,
        "new_tokens": new_tokens,
        "cache": f"StaticCache(max_cache_len={max_len})",
        "cache_argument": kw,
        "weights_bytes": weights,
        "kv_cache_bytes_allocated": kv_full,
    }
    with torch.inference_mode():
        dev.reset_peak()
        tok = prefill()
        eager_tokens = [tok]
        for _ in range(min(8, new_tokens - 1)):  # warm-up (and the eager reference tokens)
            tok = step(tok)
            eager_tokens.append(tok)
        if not graph:
            tok = prefill()
            per_step: list[float] = []
            with dev.timed() as total:
                for _ in range(new_tokens):
                    with dev.timed() as t:
                        tok = step(tok)
                    per_step += t
            result["step_seconds_synchronized_each"] = summary(per_step)
            # steps back to back (the GPU queue kept full, as a serving loop does)
            tok = prefill()
            with dev.timed() as total:
                for _ in range(new_tokens):
                    tok = step(tok)
            step_s = total[0] / new_tokens
        else:
            static_tok = eager_tokens[0].clone()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    step(static_tok)
            torch.cuda.current_stream().wait_stream(stream)
            cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cuda_graph):
                static_next = step(static_tok)
            first = prefill()
            static_tok.copy_(first)
            replayed = [first.clone()]
            with dev.timed() as total:
                for _ in range(new_tokens):
                    cuda_graph.replay()
                    static_tok.copy_(static_next)
                    if len(replayed) < len(eager_tokens):
                        replayed.append(static_next.clone())
            step_s = total[0] / new_tokens
            same = sum(int(torch.equal(a, b)) for a, b in zip(replayed, eager_tokens, strict=False))
            result["graph_tokens_equal_eager"] = f"{same} of {len(replayed)}"
            del cuda_graph
    mean_context = prompt + new_tokens / 2.0
    kv_read = kv_bytes_per_token(cfg) * mean_context * batch
    result.update(
        status="ok",
        step_seconds=step_s,
        tokens_per_second=batch / step_s,
        bytes_read_per_step=weights + kv_read,
        bandwidth_bytes_per_s=(weights + kv_read) / step_s,
        mbu_table=(weights + kv_read) / step_s / TABLE_BANDWIDTH_BYTES_PER_S,
        **dev.memory(),
    )
    return result


# --- driver ----------------------------------------------------------------------------------

TRAINING_PLAN: list[dict[str, Any]] = [
    # (estimated seconds on an H200 incl. build; spec)
    {"model": "llama-3.2-1b", "sequence_length": 2048, "micro_batch_size": 4,
     "gradient_checkpointing": "none", "_cost_s": 20},
    {"model": "llama-3.2-1b", "sequence_length": 2048, "micro_batch_size": 4,
     "gradient_checkpointing": "full", "_cost_s": 15},
    {"model": "llama-3.2-1b", "sequence_length": 4096, "micro_batch_size": 2,
     "gradient_checkpointing": "none", "_cost_s": 15},
]  # fmt: skip
TRAINING_8B: list[dict[str, Any]] = [
    {"model": "llama-3.1-8b", "sequence_length": 2048, "micro_batch_size": 1,
     "gradient_checkpointing": "full", "_cost_s": 45},
    {"model": "llama-3.1-8b", "sequence_length": 2048, "micro_batch_size": 1,
     "gradient_checkpointing": "none", "_cost_s": 45},
]  # fmt: skip
TRAINING_EXTRA: list[dict[str, Any]] = [
    {"model": "llama-3.1-8b", "sequence_length": 2048, "micro_batch_size": 2,
     "gradient_checkpointing": "none", "method": "lora", "lora_rank": 16, "_cost_s": 40},
    {"model": "llama-3.2-1b", "sequence_length": 2048, "micro_batch_size": 4,
     "gradient_checkpointing": "none", "recipe": "autocast", "_cost_s": 20},
]  # fmt: skip


def guarded(
    run: Run, dev: Device, label: str, cost_s: float, fn: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    if run.left() < cost_s:
        log(f"{label}: skipped ({run.left():.0f} s left, needs ~{cost_s:.0f})")
        return {"status": "skipped", "reason": f"budget: {run.left():.0f} s left"}
    log(f"{label} ...")
    t0 = time.monotonic()
    try:
        result = fn()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result = _error(exc)
        log(f"{label}: {result['error']}")
    result["part_seconds"] = round(time.monotonic() - t0, 2)
    dev.clean()
    log(f"{label}: {result.get('status')} in {result['part_seconds']} s")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpucal-out")))
    parser.add_argument("--configs", type=Path, default=DEFAULT_CONFIGS)
    parser.add_argument("--budget-s", type=float, default=330.0)
    parser.add_argument("--tiny", action="store_true", help="CPU dry run with tiny shapes")
    args = parser.parse_args(argv)

    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out / RESULTS_NAME, args.budget_s)
    dev = Device(torch, args.tiny)
    tiny = args.tiny
    run.doc["mode"] = "tiny CPU dry run (not a measurement)" if tiny else "measurement"
    run.doc["env"] = environment(torch, dev)
    log(f"env: {json.dumps(run.doc['env'])}")
    run.save()
    if not tiny:
        torch.backends.cuda.matmul.allow_tf32 = False

    n = 256 if tiny else 8192
    run.doc["matmul"] = guarded(run, dev, "matmul", 5, lambda: measure_matmul(torch, dev, n, 10))
    run.save()
    nbytes = (64 << 20) if tiny else (4 << 30)
    run.doc["bandwidth"] = guarded(
        run, dev, "bandwidth", 5, lambda: measure_bandwidth(torch, dev, nbytes, 10)
    )
    run.save()

    configs = {m: load_config(args.configs, m, tiny) for m in MODELS}
    warmup, steps = (1, 2) if tiny else (3, 5)

    def train(spec: dict[str, Any]) -> None:
        spec = dict(spec)
        cost = spec.pop("_cost_s")
        if tiny:
            spec["sequence_length"] //= 32
        label = "train " + " ".join(f"{k}={v}" for k, v in spec.items())
        result = guarded(
            run,
            dev,
            label,
            0 if tiny else cost,
            lambda: measure_training(
                torch, dev, configs[spec["model"]], spec, warmup=warmup, steps=steps,
                step_cap_s=20.0,
            ),
        )  # fmt: skip
        run.doc["training"].append({**spec, **result})
        run.save()

    for spec in TRAINING_PLAN:
        train(spec)

    # inference, Llama-3.1-8B bf16
    cfg8 = configs["llama-3.1-8b"]
    prompt, new = (32, 8) if tiny else (1024, 32)
    prefill_len = 128 if tiny else 4096
    model_box: dict[str, Any] = {}

    def build_inference() -> dict[str, Any]:
        model = build_model(torch, dev, cfg8, torch.bfloat16)
        model.eval()
        model_box["model"] = model
        return {"status": "ok", "parameters": unique_parameters(model), **dev.memory()}

    build = guarded(run, dev, "inference model build", 0 if tiny else 60, build_inference)
    run.doc["inference"].append({"kind": "build", **build})
    if "model" in model_box:
        model = model_box["model"]
        parts: list[tuple[str, float, Callable[[], dict[str, Any]]]] = [
            ("prefill", 10, lambda: measure_prefill(torch, dev, model, cfg8, prefill_len, 5)),
        ]
        for graph in (False, True):
            for batch in (1, 32):
                if graph and not dev.cuda:
                    continue
                parts.append(
                    (
                        f"decode {'graph' if graph else 'eager'} batch {batch}",
                        15,
                        lambda b=batch, g=graph: measure_decode(
                            torch, dev, model, cfg8, batch=b, prompt=prompt, new_tokens=new,
                            graph=g,
                        ),
                    )
                )  # fmt: skip
        for label, cost, fn in parts:
            run.doc["inference"].append(guarded(run, dev, label, 0 if tiny else cost, fn))
            run.save()
        del model
        model_box.clear()
        dev.clean()

    for spec in TRAINING_8B + TRAINING_EXTRA:
        train(spec)
    run.doc["finished_utc"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    run.save()
    log(f"done in {run.elapsed():.0f} s: {run.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
