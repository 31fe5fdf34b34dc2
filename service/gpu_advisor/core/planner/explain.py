"""Sentences from reason codes: the ONE place the planner turns numbers into words.

The core records :class:`~gpu_advisor.core.results.Reason` values (a code and the numbers
behind it); :func:`render` writes the sentence. Bytes are shown in GiB (2**30), money in USD
with cents, fractions as percentages.

Every rejected offer carries exactly one rejection code, the first that applies in the order
of :data:`REJECTION_CODES`: the caller's filters, then what the group's hardware cannot do,
then the numeric limits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpu_advisor.core.results import Reason
from gpu_advisor.core.units import format_gib

REJECTION_CODES: tuple[str, ...] = (
    "gpu_excluded",
    "provider_excluded",
    "region_excluded",
    "spot_unavailable",
    "unknown_gpu",
    "gpu_rate_unknown",
    "dtype_unsupported",
    "context_exceeds_model",
    "over_max_gpus",
    "over_max_nodes",
    "no_cluster_network",
    "tp_over_pcie",
    "insufficient_memory",
    "kv_pool_too_small",
    "target_over_concurrency",
    "over_max_price",
    "past_deadline",
    "over_budget",
)
"""All rejection codes, in the order checks are applied (the first failing one is reported)."""

TECHNICAL_CODES: frozenset[str] = frozenset(
    {
        "unknown_gpu",
        "gpu_rate_unknown",
        "dtype_unsupported",
        "no_cluster_network",
        "tp_over_pcie",
        "insufficient_memory",
        "kv_pool_too_small",
        "context_exceeds_model",
        "target_over_concurrency",
    }
)
"""Rejections for what the hardware cannot do for this workload, whatever the constraints; the
others exclude offers by the caller's constraints (GPU, provider, region, spot policy, max
GPUs or nodes, max price, deadline, budget). Rejected groups list the technical ones first."""


def rejection_order(code: str, count: int, gpu: str) -> tuple[int, int, int, str]:
    """Sort key of a rejected group: technical reasons before constraint exclusions, then
    the larger group first, then the order of :data:`REJECTION_CODES`, then the GPU id."""
    return (0 if code in TECHNICAL_CODES else 1, -count, REJECTION_CODES.index(code), gpu)


_FABRIC = {"infiniband": "InfiniBand", "efa": "EFA", "roce": "RoCE", "ethernet": "Ethernet"}
_SHARDING = {
    "none": "no ZeRO sharding",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3",
    "fsdp": "FSDP",
}


def usd(value: float) -> str:
    """``$1,234.56``."""
    return f"${value:,.2f}"


def hours(value: float) -> str:
    """``3.14 h`` below 10 h, ``31.4 h`` above."""
    return f"{value:.2f} h" if value < 10 else f"{value:,.1f} h"


def percent(fraction: float) -> str:
    """``23 %``."""
    return f"{fraction * 100:.0f} %"


def increment(seconds: float) -> str:
    """Billing granularity in words: ``per second``, ``per minute``, ``hourly``, ``daily``."""
    names = {1: "per second", 60: "per minute", 3600: "hourly", 86400: "daily"}
    return names.get(int(seconds), f"in {int(seconds)}-second increments")


def billed_hours(value: float) -> str:
    """Billed hours: whole hours without decimals (``23 h``), else as :func:`hours`."""
    return f"{value:,.0f} h" if value == round(value) else hours(value)


def _degrees(d: Mapping[str, Any]) -> str:
    """``TP=2, PP=3, DP=1`` (plus EP and the ZeRO stage where they apply)."""
    parts = [f"TP={d['tensor_parallel']}", f"PP={d['pipeline_parallel']}"]
    parts.append(f"DP={d['data_parallel']}")
    if d.get("expert_parallel", 1) > 1:
        parts.append(f"EP={d['expert_parallel']}")
    if d.get("sharding") and d["sharding"] != "none":
        parts.append(_SHARDING[d["sharding"]])
    return ", ".join(parts)


def _plan(d: Mapping[str, Any]) -> str:
    unit = "instances" if d.get("serving") else "nodes"
    nodes = f" on {d['nodes']} {unit}" if d["nodes"] > 1 else ""
    return f"{d['gpus']} × {d['gpu']}{nodes}: {_degrees(d)}"


def _memory_fit(d: Mapping[str, Any]) -> str:
    return (
        f"{format_gib(d['total_bytes'])} of {format_gib(d['usable_bytes'])} usable per GPU "
        f"({percent(d['headroom_fraction'])} headroom)"
    )


def _training_time(d: Mapping[str, Any]) -> str:
    speed = f"{d['tokens_per_second']:,.0f} tokens/s"
    if d.get("hours") is None:
        return f"{speed} at {percent(d['mfu'])} MFU (no token count given)"
    return f"{hours(d['hours'])} at {percent(d['mfu'])} MFU ({speed})"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _serving(d: Mapping[str, Any]) -> str:
    replicas = d["replicas"]
    kind = "input tokens/s encoded" if d.get("encoder_only") else "output tokens/s"
    text = f"{d['tokens_per_second']:,.0f} {kind} from {_plural(replicas, 'replica')}"
    if d.get("concurrency") is not None:
        busy = min(replicas, d["concurrency"])
        text += f" serving {_plural(d['concurrency'], 'concurrent sequence')}"
        if replicas > 1:
            text += f" ({d['sequences_per_replica']:,} per replica" + (
                f"; {replicas - busy:,} idle)" if busy < replicas else ")"
            )
    if d.get("encoder_only"):
        text += (
            f"; one batch in {d['time_to_first_token_seconds']:.2f} s (encoder-only: no generation)"
        )
    else:
        text += f"; first token in {d['time_to_first_token_seconds']:.2f} s"
    if d.get("max_concurrency") is not None:
        text += f"; holds up to {_plural(d['max_concurrency'], 'concurrent sequence')}"
        if d.get("max_concurrency_per_replica") is not None and replicas > 1:
            text += f" ({d['max_concurrency_per_replica']:,} per replica)"
    return text


def _split_for_kv_pool(d: Mapping[str, Any]) -> str:
    text = (
        f"{d['replica_gpus']} GPUs per replica because on one GPU the KV pool of "
        f"{format_gib(d['kv_pool_bytes'])} holds no {d['context_length']:,}-token sequence "
        f"({format_gib(d['sequence_bytes'])})"
    )
    if d.get("reserved_bytes") is not None:
        text += (
            f": gpu_memory_utilization {d['gpu_memory_utilization']:g} reserves "
            f"{format_gib(d['reserved_bytes'])} of the {format_gib(d['exposed_bytes'])} exposed "
            f"and the weights take {format_gib(d['weights_bytes'])} of it (the model itself "
            "fits one GPU)"
        )
    return text


def _kv_pool_too_small(d: Mapping[str, Any]) -> str:
    text = (
        f"the KV pool of {format_gib(d['kv_pool_bytes'])} per GPU on {_instance(d)} holds no "
        f"{d['context_length']:,}-token sequence ({format_gib(d['sequence_bytes'])} each)"
    )
    reserved = d.get("reserved_bytes")
    if reserved is not None and d.get("weights_bytes") is not None and d["kv_pool_bytes"] <= 0:
        # no pool at all: the cause is what the engine's reservation holds, not the cache
        text += (
            f": gpu_memory_utilization {d['gpu_memory_utilization']:g} reserves "
            f"{format_gib(reserved)} of the {format_gib(d['exposed_bytes'])} exposed; the "
            f"weights ({format_gib(d['weights_bytes'])}), the activation peak and the engine's "
            "overhead leave no room for the cache"
        )
    return text


def _target_over_concurrency(d: Mapping[str, Any]) -> str:
    return (
        f"{_plural(d['concurrency'], 'concurrent sequence')} cannot sustain "
        f"{d['target_tokens_per_second']:,.0f} output tokens/s on {_instance(d)}: one sequence "
        f"decodes at most {d['sequence_tokens_per_second']:,.0f} tokens/s on a "
        f"{d['replica_gpus']}-GPU replica, so the target needs at least "
        f"{d['concurrency_needed']:,} concurrent sequences (one replica serves a sequence)"
    )


def _billing(d: Mapping[str, Any]) -> str:
    if d.get("total_usd") is None:
        return f"{usd(d['price_per_hour_usd'])}/h, billed {increment(d['increment_seconds'])}"
    return (
        f"{usd(d['total_usd'])} in total: {billed_hours(d['billed_hours'])} billed "
        f"{increment(d['increment_seconds'])} at {usd(d['price_per_hour_usd'])}/h"
    )


def _spot(d: Mapping[str, Any]) -> str:
    expected = (
        f"{d['interruptions']:.2f} expected interruptions"
        if d.get("interruptions") is not None
        else "interruptions"
    )
    return (
        f"spot: {expected} at {d['rate_per_hour']:.3g}/h per node; cost and time include lost "
        f"work, checkpoints and {d['restart_seconds'] / 60:.0f}-minute restarts"
    )


def _insufficient(d: Mapping[str, Any]) -> str:
    exposes = f"{d['gpu']} exposes {format_gib(d['exposed_bytes'])}"
    if d["usable_bytes"] < d["exposed_bytes"]:
        exposes += f" ({format_gib(d['usable_bytes'])} usable after headroom)"
    if d.get("need_bytes") is None:
        return f"does not fit {_instance(d)}; {exposes}"
    where = _instance(d)
    plan = d.get("plan")
    used = (
        1
        if plan is None
        else (plan["tensor_parallel"] * plan["pipeline_parallel"] * plan["data_parallel"])
    )
    if plan is not None and used > 1:
        count = d.get("gpu_count") or used
        if used > count:
            where = f"{-(-used // count)} nodes of {where}"
        where += f" with {_degrees(plan)}"
    if d.get("one_sequence_per_replica"):
        where += " even with one sequence per replica"
    return f"needs {format_gib(d['need_bytes'])} per GPU on {where}; {exposes}"


def _lighter(d: Mapping[str, Any]) -> str:
    """``set gradient_checkpointing to 'full' and micro_batch_size to 1``: a relaxed
    workload's changes, in the order they were tried."""
    parts = []
    if "gradient_checkpointing" in d:
        parts.append(
            f"gradient_checkpointing to '{d['gradient_checkpointing']}' (activations recomputed)"
        )
    if "micro_batch_size" in d:
        parts.append(f"micro_batch_size to {d['micro_batch_size']:,}")
    if "sequence_length" in d:
        parts.append(f"sequence_length to {d['sequence_length']:,}")
    joined = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return f"set {joined}"


def _relaxed_fit(d: Mapping[str, Any]) -> str:
    """``8 × H100-SXM-80GB (aws p5.48xlarge us-east-1, TP=1, PP=1, DP=8, ZeRO-3) needs 61.2
    GiB per GPU of 79.6 GiB; 3.10 h, $76.80``: what a relaxed workload gets."""
    nodes = f" on {d['nodes']} nodes" if d["nodes"] > 1 else ""
    text = (
        f"{d['gpus']} × {d['gpu']}{nodes} ({d['offer']}, {_degrees(d['plan'])}) needs "
        f"{format_gib(d['need_bytes'])} per GPU of {format_gib(d['exposed_bytes'])}"
    )
    if d.get("hours") is not None:
        text += f"; {hours(d['hours'])}"
    if d.get("total_usd") is not None:
        text += f", {usd(d['total_usd'])}"
    return text


def _excluded(kind: str, names: str, field: str) -> str:
    several = "," in names or " and " in names
    return (
        f"{kind}{'s' if several else ''} {names} {'are' if several else 'is'} not in "
        f"constraints.{field}"
    )


def _relax_limits(d: Mapping[str, Any]) -> str:
    parts = []
    for name, value in d["needs"].items():
        if name == "deadline_hours":
            parts.append(f"deadline_hours to at least {value:.2f}")
        else:
            parts.append(f"{name} to at least {usd(value)}")
    return f"raise {' and '.join(parts)} together ({d['offer']})"


def _nearest_miss(d: Mapping[str, Any], lead: str) -> str:
    """``<lead>, TP=2, PP=2, DP=1, needs 35.2 GiB per GPU; L4-24GB exposes 22.4 GiB`` from
    the nearest miss the data carries (``need_bytes``, ``plan``); empty without one."""
    if d.get("need_bytes") is None:
        return ""
    plan = d.get("plan")
    with_plan = f", {_degrees(plan)}," if plan is not None else ""
    if plan is not None and d.get("one_sequence_per_replica"):
        with_plan = f", {_degrees(plan)} with one sequence per replica,"
    exposes = (
        f"; {d['gpu']} exposes {format_gib(d['exposed_bytes'])}" if d.get("exposed_bytes") else ""
    )
    return f"{lead}{with_plan} needs {format_gib(d['need_bytes'])} per GPU{exposes}"


def _closest(d: Mapping[str, Any]) -> str:
    """`` (the closest plan allowed, TP=2, PP=2, DP=1, needs 35.2 GiB per GPU; L4-24GB
    exposes 22.4 GiB)`` where the data carries the nearest miss (``need_bytes``, ``plan``)."""
    found = _nearest_miss(d, "the closest plan allowed")
    return f" ({found})" if found else ""


def _no_cluster_network(d: Mapping[str, Any]) -> str:
    """The nodes needed first; the nearest miss is on ONE instance (all the offer allows)."""
    found = _nearest_miss(d, "on one instance the closest plan")
    return (
        f"needs {d['nodes_needed']} nodes of {_instance(d)}, but the offer has no cluster "
        "network (InfiniBand, EFA or RoCE)" + (f"; {found}" if found else "")
    )


def _on(d: Mapping[str, Any]) -> str:
    """`` on 8 × H100-SXM-80GB`` when the data names the instance shape."""
    return f" on {_instance(d)}" if d.get("gpu_count") else ""


def _instance(d: Mapping[str, Any]) -> str:
    count = d.get("gpu_count")
    return f"{count} × {d['gpu']}" if count else str(d["gpu"])


_TEMPLATES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    # rationale
    "plan": _plan,
    "tp_in_nvlink_domain": lambda d: (
        f"TP={d['tensor_parallel']} inside one {d.get('fabric', 'NVLink')} domain"
    ),
    "tp_beyond_domain": lambda d: (
        f"TP={d['tensor_parallel']} reaches beyond one {d['fabric']} domain ({d['domain']} "
        f"GPUs of {d['gpu']}): its all-reduces between the domains cross PCIe"
    ),
    "idle_gpus": lambda d: (
        f"uses {d['gpus_used']} of the {d['gpus_paid']} {d['gpu']} GPUs paid for: "
        f"{d['gpus_paid'] - d['gpus_used']} sit idle"
        + (" (no plan using all of them fits)" if d.get("searched") else "")
    ),
    "tp_limited_pcie": lambda d: (
        f"PCIe-only GPUs: TP limited to {d['max_tensor_parallel']}, "
        f"PP={d['pipeline_parallel']} carries the rest"
    ),
    "multi_node": lambda d: (
        f"{d['nodes']} nodes over {_FABRIC.get(d['fabric'] or '', d['fabric'])} "
        f"at {d['gbit_per_s']:,.0f} Gbit/s"
    ),
    "single_gpu_replica": lambda d: (
        "one GPU per replica: the model fits one GPU, preferred over TP for latency"
    ),
    "split_to_fit": lambda d: (
        f"{d['replica_gpus']} GPUs per replica because the model does not fit one GPU "
        f"(needs {format_gib(d['one_gpu_need_bytes'])}; {format_gib(d['usable_bytes'])} usable)"
    ),
    "split_for_kv_pool": _split_for_kv_pool,
    "split_for_concurrency": lambda d: (
        f"{d['replica_gpus']} GPUs per replica to serve "
        f"{_plural(d['concurrency'], 'concurrent sequence')} on "
        f"{_plural(d['nodes'], 'instance')}: one-GPU replicas hold "
        f"{d['one_gpu_sequences']:,} each and need {_plural(d['one_gpu_nodes'], 'instance')}"
        if d.get("one_gpu_sequences") is not None
        else f"{d['replica_gpus']} GPUs per replica to serve "
        f"{_plural(d['concurrency'], 'concurrent sequence')} on "
        f"{_plural(d['nodes'], 'instance')}; one-GPU replicas need "
        f"{_plural(d['one_gpu_nodes'], 'instance')}"
    ),
    "engine_max_num_seqs": lambda d: (
        f"vLLM runs at most {d['max_num_seqs']:,} sequences per replica (max_num_seqs): "
        f"{_plural(d['concurrency'], 'concurrent sequence')} need at least "
        f"{_plural(d['replicas_needed'], 'replica')}"
    ),
    "split_for_target": lambda d: (
        f"{d['replica_gpus']} GPUs per replica to reach {d['target_tokens_per_second']:,.0f} "
        f"output tokens/s with {_plural(d['concurrency'], 'concurrent sequence')}: one-GPU "
        f"replicas reach at most {d['one_gpu_tokens_per_second']:,.0f}"
    ),
    "tp_for_throughput": lambda d: (
        f"{d['replica_gpus']} GPUs per replica for throughput: "
        f"{d['tokens_per_second_per_gpu']:,.0f} tokens/s per GPU vs "
        f"{d['smallest_tokens_per_second_per_gpu']:,.0f} with "
        f"{_plural(d['smallest_replica_gpus'], 'GPU')} per replica on the same instances"
    ),
    "memory_fit": _memory_fit,
    "training_time": _training_time,
    "serving_speed": _serving,
    "billing": _billing,
    "per_million_tokens": lambda d: f"{usd(d['usd'])} per million tokens",
    "spot_risk": _spot,
    "checkpoint_storage": lambda d: (
        f"checkpoints of {format_gib(d['bytes'])} cost {usd(d['usd'])} to keep for the run "
        "(storage, billed separately)"
    ),
    # warnings
    "few_vcpus": lambda d: (
        f"{d['vcpus']:g} vCPUs for {d['gpus']} GPUs ({d['vcpus_per_gpu']:.1f} per GPU): fewer "
        f"than {d['minimum']} per GPU can starve data loading and tokenisation"
    ),
    "dtype_emulated": lambda d: (
        f"{d['dtype']} has no tensor-core path on {d['gpu']}: it runs through dequantising "
        f"kernels at the {d['path']} rate ({d['tflops']:,.0f} TFLOPS)"
    ),
    "tight_memory_fit": lambda d: (
        f"only {percent(d['headroom_fraction'])} of each GPU's memory stays free, less than "
        f"the {percent(d['threshold'])} the estimate's accuracy calls for (docs/accuracy.md); "
        f"set constraints.min_headroom_fraction to {d['threshold']:g} to require that room"
    ),
    "communication_bound": lambda d: (
        f"communication-bound at {percent(d['mfu'])} MFU: {d['waiting_seconds']:.2f} s of "
        f"each {d['step_time_seconds']:.2f} s step waits on traffic, "
        f"{d['compute_seconds']:.2f} s computes -- a larger global_batch_size, fewer "
        "data-parallel ranks or a pipeline would shorten it"
    ),
    "slow_decode": lambda d: (
        f"each sequence streams {d['stream_tokens_per_second']:.1f} tokens/s (one decode step "
        f"of a {d['batch']:,}-sequence batch takes {d['decode_step_seconds']:.2f} s), slower "
        f"than people read (~{d['threshold']:g} tokens/s): for interactive use set "
        "target_tokens_per_second or the cost_per_million_tokens objective"
    ),
    "spot_rate_unknown": lambda d: (
        f"{d['provider']} publishes no spot interruption rate: assumed "
        f"{d['rate_per_hour']:.3g} per hour"
    ),
    # rejections
    "unknown_gpu": lambda d: f"GPU {d['gpu']} is not in the GPU table",
    "gpu_rate_unknown": lambda d: (
        f"the GPU table has no published compute rate for {d['gpu']}, so {d['dtype']} work on "
        "it cannot be timed or priced"
    ),
    "gpu_excluded": lambda d: f"{d['gpu']} is not in constraints.gpu_types",
    "provider_excluded": lambda d: _excluded("provider", d["provider"], "providers"),
    "region_excluded": lambda d: _excluded("region", d["region"], "regions"),
    "spot_unavailable": lambda d: "no spot price, and the spot policy is 'only'",
    "dtype_unsupported": lambda d: (
        f"{d['dtype']} needs {d['needs']}; {d['gpu']}"
        + (
            f" (compute capability {d['compute_capability']})"
            if d.get("compute_capability")
            else ""
        )
        + f" has no {d['dtype']} path"
    ),
    "over_max_gpus": lambda d: (
        f"needs {d['gpus_needed']} GPUs of {d['gpu']}"
        + (f" ({d['gpu_count']} per instance)" if d.get("gpu_count") else "")
        + f"; max_gpus is {d['max_gpus']}{_closest(d)}"
    ),
    # "limit_field": the request field that set the limit (/v1/estimate: hardware.nodes)
    "over_max_nodes": lambda d: (
        f"needs {d['nodes_needed']} nodes of {_instance(d)}; "
        f"{d.get('limit_field', 'max_nodes')} is {d['max_nodes']}"
        f"{_closest(d)}"
    ),
    "no_cluster_network": _no_cluster_network,
    "tp_over_pcie": lambda d: (
        f"fits only with TP above {d['max_tensor_parallel']} across {_instance(d)} "
        f"(PCIe only); TP over PCIe is limited to {d['max_tensor_parallel']}"
    ),
    "insufficient_memory": _insufficient,
    "context_exceeds_model": lambda d: (
        f"context_length {d['context_length']:,} is longer than the "
        f"{d['max_position_embeddings']:,} tokens {d['model']} was trained for "
        "(max_position_embeddings): a serving engine refuses it"
    ),
    "target_over_concurrency": _target_over_concurrency,
    "kv_pool_short": lambda d: (
        f"the KV cache of {_plural(d['sequences'], 'sequence')} of {d['context_length']:,} "
        f"tokens per replica needs {format_gib(d['kv_cache_bytes'])} per GPU; the KV pool on "
        f"{d['gpu']} at gpu_memory_utilization {d['gpu_memory_utilization']:g} holds "
        f"{format_gib(d['kv_pool_bytes'])} ({_plural(d['max_sequences'], 'sequence')})"
    ),
    "kv_pool_too_small": _kv_pool_too_small,
    "over_max_price": lambda d: (
        f"costs at least {usd(d['price_per_hour_usd'])}/h{_on(d)}; max_price_per_hour_usd is "
        f"{usd(d['max_price_per_hour_usd'])}"
    ),
    "past_deadline": lambda d: (
        f"takes at least {hours(d['hours'])}{_on(d)}; deadline_hours is {d['deadline_hours']:g}"
    ),
    "over_budget": lambda d: (
        f"costs at least {usd(d['total_usd'])}{_on(d)}; budget_usd is {usd(d['budget_usd'])}"
    ),
    # suggestions
    "raise_budget": lambda d: f"raise budget_usd to at least {usd(d['total_usd'])} ({d['offer']})",
    "extend_deadline": lambda d: (
        f"raise deadline_hours to at least {d['hours']:.2f} ({d['offer']})"
    ),
    "raise_max_price": lambda d: (
        f"raise max_price_per_hour_usd to at least {usd(d['price_per_hour_usd'])} ({d['offer']})"
    ),
    "raise_max_nodes": lambda d: f"raise max_nodes to {d['nodes_needed']} ({_instance(d)})",
    "raise_max_gpus": lambda d: f"raise max_gpus to {d['gpus_needed']} ({d['gpu']})",
    "include_provider": lambda d: f"add provider {d['provider']} ({d['offer']})",
    "include_region": lambda d: f"add region {d['region']} ({d['offer']})",
    "include_gpu": lambda d: f"add {d['gpu']} to gpu_types ({d['offer']})",
    "allow_on_demand": lambda d: f"set spot to 'allow' ({d['offer']} on demand)",
    "larger_gpu": lambda d: (
        f"a GPU exposing at least {format_gib(d['need_bytes'])}: needs "
        f"{format_gib(d['need_bytes'])} per GPU; the largest offered exposes "
        f"{format_gib(d['largest_exposed_bytes'])}"
    ),
    "cluster_network": lambda d: (
        f"an offer with a cluster network: {_instance(d)} needs {d['nodes_needed']} nodes"
    ),
    "allow_spot": lambda d: f"set spot to 'allow' ({d['offer']} on spot)",
    "relax_limits": _relax_limits,
    "nvlink_offer": lambda d: (
        f"an offer with {d.get('fabric', 'NVLink')}: {d['gpu']} fits only with TP above "
        f"{d['max_tensor_parallel']}"
    ),
    "newer_gpu": lambda d: f"a GPU with a {d['dtype']} path: {d['needs']}",
    "shorter_context": lambda d: (
        f"lower context_length below {d['context_length']:,} or raise gpu_memory_utilization: "
        f"the KV pool of {format_gib(d['kv_pool_bytes'])} on {d['gpu']} holds no full sequence"
    ),
    "lower_context_length": lambda d: (
        f"lower context_length (prompt + output tokens) to at most "
        f"{d['max_position_embeddings']:,}, the trained context of {d['model']}"
    ),
    "raise_concurrency": lambda d: (
        f"raise concurrency to at least {d['concurrency_needed']:,}, or lower "
        f"target_tokens_per_second to at most {d['max_tokens_per_second']:,.0f} "
        f"({_instance(d)}: one sequence decodes at most "
        f"{d['sequence_tokens_per_second']:,.0f} tokens/s)"
    ),
    "lower_concurrency": lambda d: (
        f"lower concurrency to at most {d['max_concurrency']:,} ({_instance(d)}: "
        f"{_plural(d['per_replica'], 'sequence')} per {d['replica_gpus']}-GPU replica within "
        + (
            f"max_gpus {d['max_gpus']}"
            if "max_gpus" in d
            else f"{d.get('limit_field', 'max_nodes')} {d['max_nodes']}"
        )
        + ")"
    ),
    "lower_headroom": lambda d: (
        f"lower min_headroom_fraction to {d['min_headroom_fraction']:.2f} or less: "
        f"{_instance(d)} needs {format_gib(d['need_bytes'])} per GPU of the "
        f"{format_gib(d['exposed_bytes'])} it exposes"
    ),
    "enable_checkpointing": lambda d: f"{_lighter(d)}: {_relaxed_fit(d)}",
    "lower_micro_batch_size": lambda d: f"{_lighter(d)}: {_relaxed_fit(d)}",
    "lower_sequence_length": lambda d: f"{_lighter(d)}: {_relaxed_fit(d)}",
}


def render(reason: Reason) -> str:
    """The sentence for one reason (the code itself for an unknown code)."""
    template = _TEMPLATES.get(reason.code)
    return template(reason.data) if template else reason.code


def rendered(reason: Reason) -> Reason:
    """``reason`` with ``text`` filled in."""
    return Reason(code=reason.code, data=reason.data, text=render(reason))


def summary(reasons: list[Reason]) -> str:
    """The rationale as one sentence: the parts joined with semicolons (a reason's ``text``
    where :func:`rendered` filled it in, else rendered here)."""
    return "; ".join(r.text or render(r) for r in reasons)
