"""Shape limits of request documents, checked BEFORE a recursive decoder sees them.

msgspec's JSON decoder, ``msgspec.convert`` and PyYAML's composer recurse once per nesting
level and give up with ``RecursionError`` near the interpreter's recursion limit (1,000
frames), which Litestar does not catch (its ``decode_json`` catches only
``msgspec.DecodeError``) -- a 500. A request never needs more than a few levels: the deepest
real input is a Hugging Face ``config.json`` posted in ``model.config`` (``text_config`` ->
``rope_scaling`` -> a list: 3-4 levels, plus 2 for the request around it). So documents nested
deeper than :data:`MAX_NESTING_DEPTH` objects and arrays are rejected with the path of the
field whose value is too deep (``model.config.a.a....``), in dotted form with list indexes as
numbers (``constraints.gpu_types.0.0``), as every other error names fields.

* :func:`json_too_deep` scans JSON bytes (HTTP bodies, JSON SPEC files) without decoding them:
  a C-speed pre-check (bracket count, then peeling innermost ``[]``/``{}`` pairs at most
  ``MAX_NESTING_DEPTH`` times on the brackets outside strings) and, only for a document that
  is too deep, one token pass for the path (1 MiB of adversarial brackets: about 0.3 s).
* :func:`yaml_shape_error` walks PyYAML's event stream (its parser is a state machine, not
  recursive) before the composer builds nodes; it also rejects a key given twice in one
  mapping, which PyYAML's loader silently resolves to the last value.
* :func:`value_shape_error` checks a decoded value (YAML aliases can nest and multiply what a
  short text holds: ``&a [*b, *b, ...]`` chains grow exponentially, "billion laughs").
"""

from __future__ import annotations

import re
from typing import Any, Final

import yaml

MAX_NESTING_DEPTH: Final = 32
"""Most objects/arrays nested inside one another in a request document (top level = 1)."""
MAX_DOCUMENT_VALUES: Final = 100_000
"""Most values a decoded YAML document may expand to (aliases counted each time used)."""

# A JSON string, or an unterminated one running to the end (so the scan never backtracks
# over the rest of the input: linear time on any bytes).
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*+(?:"|\Z)', re.DOTALL)
_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*+(?:"|\Z)|[\[\]{},]', re.DOTALL)
_NOT_BRACKET: Final = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep_message(max_depth: int = MAX_NESTING_DEPTH) -> str:
    """The error message for a document nested deeper than ``max_depth``."""
    return (
        f"nested deeper than {max_depth} levels of objects and arrays; "
        "a request needs only a few (flatten this value)"
    )


def json_too_deep(data: bytes, max_depth: int = MAX_NESTING_DEPTH) -> str | None:
    """The dotted path of the first field nested deeper than ``max_depth``, else None.

    Args:
        data: JSON bytes (need not be valid: malformed input is left to the decoder, which
            reports it; this only promises that a decoder sees no deeper nesting).
        max_depth: most nested objects/arrays (the top-level value is level 1).

    Returns:
        ``"model.config.a.a"``-style path of the value that opens level ``max_depth + 1``
        (``""`` when that is the top level itself), or None when the document is shallow
        enough.
    """
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return None
    skeleton = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    for _ in range(max_depth):
        if not skeleton:
            return None
        peeled = skeleton.replace(b"[]", b"").replace(b"{}", b"")
        if peeled == skeleton:
            break  # mismatched brackets: not JSON; the token pass decides
        skeleton = peeled
    if not skeleton:
        return None
    return _json_path_beyond(data, max_depth)


def _json_path_beyond(data: bytes, max_depth: int) -> str | None:
    # One frame per open container: [is_object, key or index, expecting a key].
    stack: list[list[Any]] = []
    for match in _TOKEN.finditer(data):
        token = match.group()
        head = token[:1]
        if head == b'"':
            frame = stack[-1] if stack else None
            if frame is not None and frame[0] and frame[2]:
                frame[1] = token[1:-1].decode("utf-8", "replace")
                frame[2] = False
        elif head in (b"{", b"["):
            if len(stack) >= max_depth:
                return ".".join(str(frame[1]) for frame in stack)
            is_object = head == b"{"
            stack.append([is_object, "" if is_object else 0, is_object])
        elif head in (b"}", b"]"):
            if not stack:
                return None
            stack.pop()
        elif stack:  # a comma: the next key, or the next index
            if stack[-1][0]:
                stack[-1][2] = True
            else:
                stack[-1][1] += 1
    return None


def yaml_shape_error(
    text: str, loader: type[yaml.SafeLoader], max_depth: int = MAX_NESTING_DEPTH
) -> tuple[str | None, str] | None:
    """``(field path, message)`` for the first problem PyYAML's loader would not report, or
    None: a collection nested deeper than ``max_depth`` (its composer recurses per level) or a
    key given twice in one mapping (YAML 1.2 section 3.2.1.1 requires unique keys; PyYAML
    silently keeps the last, so a CI spec with two ``target:`` keys would be judged on one).

    Walks the parser's events (no nodes are built, no recursion). Keys are compared as their
    scalar text (``1`` and ``"1"`` are the same key: the document is read as JSON would be).

    Raises:
        yaml.YAMLError: the text is not YAML (the caller reports it as such).
    """
    # One frame per open collection: [is_mapping, key or items done, expecting a key,
    # {key: line first seen}].
    stack: list[list[Any]] = []

    def path() -> str:
        return ".".join(str(frame[1]) for frame in stack)

    def value_done() -> None:
        if stack:
            frame = stack[-1]
            if frame[0]:
                frame[2] = not frame[2]  # a key, then its value
            else:
                frame[1] += 1  # the next item's index

    for event in yaml.parse(text, Loader=loader):
        match event:
            case yaml.MappingStartEvent() | yaml.SequenceStartEvent():
                if len(stack) >= max_depth:
                    return path() or None, too_deep_message(max_depth)
                is_mapping = isinstance(event, yaml.MappingStartEvent)
                stack.append([True, "?", True, {}] if is_mapping else [False, 0, False, {}])
            case yaml.MappingEndEvent() | yaml.SequenceEndEvent():
                stack.pop()
                value_done()
            case yaml.ScalarEvent():
                frame = stack[-1] if stack else None
                if frame is not None and frame[0] and frame[2]:
                    line = event.start_mark.line + 1 if event.start_mark else 0
                    frame[1] = event.value
                    if event.value in frame[3]:
                        return path(), (
                            f"duplicate key {event.value!r} (line {line}; first at line "
                            f"{frame[3][event.value]}): YAML keeps only the last one, so "
                            "remove one of them"
                        )
                    frame[3][event.value] = line
                value_done()
            case yaml.AliasEvent():
                value_done()
            case _:
                pass
    return None


def value_shape_error(
    value: Any, max_depth: int = MAX_NESTING_DEPTH, max_values: int = MAX_DOCUMENT_VALUES
) -> tuple[str | None, str] | None:
    """``(field path, message)`` when a decoded document is too deep or too large, else None.

    Iterative (no recursion); each use of a shared (aliased) value is counted, so the work is
    bounded by ``max_values`` however the value is built.
    """
    pending: list[tuple[Any, tuple[str, ...], int]] = [(value, (), 1)]
    seen = 0
    while pending:
        item, path, depth = pending.pop()
        seen += 1
        if seen > max_values:
            return None, (
                f"the document expands to more than {max_values:,} values "
                "(YAML aliases repeating large parts?)"
            )
        if isinstance(item, dict | list):
            if depth > max_depth:
                return ".".join(path) or None, too_deep_message(max_depth)
            children = item.items() if isinstance(item, dict) else enumerate(item)
            pending.extend((child, (*path, str(key)), depth + 1) for key, child in children)
    return None
