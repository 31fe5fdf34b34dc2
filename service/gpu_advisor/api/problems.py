"""The one table that maps errors to RFC 9457 problem+json responses (STYLE rule 4).

Every client error names the offending field: ``{"type", "title", "status", "detail",
"errors": [{"field": "workload.sequence_length", "message": "..."}]}``.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from litestar import Request, Response
from litestar.exceptions import ClientException, HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import (
    HTTP_404_NOT_FOUND,
    HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    HTTP_422_UNPROCESSABLE_ENTITY,
    HTTP_429_TOO_MANY_REQUESTS,
    HTTP_500_INTERNAL_SERVER_ERROR,
)
from litestar.types import ExceptionHandlersMap
from msgspec import Struct

from gpu_advisor.core.errors import DomainError, NotFoundError
from gpu_advisor.decoding import (
    field_path,
    named_field,
    split_msgspec_message,
    with_allowed_values,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"
_TYPE_BASE = "https://gpu-advisor.dev/problems/"


def _problem(
    status: int, slug: str, title: str, detail: str, errors: list[dict[str, Any]]
) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {
        "type": _TYPE_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "errors": errors,
    }
    return Response(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE)


def _source(value: Any) -> str | None:
    """``"query"``/``"path"``/``"header"``/``"cookie"``/``"body"``; Litestar passes its
    ``ParamType`` enum for parameters (``str()`` of which is ``ParamType.QUERY``)."""
    if value is None:
        return None
    return str(value.value) if isinstance(value, Enum) else str(value)


def _with_choices(request: Request[Any, Any, Any], source: str | None, field: str, msg: str) -> str:
    """An enum error with the values the field accepts (body: the request Struct; a query or
    path parameter: its annotation)."""
    parameters = request.route_handler.parsed_fn_signature.parameters
    if source == "body" and "data" in parameters:
        return with_allowed_values(msg, parameters["data"].annotation, field)
    if field in parameters:
        return with_allowed_values(msg, parameters[field].annotation, "")
    return msg


def validation_exception_handler(
    request: Request[Any, Any, Any], exc: ValidationException
) -> Response[dict[str, Any]]:
    """Litestar's decode/validation failures (body, query, path) -> 400/422 problem+json.

    Every entry: ``field`` as a dotted path with list indexes as numbers
    (``constraints.gpu_types.0``), ``source`` ``body|query|path|header|cookie``, and for an
    enum the values it accepts.
    """
    errors: list[dict[str, Any]] = []
    extra = exc.extra if isinstance(exc.extra, list) else []
    for item in extra:
        if not isinstance(item, dict):
            continue
        raw = str(item.get("message", ""))
        key = field_path(str(item.get("key", "") or ""))
        source = _source(item.get("source"))
        field, message = split_msgspec_message(raw)
        if key and key != "data":
            field = f"{key}.{field}" if field and not field.startswith(key) else (field or key)
        # "Object contains unknown field `x`" / "missing required field `x`": name the field.
        field = named_field(field, message)
        message = _with_choices(request, source, field, message)
        entry: dict[str, Any] = {"field": field or None, "message": message}
        if source is not None:
            entry["source"] = source
        errors.append(entry)
    if not errors:
        errors.append({"field": None, "message": exc.detail})
    detail = "; ".join(
        f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors
    )
    return _problem(exc.status_code, "validation", "Invalid request", detail, errors)


def domain_error_handler(_: Request[Any, Any, Any], exc: DomainError) -> Response[dict[str, Any]]:
    """Domain errors (semantic problems with a well-formed request) -> 422 or 404."""
    status = HTTP_404_NOT_FOUND if isinstance(exc, NotFoundError) else HTTP_422_UNPROCESSABLE_ENTITY
    slug = re.sub(r"(?<!^)(?=[A-Z])", "-", type(exc).__name__.removesuffix("Error")).lower()
    errors = [{"field": exc.field, "message": exc.message}]
    detail = f"{exc.field}: {exc.message}" if exc.field else exc.message
    return _problem(
        status, slug, "Unprocessable request" if status == 422 else "Not found", detail, errors
    )


def http_exception_handler(
    request: Request[Any, Any, Any], exc: HTTPException
) -> Response[dict[str, Any]]:
    """Any other HTTPException (404 route, 405, 413, 429...) as problem+json.

    A 400 ``ClientException`` on a route that takes a JSON body is Litestar's "not JSON"
    (``SerializationException`` re-raised in ``HTTPRoute._call_handler_function``): it gets the
    validation shape, like every other body error. A 429 carries ``Retry-After`` (seconds,
    RFC 9110 section 10.2.3): the rate limiter's ``RateLimit-Reset``.
    """
    if type(exc) is ClientException and exc.status_code == 400 and _takes_body(request):
        message = f"not valid JSON: {exc.detail}"
        not_json = [{"field": None, "message": message, "source": "body"}]
        return _problem(exc.status_code, "validation", "Invalid request", message, not_json)
    errors: list[dict[str, Any]] = [
        {
            "field": item.get("field"),
            "message": str(item.get("message", exc.detail)),
            **({"source": item["source"]} if item.get("source") else {}),
        }
        for item in (exc.extra if isinstance(exc.extra, list) else [])
        if isinstance(item, dict)
    ]
    if not errors and exc.status_code == HTTP_413_REQUEST_ENTITY_TOO_LARGE:
        errors = [{"field": None, "message": str(exc.detail), "source": "body"}]
    body = _problem(
        exc.status_code, "http-" + str(exc.status_code), str(exc.detail), str(exc.detail), errors
    )
    if exc.headers:
        body.headers.update(exc.headers)
    if exc.status_code == HTTP_429_TOO_MANY_REQUESTS and "retry-after" not in {
        name.lower() for name in body.headers
    }:
        reset = (exc.headers or {}).get("RateLimit-Reset", "")
        body.headers["Retry-After"] = str(max(1, int(reset))) if reset.isdigit() else "60"
    return body


def _takes_body(request: Request[Any, Any, Any]) -> bool:
    handler = request.scope.get("route_handler")  # absent when no route matched (404, 405)
    return handler is not None and "data" in handler.parsed_fn_signature.parameters


def internal_error_handler(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """A bug: never leak internals; the log line carries the request id and traceback."""
    return _problem(
        HTTP_500_INTERNAL_SERVER_ERROR,
        "internal",
        "Internal error",
        "An internal error occurred.",
        [],
    )


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    ValidationException: validation_exception_handler,
    DomainError: domain_error_handler,
    HTTPException: http_exception_handler,
    Exception: internal_error_handler,
}


class ProblemError(Struct, frozen=True, kw_only=True):
    """One offending input: its dotted path (None when not about one field) and what is wrong."""

    field: str | None
    message: str
    source: str | None = None


class ProblemDetails(Struct, frozen=True, kw_only=True):
    """RFC 9457 problem details, as every error response of this API carries them."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[ProblemError] = []


def problem_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the problem+json responses a handler can give."""
    descriptions = {
        400: "Malformed request: bad JSON, wrong types, out-of-range or unknown fields.",
        401: "Missing or malformed bearer token.",
        403: "Wrong bearer token.",
        404: "Not found.",
        413: "Request body larger than the configured limit.",
        422: "Well-formed but cannot be answered: unknown preset or GPU, impossible plan...",
        429: (
            "Rate limit exceeded for this client (GPU_ADVISOR_RATE_LIMIT_PER_MINUTE); "
            "Retry-After says when to retry."
        ),
    }
    return {
        status: ResponseSpec(
            data_container=ProblemDetails,
            media_type=PROBLEM_MEDIA_TYPE,
            description=descriptions[status],
            generate_examples=False,
        )
        for status in statuses
    }
