"""Assertions on HTTP answers shared by the API tests."""

from __future__ import annotations

from typing import Any


def problem_of(response: Any, status: int = 400) -> dict[str, Any]:
    """The problem+json body of ``response``, after checking its status and media type."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    return body


def field_error(response: Any, field: str, status: int = 400) -> str:
    """The message of the error that names ``field`` in a problem+json ``response``."""
    fields = {e["field"]: e["message"] for e in problem_of(response, status)["errors"]}
    assert field in fields, fields
    return fields[field]


def body_of(response: Any, *allowed: int) -> dict[str, Any]:
    """The JSON body of ``response``, after checking its status is one of ``allowed``."""
    assert response.status_code in allowed, response.text
    body: dict[str, Any] = response.json()
    return body
