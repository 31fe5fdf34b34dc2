"""Measured truth harness (b): what PyTorch really allocates, against our memory formulas.

For a small configuration of each family (a few layers, a small hidden size, the real structure:
GQA, explicit head_dim, sliding and hybrid windows, MoE, MLA, fused projections, encoder-decoder)
built from its real ``config.json`` with the sizes shrunk, on CPU:

* weights: bytes of the parameters (each storage once, tied weights once);
* gradients: bytes of ``p.grad`` after one backward pass;
* optimizer state: bytes of ``optimizer.state`` after one real ``torch.optim.AdamW`` step;
* saved activations: bytes saved for backward during the forward pass, recorded with
  ``torch.autograd.graph.saved_tensors_hooks`` and each storage counted once (parameters
  excluded), in fp32 with SDPA, bf16 with SDPA and bf16 with eager attention;
* KV cache: bytes of the cache a real ``generate`` call leaves (prompt + new tokens);
* LoRA (PEFT): trainable parameters, gradients, optimizer and saved activations with adapters on
  q/v (no dropout: the frozen base keeps nothing for its own weights) and on every linear with
  dropout (each adapter keeps its dropped-out input);
* full gradient checkpointing (transformers ``gradient_checkpointing_enable``).

Each row is compared with our estimate at the same sizes (``gpu_advisor.core.memory``):
parameters, gradients and optimizer within 5 %, saved activations within 15 %, KV within 5 %.
Which terms apply: FlashAttention-style terms (Q, K, V, output, fp32 log-sum-exp) for SDPA;
the a*s^2 score terms for eager; no dropout (the small configs set every dropout to 0, because
PyTorch's CPU SDPA falls back to its math kernel with dropout). Falcon's and DeepSeek-V3's SDPA
paths fall back to PyTorch's math kernel on CPU (alibi/explicit mask, and MLA's unequal Q/V head
widths), which materialises fp32 scores: their SDPA activations are compared with the eager terms.

Usage::

    .venv/bin/python bench/harness_memory.py [--out FILE]

writes ``docs/data/measured_memory.json`` (read by ``bench/accuracy_report.py``);
``tests/harness/test_measured_memory.py`` (slow) re-measures, checks every tolerance and that the
committed JSON is current. Needs the ``harness`` extra (torch 2.13.0 CPU, transformers, peft).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "service"))
DEFAULT_OUT = REPO_ROOT / "docs" / "data" / "measured_memory.json"

TOLERANCE_PCT = {
    "weights": 5.0,
    "gradients": 5.0,
    "optimizer": 5.0,
    "saved_activations": 15.0,
    "kv_cache": 5.0,
}

SEQ, BATCH = 64, 2  # training shapes
PROMPT, NEW = 60, 41  # generate: 60 prompt tokens + 41 new -> 100 cached tokens
WINDOW = 48  # sliding windows of the small configs (shorter than both the training and KV lengths)


def shared_dir() -> Path:
    """The vendored ``shared/`` copy (tests/fixtures/shared); ``GPU_ADVISOR_SHARED`` wins."""
    import os

    override = os.environ.get("GPU_ADVISOR_SHARED")
    return Path(override) if override else REPO_ROOT / "tests" / "fixtures" / "shared"


def real_config(stem: str) -> dict[str, Any]:
    path = shared_dir() / "data" / "hf-configs" / f"{stem}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    data.pop("_note", None)
    data.pop("quantization_config", None)  # quantisers act only in from_pretrained
    return data


_NO_DROPOUT = {
    "attention_dropout": 0.0,
    "hidden_dropout": 0.0,
    "dropout": 0.0,
    "attn_pdrop": 0.0,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "dropout_rate": 0.0,
    "activation_dropout": 0.0,
}


@dataclass(frozen=True)
class Family:
    """A small configuration of one family.

    Attributes:
        name: family label.
        stem: the real config file it is derived from.
        overrides: the shrunk sizes (structure keys kept from the real file).
        kind: ``causal`` | ``encoder`` | ``seq2seq``.
        sdpa_math: PyTorch's CPU SDPA falls back to the math kernel for this family.
        kv: measure a generate call's cache.
        text_config: take the nested ``text_config`` (Gemma 3).
        sdpa: transformers offers SDPA for the family (Gemma 2 and gpt-oss are eager-only in 5.24).
        sdpa_rows: compare SDPA activations (False for T5: its relative position bias sends
            self-attention to the CPU math kernel while cross-attention uses the flash kernel, a
            CPU-only mix with no GPU counterpart).
    """

    name: str
    stem: str
    overrides: dict[str, Any]
    kind: str = "causal"
    sdpa_math: bool = False
    kv: bool = True
    text_config: bool = False
    sdpa: bool = True
    sdpa_rows: bool = True


SMALL = {"vocab_size": 512}
FAMILIES = [
    Family(
        "llama",
        "meta-llama--Llama-3.1-8B",
        {
            **SMALL,
            "hidden_size": 256,
            "intermediate_size": 688,
            "num_hidden_layers": 2,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
        },
    ),
    Family(
        "mistral (sliding window)",
        "mistralai--Mistral-7B-v0.1",
        {
            **SMALL,
            "hidden_size": 256,
            "intermediate_size": 688,
            "num_hidden_layers": 2,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "sliding_window": WINDOW,
        },
    ),
    Family(
        "mixtral (MoE)",
        "mistralai--Mixtral-8x7B-v0.1",
        {
            **SMALL,
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
        },
    ),
    Family(
        "qwen2 (biases)",
        "Qwen--Qwen2.5-7B",
        {
            **SMALL,
            "hidden_size": 128,
            "intermediate_size": 384,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_window_layers": 2,
        },
    ),
    Family(
        "qwen3 (head_dim, qk-norm)",
        "Qwen--Qwen3-8B",
        {
            **SMALL,
            "hidden_size": 128,
            "intermediate_size": 384,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 48,
        },
    ),
    Family(
        "qwen3_moe",
        "Qwen--Qwen3-30B-A3B",
        {
            **SMALL,
            "hidden_size": 128,
            "intermediate_size": 384,
            "moe_intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 48,
            "num_experts": 8,
            "num_experts_per_tok": 2,
        },
    ),
    Family(
        "gemma2 (hybrid, softcap)",
        "google--gemma-2-9b",
        {
            **SMALL,
            "hidden_size": 128,
            "intermediate_size": 384,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 48,
            "sliding_window": WINDOW,
        },
        sdpa=False,
    ),
    Family(
        "gemma3 (5:1 hybrid)",
        "google--gemma-3-27b-it",
        {
            **SMALL,
            "model_type": "gemma3_text",
            "hidden_size": 128,
            "intermediate_size": 384,
            "num_hidden_layers": 6,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 48,
            "sliding_window": WINDOW,
            "layer_types": None,
        },
        text_config=True,
    ),
    Family(
        "phi3 (fused qkv)",
        "microsoft--Phi-3-mini-4k-instruct",
        {
            **SMALL,
            "hidden_size": 192,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 6,
            "num_key_value_heads": 6,
            "sliding_window": WINDOW,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
    ),
    Family(
        "deepseek_v3 (MLA, MoE)",
        "deepseek-ai--DeepSeek-V3",
        {
            **SMALL,
            "hidden_size": 128,
            "intermediate_size": 256,
            "moe_intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "q_lora_rank": 48,
            "kv_lora_rank": 32,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8,
            "v_head_dim": 16,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "first_k_dense_replace": 1,
            "n_group": 2,
            "topk_group": 1,
            "rope_scaling": None,
        },
        sdpa_math=True,
    ),
    Family(
        "gpt_oss (sinks, hybrid MoE)",
        "openai--gpt-oss-20b",
        {
            **SMALL,
            "hidden_size": 128,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "experts_per_token": 2,
            "sliding_window": WINDOW,
            "layer_types": ["sliding_attention", "full_attention"],
            "rope_scaling": None,
        },
        sdpa=False,
    ),
    Family(
        "falcon (MQA)",
        "tiiuae--falcon-7b-instruct",
        {**SMALL, "hidden_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2},
        sdpa_math=True,
    ),
    Family(
        "gpt2 (fused qkv, Python GeLU)",
        "openai-community--gpt2",
        {**SMALL, "n_embd": 128, "n_head": 4, "n_layer": 2, "n_positions": 256},
    ),
    Family(
        "opt",
        "facebook--opt-13b",
        {
            **SMALL,
            "hidden_size": 128,
            "num_attention_heads": 4,
            "ffn_dim": 512,
            "num_hidden_layers": 2,
            "word_embed_proj_dim": 128,
            "max_position_embeddings": 256,
            "pad_token_id": 1,
            "bos_token_id": 2,
            "eos_token_id": 2,
        },
    ),
    Family(
        "bert (encoder-only)",
        "google-bert--bert-base-uncased",
        {
            **SMALL,
            "hidden_size": 128,
            "num_attention_heads": 4,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
        },
        kind="encoder",
        kv=False,
    ),
    Family(
        "t5 (encoder-decoder)",
        "google-t5--t5-base",
        {
            **SMALL,
            "d_model": 128,
            "num_heads": 4,
            "d_kv": 32,
            "d_ff": 512,
            "num_layers": 2,
            "decoder_start_token_id": 0,
        },
        kind="seq2seq",
        sdpa_rows=False,
    ),
]


def small_config(family: Family) -> dict[str, Any]:
    """The real config with the family's sizes shrunk and every dropout set to 0."""
    cfg = real_config(family.stem)
    if family.text_config:
        cfg = copy.deepcopy(cfg["text_config"])
    cfg.update(family.overrides)
    for key in _NO_DROPOUT:
        if key in cfg or key in ("attention_dropout", "dropout"):
            cfg[key] = _NO_DROPOUT[key]
    for key, small in (("pad_token_id", 0), ("bos_token_id", 1), ("eos_token_id", 2)):
        if key in cfg:
            cfg[key] = small  # token ids inside the small vocabulary
    return {k: v for k, v in cfg.items() if v is not None or k in ("rope_scaling",)}


# --- measurement (torch) ------------------------------------------------------------------------


def _hf_model(cfg: dict[str, Any], kind: str, dtype: Any, attn: str) -> Any:
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    config = AutoConfig.for_model(**cfg)
    config._attn_implementation = attn
    cls = {"causal": AutoModelForCausalLM, "encoder": AutoModel, "seq2seq": AutoModelForSeq2SeqLM}[
        kind
    ]
    torch.manual_seed(0)
    model = cls.from_config(config, dtype=dtype)
    model.train()
    return model


def _inputs(kind: str, vocab: int) -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
    if kind == "encoder":
        return {"input_ids": ids}
    return {"input_ids": ids, "labels": ids}


def _param_storages(model: Any) -> set[int]:
    return {p.untyped_storage().data_ptr() for p in model.parameters()}


def saved_bytes(model: Any, inputs: dict[str, Any]) -> tuple[int, Any]:
    """Bytes saved for backward during one forward pass, each storage once, parameters
    excluded; returns (bytes, loss-like output)."""
    import torch

    params = _param_storages(model)
    seen: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in params and key not in seen:
            seen[key] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**inputs)
    return sum(seen.values()), out


def _loss(out: Any) -> Any:
    if getattr(out, "loss", None) is not None:
        return out.loss
    return out.last_hidden_state.float().sum()


def measure_states(model: Any, inputs: dict[str, Any]) -> dict[str, int]:
    """Weights, gradients after backward and AdamW state after one step (bytes)."""
    import torch

    weights = sum(
        {
            p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()
        }.values()
    )
    _, out = saved_bytes(model, inputs)
    _loss(out).backward()
    grads = sum(p.grad.untyped_storage().nbytes() for p in model.parameters() if p.grad is not None)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    opt.step()
    state = 0
    for per_param in opt.state.values():
        for value in per_param.values():
            if torch.is_tensor(value):
                state += value.untyped_storage().nbytes()
    return {"weights": weights, "gradients": grads, "optimizer": state}


def cache_bytes(cache: Any) -> int:
    """Bytes of a transformers cache (DynamicCache / EncoderDecoderCache), each storage once."""
    caches = [cache]
    if hasattr(cache, "self_attention_cache"):
        caches = [cache.self_attention_cache, cache.cross_attention_cache]
    seen: dict[int, int] = {}
    for c in caches:
        for layer in c.layers:
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if t is not None and t.numel():
                    seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def measure_kv(cfg: dict[str, Any], kind: str, attn: str = "sdpa") -> int:
    import torch

    model = _hf_model(cfg, kind, torch.float32, attn)
    model.eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, cfg["vocab_size"], (1, PROMPT), generator=g)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            max_new_tokens=NEW,
            min_new_tokens=NEW,
            do_sample=False,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    return cache_bytes(out.past_key_values)


# --- our formulas ------------------------------------------------------------------------------


def _ours_states(arch: Any, precision: str, workload: Any) -> dict[str, int]:
    from gpu_advisor.core.memory import estimate_memory
    from gpu_advisor.core.results import ParallelPlan

    b = estimate_memory(arch, workload, ParallelPlan())
    return {
        "weights": b.weights_bytes,
        "gradients": b.gradients_bytes,
        "optimizer": b.optimizer_bytes,
    }


def _ours_saved(
    arch: Any,
    family: Family,
    *,
    act_bytes: int,
    flash: bool,
    trainable: Any = None,
    recompute: str = "none",
) -> int:
    import msgspec

    from gpu_advisor.core.memory.activation_stages import layer_kinds, stage_activations
    from gpu_advisor.core.memory.activations import FULL, ActivationSetup
    from gpu_advisor.core.memory.kernels import kernels_for
    from gpu_advisor.core.memory.validate import total_stack_layers

    kernels = msgspec.structs.replace(kernels_for(arch.family), dropout=False)
    setup = ActivationSetup(
        sequence=SEQ,
        batch=BATCH,
        act_bytes=act_bytes,
        flash_attention=flash,
        kernels=kernels,
        trainable=trainable or FULL,
        recompute=recompute,  # type: ignore[arg-type]
    )
    return stage_activations(
        arch,
        setup,
        layers=layer_kinds(arch, (0, total_stack_layers(arch)), SEQ),
        first_stage=True,
        last_stage=family.kind != "encoder",
    ).saved


def _ours_kv(arch: Any, family: Family) -> int:
    from gpu_advisor.core.memory.kv_cache import cross_attention_kv_bytes, kv_cache_bytes

    if family.kind == "seq2seq":
        # decoder self-attention cache of the generated tokens + cross-attention K/V of the prompt
        return kv_cache_bytes(arch, context_tokens=NEW, sequences=1, element_bytes=4) + (
            cross_attention_kv_bytes(arch, encoder_tokens=PROMPT, sequences=1, element_bytes=4)
        )
    # the cache holds the prompt and every generated token but the last
    return kv_cache_bytes(arch, context_tokens=PROMPT + NEW - 1, sequences=1, element_bytes=4)


def _row(
    family: str, quantity: str, setting: str, measured: int, ours: int, note: str = ""
) -> dict[str, Any]:
    error = 100.0 * (ours - measured) / measured if measured else 0.0
    tolerance = TOLERANCE_PCT[quantity]
    return {
        "family": family,
        "quantity": quantity,
        "setting": setting,
        "measured_bytes": measured,
        "ours_bytes": ours,
        "error_pct": round(error, 2),
        "tolerance_pct": tolerance,
        "pass": abs(error) <= tolerance,
        "note": note,
    }


def measure_family(family: Family) -> list[dict[str, Any]]:
    import torch

    from gpu_advisor.core.models import parse_hf_config
    from gpu_advisor.core.spec import TrainingWorkload

    cfg = small_config(family)
    arch = parse_hf_config(copy.deepcopy(cfg))
    rows = []
    # model states in fp32 with AdamW (fp32 weights 4 + grads 4 + moments 8 B/param)
    default_attn = "sdpa" if family.sdpa else "eager"
    model = _hf_model(cfg, family.kind, torch.float32, default_attn)
    states = measure_states(model, _inputs(family.kind, cfg["vocab_size"]))
    ours = _ours_states(
        arch,
        "fp32",
        TrainingWorkload(precision="fp32", sequence_length=SEQ, micro_batch_size=BATCH),
    )
    for quantity in ("weights", "gradients", "optimizer"):
        rows.append(_row(family.name, quantity, "fp32 AdamW", states[quantity], ours[quantity]))
    # saved activations in three settings
    settings = [
        (torch.float32, "sdpa", 4),
        (torch.bfloat16, "sdpa", 2),
        (torch.bfloat16, "eager", 2),
    ]
    if not family.sdpa or not family.sdpa_rows:
        settings = [(torch.float32, "eager", 4), (torch.bfloat16, "eager", 2)]
    elif family.sdpa_math:
        # the CPU math kernel upcasts bf16 to fp32 (no GPU counterpart): fp32 SDPA only
        settings = [(torch.float32, "sdpa", 4), (torch.bfloat16, "eager", 2)]
    for dtype, attn, act_bytes in settings:
        model = _hf_model(cfg, family.kind, dtype, attn)
        measured, _ = saved_bytes(model, _inputs(family.kind, cfg["vocab_size"]))
        flash = attn == "sdpa" and not family.sdpa_math
        note = (
            "CPU SDPA math kernel: compared with the eager terms"
            if attn == "sdpa" and family.sdpa_math
            else ""
        )
        ours_saved = _ours_saved(arch, family, act_bytes=act_bytes, flash=flash)
        rows.append(
            _row(
                family.name,
                "saved_activations",
                f"{str(dtype).removeprefix('torch.')} {attn}",
                measured,
                ours_saved,
                note,
            )
        )
    if family.kv:
        rows.append(
            _row(
                family.name,
                "kv_cache",
                f"generate {PROMPT}+{NEW} fp32",
                measure_kv(cfg, family.kind, default_attn),
                _ours_kv(arch, family),
            )
        )
    return rows


def measure_lora() -> list[dict[str, Any]]:
    """PEFT LoRA on the small Llama: adapters in the model dtype (no cast), q/v without dropout
    and every linear with dropout 0.1."""
    import torch
    from peft import LoraConfig, get_peft_model

    from gpu_advisor.core.memory.activations import Trainable
    from gpu_advisor.core.memory.lora import adapter_counts
    from gpu_advisor.core.models import parse_hf_config

    family = FAMILIES[0]
    cfg = small_config(family)
    arch = parse_hf_config(copy.deepcopy(cfg))
    rows = []
    for targets, dropout, label in (
        (["q_proj", "v_proj"], 0.0, "LoRA r=8 q,v"),
        ("all-linear", 0.1, "LoRA r=8 all-linear, dropout 0.1"),
    ):
        model = _hf_model(cfg, "causal", torch.bfloat16, "sdpa")
        lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=dropout, target_modules=targets)
        model = get_peft_model(model, lora, autocast_adapter_dtype=False)
        model.train()
        inputs = _inputs("causal", cfg["vocab_size"])
        measured, out = saved_bytes(model, inputs)
        names = ["q_proj", "v_proj"] if targets != "all-linear" else ["all-linear"]
        counts = adapter_counts(arch, names, 8)
        trainable = Trainable(
            all_linear=False,
            names=counts.names,
            lora_rank=8,
            head=False,
            router=False,
            lora_dropout=dropout > 0,
        )
        ours = _ours_saved(arch, family, act_bytes=2, flash=True, trainable=trainable)
        rows.append(
            _row("llama + PEFT", "saved_activations", f"bf16 sdpa, {label}", measured, ours)
        )
        out.loss.backward()
        grads = sum(
            p.grad.untyped_storage().nbytes() for p in model.parameters() if p.grad is not None
        )
        rows.append(_row("llama + PEFT", "gradients", f"bf16, {label}", grads, counts.total * 2))
    return rows


def measure_checkpointing() -> list[dict[str, Any]]:
    """transformers gradient checkpointing: each layer keeps its input only."""
    import torch

    from gpu_advisor.core.models import parse_hf_config

    family = FAMILIES[0]
    cfg = small_config(family)
    arch = parse_hf_config(copy.deepcopy(cfg))
    model = _hf_model(cfg, "causal", torch.bfloat16, "sdpa")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    measured, _ = saved_bytes(model, _inputs("causal", cfg["vocab_size"]))
    ours = _ours_saved(arch, family, act_bytes=2, flash=True, recompute="full")
    return [
        _row(
            "llama",
            "saved_activations",
            "bf16 sdpa, full checkpointing (forward)",
            measured,
            ours,
            "recompute working set not in the forward's saved set",
        )
    ]


def run() -> dict[str, Any]:
    import peft
    import torch
    import transformers

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)  # MoE routing must not depend on reduction order
    rows: list[dict[str, Any]] = []
    for family in FAMILIES:
        rows.extend(measure_family(family))
    rows.extend(measure_lora())
    rows.extend(measure_checkpointing())
    return {
        "about": "bench/harness_memory.py: PyTorch CPU measurements vs gpu_advisor.core.memory",
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
        },
        "shapes": {
            "training": {"sequence": SEQ, "batch": BATCH},
            "generate": {"prompt": PROMPT, "new_tokens": NEW},
            "window": WINDOW,
        },
        "results": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    result = run()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    failed = [r for r in result["results"] if not r["pass"]]
    for r in result["results"]:
        flag = "ok  " if r["pass"] else "FAIL"
        label = f"{r['family']:32s} {r['quantity']:18s} {r['setting']:38s}"
        numbers = f"{r['measured_bytes']:>12,} {r['ours_bytes']:>12,} {r['error_pct']:+7.2f}%"
        print(f"{flag} {label} {numbers}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
