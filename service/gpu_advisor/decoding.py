"""Request documents (JSON or YAML) into the request Structs, and msgspec's errors as
``(field path, message)`` -- shared by the HTTP layer's problem details and the CLI, so both
name the offending field the same way (``workload.sequence_length``).

YAML is read with PyYAML's safe loader plus the YAML 1.2 float rule, so ``tokens: 2.0e8``
(and ``1e9``) are numbers as in JSON -- PyYAML alone follows YAML 1.1 and reads them as strings
(yaml/pyyaml issue #173). Values are then converted with ``msgspec.convert`` (strict: no
string-to-number coercion), so a YAML spec is validated exactly like the JSON body.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
import yaml

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


def explain_validation_error(error: msgspec.ValidationError) -> SpecError:
    """msgspec's ``Expected `int` >= 1 - at `$.workload.sequence_length``` as a SpecError
    naming ``workload.sequence_length``."""
    field, message = split_msgspec_message(str(error))
    return SpecError(message, field=named_field(field, message) or None)


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats (``1e9``, ``2.0e8``)."""


_Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


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
            return msgspec.json.decode(data, type=kind)
        loaded: Any = yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader subclass
    except msgspec.ValidationError as exc:
        raise explain_validation_error(exc) from None
    except msgspec.DecodeError as exc:
        raise SpecError(f"not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise SpecError("not valid YAML: " + " ".join(str(exc).split())) from None
    if not isinstance(loaded, dict):
        raise SpecError("the document must be a mapping (a JSON object) at its top level")
    try:
        return msgspec.convert(loaded, type=kind)
    except msgspec.ValidationError as exc:
        raise explain_validation_error(exc) from None
