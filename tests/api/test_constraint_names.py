"""Names in ``constraints`` that cannot select anything are errors naming the field, not a 200
in which every offer is ``provider_excluded``: a typo in a CI pipeline's provider list would
otherwise turn into "nothing fits" (or silently drop the provider meant)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from gpu_advisor.advisor import Advisor
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.reference import load_providers
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.spec import RecommendationRequest
from tests.api.answers import problem_of

BASE: dict[str, Any] = {
    "model": {"preset": "meta-llama/Llama-3.1-8B"},
    "workload": {"kind": "inference", "context_length": 4096, "concurrency": 4},
}


def _post(client: TestClient, constraints: dict[str, Any]) -> Any:  # type: ignore[type-arg]
    return client.post("/v1/recommendations", json={**BASE, "constraints": constraints})


def test_an_unknown_provider_is_a_422_naming_it_and_the_known_ones(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    problem = problem_of(_post(client, {"providers": ["aws", "lamdba"]}), 422)
    [error] = problem["errors"]
    assert error["field"] == "constraints.providers.1"
    assert "'lamdba'" in error["message"]
    # every provider of the bundled provider table is offered as a known name
    for name in load_providers():
        assert name in error["message"]


def test_provider_names_match_case_insensitively(client: TestClient) -> None:  # type: ignore[type-arg]
    response = _post(client, {"providers": ["Lambda"]})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["recommendations"]
    assert {r["offer"]["provider"] for r in answer["recommendations"]} == {"lambda"}


@pytest.mark.parametrize("field", ["providers", "regions", "gpu_types"])
def test_an_empty_filter_list_is_a_400_naming_the_field(
    client: TestClient,  # type: ignore[type-arg]
    field: str,
) -> None:
    # [] would allow nothing; omitting the field allows everything.
    [error] = problem_of(_post(client, {field: []}), 400)["errors"]
    assert error["field"] == f"constraints.{field}"
    assert "length >= 1" in error["message"]


@pytest.mark.anyio
async def test_a_provider_of_the_catalog_is_known_without_a_provider_table_row() -> None:
    # The provider table holds billing facts; an offer source may bring a provider it lacks.
    # With an empty table, a provider the catalog's offers have is still a valid filter and
    # one they do not have is still an error.
    service = CatalogService(CatalogConfig(sources=("bundled",)))
    await service.start()
    try:
        advisor = Advisor(service, providers={})
        request = msgspec.convert(
            {**BASE, "constraints": {"providers": ["lambda"]}}, RecommendationRequest
        )
        answer = await advisor.recommend(request)
        assert {r.offer.provider for r in answer.recommendations} == {"lambda"}
        unknown = msgspec.structs.replace(
            request, constraints=msgspec.structs.replace(request.constraints, providers=["x"])
        )
        with pytest.raises(InvalidSpecError) as raised:
            await advisor.recommend(unknown)
        assert raised.value.field == "constraints.providers.0"
    finally:
        await service.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_an_unknown_region_is_a_422_with_the_closest_regions(client: TestClient) -> None:  # type: ignore[type-arg]
    # "us-east1" is GCP's spelling; AWS's is "us-east-1". The catalog holds both, so a region
    # is unknown only when no offer at all is in it.
    problem = problem_of(_post(client, {"regions": ["us-east-1", "us-eest-1"]}), 422)
    [error] = problem["errors"]
    assert error["field"] == "constraints.regions.1"
    assert "'us-eest-1'" in error["message"]
    suggested = error["message"].rpartition("did you mean ")[2].rstrip("?").split(" or ")
    assert "'us-east-1'" in suggested
    response = _post(client, {"regions": ["US-EAST-1"]})
    assert response.status_code == 200, response.text
    regions = {r["offer"]["region"] for r in response.json()["recommendations"]}
    assert regions == {"us-east-1"}


def test_a_misspelt_provider_gets_the_closest_name(client: TestClient) -> None:  # type: ignore[type-arg]
    [error] = problem_of(_post(client, {"providers": ["lamdba"]}), 422)["errors"]
    assert error["message"].endswith("did you mean 'lambda'?")


def test_a_region_hint_keeps_the_catalogs_spelling_and_quotes_it(client: TestClient) -> None:  # type: ignore[type-arg]
    # vast.ai regions hold commas ("Texas, US, NA"): each suggestion is quoted, as spelt.
    [error] = problem_of(_post(client, {"regions": ["Texas, US, NB"]}), 422)["errors"]
    assert "'Texas, US, NA'" in error["message"]
