"""Topology matcher, performance model, cost and ranking (DESIGN steps 3-5).

Public entry point: :func:`recommend`. Build a :class:`RecommendationIndex` once per catalog
version (:func:`build_recommendation_index`) and pass it instead of the offer list to price
50,000 offers in milliseconds. The memory estimator is injected (:class:`MemoryEstimator`).
"""

from gpu_advisor.core.planner.estimator import MemoryEstimator
from gpu_advisor.core.planner.index import RecommendationIndex, build_recommendation_index
from gpu_advisor.core.planner.recommend import RecommendationResult, recommend

__all__ = [
    "MemoryEstimator",
    "RecommendationIndex",
    "RecommendationResult",
    "build_recommendation_index",
    "recommend",
]
