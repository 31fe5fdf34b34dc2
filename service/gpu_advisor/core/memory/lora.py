"""LoRA adapters: which linears they target and how many parameters they add.

LoRA (Hu et al. 2021, arXiv 2106.09685, section 4.1) adds to a frozen linear W (d_out x d_in)
two trainable matrices A (r x d_in) and B (d_out x r): ``r * (d_in + d_out)`` parameters per
targeted linear, per copy, per layer. Target names follow PEFT's ``target_modules`` matching (a
module matches when its name equals a listed name); ``all-linear`` targets every linear of the
blocks and not the output head (PEFT ``INCLUDE_LINEAR_LAYERS_SHORTHAND``); ``lm_head`` targets
the output head (Lit-GPT's ``lora_head``). Routed experts are targeted like any linear (PEFT's
``target_parameters`` for fused 3-D expert weights; transformers < 5 stored them as nn.Linear).

Example (Raschka, "Finetuning LLMs with LoRA and QLoRA", reference case E15): Llama-2-7B,
r = 8 on q_proj and v_proj: 32 layers x 2 modules x 8 x (4096 + 4096) = 4,194,304 parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError

ALL_LINEAR = "all-linear"
HEAD = "lm_head"


def adapter_parameters(in_features: int, out_features: int, rank: int) -> int:
    """Parameters of one LoRA adapter pair: r x (d_in + d_out)."""
    return rank * (in_features + out_features)


class AdapterCounts(Struct, frozen=True, kw_only=True):
    """LoRA parameters of a model, split the way parallelism splits them.

    Attributes:
        names: the block-linear names that carry adapters.
        dense: adapter parameters on non-routed block linears.
        routed: adapter parameters on routed experts.
        head: adapter parameters on the output head.
    """

    names: frozenset[str]
    dense: int
    routed: int
    head: int

    @property
    def total(self) -> int:
        return self.dense + self.routed + self.head


def resolve_targets(
    arch: Architecture, targets: Sequence[str], *, field: str = "workload.lora_targets"
) -> tuple[frozenset[str], bool]:
    """The block-linear names a target list selects, and whether the head is targeted.

    Raises:
        InvalidSpecError: a target name matches no linear of the model (naming the ones it has).
    """
    available = sorted({m.name for m in arch.linears})
    names: set[str] = set()
    head = False
    for i, target in enumerate(targets):
        if target == ALL_LINEAR:
            names.update(available)
        elif target == HEAD:
            head = True
        elif target in available:
            names.add(target)
        elif not arch.linears:
            # approximate architecture without module names: accept any name as "a linear"
            names.add(target)
        else:
            raise InvalidSpecError(
                f"LoRA target {target!r} matches no linear of {arch.name}; use "
                f"'all-linear', 'lm_head' or some of: {', '.join(available)}",
                field=f"{field}.{i}",
            )
    return frozenset(names), head


def adapter_counts(arch: Architecture, targets: Sequence[str], rank: int) -> AdapterCounts:
    """LoRA parameters for ``targets`` at rank ``rank`` (whole model, before any parallelism).

    Approximate architectures (a bare parameter count, no module list) are treated as
    ``all-linear`` over a dense stack of four h x h and three h x ffn matrices per layer.
    """
    names, head = resolve_targets(arch, targets)
    dense = routed = 0
    if arch.linears:
        for m in arch.linears:
            if m.name not in names:
                continue
            count = adapter_parameters(m.in_features, m.out_features, rank) * (
                m.copies_per_layer * m.layers
            )
            if m.expert == "routed":
                routed += count
            else:
                dense += count
    else:
        h, f = arch.hidden_size, arch.intermediate_size
        per_layer = 4 * adapter_parameters(h, h, rank) + 3 * adapter_parameters(h, f, rank)
        dense = per_layer * arch.num_layers
    head_params = adapter_parameters(arch.hidden_size, arch.vocab_size, rank) if head else 0
    return AdapterCounts(names=names, dense=dense, routed=routed, head=head_params)
