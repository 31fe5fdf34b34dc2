"""Malformed requests at the edge: every one a 400 problem+json naming the field and its
source, never a 500 (QA findings 1, 16, 17)."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

from gpu_advisor.nesting import MAX_NESTING_DEPTH, json_too_deep
from tests.api.answers import problem_of

PLANNING = ["/v1/estimate", "/v1/recommendations", "/v1/check"]
PRESET = '{"preset":"meta-llama/Llama-3.1-8B"}'
WORKLOAD = '{"kind":"inference"}'
TARGET = '{"gpu":"H100"}'


def _body(model: str = PRESET, constraints: str = "{}", path: str = "/v1/estimate") -> bytes:
    extra = {
        "/v1/estimate": "",
        "/v1/recommendations": f',"constraints":{constraints}',
        "/v1/check": f',"target":{TARGET}',
    }[path]
    return f'{{"model":{model},"workload":{WORKLOAD}{extra}}}'.encode()


@pytest.mark.parametrize("path", PLANNING)
def test_config_nested_1000_deep_is_a_400_naming_the_field(
    client: TestClient,  # type: ignore[type-arg]
    path: str,
) -> None:
    config = '{"a":' * 1000 + "1" + "}" * 1000
    problem = problem_of(
        client.post(path, content=_body(model=f'{{"config":{config}}}', path=path))
    )
    [error] = problem["errors"]
    # Levels: body 1, model 2, config 3, then the 30 "a" objects up to level 32; the value
    # of the 30th "a" opens level 33.
    assert error["field"] == "model.config" + ".a" * (MAX_NESTING_DEPTH - 2)
    assert error["source"] == "body"
    assert f"nested deeper than {MAX_NESTING_DEPTH} levels" in error["message"]


def test_5000_nested_lists_in_gpu_types_are_a_400(client: TestClient) -> None:  # type: ignore[type-arg]
    gpu_types = "[" * 5000 + "]" * 5000
    body = _body(constraints=f'{{"gpu_types":{gpu_types}}}', path="/v1/recommendations")
    problem = problem_of(client.post("/v1/recommendations", content=body))
    # body 1, constraints 2, gpu_types' list 3, then 29 inner lists (index 0 each) to 32.
    assert problem["errors"][0]["field"] == "constraints.gpu_types" + ".0" * 30


def test_nesting_up_to_the_limit_is_decoded_as_usual(client: TestClient) -> None:  # type: ignore[type-arg]
    # 32 levels exactly (body, model, config + 29 "a"): past the guard, the model parser says
    # what it misses about this config -- a 422 about the model, not a 400 about nesting.
    config = '{"a":' * 29 + "1" + "}" * 29
    response = client.post("/v1/estimate", content=_body(model=f'{{"config":{config}}}'))
    assert response.status_code == 422, response.text
    assert "nested" not in response.text


@pytest.mark.parametrize("content", [b"", b"  \n"])
def test_empty_body_says_a_body_is_required(
    client: TestClient,  # type: ignore[type-arg]
    content: bytes,
) -> None:
    response = client.post(
        "/v1/estimate", content=content, headers={"content-type": "application/json"}
    )
    problem = problem_of(response)
    assert problem["detail"] == "request body is required (JSON object)"
    assert problem["errors"] == [
        {"field": None, "message": "request body is required (JSON object)", "source": "body"}
    ]


def test_malformed_json_is_a_validation_problem(client: TestClient) -> None:  # type: ignore[type-arg]
    problem = problem_of(client.post("/v1/estimate", content=b'{"model": '))
    assert problem["type"].endswith("/validation")
    assert problem["errors"][0]["source"] == "body"
    assert problem["errors"][0]["message"].startswith("not valid JSON: ")


def test_query_errors_say_query_and_list_enum_values(client: TestClient) -> None:  # type: ignore[type-arg]
    problem = problem_of(client.get("/v1/offers", params={"sort": "cheapest", "limit": 0}))
    errors = {e["field"]: e for e in problem["errors"]}
    assert errors["limit"]["source"] == "query"
    assert errors["sort"]["source"] == "query"
    # OfferSort in core/offer_query.py: price and price_per_gpu, gpu_memory, gpus; '-' desc.
    assert errors["sort"]["message"] == (
        "Invalid enum value 'cheapest'; use one of: "
        "-gpu_memory, -gpus, -price, -price_per_gpu, gpu_memory, gpus, price, price_per_gpu"
    )


def test_unknown_query_parameters_are_rejected_like_unknown_body_fields(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    problem = problem_of(client.get("/v1/offers", params={"min_gpu": 8, "colour": "red"}))
    assert [(e["field"], e["source"]) for e in problem["errors"]] == [
        ("colour", "query"),
        ("min_gpu", "query"),
    ]
    assert "min_gpus" in problem["errors"][1]["message"]  # the parameters it does take
    assert client.get("/v1/offers", params={"min_gpus": 8, "limit": 1}).status_code == 200
    body_route = client.post("/v1/estimate?verbose=1", content=_body())
    assert problem_of(body_route)["errors"][0]["field"] == "verbose"


def test_a_query_parameter_given_twice_is_a_400_naming_it(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # ?gpu=A100&gpu=H100 would otherwise list H100s only (the last value wins)
    problem = problem_of(client.get("/v1/offers?gpu=A100&gpu=H100&limit=1&limit=2"))
    assert [(e["field"], e["source"]) for e in problem["errors"]] == [
        ("gpu", "query"),
        ("limit", "query"),
    ]
    assert client.get("/v1/offers?gpu=A100&limit=1").status_code == 200


def test_query_checks_repeat_alike_and_cover_options_requests(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    # The names a handler takes are worked out once per handler: a second request is judged
    # alike, and Litestar's own OPTIONS handler (which takes no weak reference) still answers
    # a 4xx, never a 500.
    for _ in range(2):
        problem = problem_of(client.get("/v1/offers", params={"colour": "red"}))
        assert [e["field"] for e in problem["errors"]] == ["colour"]
    options = client.options("/v1/offers", params={"gpu": "H100"})
    assert options.status_code < 500, options.text


@pytest.mark.parametrize("path", PLANNING)
def test_numbers_sent_as_strings_are_400_naming_the_field(
    client: TestClient,  # type: ignore[type-arg]
    path: str,
) -> None:
    # JSON has numbers; "4096" is a string. msgspec's strict rules (the CLI's) reject it, as
    # they reject true or 4.5 for an integer: the HTTP API must not read it as 4096.
    body = _body(path=path).replace(b'"kind":"inference"', b'"kind":"inference","concurrency":"4"')
    [error] = problem_of(client.post(path, content=body))["errors"]
    assert error == {
        "field": "workload.concurrency",
        "message": "Expected `int`, got `str`",
        "source": "body",
    }


def test_body_enum_and_tag_errors_list_the_allowed_values(client: TestClient) -> None:  # type: ignore[type-arg]
    engine = client.post(
        "/v1/estimate",
        json={"model": {"preset": "x"}, "workload": {"kind": "inference", "engine": "tgi"}},
    )
    [error] = problem_of(engine)["errors"]
    assert error == {
        "field": "workload.engine",
        "message": "Invalid enum value 'tgi'; use one of: generic, vllm",  # spec.Engine
        "source": "body",
    }
    kind = client.post("/v1/estimate", json={"model": {"preset": "x"}, "workload": {"kind": "x"}})
    [error] = problem_of(kind)["errors"]
    assert error["field"] == "workload.kind"
    assert error["message"] == "Invalid value 'x'; use one of: inference, training"


def test_list_items_are_named_with_dots_everywhere(client: TestClient) -> None:  # type: ignore[type-arg]
    decode = client.post(
        "/v1/recommendations",
        content=_body(constraints='{"gpu_types":["H100",""]}', path="/v1/recommendations"),
    )
    assert problem_of(decode)["errors"][0]["field"] == "constraints.gpu_types.1"
    domain = client.post(
        "/v1/recommendations",
        content=_body(constraints='{"gpu_types":["H100","Z9"]}', path="/v1/recommendations"),
    )
    assert problem_of(domain, 422)["errors"][0]["field"] == "constraints.gpu_types.1"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"[" * 32 + b"]" * 32, None),  # exactly the limit
        (b"[" * 33 + b"]" * 33, ".".join(["0"] * 32)),
        (b'{"k": "' + b"[" * 100 + b'"}', None),  # brackets inside a string are text
        (b'{"k": "\\"' + b"[" * 100 + b'"}', None),  # ...after an escaped quote too
        (
            b'{"a": 1, "b": [7, ' + b"[" * 40 + b"]" * 40 + b"]}",
            "b." + ".".join(["1"] + ["0"] * 30),
        ),
        (b"[" * 40, ".".join(["0"] * 32)),  # unbalanced but too deep: still caught
        (b"[}" * 40, None),  # not JSON, not deep: the decoder reports it
        (b'"' + b"\\" * 10_001, None),  # unterminated string: linear scan, no error here
    ],
)
def test_json_depth_scan(data: bytes, expected: str | None) -> None:
    assert json_too_deep(data) == expected


def test_json_depth_scan_names_the_path_after_a_large_flat_prefix() -> None:
    # 1 MiB of sibling lists with the deep part at the very end (one pass, no recursion):
    # the outer list (level 1) at index 349000, then 31 lists at index 0 up to level 32.
    data = b"[" + b"[]," * 349_000 + b"[" * 40 + b"]" * 40 + b"]"
    assert json_too_deep(data) == "349000." + ".".join(["0"] * 31)


# --- GPU family names in filters (QA finding 11) ---------------------------------------------
# gpus.csv: A100 has SXM/PCIe x 40/80 GB; H100 has SXM 80, PCIe 80 and NVL 94; L40S one variant.
A100_ALL = {"A100-SXM-40GB", "A100-SXM-80GB", "A100-PCIE-40GB", "A100-PCIE-80GB"}
H100_ALL = {"H100-SXM-80GB", "H100-PCIE-80GB", "H100-NVL-94GB"}


def _offer_gpus(client: TestClient, gpu: str) -> set[str]:  # type: ignore[type-arg]
    response = client.get("/v1/offers", params={"gpu": gpu, "limit": 1000})
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["total"] <= 1000
    return {offer["gpu"] for offer in page["offers"]}


def _all_offer_gpus(client: TestClient) -> set[str]:  # type: ignore[type-arg]
    gpus: set[str] = set()
    offset = 0
    while True:
        page = client.get("/v1/offers", params={"limit": 1000, "offset": offset}).json()
        gpus |= {offer["gpu"] for offer in page["offers"]}
        offset += 1000
        if offset >= page["total"]:
            return gpus


@pytest.mark.parametrize(
    ("name", "family"),
    [("A100", A100_ALL), ("a100", A100_ALL), ("H100", H100_ALL), ("h100", H100_ALL)],
)
def test_family_name_in_offers_filter_matches_every_variant(
    client: TestClient,  # type: ignore[type-arg]
    name: str,
    family: set[str],
) -> None:
    # Every variant of the family that the bundled catalog sells, and nothing else.
    assert _offer_gpus(client, name) == family & _all_offer_gpus(client)
    assert len(family & _all_offer_gpus(client)) >= 3


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100-NVL", {"H100-NVL-94GB"}),
        ("nvidia a100-sxm4-80gb", {"A100-SXM-80GB"}),
        ("A100-80GB", {"A100-SXM-80GB", "A100-PCIE-80GB"}),  # a size, no form: both forms
        ("L40S", {"L40S-48GB"}),
    ],
)
def test_specific_names_in_offers_filter_match_their_variants(
    client: TestClient,  # type: ignore[type-arg]
    name: str,
    expected: set[str],
) -> None:
    assert _offer_gpus(client, name) == expected


def test_unknown_size_of_a_known_family_is_a_422(client: TestClient) -> None:  # type: ignore[type-arg]
    response = client.get("/v1/offers", params={"gpu": "A100-96GB"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "gpu"


def test_family_name_in_gpu_types_keeps_every_variant(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-8B"},
        "workload": {"kind": "inference"},
        "constraints": {"gpu_types": ["a100"]},
        "top_k": 20,
    }
    answer = client.post("/v1/recommendations", json=body).json()
    chosen = {rec["offer"]["gpu"] for rec in answer["recommendations"]}
    assert chosen <= A100_ALL
    assert len(chosen) >= 2  # not only the default A100-SXM-40GB
    excluded = {g["gpu"] for g in answer["rejected"] if g["code"] == "gpu_excluded"}
    assert not excluded & A100_ALL


def test_hardware_family_name_takes_the_default_variant_and_says_so(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    body: dict[str, Any] = {
        "model": {"preset": "meta-llama/Llama-3.1-8B"},
        "workload": {"kind": "inference"},
        "hardware": {"gpu": "H100"},
    }
    answer = client.post("/v1/estimate", json=body).json()
    assert answer["hardware"]["gpu"] == "H100-SXM-80GB"
    [note] = [n for n in answer["notes"] if n["code"] == "gpu_default_variant"]
    assert set(note["data"]["others"]) == {"H100-PCIE-80GB", "H100-NVL-94GB"}
    body["hardware"] = {"gpu": "H100-PCIe"}
    pinned = client.post("/v1/estimate", json=body).json()
    assert pinned["hardware"]["gpu"] == "H100-PCIE-80GB"
    assert not [n for n in pinned["notes"] if n["code"] == "gpu_default_variant"]


def test_an_unknown_preset_names_its_field_once(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {"model": {"preset": "meta-llama/Llama-9-1T"}, "workload": {"kind": "inference"}}
    problem = problem_of(client.post("/v1/estimate", json=body), 422)
    [error] = problem["errors"]
    assert error["field"] == "model.preset"
    assert error["message"].startswith("'meta-llama/Llama-9-1T' is not a known preset.")
    assert problem["detail"].count("model.preset") == 1 + error["message"].count("model.preset")
