"""The result is plain data: it encodes to JSON (no numpy scalars leak out of the core) and
decodes back to the same values."""

from __future__ import annotations

import msgspec

from gpu_advisor.core.planner import RecommendationResult, recommend
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

from .fixtures import GPUS, INFINIBAND, make_arch, make_offer, make_request, providers, toy_estimate


def _roundtrip(result: RecommendationResult) -> None:
    encoded = msgspec.json.encode(result)  # raises on numpy integers
    assert msgspec.json.decode(encoded, type=RecommendationResult) == result
    assert b"nan" not in encoded.lower()


def test_training_result_with_spot_rejections_and_pareto_encodes() -> None:
    arch = make_arch(70 * 10**9, layers=80, hidden=8192, heads=64)
    offers = [
        make_offer(network=INFINIBAND, spot=6.0, vcpus=8),
        make_offer(instance_type="plain"),
        make_offer("L4-24GB", 1, interconnect="pcie"),
    ]
    result = recommend(
        arch,
        make_request(TrainingWorkload(tokens=1e9), spot="allow"),
        offers,
        GPUS,
        providers(acme=0.1),
        toy_estimate,
    )
    assert result.recommendations
    assert result.rejected
    assert result.pareto
    _roundtrip(result)


def test_serving_result_with_suggestions_encodes() -> None:
    arch = make_arch(40 * 10**9)
    offers = [make_offer("L4-24GB", 1, interconnect="pcie")]
    result = recommend(arch, make_request(InferenceWorkload()), offers, GPUS, {}, toy_estimate)
    assert result.suggestions
    _roundtrip(result)
