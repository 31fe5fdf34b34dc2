"""Activations of a pipeline stage: the layers' inventories, recomputation, the embedding side,
the output head and the loss, and the micro-batches a 1F1B schedule keeps in flight.

Per-layer inventories come from :mod:`.activations`; this module adds them up for the layers a
GPU holds and adds the tensors outside the layers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.memory.activations import (
    MASK_BYTES,
    TOKEN_ID_BYTES,
    ActivationSetup,
    LayerActivations,
    LayerKind,
    layer_activations,
)
from gpu_advisor.core.memory.kernels import norm_bytes_per_element


def _ceil_div(value: int, divisor: int) -> int:
    return -(-value // divisor)


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
    inventories: Mapping[LayerKind, LayerActivations] | None = None,
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
        inventories: per layer kind, :func:`layer_activations` for this ``setup`` already
            computed (the stages of one plan share them); computed here when absent.
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
        known = inventories.get(kind) if inventories is not None else None
        layer = known if known is not None else layer_activations(arch, setup, kind)
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
        if k.embedding_norm:
            embedding += norm_bytes_per_element(k.norm, eb) * tokens * arch.hidden_size
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
        head_in = (
            norm_bytes_per_element(k.norm, eb, trainable=setup.trainable.all_linear)
            * target_tokens
            * arch.hidden_size
        )
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
    the sequence. Kinds are listed in the order of their first layer. Without sliding windows
    the counts are interval arithmetic; with them one pass over the window pattern.
    """
    if arch.encoder_only:
        enc, dec = arch.num_layers, 0
    else:
        enc, dec = arch.num_encoder_layers, arch.num_layers
    moe_model = arch.is_moe
    first_moe = dec - (arch.num_moe_layers if moe_model else 0)
    if moe_model and arch.num_moe_layers == 0:
        first_moe = 0
    start, end = layer_range
    # None: an encoder layer; (moe, windowed): a decoder layer
    counts: dict[tuple[bool, bool] | None, int] = {}
    encoder_end = min(end, enc)
    if start < encoder_end:
        counts[None] = encoder_end - start
    d0, d1 = max(start, enc) - enc, end - enc
    windows = arch.layer_windows
    if d0 < d1 and windows:
        period = len(windows)
        short = [w is not None and w < sequence for w in windows]
        for j in range(d0, d1):
            key = (moe_model and j >= first_moe, short[j % period])
            counts[key] = counts.get(key, 0) + 1
    elif d0 < d1:
        split = min(max(first_moe, d0), d1) if moe_model else d1
        if split > d0:
            counts[(False, False)] = split - d0
        if d1 > split:
            counts[(True, False)] = d1 - split
    return [
        (
            LayerKind(stack="encoder")
            if key is None
            else LayerKind(stack="decoder", moe=key[0], cross_attention=enc > 0, windowed=key[1]),
            count,
        )
        for key, count in counts.items()
    ]
