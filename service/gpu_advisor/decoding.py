"""Request documents (JSON or YAML) into the request Structs, and msgspec's errors as
``(field path, message)`` -- shared by the HTTP layer's problem details and the CLI, so both
name the offending field the same way (``workload.sequence_length``).

YAML is read with PyYAML's safe loader plus the YAML 1.2 float rule, so ``tokens: 2.0e8``
(and ``1e9``) are numbers as in JSON -- PyYAML alone follows YAML 1.1 and reads them as strings
(yaml/pyyaml issue #173). A key given twice in one mapping is an error (PyYAML keeps the last
silently), and so is nesting deeper than the HTTP body limit
(:func:`gpu_advisor.nesting.yaml_shape_error`). Values are then converted with
``msgspec.convert`` (strict: no string-to-number coercion), so a YAML spec is validated exactly
like the JSON body.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
import yaml
from msgspec import inspect as mi

from gpu_advisor.nesting import json_too_deep, too_deep_message, value_shape_error, yaml_shape_error

T = TypeVar("T")

# msgspec reports a location as "at `$.workload.sequence_length`" or "at `$[0]`".
_NAMED_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")
_MSGSPEC_PATH = re.compile(r"\s*-\s*at `\$(?P<path>[^`]*)`\s*$")
_YAML12_FLOAT = re.compile(
    r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|[0-9][0-9_]*[eE][-+]?[0-9]+)$"
)


class SpecError(ValueError):
    """A document that is not a valid request.

    Attributes:
        field: dotted path of the offending field (None when the document itself is bad).
        message: what is wrong.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def _field_of(path: str) -> str:
    """``.workload.sequence_length`` / ``[0].x`` -> ``workload.sequence_length`` / ``0.x``."""
    return re.sub(r"\[(\d+)\]", r".\1", path).lstrip(".")


def split_msgspec_message(message: str, prefix: str = "") -> tuple[str, str]:
    """Split a msgspec error into (field path, message without the location)."""
    match = _MSGSPEC_PATH.search(message)
    if match is None:
        return prefix, message
    field = _field_of(match.group("path"))
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    return field, message[: match.start()].strip()


def named_field(field: str, message: str) -> str:
    """``Object contains unknown field `x``` at ``model``: the field is ``model.x``."""
    named = _NAMED_FIELD.search(message)
    if named is None:
        return field
    return f"{field}.{named.group(1)}" if field else named.group(1)


def field_path(key: str) -> str:
    """One spelling of field paths: dots, list indexes as numbers (``gpu_types[0]`` ->
    ``gpu_types.0``), as msgspec locations and Litestar keys are rewritten."""
    return _field_of(key)


def _members(types: list[mi.Type]) -> list[mi.Type]:
    """``types`` with metadata wrappers removed and unions flattened."""
    out: list[mi.Type] = []
    pending = list(types)
    while pending:
        t = pending.pop()
        match t:
            case mi.Metadata():
                pending.append(t.type)
            case mi.UnionType():
                pending.extend(t.types)
            case _:
                out.append(t)
    return out


def allowed_values(kind: Any, field: str) -> tuple[str, ...]:
    """The values an enum (``Literal``) or a union's tag field at ``field`` of ``kind``
    accepts (``workload.engine`` -> ``generic, vllm``); empty when it is not one."""
    types: list[mi.Type] = [mi.type_info(kind)]
    tags: list[str] = []
    parts = [p for p in field.split(".") if p] if field else []
    for i, part in enumerate(parts):
        inner: list[mi.Type] = []
        for t in _members(types):
            match t:
                case mi.StructType():
                    if i == len(parts) - 1 and t.tag_field == part and isinstance(t.tag, str):
                        tags.append(t.tag)
                    inner.extend(f.type for f in t.fields if f.encode_name == part)
                case mi.ListType() | mi.VarTupleType() if part.isdigit():
                    inner.append(t.item_type)
                case mi.TupleType() if part.isdigit() and int(part) < len(t.item_types):
                    inner.append(t.item_types[int(part)])
                case mi.DictType():
                    inner.append(t.value_type)
                case _:
                    pass
        types = inner
    values = [v for t in _members(types) if isinstance(t, mi.LiteralType) for v in t.values]
    return tuple(sorted({str(v) for v in (*values, *tags)}))


def with_allowed_values(message: str, kind: Any, field: str) -> str:
    """msgspec's ``Invalid enum value 'x'`` (or a bad union tag's ``Invalid value 'x'``)
    followed by the values the field accepts."""
    if not message.startswith(("Invalid enum value", "Invalid value")):
        return message
    try:
        values = allowed_values(kind, field)
    except (TypeError, ValueError):  # not a type msgspec can describe: keep the message
        return message
    return f"{message}; use one of: {', '.join(values)}" if values else message


def explain_validation_error(error: msgspec.ValidationError, kind: Any = None) -> SpecError:
    """msgspec's ``Expected `int` >= 1 - at `$.workload.sequence_length``` as a SpecError
    naming ``workload.sequence_length`` (an enum's allowed values added when ``kind``, the
    decoded type, is given)."""
    field, message = split_msgspec_message(str(error))
    if kind is not None:
        message = with_allowed_values(message, kind, field)
    return SpecError(message, field=named_field(field, message) or None)


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats (``1e9``, ``2.0e8``)."""


_Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """YAML text as plain values, with PyYAML's safe loader and the YAML 1.2 float rule
    (``1.0e9`` is a number). No depth or duplicate-key checks: :func:`decode_document` makes
    them first for documents from outside.

    Raises:
        yaml.YAMLError: not YAML.
    """
    return yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader subclass


def looks_like_json(text: str, name: str) -> bool:
    """JSON by file extension, else by its first character (``-`` is stdin)."""
    lowered = name.lower()
    if lowered.endswith(".json"):
        return True
    if lowered.endswith((".yaml", ".yml")):
        return False
    return text.lstrip().startswith(("{", "["))


def decode_document(data: bytes, kind: type[T], name: str = "-") -> T:
    """A JSON or YAML request document as ``kind`` (unknown fields rejected).

    Args:
        data: the document's bytes (UTF-8).
        kind: the request Struct (``CheckRequest``, ``EstimateRequest``...).
        name: file name (its extension picks the format; ``-`` for stdin).

    Raises:
        SpecError: the document is not JSON/YAML, or not a valid ``kind`` (naming the field).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        if looks_like_json(text, name):
            too_deep = json_too_deep(data)
            if too_deep is not None:
                raise SpecError(too_deep_message(), field=too_deep or None)
            return msgspec.json.decode(data, type=kind)
        # Depth (the composer recurses per level) and duplicated keys (the loader keeps the
        # last): the event pass first, which neither recurses nor builds anything.
        shape = yaml_shape_error(text, _Yaml12Loader)
        if shape is not None:
            raise SpecError(shape[1], field=shape[0])
        loaded = load_yaml(text)
    except msgspec.ValidationError as exc:
        raise explain_validation_error(exc, kind) from None
    except msgspec.DecodeError as exc:
        raise SpecError(f"not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise SpecError("not valid YAML: " + " ".join(str(exc).split())) from None
    if not isinstance(loaded, dict):
        raise SpecError("the document must be a mapping (a JSON object) at its top level")
    expanded = value_shape_error(loaded)  # aliases can nest and repeat what the text holds
    if expanded is not None:
        raise SpecError(expanded[1], field=expanded[0])
    try:
        return msgspec.convert(loaded, type=kind)
    except msgspec.ValidationError as exc:
        raise explain_validation_error(exc, kind) from None
