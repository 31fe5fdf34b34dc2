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


def test_duplicated_yaml_key_is_an_error_naming_the_key_and_lines() -> None:
    doc = YAML + b"target: {gpu: A100, gpu_count: 1}\n"
    with pytest.raises(SpecError) as caught:
        decode_document(doc, CheckRequest, "spec.yaml")
    # YAML above: "target:" on line 8 of the text (its first line is empty), again on line 10.
    assert caught.value.field == "target"
    assert caught.value.message.startswith("duplicate key 'target' (line 10; first at line 8)")


def test_duplicated_key_inside_a_nested_flow_mapping_names_its_path() -> None:
    doc = YAML.replace(b"{gpu: H100, gpu_count: 8}", b"{gpu: H100, gpu_count: 8, gpu: A100}")
    with pytest.raises(SpecError) as caught:
        decode_document(doc, CheckRequest, "spec.yaml")
    assert caught.value.field == "target.gpu"
    assert "duplicate key 'gpu'" in caught.value.message


def test_yaml_merge_keys_and_repeated_keys_in_sibling_mappings_are_fine() -> None:
    doc = YAML.replace(
        b"target: {gpu: H100, gpu_count: 8}", b"target: {<<: {gpu: A100}, gpu: H100}"
    )
    assert decode_document(doc, CheckRequest, "spec.yaml").target.gpu == "H100"


@pytest.mark.parametrize("name", ["spec.json", "spec.yaml"])
def test_deep_nesting_is_an_error_naming_the_field_not_a_recursion_error(name: str) -> None:
    # 1000 levels in model.config: far past the interpreter's recursion limit for msgspec's
    # decoder and PyYAML's composer; flow style is valid YAML and JSON alike.
    config = '{"a":' * 1000 + "1" + "}" * 1000
    doc = (
        f'{{"model": {{"config": {config}}}, "workload": {{"kind": "inference"}},'
        ' "target": {"gpu": "H100"}}'
    ).encode()
    with pytest.raises(SpecError) as caught:
        decode_document(doc, CheckRequest, name)
    # body 1, model 2, config 3, 29 more "a" levels to 32: the 30th "a" opens level 33.
    assert caught.value.field == "model.config" + ".a" * 30
    assert "nested deeper than 32 levels" in caught.value.message


def test_yaml_aliases_cannot_nest_deeper_or_expand_without_bound() -> None:
    # Each anchor holds the previous one: 40 levels from 40 short lines (no deep text).
    chain = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 40))
    deep = f"{chain}model:\n  config:\n    x: *a39\nworkload: {{kind: inference}}\n".encode()
    with pytest.raises(SpecError, match="nested deeper than 32"):
        decode_document(deep, CheckRequest, "spec.yaml")
    # "billion laughs": 9 lists of 10 aliases of the previous one = 10**9 values.
    laughs = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)
    )
    with pytest.raises(SpecError, match="expands to more than 100,000 values"):
        decode_document(laughs.encode(), CheckRequest, "spec.yaml")


def test_enum_errors_list_the_allowed_values() -> None:
    with pytest.raises(SpecError) as caught:
        decode_document(
            YAML.replace(b"kind: training", b"kind: training\n  optimizer: adam"),
            CheckRequest,
            "spec.yaml",
        )
    assert caught.value.field == "workload.optimizer"
    # spec.Optimizer
    assert caught.value.message == (
        "Invalid enum value 'adam'; use one of: adafactor, adamw, adamw-8bit, lion, sgd"
    )
