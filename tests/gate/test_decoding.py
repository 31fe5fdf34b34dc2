"""SPEC documents: JSON or YAML into the same request Structs, errors naming the field."""

from __future__ import annotations

import pytest

from gpu_advisor.core.spec import CheckRequest, TrainingWorkload
from gpu_advisor.decoding import SpecError, decode_document, looks_like_json

YAML = b"""
model: {preset: meta-llama/Llama-3.1-8B}
workload:
  kind: training
  sequence_length: 4096
  tokens: 1e9
  mfu: .45
target: {gpu: H100, gpu_count: 8}
budget_usd: 2.5E+3
"""


def test_yaml_numbers_follow_yaml_1_2() -> None:
    request = decode_document(YAML, CheckRequest, "spec.yaml")
    workload = request.workload
    assert isinstance(workload, TrainingWorkload)
    assert workload.tokens == 1e9  # PyYAML's YAML 1.1 rule would make "1e9" a string
    assert workload.mfu == 0.45
    assert workload.sequence_length == 4096  # integers stay integers
    assert isinstance(workload.sequence_length, int)
    assert request.budget_usd == 2500.0


def test_quoted_numbers_stay_strings_and_are_rejected() -> None:
    with pytest.raises(SpecError) as caught:
        decode_document(YAML.replace(b"tokens: 1e9", b'tokens: "1e9"'), CheckRequest, "s.yml")
    assert caught.value.field == "workload.tokens"
    assert "Expected `float | null`, got `str`" in caught.value.message


def test_json_and_yaml_give_the_same_request() -> None:
    json_doc = (
        b'{"model": {"preset": "meta-llama/Llama-3.1-8B"}, "workload": {"kind": "training",'
        b' "sequence_length": 4096, "tokens": 1e9, "mfu": 0.45},'
        b' "target": {"gpu": "H100", "gpu_count": 8}, "budget_usd": 2500}'
    )
    assert decode_document(json_doc, CheckRequest, "-") == decode_document(YAML, CheckRequest, "-")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (YAML.replace(b"gpu_count: 8", b"gpu_count: 8, colour: red"), "target.colour"),
        (YAML.replace(b"kind: training", b"kind: pretraining"), "workload.kind"),
        (
            YAML.replace(b"sequence_length: 4096", b"sequence_length: -1"),
            "workload.sequence_length",
        ),
        (b"workload: {kind: training}\ntarget: {gpu: H100}\n", "model"),
    ],
)
def test_errors_name_the_field(doc: bytes, field: str) -> None:
    with pytest.raises(SpecError) as caught:
        decode_document(doc, CheckRequest, "spec.yaml")
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_format_by_extension_then_content() -> None:
    assert looks_like_json("model: x", "spec.json")
    assert not looks_like_json("{}", "spec.yaml")
    assert looks_like_json('  {"model": {}}', "-")
    assert not looks_like_json("model: {}", "-")
    with pytest.raises(SpecError, match="not UTF-8"):
        decode_document(b"\xff\xfe", CheckRequest, "-")
