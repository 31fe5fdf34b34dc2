"""Guards every request passes before its handler's arguments are decoded (Litestar's
app-level ``before_request`` hook, which runs before the body is parsed -- Litestar 2.x
``HTTPRoute._call_handler_function``).

* Unknown query parameters on ``/v1/`` routes are a 400 naming them, as unknown body fields
  are (``/v1/offers?min_gpu=8`` must not silently list every offer); so is a parameter given
  twice (every one takes a single value).
* A handler that takes a JSON body gets one: an empty body is a 400 "request body is
  required (JSON object)" (Litestar would report its internal ``KeyError('data')``).
* A body nested deeper than :data:`~gpu_advisor.nesting.MAX_NESTING_DEPTH` objects/arrays is a
  400 naming the field, before msgspec's recursive decoder meets it (a ``RecursionError``, a
  500, otherwise; :mod:`gpu_advisor.nesting`).
"""

from __future__ import annotations

import weakref
from typing import Any, Final

import msgspec
from litestar import Request
from litestar.constants import RESERVED_KWARGS
from litestar.exceptions import ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.params import ParameterKwarg

from gpu_advisor.nesting import json_too_deep, too_deep_message

BODY_REQUIRED: Final = "request body is required (JSON object)"
_GUARDED_PREFIX: Final = "/v1/"


def query_names(request: Request[Any, Any, Any]) -> frozenset[str]:
    """The query parameter names the route's handler declares (aliases included): its
    arguments less the ones Litestar fills in (``RESERVED_KWARGS``: request, state, data...),
    dependencies, headers and cookies -- the set Litestar's ``KwargsModel`` reads from the
    query string. Worked out once per handler (a handler's signature never changes)."""
    handler = request.route_handler
    try:
        found = _QUERY_NAMES.get(handler)
        if found is None:
            found = _QUERY_NAMES[handler] = _handler_query_names(handler)
    except TypeError:  # Litestar's own OPTIONS handlers take no weak reference
        found = _handler_query_names(handler)
    return found


_QUERY_NAMES: weakref.WeakKeyDictionary[HTTPRouteHandler, frozenset[str]] = (
    weakref.WeakKeyDictionary()
)


def _handler_query_names(handler: HTTPRouteHandler) -> frozenset[str]:
    injected = {*RESERVED_KWARGS, *handler.resolve_dependencies()}
    names: set[str] = set()
    for name, field in handler.parsed_fn_signature.parameters.items():
        kwarg = field.kwarg_definition
        if isinstance(kwarg, ParameterKwarg):
            if kwarg.header or kwarg.cookie:
                continue
            names.add(kwarg.query or name)
        elif name not in injected:
            names.add(name)
    return frozenset(names)


def _invalid(errors: list[dict[str, Any]]) -> ValidationException:
    detail = "; ".join(
        f"{e['key']}: {e['message']}" if e.get("key") else e["message"] for e in errors
    )
    return ValidationException(detail=detail, extra=errors)


async def guard_request(request: Request[Any, Any, Any]) -> None:
    """The app's ``before_request`` hook (see the module docstring).

    Raises:
        ValidationException: unknown query parameters, an empty JSON body, or one nested too
            deeply (400 problem+json naming the field, source ``query`` or ``body``).
    """
    if not request.url.path.startswith(_GUARDED_PREFIX):
        return
    known = query_names(request)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        allowed = ", ".join(sorted(known)) or "none"
        raise _invalid(
            [
                {
                    "key": name,
                    "message": f"unknown query parameter; this endpoint takes: {allowed}",
                    "source": "query",
                }
                for name in unknown
            ]
        )
    # every query parameter of the API takes one value: a repeated one is ambiguous
    # (Litestar would keep the last: ?gpu=A100&gpu=H100 would list H100s only)
    repeated = sorted(name for name in known if len(request.query_params.getall(name, [])) > 1)
    if repeated:
        raise _invalid(
            [
                {
                    "key": name,
                    "message": "given more than once; it takes one value",
                    "source": "query",
                }
                for name in repeated
            ]
        )
    if "data" not in request.route_handler.parsed_fn_signature.parameters:
        return
    body = await request.body()
    if not body.strip():
        raise _invalid([{"message": BODY_REQUIRED, "source": "body"}])
    too_deep = json_too_deep(body)
    if too_deep is not None:
        raise _invalid([{"key": too_deep, "message": too_deep_message(), "source": "body"}])
    kind = request.route_handler.parsed_fn_signature.parameters["data"].annotation
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        _check_types(body, kind)


def _check_types(body: bytes, kind: type[msgspec.Struct]) -> None:
    """Decode ``body`` as ``kind`` with msgspec's strict rules, as the CLI does
    (:func:`gpu_advisor.decoding.decode_document`): a number sent as a string
    (``"concurrency": "4"``) is an error naming the field, not a number. Litestar converts
    request bodies leniently (``strict=False``, which also turns ``"4"`` into 4), so the
    strict pass runs here first; its error goes to the same handler as Litestar's own
    (:func:`gpu_advisor.api.problems.validation_exception_handler`). A body that is not JSON
    at all is left to Litestar.
    """
    try:
        msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as error:
        raise _invalid([{"message": str(error), "source": "body"}]) from None
    except msgspec.DecodeError:
        return
