"""Plan search: TP only where it must, multi-node only over a cluster network, TP over PCIe
limited to 2. Memory comes from ``toy_estimate`` (arithmetic in fixtures.py)."""

from __future__ import annotations

from gpu_advisor.core.planner import recommend
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

from .fixtures import GIB, GPUS, INFINIBAND, MIB, make_arch, make_offer, make_request, toy_estimate

PROVIDERS: dict = {}


def test_a_model_that_fits_only_with_tp2_gets_tp2() -> None:
    # 24e9 params, 40 layers x 8 KV heads x 128: KV per token = 2 * 40 * 8 * 128 * 2 = 163,840 B;
    # one 8,192-token sequence = 8192 * 163840 = 1.25 GiB.
    # One GPU, even with one sequence: 2 * 24e9 + 1.25 GiB + 1 GiB = 48e9 + 2.25 GiB
    #   = 50,415,919,104 B (47.0 GiB) > L40S exposed 46,068 MiB (45.0 GiB).
    # TP=2 replica: 24e9 of weights per GPU; the vLLM pool per GPU is
    #   int(0.9 * 46,068 MiB) - 24e9 - 1 GiB = 43,475,219,251 - 25,073,741,824 = 18,401,477,427 B,
    #   one sequence's KV per GPU 1.25 GiB / 2 = 671,088,640 B -> 27 sequences per replica, so
    #   one replica holds the 4 sequences: KV 4 x 0.625 GiB = 2.5 GiB per GPU.
    arch = make_arch(24 * 10**9, layers=40)
    workload = InferenceWorkload(concurrency=4, context_length=8192)
    pair = make_offer("L40S-48GB", 2, interconnect="pcie", instance_type="pair")
    single = make_offer("L40S-48GB", 1, interconnect="pcie", instance_type="single")
    result = recommend(arch, make_request(workload), [pair, single], GPUS, PROVIDERS, toy_estimate)

    assert [r.offer.instance_type for r in result.recommendations] == ["pair"]
    best = result.recommendations[0]
    assert (best.plan.tensor_parallel, best.plan.pipeline_parallel) == (2, 1)
    assert best.plan.data_parallel == 1
    assert best.memory_per_gpu.total_bytes == 24 * 10**9 + 2 * GIB + GIB // 2 + GIB
    assert best.performance.max_concurrency_per_replica == 18_401_477_427 // 671_088_640 == 27
    [split] = [r for r in best.rationale if r.code == "split_to_fit"]
    assert split.text == (
        "2 GPUs per replica because the model does not fit one GPU (needs 47.0 GiB; "
        "45.0 GiB usable)"
    )
    [rejected] = result.rejected
    assert (rejected.code, rejected.gpu, rejected.count) == ("insufficient_memory", "L40S-48GB", 1)
    assert rejected.data["need_bytes"] == 48 * 10**9 + 2 * GIB + GIB // 4 == 50_415_919_104
    assert rejected.text == (
        "needs 47.0 GiB per GPU on 1 × L40S-48GB even with one sequence per replica; "
        "L40S-48GB exposes 45.0 GiB"
    )


def test_tp_because_the_engine_reservation_leaves_one_gpu_no_kv_cache() -> None:
    # 22e9 params: one GPU, one 8,192-token sequence needs 44e9 + 1.25 GiB + 1 GiB
    #   = 46,415,919,104 B (43.2 GiB) <= 45.0 GiB: the model fits one L40S, but vLLM at
    #   gpu_memory_utilization 0.9 reserves int(0.9 * 46,068 MiB) = 43,475,219,251 B (40.5 GiB)
    #   and the 44e9 B (41.0 GiB) of weights leave it no KV pool. The sentence must say so,
    #   not that the model does not fit.
    arch = make_arch(22 * 10**9, layers=40)
    workload = InferenceWorkload(concurrency=4, context_length=8192)
    pair = make_offer("L40S-48GB", 2, interconnect="pcie", instance_type="pair")
    single = make_offer("L40S-48GB", 1, interconnect="pcie", instance_type="single")
    result = recommend(arch, make_request(workload), [pair, single], GPUS, PROVIDERS, toy_estimate)

    [best] = result.recommendations
    assert best.plan.tensor_parallel == 2
    [split] = [r for r in best.rationale if r.code == "split_for_kv_pool"]
    assert split.text == (
        "2 GPUs per replica because on one GPU the KV pool of 0.0 GiB holds no 8,192-token "
        "sequence (1.2 GiB): gpu_memory_utilization 0.9 reserves 40.5 GiB of the 45.0 GiB "
        "exposed and the weights take 41.0 GiB of it (the model itself fits one GPU)"
    )
    assert not any(r.code == "split_to_fit" for r in best.rationale)
    [rejected] = result.rejected
    assert rejected.code == "kv_pool_too_small"
    assert rejected.data["kv_pool_bytes"] == 0
    assert rejected.data["sequence_bytes"] == 8192 * 163_840


def test_two_nodes_only_where_the_offer_has_a_cluster_network() -> None:
    # 70e9 params, full fine-tuning: 2 + 2 + 12 = 16 B/param of model states.
    # One node, ZeRO-3 over 8 GPUs: 16 * 70e9 / 8 = 140e9 B (130.4 GiB) > 79.6 GiB.
    # Two nodes, ZeRO-3 over 16 GPUs: 16 * 70e9 / 16 = 70e9 B (65.2 GiB) + 2 GiB activations
    #   + 1 GiB overhead = 68.2 GiB <= 81,559 MiB (79.6 GiB).
    arch = make_arch(70 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    clustered = make_offer(network=INFINIBAND, instance_type="with-ib")
    isolated = make_offer(instance_type="no-network")
    result = recommend(
        arch, make_request(workload), [clustered, isolated], GPUS, PROVIDERS, toy_estimate
    )

    assert [r.offer.instance_type for r in result.recommendations] == ["with-ib"]
    best = result.recommendations[0]
    assert best.nodes == 2
    assert best.gpus == 16
    assert best.memory_per_gpu.total_bytes <= 81_559 * MIB
    assert any(r.code == "multi_node" for r in best.rationale)
    [rejected] = result.rejected
    assert rejected.code == "no_cluster_network"
    assert rejected.data["nodes_needed"] == 2
    assert rejected.examples == ["acme no-network us-east-1"]
    assert "needs 2 nodes of 8 × H100-SXM-80GB" in rejected.text


def test_max_nodes_one_turns_the_clustered_offer_down_with_a_suggestion() -> None:
    arch = make_arch(70 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    clustered = make_offer(network=INFINIBAND)
    result = recommend(
        arch, make_request(workload, max_nodes=1), [clustered], GPUS, PROVIDERS, toy_estimate
    )

    assert result.recommendations == []
    assert [g.code for g in result.rejected] == ["over_max_nodes"]
    assert result.rejected[0].data["nodes_needed"] == 2
    assert [s.code for s in result.suggestions] == ["raise_max_nodes"]
    assert result.suggestions[0].text == "raise max_nodes to 2 (8 × H100-SXM-80GB)"


def _eight_gpu_serving() -> tuple:
    # 80e9 params, 80 layers x 8 KV heads x 128: KV per token = 2 * 80 * 8 * 128 * 2 = 327,680 B;
    # 16 sequences x 8,192 tokens -> 40 GiB of KV.
    # 4 GPUs: 160e9 / 4 = 40e9 B (37.25 GiB) + 10 GiB + 1 GiB = 48.25 GiB > 45.0 GiB (L40S).
    # 8 GPUs: 18.6 GiB + 5 GiB + 1 GiB = 24.6 GiB fits.
    arch = make_arch(80 * 10**9, layers=80, hidden=8192, heads=64)
    workload = InferenceWorkload(concurrency=16, context_length=8192)
    return arch, workload


def test_pcie_only_eight_gpus_lose_tp8_and_say_why() -> None:
    arch, workload = _eight_gpu_serving()
    pcie = make_offer("L40S-48GB", 8, interconnect="pcie")
    result = recommend(arch, make_request(workload), [pcie], GPUS, PROVIDERS, toy_estimate)

    best = result.recommendations[0]
    assert (best.plan.tensor_parallel, best.plan.pipeline_parallel) == (2, 4)
    texts = [r.text for r in best.rationale]
    assert "PCIe-only GPUs: TP limited to 2, PP=4 carries the rest" in texts


def test_the_same_gpus_inside_one_nvlink_domain_use_tp8() -> None:
    arch, workload = _eight_gpu_serving()
    switched = make_offer("L40S-48GB", 8, interconnect="nvswitch")
    result = recommend(arch, make_request(workload), [switched], GPUS, PROVIDERS, toy_estimate)

    best = result.recommendations[0]
    assert (best.plan.tensor_parallel, best.plan.pipeline_parallel) == (8, 1)
    assert "TP=8 inside one NVLink domain" in [r.text for r in best.rationale]


def test_tp_over_pcie_rejects_when_pipeline_cannot_take_over() -> None:
    # 2 layers: PP <= 2, so TP=2 x PP=2 = 4 GPUs at most over PCIe.
    # 100e9 params: 4 GPUs hold 200e9 / 4 = 50e9 B (46.6 GiB) > 45.0 GiB; 8 would need TP=8.
    arch = make_arch(100 * 10**9, layers=2)
    workload = InferenceWorkload(concurrency=1, context_length=4096)
    pcie = make_offer("L40S-48GB", 8, interconnect="pcie")
    result = recommend(arch, make_request(workload), [pcie], GPUS, PROVIDERS, toy_estimate)

    assert result.recommendations == []
    [rejected] = result.rejected
    assert rejected.code == "tp_over_pcie"
    assert rejected.text == (
        "fits only with TP above 2 across 8 × L40S-48GB (PCIe only); TP over PCIe is limited to 2"
    )
    assert [s.code for s in result.suggestions] == ["nvlink_offer"]


def test_one_gpu_per_replica_when_the_model_fits_one_gpu() -> None:
    # 7e9 params: 14e9 B + KV (1 x 4096 x 131,072 B = 0.5 GiB) + 1 GiB fits one 80 GB GPU.
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(concurrency=1, context_length=4096)
    node = make_offer("H100-SXM-80GB", 8)
    result = recommend(arch, make_request(workload), [node], GPUS, PROVIDERS, toy_estimate)

    best = result.recommendations[0]
    assert best.plan.tensor_parallel == 1
    assert best.plan.data_parallel == 8  # 8 replicas fill the instance
    assert best.performance.replicas == 8
    assert "single_gpu_replica" in [r.code for r in best.rationale]


def test_dtype_without_hardware_path_is_rejected_naming_dtype_and_gpu() -> None:
    arch = make_arch(1 * 10**9, layers=16)
    workload = InferenceWorkload(weight_dtype="bf16")
    t4 = make_offer("T4-16GB", 1, interconnect="pcie")
    result = recommend(arch, make_request(workload), [t4], GPUS, PROVIDERS, toy_estimate)

    [rejected] = result.rejected
    assert rejected.code == "dtype_unsupported"
    assert rejected.text == (
        "bf16 needs Ampere (compute capability 8.0); T4-16GB (compute capability 7.5) has no "
        "bf16 path"
    )


def test_fp16_weights_run_on_t4() -> None:
    arch = make_arch(1 * 10**9, layers=16)
    workload = InferenceWorkload(weight_dtype="fp16")
    t4 = make_offer("T4-16GB", 1, interconnect="pcie")
    result = recommend(arch, make_request(workload), [t4], GPUS, PROVIDERS, toy_estimate)
    assert len(result.recommendations) == 1


def test_unknown_gpu_is_kept_and_rejected() -> None:
    arch = make_arch(1 * 10**9, layers=16)
    offer = make_offer("MYSTERY-99GB", 1, interconnect="pcie")
    result = recommend(
        arch, make_request(InferenceWorkload()), [offer], GPUS, PROVIDERS, toy_estimate
    )
    [rejected] = result.rejected
    assert (rejected.code, rejected.gpu) == ("unknown_gpu", "MYSTERY-99GB")


def test_plans_the_estimator_refuses_are_skipped_and_workload_errors_propagate() -> None:
    import pytest

    from gpu_advisor.core.errors import InvalidSpecError

    def no_tensor_parallel(arch, workload, plan, *, capacity_bytes=None):  # type: ignore[no-untyped-def]
        if plan.tensor_parallel > 1:
            raise InvalidSpecError("no TP for this model", field="plan.tensor_parallel")
        return toy_estimate(arch, workload, plan, capacity_bytes=capacity_bytes)

    # the TP=2 case above: TP refused -> TP=1 x PP=2 over the pair
    arch = make_arch(22 * 10**9, layers=40)
    workload = InferenceWorkload(concurrency=4, context_length=8192)
    pair = make_offer("L40S-48GB", 2, interconnect="pcie")
    result = recommend(arch, make_request(workload), [pair], GPUS, PROVIDERS, no_tensor_parallel)
    best = result.recommendations[0]
    assert (best.plan.tensor_parallel, best.plan.pipeline_parallel) == (1, 2)

    def bad_workload(arch, workload, plan, *, capacity_bytes=None):  # type: ignore[no-untyped-def]
        raise InvalidSpecError("unknown LoRA target", field="workload.lora_targets.0")

    with pytest.raises(InvalidSpecError) as error:
        recommend(arch, make_request(workload), [pair], GPUS, PROVIDERS, bad_workload)
    assert error.value.field == "workload.lora_targets.0"


def test_tensor_parallel_respects_kv_head_divisibility() -> None:
    # 24 heads, 6 KV heads: TP=4 divides the heads but neither divides 6 KV heads nor is a
    # multiple of them -> skipped; TP=2 (divides 6) is used with PP.
    from gpu_advisor.core.planner.topology import SearchSpace

    arch = make_arch(1 * 10**9, heads=24, kv_heads=6)
    space = SearchSpace(arch, make_request(InferenceWorkload()).constraints, None)  # type: ignore[arg-type]
    assert space.tensor_degrees(8, 8) == [1, 2]


def test_a_gpu_without_published_rates_is_a_data_gap_not_a_missing_dtype() -> None:
    from msgspec import structs

    # A GPU row without compute figures (a vendor that publishes no datasheet, no cited source)
    unrated = structs.replace(
        GPUS["L4-24GB"],
        id="NORATE-24GB",
        fp32_tflops=None,
        bf16_dense_tflops=None,
        fp16_dense_tflops=None,
        fp8_dense_tflops=None,
        int8_dense_tops=None,
    )
    arch = make_arch(1 * 10**9, layers=16)
    offer = make_offer("NORATE-24GB", 1, interconnect="pcie")
    result = recommend(
        arch,
        make_request(InferenceWorkload()),
        [offer],
        {"NORATE-24GB": unrated},
        PROVIDERS,
        toy_estimate,
    )
    [rejected] = result.rejected
    assert rejected.code == "gpu_rate_unknown"
    assert rejected.text == (
        "the GPU table has no published compute rate for NORATE-24GB, so bf16 work on it "
        "cannot be timed or priced"
    )
