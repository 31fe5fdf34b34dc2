"""The CLI's three questions and when each one passes (its exit status).

``gpu-advisor check|estimate|recommend SPEC`` sends SPEC -- the same document as the
matching endpoint's request body -- and exits 0 when the answer passes, 1 when it does not
(2 is an error: bad spec, service unreachable, a 4xx/5xx):

* ``check``: the verdict is ``pass``;
* ``estimate``: with ``hardware``, the workload fits it; without, at least one GPU type can
  run it (``min_gpus`` has a count);
* ``recommend``: at least one recommendation fits the constraints.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from msgspec import Struct

from gpu_advisor.core.check import CheckResponse
from gpu_advisor.core.estimate import EstimateResponse
from gpu_advisor.core.results import RecommendationResponse
from gpu_advisor.core.spec import CheckRequest, EstimateRequest, RecommendationRequest
from gpu_advisor.render.report import Response

CommandName = Literal["check", "estimate", "recommend"]
Request = CheckRequest | EstimateRequest | RecommendationRequest


class Command(Struct, frozen=True, kw_only=True):
    """One CLI command: its endpoint and the request/response types of its body."""

    name: CommandName
    path: str
    request_type: Any
    response_type: Any
    progress: str


COMMANDS: Final[dict[CommandName, Command]] = {
    "check": Command(
        name="check",
        path="/v1/check",
        request_type=CheckRequest,
        response_type=CheckResponse,
        progress="Checking the workload against its target",
    ),
    "estimate": Command(
        name="estimate",
        path="/v1/estimate",
        request_type=EstimateRequest,
        response_type=EstimateResponse,
        progress="Estimating memory and speed",
    ),
    "recommend": Command(
        name="recommend",
        path="/v1/recommendations",
        request_type=RecommendationRequest,
        response_type=RecommendationResponse,
        progress="Ranking the catalog's offers",
    ),
}


def passed(response: Response) -> bool:
    """Whether the answer passes (module docstring)."""
    match response:
        case CheckResponse():
            return response.verdict == "pass"
        case EstimateResponse():
            if response.hardware is not None:
                return bool(response.fits)
            return any(row.min_gpus is not None for row in response.min_gpus)
        case RecommendationResponse():
            return bool(response.recommendations)
