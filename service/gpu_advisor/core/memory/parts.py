"""The parts of an estimate that depend on the plan's shape only, computed fresh or
remembered across plans.

:func:`~gpu_advisor.core.memory.estimate.estimate_memory` computes every part for each call
(:data:`FRESH`). A search over hundreds of plans of one model and workload -- the planner's --
asks for the same parts again and again: a pipeline stage's parameters depend on TP, PP, EP and
the stage only, not on data parallelism or ZeRO; a layer kind's activation inventory on the
activation inputs only; LoRA adapter counts on nothing of the plan. :class:`RememberedParts`
computes each once for one architecture and workload. Both give the same values.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.memory.activation_stages import layer_kinds
from gpu_advisor.core.memory.activations import ActivationSetup, LayerActivations, LayerKind
from gpu_advisor.core.memory.activations import layer_activations as _layer_activations
from gpu_advisor.core.memory.layout import (
    LayerShare,
    ShardParams,
    heaviest_stage_candidates,
    layer_shares,
    shard_params,
)
from gpu_advisor.core.memory.lora import AdapterCounts, adapter_counts
from gpu_advisor.core.memory.validate import total_stack_layers
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import TrainingWorkload


class Parts:
    """The shape-only parts of an estimate, computed on each call."""

    def shard(self, arch: Architecture, plan: ParallelPlan, stage: int) -> ShardParams:
        """:func:`~gpu_advisor.core.memory.layout.shard_params`."""
        return shard_params(arch, plan, stage)

    def stages(self, arch: Architecture, pipeline_parallel: int) -> list[int]:
        """:func:`~gpu_advisor.core.memory.layout.heaviest_stage_candidates`."""
        return heaviest_stage_candidates(arch, pipeline_parallel)

    def adapters(self, arch: Architecture, workload: TrainingWorkload) -> AdapterCounts:
        """:func:`~gpu_advisor.core.memory.lora.adapter_counts` of the workload's targets."""
        return adapter_counts(arch, workload.lora_targets, workload.lora_rank)

    def kinds(
        self, arch: Architecture, layer_range: tuple[int, int], sequence: int
    ) -> list[tuple[LayerKind, int]]:
        """:func:`~gpu_advisor.core.memory.activation_stages.layer_kinds`."""
        return layer_kinds(arch, layer_range, sequence)

    def inventories(
        self, arch: Architecture, setup: ActivationSetup
    ) -> Mapping[LayerKind, LayerActivations]:
        """The activation inventory of every layer kind of the stack under ``setup``."""
        everything = (0, total_stack_layers(arch))
        return {
            kind: _layer_activations(arch, setup, kind)
            for kind, _ in self.kinds(arch, everything, setup.sequence)
        }


FRESH = Parts()
"""Parts computed on each call (nothing remembered)."""


class RememberedParts(Parts):
    """The shape-only parts of one architecture's estimates, each computed once.

    Keyed by what each part depends on (the plan's TP, PP and EP and the stage -- and the
    block linears' per-layer split by TP and EP alone; the activation inputs; the layer
    range), so it is only valid for the one architecture it was made for. Request-scoped:
    not shared between threads.
    """

    def __init__(self, arch: Architecture) -> None:
        self._arch = arch
        self._shards: dict[tuple[int, int, int, int], ShardParams] = {}
        self._shares: dict[tuple[int, int], tuple[LayerShare, ...]] = {}
        self._stages: dict[int, list[int]] = {}
        self._adapters: dict[tuple[tuple[str, ...], int], AdapterCounts] = {}
        self._kinds: dict[tuple[int, int, int], list[tuple[LayerKind, int]]] = {}
        self._inventories: dict[ActivationSetup, Mapping[LayerKind, LayerActivations]] = {}

    def _check(self, arch: Architecture) -> None:
        if arch is not self._arch:
            raise ValueError("RememberedParts serves the architecture it was made for")

    def shard(self, arch: Architecture, plan: ParallelPlan, stage: int) -> ShardParams:
        self._check(arch)
        tp, ep = plan.tensor_parallel, plan.expert_parallel
        key = (tp, plan.pipeline_parallel, ep, stage)
        found = self._shards.get(key)
        if found is None:
            # the block linears' split depends on TP and EP alone: every PP degree and stage
            # of them sums the same per-layer groups
            shares = self._shares.get((tp, ep))
            if shares is None:
                shares = self._shares[(tp, ep)] = layer_shares(arch, tp, ep)
            found = self._shards[key] = shard_params(arch, plan, stage, shares=shares)
        return found

    def stages(self, arch: Architecture, pipeline_parallel: int) -> list[int]:
        self._check(arch)
        found = self._stages.get(pipeline_parallel)
        if found is None:
            found = self._stages[pipeline_parallel] = heaviest_stage_candidates(
                arch, pipeline_parallel
            )
        return found

    def adapters(self, arch: Architecture, workload: TrainingWorkload) -> AdapterCounts:
        self._check(arch)
        key = (tuple(workload.lora_targets), workload.lora_rank)
        found = self._adapters.get(key)
        if found is None:
            found = self._adapters[key] = super().adapters(arch, workload)
        return found

    def kinds(
        self, arch: Architecture, layer_range: tuple[int, int], sequence: int
    ) -> list[tuple[LayerKind, int]]:
        self._check(arch)
        key = (layer_range[0], layer_range[1], sequence)
        found = self._kinds.get(key)
        if found is None:
            found = self._kinds[key] = layer_kinds(arch, layer_range, sequence)
        return found

    def inventories(
        self, arch: Architecture, setup: ActivationSetup
    ) -> Mapping[LayerKind, LayerActivations]:
        self._check(arch)
        found = self._inventories.get(setup)
        if found is None:
            found = self._inventories[setup] = super().inventories(arch, setup)
        return found
