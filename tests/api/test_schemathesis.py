"""Schemathesis over every documented endpoint: no 5xx, responses conform to the schema.

Runs in process against the ASGI app built by the composition root (embedded defaults), with
Hypothesis derandomised so CI sees the same cases every run.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings

from gpu_advisor.asgi import build
from gpu_advisor.settings import Settings

APP = build(Settings(rate_limit_per_minute=0, log_level="error"))
schema = schemathesis.openapi.from_asgi("/schema/openapi.json", APP)


@schema.parametrize()
@settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms(case: schemathesis.Case) -> None:
    case.call_and_validate()
