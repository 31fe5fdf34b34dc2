"""How fast the replicas of one fitted serving shape run, shared by the groups of a request.

A group's serving speed (:mod:`gpu_advisor.core.planner.serving`) depends on the group only
through the replica's fit (its shape and per-GPU requirement on the group's GPU capacity),
the GPU, the compute path of the weight dtype, the prefill efficiency and the links of its
collectives: the other inputs of
:func:`~gpu_advisor.core.planner.performance.estimate_inference` (the model, the workload)
are the request's. Groups that agree on all of those -- e.g. instances of one GPU type with
4 and 8 GPUs, both on NVLink, sizing a replica of 2 -- share one :class:`ReplicaSpeed`: its
estimates per batch, its throughput-target searches and its deployed estimates are computed
once per request instead of once per group.

A deployment's rate needs only the estimates per batch
(:meth:`ReplicaSpeed.tokens_per_second`); its per-GPU breakdown and estimate
(:meth:`ReplicaSpeed.deployment`) are taken only for the deployment a group chooses.
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.planner.hardware import ComputePath, Links
from gpu_advisor.core.planner.performance import (
    InferenceEstimate,
    ServingFlops,
    deployment_tokens_per_second,
    estimate_inference,
    replica_timing,
    sequences_per_replica,
    timed_estimate,
)
from gpu_advisor.core.planner.topology import SearchSpace, smallest_true
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload


def deployed(replica: ParallelPlan, replicas: int) -> ParallelPlan:
    """``replicas`` copies of the replica shape ``replica`` (its ``data_parallel`` becomes
    ``replicas``)."""
    return ParallelPlan(
        tensor_parallel=replica.tensor_parallel,
        pipeline_parallel=replica.pipeline_parallel,
        data_parallel=replicas,
        expert_parallel=replica.expert_parallel,
    )


class Deployment(Struct, frozen=True):
    """``replicas`` replicas of one shape on one GPU type.

    Attributes:
        plan: the replica's TP x PP (x EP) with ``data_parallel = replicas``.
        memory: per-GPU breakdown of ``plan`` on the GPU capacity.
        estimate: one replica's speed serving its share of the sequences.
        tokens_per_second: output tokens per second of all replicas together.
    """

    plan: ParallelPlan
    memory: MemoryBreakdown
    estimate: InferenceEstimate
    tokens_per_second: float


class ReplicaSpeed:
    """Speeds of one replica shape fitted on one GPU capacity, on one GPU over ``link``.

    Each answer is computed on first demand and remembered; what no batch changes is taken
    once (:func:`~.performance.replica_timing` of ``one``).

    Args:
        space: the request's search space (model, memory estimator).
        workload: the request's serving workload.
        flops: :func:`~.performance.serving_flops` of the request's model and workload.
        replica: the replica's TP x PP (x EP), ``data_parallel`` 1.
        one: per-GPU requirement of the replica holding one sequence (``data_parallel`` =
            ``workload.concurrency``: one sequence per replica).
        per_replica: most full-context sequences one replica runs at once (None: unbounded).
        capacity_bytes: the GPU's exposed bytes (the breakdowns of deployed plans are taken
            on it).
        gpu: the GPU (memory bandwidth).
        compute: the compute path of the weight dtype on ``gpu`` (peak TFLOPS).
        efficiency: utilisation of peak compute for prefill.
        link: the links of the replica's collectives (tensor-parallel traffic).
    """

    def __init__(
        self,
        space: SearchSpace,
        workload: InferenceWorkload,
        flops: ServingFlops,
        *,
        replica: ParallelPlan,
        one: MemoryBreakdown,
        per_replica: int | None,
        capacity_bytes: int,
        gpu: GpuSpec,
        compute: ComputePath,
        efficiency: float,
        link: Links,
    ) -> None:
        self._space = space
        self._workload = workload
        self._flops = flops
        self._replica = replica
        self._one = one
        # what every batch's estimate shares, on one's requirement (one sequence per replica)
        self._timing = replica_timing(
            space.arch,
            workload,
            deployed(replica, workload.concurrency),
            one,
            gpu,
            compute,
            link,
            per_replica,
            efficiency,
            flops,
        )
        self._per_replica = per_replica
        self._capacity_bytes = capacity_bytes
        self._gpu = gpu
        self._compute = compute
        self._efficiency = efficiency
        self._link = link
        self._estimates: dict[int, InferenceEstimate] = {}
        self._tokens: dict[int, float] = {}
        self._targets: dict[tuple[float, int], int] = {}
        self._deployments: dict[int, Deployment] = {}

    def estimate(self, batch: int) -> InferenceEstimate:
        """One replica serving ``batch`` sequences (at most ``per_replica``), its per-GPU
        requirement taken as ``one``'s: the weights and the KV bytes of one sequence."""
        found = self._estimates.get(batch)
        if found is None:
            found = self._estimates[batch] = timed_estimate(self._timing, batch)
        return found

    def rate(self, batch: int) -> float:
        """Output tokens per second of one replica serving ``batch`` sequences."""
        found = self._estimates.get(batch)
        if found is None:
            found = self.estimate(batch)
        return found.tokens_per_second

    def tokens_per_second(self, replicas: int) -> float:
        """Output tokens per second of ``replicas`` replicas sharing the workload's
        sequences (:func:`deployment_tokens_per_second`)."""
        found = self._tokens.get(replicas)
        if found is None:
            found = self._tokens[replicas] = deployment_tokens_per_second(
                self.rate, self._workload.concurrency, replicas
            )
        return found

    def replicas_for(self, goal: float, fewest: int) -> int:
        """Fewest replicas, at least ``fewest``, whose combined rate reaches ``goal`` tokens
        per second (:func:`deployment_tokens_per_second`, monotone in the replicas up to one
        per sequence); ``max(fewest, concurrency)`` when none below does."""
        key = (goal, fewest)
        found = self._targets.get(key)
        if found is None:
            concurrency = self._workload.concurrency
            found = self._targets[key] = smallest_true(
                lambda n: deployment_tokens_per_second(self.rate, concurrency, n) >= goal,
                fewest,
                max(fewest, concurrency),
            )
        return found

    def deployment(self, replicas: int) -> Deployment:
        """``replicas`` replicas: the deployed plan, its per-GPU breakdown and speed.

        The replica's estimate is :meth:`estimate` of its share of the sequences when the
        deployed breakdown has ``one``'s weights and KV bytes per sequence (the same stage is
        the most loaded one): :func:`estimate_inference` reads nothing else of a breakdown,
        and ``kv_cache_bytes / share`` is then exactly ``one``'s (integers below 2**53 divide
        exactly), so both give the same numbers. Otherwise it is estimated on the deployed
        breakdown.
        """
        found = self._deployments.get(replicas)
        if found is None:
            plan = deployed(self._replica, replicas)
            memory = self._space.memory(plan, self._capacity_bytes)
            if memory is None:  # pragma: no cover - a plan of the same shape was estimated
                raise LookupError("the deployed plan has no estimate")
            share = sequences_per_replica(self._workload, plan)
            one = self._one
            if (
                memory.weights_bytes == one.weights_bytes
                and memory.kv_cache_bytes == share * one.kv_cache_bytes
            ):
                estimate = self.estimate(share)
            else:
                estimate = estimate_inference(
                    self._space.arch,
                    self._workload,
                    plan,
                    memory,
                    self._gpu,
                    self._compute,
                    self._link,
                    self._per_replica,
                    self._efficiency,
                    flops=self._flops,
                )
            tokens = self.tokens_per_second(replicas)
            found = self._deployments[replicas] = Deployment(plan, memory, estimate, tokens)
        return found
