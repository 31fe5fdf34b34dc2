"""Schemathesis over every documented endpoint: no 5xx, responses conform to the schema.

Runs in process against the ASGI app built by the composition root (embedded defaults), with
Hypothesis derandomised so CI sees the same cases every run.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from gpu_advisor.asgi import build
from gpu_advisor.settings import Settings

APP = build(Settings(rate_limit_per_minute=0, log_level="error"))
schema = schemathesis.openapi.from_asgi("/schema/openapi.json", APP)


@schema.parametrize()
@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms(case: schemathesis.Case) -> None:
    # Schema-valid is not always answerable: an unknown GPU alias or model preset, a plan that
    # does not divide the heads, are semantic 422s the schema cannot express. Every other
    # check (no 5xx, documented status codes and content types, response schemas, rejection
    # of schema-invalid data) applies.
    case.call_and_validate(excluded_checks=[positive_data_acceptance])
