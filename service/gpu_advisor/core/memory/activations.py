"""Training activations: the tensors saved for backward, per layer and per stage, in bytes.

The model is an inventory of saved tensors, the generalisation of Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198, section 4.1,
Table 2). For a GPT layer (MHA, plain 4h GeLU MLP, LayerNorm, dropout, 16-bit) the inventory is
exactly the paper's ``s*b*h*(34 + 5*a*s/h)`` bytes:

* attention 11sbh + 5as^2b: QKV input 2sbh, Q and K 4sbh, V 2sbh, softmax output 2as^2b, its
  dropout mask as^2b and dropout output 2as^2b, output-projection input 2sbh, dropout mask sbh;
* MLP 19sbh: input 2sbh, first-linear output 8sbh, GeLU output 8sbh, dropout mask sbh;
* two LayerNorm inputs 4sbh.

Generalised to what implementations store (see :mod:`.kernels`): GQA/MQA K and V widths,
explicit head_dim, gated MLPs (2sbh + 8sbf bytes in 16-bit), MoE FFNs (``experts_per_token``
routed copies of each token plus router state: "MoE FFN activations scale with experts per
token"), MLA projections, the norm implementation, FlashAttention-style kernels (Q, K, V, output
and an fp32 log-sum-exp instead of the a*s^2 score tensors; Dao et al. 2022, arXiv 2205.14135,
section 3.1), dropout masks (1 byte) only where the model trains with dropout, and LoRA (a frozen
linear does not save its input; an adapter saves its rank-r intermediate).

Tensor parallel with sequence parallel divides every term by t; without sequence parallel the
norm inputs, the block inputs and the dropout masks stay whole (Korthikanti Table 2:
sbh(10 + 24/t + 5as/(ht))). Selective recomputation drops the attention-score terms (Table 2);
full recomputation keeps each layer's input (2sbh in 16-bit, /t with SP) plus one layer's
working set during its recomputation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import msgspec
from msgspec import Struct

from gpu_advisor.core.architecture import Architecture, LinearModule
from gpu_advisor.core.memory.kernels import Kernels, norm_bytes_per_element

Recompute = Literal["none", "selective", "full"]

LSE_BYTES = 4
"""FlashAttention keeps one fp32 log-sum-exp per query row and head (FlashAttention-2
``softmax_lse``; PyTorch's flash kernels' ``logsumexp``)."""

MASK_BYTES = 1
"""A dropout mask is one byte per element (PyTorch ``native_dropout`` returns a bool mask;
Korthikanti's 'sbh' mask terms)."""

ROUTER_TOKEN_BYTES = 4
"""Per token: the fp32 sum that normalises the top-k weights (on top of 4 B per expert for the
fp32 router probabilities)."""

ROUTER_SLOT_BYTES = 41
"""Per token and routed slot, the dispatch bookkeeping of transformers 5.17's MoE blocks: the
top-k index (int64, 8 B), the cloned fp32 weight (4 B), three int64 sort/scatter indices (24 B),
a bool mask (1 B) and the fp32 routing weight applied to the expert output (4 B)."""

TOKEN_ID_BYTES = 8
"""int64 token ids the embedding backward keeps."""


class Trainable(Struct, frozen=True, kw_only=True):
    """Which block linears train (their inputs are saved) and the LoRA rank on targeted ones.

    Attributes:
        all_linear: every block linear trains (full fine-tuning).
        names: module names that carry LoRA adapters (PEFT name matching).
        lora_rank: adapter rank r (0 for full fine-tuning).
        head: the output head trains (its input is saved).
        router: MoE routers train (their input is saved).
        lora_dropout: the adapters apply dropout to their input (PEFT ``lora_dropout`` > 0):
            ``lora_A`` then keeps the dropout output and a 1-byte mask instead of the input.
    """

    all_linear: bool
    names: frozenset[str] = frozenset()
    lora_rank: int = 0
    head: bool = True
    router: bool = True
    lora_dropout: bool = False

    def trains(self, module: LinearModule) -> bool:
        """The module's input is kept: it trains, or an adapter without dropout reads it."""
        if self.all_linear:
            return True
        return module.name in self.names and not self.lora_dropout


FULL = Trainable(all_linear=True)
"""Full fine-tuning / pre-training: everything trains."""


class LayerKind(Struct, frozen=True, kw_only=True):
    """What distinguishes one layer's inventory from another's.

    Attributes:
        stack: ``decoder`` or ``encoder``.
        moe: the FFN is a routed-expert MoE.
        cross_attention: decoder layer of an encoder-decoder model.
        windowed: a sliding-window layer whose window is shorter than the sequence (SDPA then
            takes an explicit mask).
    """

    stack: Literal["decoder", "encoder"] = "decoder"
    moe: bool = False
    cross_attention: bool = False
    windowed: bool = False


class ActivationSetup(Struct, frozen=True, kw_only=True):
    """Inputs of the activation inventory that are not architecture.

    Attributes:
        sequence: tokens per sequence s.
        batch: micro-batch size b.
        act_bytes: bytes per activation element B (2 under bf16/fp16 autocast, 4 in fp32).
        flash_attention: FlashAttention / SDPA fused kernels (no a*s^2 tensors).
        kernels: implementation profile (:mod:`.kernels`).
        trainable: which linears train.
        tensor_parallel: t.
        sequence_parallel: Megatron sequence parallelism (with t > 1).
        recompute: ``none`` | ``selective`` | ``full``.
        decoder_sequence: target tokens per sequence of an encoder-decoder model (its decoder
            layers run on these); None: the same as ``sequence``.
    """

    sequence: int
    batch: int
    act_bytes: int
    flash_attention: bool
    kernels: Kernels
    trainable: Trainable = FULL
    tensor_parallel: int = 1
    sequence_parallel: bool = False
    recompute: Recompute = "none"
    decoder_sequence: int | None = None


class LayerActivations(Struct, frozen=True, kw_only=True):
    """Bytes one layer saves for one micro-batch on one GPU, by part."""

    norms: int
    block_inputs: int
    attention: int
    attention_scores: int
    ffn: int
    router: int
    dropout_masks: int
    lora: int

    @property
    def total(self) -> int:
        return (
            self.norms
            + self.block_inputs
            + self.attention
            + self.attention_scores
            + self.ffn
            + self.router
            + self.dropout_masks
            + self.lora
        )


def korthikanti_layer_bytes(
    *,
    sequence: int,
    batch: int,
    hidden: int,
    heads: int,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    recompute: Recompute = "none",
) -> int:
    """Korthikanti et al. 2022, Table 2: activation bytes per layer (16-bit), as published.

    * no recomputation: sbh(34 + 5as/h); with TP: sbh(10 + 24/t + 5as/(ht)); TP + SP:
      sbh(34/t + 5as/(ht));
    * selective recomputation: sbh(10 + 24/t), or sbh*34/t with SP;
    * full recomputation: 2sbh (the layer input; Table 2 last row).

    Example: GPT-2 XL, s=1024, b=32, h=1600, a=25: 1024*32*1600*(34 + 5*25*1024/1600)
    = 5,976,883,200 bytes per layer.
    """
    s, b, h, a, t = sequence, batch, hidden, heads, tensor_parallel
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh
    score = 5 * a * s * s * b // t if recompute == "none" else 0
    if sequence_parallel:
        return 34 * sbh // t + score
    return 10 * sbh + 24 * sbh // t + score


def attention_score_bytes(*, heads: int, sequence: int, batch: int, element_bytes: int) -> int:
    """Bytes of one layer's materialised attention scores QK^T: a x s^2 x b x B.

    Example (von Platen, "Optimizing your LLM in production", section 2): 40 x 16000^2 x 2 B
    = 20.48e9 B = 19.07 GiB for one layer at N = 16,000.
    """
    return heads * sequence * sequence * batch * element_bytes


# --- roles of the block linears ---------------------------------------------------------------

_OUTPUT_PROJECTIONS = frozenset({"o_proj", "c_proj", "dense", "out_proj", "o", "wo"})


def _is_attention_output(module: LinearModule) -> bool:
    return module.attention and module.name in _OUTPUT_PROJECTIONS


def _is_attention_input(module: LinearModule) -> bool:
    return module.attention and module.name not in _OUTPUT_PROJECTIONS


def _is_down(module: LinearModule) -> bool:
    """An FFN output projection: narrows the intermediate width back to the hidden size."""
    return not module.attention and module.in_features > module.out_features


def _ceil_div(value: int, divisor: int) -> int:
    return -(-value // divisor)


def _ffn_tensors(gated: bool, activation: str, down_trains: bool, expert_tensors: int = 4) -> int:
    """Intermediate-width tensors an FFN keeps per token (excluding its input).

    Gated (SwiGLU/GeGLU): gate output (the activation's input), activation output, up output
    (the product's inputs) and the product (the down projection's input, kept if it trains).
    Plain: first-linear output (the activation's input) and the activation output (the second
    linear's input, kept if it trains); ReLU keeps only its output, which is also the second
    linear's input; the Python tanh GeLU keeps four tensors.
    """
    if gated:
        return expert_tensors - (0 if down_trains else 1)
    match activation:
        case "relu":
            return 1
        case "gelu_python":
            return 4 + (1 if down_trains else 0)
        case _:
            return 1 + (1 if down_trains else 0)


def layer_activations(
    arch: Architecture, setup: ActivationSetup, kind: LayerKind
) -> LayerActivations:
    """Bytes one layer saves for backward for one micro-batch (no recomputation), by part.

    Shapes: tokens T = s x b; hidden h; query heads a of width d; KV heads kv; FFN width f.
    All terms are bytes; replicated terms divide by t only with sequence parallel, sharded
    terms always divide by t (Korthikanti Table 2).
    """
    eb = setup.act_bytes
    k = setup.kernels
    t = setup.tensor_parallel
    sp = setup.sequence_parallel and t > 1
    b = setup.batch
    encoder_tokens = setup.sequence * b
    s = setup.sequence
    if kind.cross_attention and setup.decoder_sequence is not None:
        s = setup.decoder_sequence  # decoder layers of an encoder-decoder run on the targets
    tokens = s * b
    h = arch.hidden_size
    a = arch.num_attention_heads
    d = arch.head_dim
    kv = arch.num_kv_heads
    tr = setup.trainable
    modules = [m for m in arch.linears if m.stack == kind.stack] or list(arch.linears)

    def trains_any(predicate: Callable[[LinearModule], bool]) -> bool:
        if not modules:
            return tr.all_linear
        return any(tr.trains(m) for m in modules if predicate(m))

    def replicated(x: int) -> int:
        return _ceil_div(x, t) if sp else x

    def sharded(x: int) -> int:
        return _ceil_div(x, t)

    flash = setup.flash_attention
    no_scores = flash or setup.recompute == "selective"
    lse = LSE_BYTES * tokens * a if flash else 0
    norm_b = norm_bytes_per_element(k.norm, eb)
    norms = replicated(
        (k.norms_per_layer + (1 if kind.cross_attention else 0)) * norm_b * tokens * h
    )
    block_inputs = replicated(eb * tokens * h) if trains_any(_is_attention_input) else 0

    # --- attention ---
    attention = 0
    if arch.mla is not None:
        mla = arch.mla
        q_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        v_head = mla.v_head_dim
        q_width, k_width, v_width = a * q_head, a * q_head, a * v_head
        low_rank = mla.kv_lora_rank + (mla.q_lora_rank or 0)
        # q_a_layernorm / kv_a_layernorm and the inputs of the up projections
        attention += norm_b * tokens * low_rank
        if trains_any(lambda m: m.name in ("q_b_proj", "kv_b_proj")):
            attention += eb * tokens * low_rank
        attention += eb * tokens * mla.qk_rope_head_dim  # the shared rotary key part
    else:
        v_head = d
        q_width, k_width, v_width = a * d, kv * d, kv * d
        mask_path = flash and kind.windowed and k.sdpa_mask_repeats_kv
        if not no_scores or mask_path:
            k_width = v_width = a * d  # K/V repeated to every query head (repeat_kv)
        if mask_path:
            attention += eb * b * s * s  # the explicit sliding-window mask
    if k.qk_norm:
        attention += norm_b * tokens * (a + kv) * d
    attention += eb * tokens * (q_width + k_width + v_width)
    if flash and k.fused_qkv_query_view and arch.mla is None:
        attention += eb * tokens * 2 * kv * d  # the fused buffer's K/V parts stay alive with Q
    out_width = a * v_head
    scores = 0
    probs = a * s * s * b
    if flash:
        attention += eb * tokens * out_width + lse
    elif no_scores:
        # selective recomputation: the output-projection input stays, the scores are recomputed
        if trains_any(_is_attention_output):
            attention += eb * tokens * out_width
    else:
        scores = _score_bytes(probs, eb, k)
        if trains_any(_is_attention_output):
            attention += eb * tokens * out_width
    if kind.cross_attention:
        # queries from the decoder, keys/values projected from the encoder output
        attention += eb * (tokens * q_width + encoder_tokens * 2 * kv * d)
        if trains_any(_is_attention_input):
            block_inputs += replicated(eb * tokens * h)
        if flash:
            attention += eb * tokens * out_width + lse
        else:
            if not no_scores:
                scores += _score_bytes(a * s * setup.sequence * b, eb, k)
            if trains_any(_is_attention_output):
                attention += eb * tokens * out_width
    attention = sharded(attention)
    scores = sharded(scores)

    # --- FFN ---
    router = 0
    if kind.moe:
        kk = arch.num_experts_per_token
        slots = tokens * kk
        e_ffn = arch.moe_intermediate_size or arch.intermediate_size
        routed = [m for m in modules if m.expert == "routed"]
        down_trains = tr.all_linear or any(tr.trains(m) for m in routed if _is_down(m))
        ffn = (
            eb
            * slots
            * e_ffn
            * _ffn_tensors(arch.gated_mlp, k.mlp_activation, down_trains, k.expert_tensors)
        )
        ffn += eb * slots * h  # each expert's output, kept for the routing-weight product
        if trains_any(lambda m: m.expert == "routed" and not _is_down(m)):
            ffn += eb * slots * h  # the tokens gathered for each expert
        if arch.num_shared_experts:
            shared = [m for m in modules if m.expert == "shared"]
            shared_down = tr.all_linear or any(tr.trains(m) for m in shared if _is_down(m))
            ffn += (
                eb
                * tokens
                * _shared_width(arch, shared)
                * _ffn_tensors(arch.gated_mlp, k.mlp_activation, shared_down)
            )
        ffn = sharded(ffn)
        router = tokens * (4 * arch.num_experts + ROUTER_TOKEN_BYTES) + slots * ROUTER_SLOT_BYTES
        if k.router_fp32_input:
            router += 4 * tokens * h
        ffn_input = tr.router or trains_any(lambda m: m.expert != "dense" and not _is_down(m))
    else:
        dense = [m for m in modules if m.expert == "dense" and not m.attention]
        down_trains = tr.all_linear or any(tr.trains(m) for m in dense if _is_down(m))
        ffn = sharded(
            eb
            * tokens
            * arch.intermediate_size
            * _ffn_tensors(arch.gated_mlp, k.mlp_activation, down_trains)
        )
        ffn_input = trains_any(lambda m: not m.attention and not _is_down(m))
    if ffn_input:
        block_inputs += replicated(eb * tokens * h)

    masks = 0
    if k.dropout:
        # dropout after attention output, (cross-attention output) and FFN output
        masks = replicated(MASK_BYTES * tokens * h * (3 if kind.cross_attention else 2))

    lora = 0
    if tr.lora_rank and not tr.all_linear:
        for m in modules:
            if m.name in tr.names:
                adapter_tokens = tokens * (
                    arch.num_experts_per_token if m.expert == "routed" else 1
                )
                # lora_B keeps lora_A's rank-r output; with dropout lora_A keeps its own
                # dropped-out copy of the input and the mask (one per targeted module)
                per_copy = m.copies_per_layer if m.expert != "routed" else 1
                lora += eb * adapter_tokens * tr.lora_rank * per_copy
                if tr.lora_dropout:
                    lora += (eb + MASK_BYTES) * adapter_tokens * m.in_features * per_copy
        lora = sharded(lora)

    return LayerActivations(
        norms=norms,
        block_inputs=block_inputs,
        attention=attention,
        attention_scores=scores,
        ffn=ffn,
        router=router,
        dropout_masks=masks,
        lora=lora,
    )


def _score_bytes(probs: int, act_bytes: int, k: Kernels) -> int:
    """Eager attention's a*s^2*b tensors: the softmax output (fp32 in HF Llama-style code, 16-bit
    in Megatron), the dropout mask and output when training with dropout, else the
    compute-dtype copy of fp32 probabilities; the tanh output when scores are soft-capped."""
    softmax = 4 if k.eager_softmax_fp32 else act_bytes
    total = softmax * probs
    if k.dropout:
        total += (MASK_BYTES + act_bytes) * probs
    elif softmax != act_bytes:
        total += act_bytes * probs
    if k.attention_softcap:
        total += act_bytes * probs
    return total


def _shared_width(arch: Architecture, shared: list[LinearModule]) -> int:
    for m in shared:
        if _is_down(m):
            return m.in_features * m.copies_per_layer
    return (arch.moe_intermediate_size or arch.intermediate_size) * max(1, arch.num_shared_experts)


def full_recompute_layer_bytes(hidden: int, setup: ActivationSetup) -> int:
    """Full recomputation keeps each layer's input: B x s x b x h (Korthikanti: 2sbh in
    16-bit), divided by t with sequence parallelism."""
    value = setup.act_bytes * setup.sequence * setup.batch * hidden
    t = setup.tensor_parallel
    return _ceil_div(value, t) if setup.sequence_parallel and t > 1 else value


def loss_bytes(
    tokens: int, vocab: int, act_bytes: int, *, tensor_parallel: int = 1
) -> tuple[int, int]:
    """(saved, transient) bytes of the output logits and the cross-entropy loss.

    Saved: the fp32 log-probabilities cross entropy keeps (transformers ``ForCausalLMLoss``
    upcasts the logits with ``.float()``; Megatron's ``vocab_parallel_cross_entropy`` also
    computes in fp32): 4 x tokens x vocab.
    Transient at the start of backward: the logits (B bytes each, held by the model output), the
    fp32 gradient of the log-probabilities and the fp32 gradient of the logits:
    (B + 8) x tokens x vocab. Vocabulary-parallel over t.
    """
    v = _ceil_div(vocab, tensor_parallel)
    return 4 * tokens * v, (act_bytes + 8) * tokens * v


class StageActivations(Struct, frozen=True, kw_only=True):
    """Activation bytes of one GPU (one pipeline stage) for one training step, by part.

    Attributes:
        layers: bytes all layers of the stage keep for ONE micro-batch.
        embedding: embedding-side tensors (token ids, embedding dropout mask).
        head: final norm and output-head input (last stage).
        loss_saved: fp32 log-probabilities the loss keeps (and soft-capped logits).
        logits_transient: logits and loss gradients alive at the start of backward.
        recompute_working_set: one layer's full inventory while it is recomputed.
        micro_batches_in_flight: micro-batches whose activations the stage holds.
    """

    layers: int
    embedding: int
    head: int
    loss_saved: int
    logits_transient: int
    recompute_working_set: int
    micro_batches_in_flight: int

    @property
    def saved(self) -> int:
        """Bytes saved for backward across the micro-batches in flight (what
        ``saved_tensors_hooks`` records)."""
        return (self.layers + self.embedding + self.head + self.loss_saved) * (
            self.micro_batches_in_flight
        )

    @property
    def peak(self) -> int:
        """Saved bytes plus the transient buffers alive at the peak of the step."""
        return self.saved + self.logits_transient + self.recompute_working_set


def stage_activations(
    arch: Architecture,
    setup: ActivationSetup,
    *,
    layers: Sequence[tuple[LayerKind, int]],
    first_stage: bool,
    last_stage: bool,
    micro_batches_in_flight: int = 1,
) -> StageActivations:
    """Activations of one pipeline stage.

    Args:
        arch: architecture.
        setup: activation inputs.
        layers: (kind, count) of the layers on the stage.
        first_stage: holds the embedding.
        last_stage: holds the head and the loss.
        micro_batches_in_flight: 1F1B keeps up to PP micro-batches on the first stage
            (Narayanan et al. 2021, arXiv 2104.04473, section 2.2.1; Korthikanti section 4.2.3).
    """
    eb = setup.act_bytes
    tokens = setup.sequence * setup.batch
    encoder_decoder = arch.num_encoder_layers > 0 and not arch.encoder_only
    target_tokens = tokens
    if encoder_decoder and setup.decoder_sequence is not None:
        target_tokens = setup.decoder_sequence * setup.batch
    t = setup.tensor_parallel
    sp = setup.sequence_parallel and t > 1
    k = setup.kernels
    per_mb = 0
    working = 0
    for kind, count in layers:
        if count <= 0:
            continue
        layer = layer_activations(arch, setup, kind)
        if setup.recompute == "full":
            layer_setup = setup
            if kind.cross_attention and setup.decoder_sequence is not None:
                layer_setup = msgspec.structs.replace(setup, sequence=setup.decoder_sequence)
            per_mb += count * full_recompute_layer_bytes(arch.hidden_size, layer_setup)
            working = max(working, layer.total)
        else:
            per_mb += count * layer.total
    embedding = 0
    if first_stage:
        embedding = TOKEN_ID_BYTES * tokens
        if k.dropout:
            embedding += (
                _ceil_div(MASK_BYTES * tokens * arch.hidden_size, t)
                if sp
                else (MASK_BYTES * tokens * arch.hidden_size)
            )
        if encoder_decoder:
            # the encoder output: every decoder layer's cross-attention K/V input
            embedding += eb * tokens * arch.hidden_size
    head = loss_saved = transient = 0
    if last_stage and not arch.encoder_only:
        head_in = norm_bytes_per_element(k.norm, eb) * target_tokens * arch.hidden_size
        if setup.trainable.head:
            head_in += eb * target_tokens * arch.hidden_size
        head = _ceil_div(head_in, t) if sp else head_in
        loss_saved, transient = loss_bytes(target_tokens, arch.vocab_size, eb, tensor_parallel=t)
        if k.logit_softcap:
            loss_saved += eb * target_tokens * _ceil_div(arch.vocab_size, t)
    return StageActivations(
        layers=per_mb,
        embedding=embedding,
        head=head,
        loss_saved=loss_saved,
        logits_transient=transient,
        recompute_working_set=working,
        micro_batches_in_flight=micro_batches_in_flight,
    )


def layer_kinds(
    arch: Architecture, layer_range: tuple[int, int], sequence: int
) -> list[tuple[LayerKind, int]]:
    """Group the layers [start, end) of the stack (encoder layers first) by kind.

    MoE layers are the last ``num_moe_layers`` decoder layers (dense-first layers, DeepSeek-V3
    ``first_k_dense_replace``); a layer is ``windowed`` when its sliding window is shorter than
    the sequence.
    """
    if arch.encoder_only:
        enc, dec = arch.num_layers, 0
    else:
        enc, dec = arch.num_encoder_layers, arch.num_layers
    first_moe = dec - (arch.num_moe_layers if arch.is_moe else 0)
    if arch.is_moe and arch.num_moe_layers == 0:
        first_moe = 0
    windows = arch.layer_windows
    counts: dict[LayerKind, int] = {}
    for index in range(layer_range[0], layer_range[1]):
        if index < enc:
            kind = LayerKind(stack="encoder")
        else:
            j = index - enc
            window = windows[j % len(windows)] if windows else None
            kind = LayerKind(
                stack="decoder",
                moe=arch.is_moe and j >= first_moe,
                cross_attention=enc > 0,
                windowed=window is not None and window < sequence,
            )
        counts[kind] = counts.get(kind, 0) + 1
    return list(counts.items())
