"""Which tensors an implementation keeps for backward: the kernel profiles of the inventory.

Two kinds of profile:

* :data:`MEGATRON`: Korthikanti et al. 2022's accounting (fused LayerNorm/RMSNorm that keep only
  their input, fused activation functions, 16-bit softmax, dropout), what Megatron-LM / NeMo /
  TransformerEngine training stores. The published ``34 + 5as/h`` is this profile.
* :data:`HF_KERNELS`: what Hugging Face transformers 5.17's eager PyTorch modeling code keeps,
  per family. Each entry was established by recording the tensors saved for backward
  (``torch.autograd.graph.saved_tensors_hooks``, each storage counted once) on small configs of
  the family, and is checked by the measured harness (``tests/harness``).

Sources for the HF behaviours (transformers 5.17 source):
``models/llama/modeling_llama.py`` ``LlamaRMSNorm`` (``hidden_states.to(torch.float32)``, then
``weight * hidden_states.to(input_dtype)``); ``models/gemma2/modeling_gemma2.py``
``Gemma2RMSNorm`` (normalises and scales in fp32), attention and final-logit soft-capping
(``torch.tanh``); ``activations.py`` ``NewGELUActivation`` (Python tanh GeLU);
``integrations/sdpa_attention.py`` (``repeat_kv`` unless ``use_gqa_in_sdpa``, which needs no
explicit mask); ``modeling_utils``/``eager_attention_forward`` (``softmax(..., dtype=float32)``);
``models/deepseek_v3`` router (``F.linear(hidden_states.type(torch.float32), ...)``);
``models/gpt_oss`` experts (clamped SwiGLU with ``sigmoid``) and RMSNorm.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

NormKind = Literal["fused", "layernorm", "rms_upcast", "rms_fp32", "rms_t5"]
ActKind = Literal["native", "relu", "gelu_python"]


class Kernels(Struct, frozen=True, kw_only=True):
    """How one implementation stores activations.

    Attributes:
        name: profile name.
        norm: ``fused``/``layernorm`` keep the input (B bytes per element); ``rms_upcast``
            keeps an fp32 copy and the normalised tensor (4 + B); ``rms_fp32`` keeps its input
            in fp32 and the fp32 normalised tensor (8); ``rms_t5`` keeps the fp32 copy, the
            input and the normalised tensor (4 + 2B; 8 in fp32).
        norms_per_layer: norms in one layer (Gemma 2/3: 4; parallel-attention Falcon: 1).
        qk_norm: per-head RMSNorm on queries and keys (Qwen3, Gemma 3).
        mlp_activation: ``native`` keeps its input; ``relu`` its output (which is the next
            linear's input too); ``gelu_python`` keeps four tensors (input, tanh, 1 + tanh,
            0.5 x).
        expert_tensors: intermediate-width tensors one routed token keeps in a gated expert
            (gate/up output counted as two, activation output, product): 4; gpt-oss's
            clamped SwiGLU keeps 7.
        eager_softmax_fp32: eager attention keeps fp32 probabilities plus a compute-dtype copy.
        attention_softcap: eager attention soft-caps the scores with tanh (Gemma 2) and keeps
            the tanh output.
        logit_softcap: the output logits are soft-capped with tanh (Gemma 2) and its output kept.
        dropout: the model trains with dropout (GPT-2, BERT, T5, OPT configs: p = 0.1).
        fused_qkv_query_view: the query handed to attention is a view of a fused QKV output, so
            the whole fused buffer stays alive next to the cached K/V copies (GPT-2).
        sdpa_mask_repeats_kv: with an explicit attention mask (sliding-window layers shorter
            than the sequence) SDPA gets K/V repeated to every head and keeps the mask.
        router_fp32_input: the MoE router runs on an fp32 copy of the hidden state
            (DeepSeek-V3).
    """

    name: str
    norm: NormKind
    norms_per_layer: int = 2
    qk_norm: bool = False
    mlp_activation: ActKind = "native"
    expert_tensors: int = 4
    eager_softmax_fp32: bool = True
    attention_softcap: bool = False
    logit_softcap: bool = False
    dropout: bool = False
    fused_qkv_query_view: bool = False
    sdpa_mask_repeats_kv: bool = False
    router_fp32_input: bool = False


MEGATRON = Kernels(name="megatron", norm="fused", eager_softmax_fp32=False, dropout=True)
"""Korthikanti et al. 2022 (arXiv 2205.05198, section 4.1): fused kernels, 16-bit softmax,
dropout; the profile of Megatron-LM-style frameworks (used with tensor/pipeline parallel)."""

_HF_LLAMA = Kernels(name="hf-llama", norm="rms_upcast", sdpa_mask_repeats_kv=True)
_HF_QWEN3 = Kernels(name="hf-qwen3", norm="rms_upcast", qk_norm=True, sdpa_mask_repeats_kv=True)
_HF_GEMMA3 = Kernels(
    name="hf-gemma3", norm="rms_fp32", norms_per_layer=4, qk_norm=True, sdpa_mask_repeats_kv=True
)

HF_KERNELS: dict[str, Kernels] = {
    "llama": _HF_LLAMA,
    "mistral": _HF_LLAMA,
    "mixtral": _HF_LLAMA,
    "qwen2": _HF_LLAMA,
    "qwen2_moe": _HF_LLAMA,
    "phi3": _HF_LLAMA,
    "qwen3": _HF_QWEN3,
    "qwen3_moe": _HF_QWEN3,
    "deepseek_v3": Kernels(
        name="hf-deepseek-v3", norm="rms_upcast", router_fp32_input=True, sdpa_mask_repeats_kv=True
    ),
    "gpt_oss": Kernels(
        name="hf-gpt-oss",
        norm="rms_fp32",
        expert_tensors=7,
        eager_softmax_fp32=False,
        sdpa_mask_repeats_kv=True,
    ),
    "gemma": Kernels(name="hf-gemma", norm="rms_fp32", sdpa_mask_repeats_kv=True),
    "gemma2": Kernels(
        name="hf-gemma2",
        norm="rms_fp32",
        norms_per_layer=4,
        attention_softcap=True,
        logit_softcap=True,
        sdpa_mask_repeats_kv=True,
    ),
    "gemma3": _HF_GEMMA3,
    "gemma3_text": _HF_GEMMA3,
    "gpt2": Kernels(
        name="hf-gpt2",
        norm="layernorm",
        mlp_activation="gelu_python",
        eager_softmax_fp32=False,
        dropout=True,
        fused_qkv_query_view=True,
    ),
    "opt": Kernels(name="hf-opt", norm="layernorm", mlp_activation="relu", dropout=True),
    "bert": Kernels(name="hf-bert", norm="layernorm", eager_softmax_fp32=False, dropout=True),
    "t5": Kernels(name="hf-t5", norm="rms_t5", mlp_activation="relu", dropout=True),
    "falcon": Kernels(name="hf-falcon", norm="layernorm", norms_per_layer=1),
}
"""``Architecture.family`` -> what transformers 5.17 keeps for backward."""


def kernels_for(family: str) -> Kernels:
    """The Hugging Face profile of a family; the Llama profile for families not in the table."""
    return HF_KERNELS.get(family, _HF_LLAMA)


def norm_bytes_per_element(kind: NormKind, act_bytes: int) -> int:
    """Bytes one norm keeps per normalised element (see :class:`Kernels`).

    Example: Llama's RMSNorm in bf16 keeps an fp32 copy (4 B) and the normalised bf16 tensor
    (2 B): 6 bytes per element; a fused or native LayerNorm keeps its 2-byte input.
    """
    match kind:
        case "fused" | "layernorm":
            return act_bytes
        case "rms_upcast":
            return 4 + act_bytes
        case "rms_fp32":
            return 8
        case "rms_t5":
            return 4 + 2 * act_bytes if act_bytes != 4 else 8
