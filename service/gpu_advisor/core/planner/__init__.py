"""Topology matcher, performance model, cost and ranking (DESIGN steps 3-5).

Public entry point: :func:`recommend`. Build an :class:`OfferIndex` once per catalog version
(:func:`build_offer_index`) and pass it instead of the offer list to price 50,000 offers in
milliseconds. The memory estimator is injected (:class:`MemoryEstimator`).
"""

from gpu_advisor.core.planner.estimator import MemoryEstimator
from gpu_advisor.core.planner.index import OfferIndex, build_offer_index
from gpu_advisor.core.planner.recommend import RecommendationResult, recommend

__all__ = [
    "MemoryEstimator",
    "OfferIndex",
    "RecommendationResult",
    "build_offer_index",
    "recommend",
]
