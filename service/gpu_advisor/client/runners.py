"""Run one request: in this process (the embedded service) or against a running service.

Both return the same response Struct, so ``--format json`` prints the same bytes either way
for the same catalog: the remote answer is decoded into the Struct and encoded again by the
same code as the in-process one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec

from gpu_advisor.client.commands import Command, Request
from gpu_advisor.core.errors import DomainError
from gpu_advisor.core.spec import CheckRequest, EstimateRequest, RecommendationRequest
from gpu_advisor.decoding import SpecError, decode_document
from gpu_advisor.render.report import Response
from gpu_advisor.settings import SettingsError


class ClientError(Exception):
    """The command could not be answered (exit status 2); the message says why."""


def read_spec(spec: str, command: Command, stdin: bytes | None = None) -> Request:
    """SPEC (a JSON or YAML file, or ``-`` with ``stdin``) as the command's request Struct.

    Raises:
        SpecError: unreadable, not JSON/YAML, or not a valid request (naming the field).
    """
    if spec == "-":
        data = stdin if stdin is not None else b""
    else:
        try:
            data = Path(spec).read_bytes()
        except OSError as exc:
            raise SpecError(f"cannot read it: {exc.strerror or exc}") from None
    request: Request = decode_document(data, command.request_type, spec)
    return request


def read_baseline(path: str, command: Command) -> Response:
    """An earlier ``--format json`` result of the same command.

    Raises:
        ClientError: unreadable, or not a JSON result of ``command``.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ClientError(f"cannot read baseline {path}: {exc.strerror or exc}") from None
    try:
        baseline: Response = msgspec.json.decode(data, type=command.response_type)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ClientError(
            f"baseline {path} is not a JSON result of `gpu-advisor {command.name}`: {exc}"
        ) from None
    return baseline


def encode_json(response: Response) -> bytes:
    """The answer as indented JSON with a final newline (``--format json``)."""
    return msgspec.json.format(msgspec.json.encode(response), indent=2) + b"\n"


def _domain_message(exc: DomainError) -> str:
    return f"{exc.field}: {exc.message}" if exc.field else exc.message


async def _answer_in_process(request: Request) -> Response:
    from gpu_advisor.asgi import build_advisor, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        raise ClientError(f"invalid setting {exc}") from None
    catalog, advisor = build_advisor(settings)
    await catalog.start()
    try:
        if any(name != "bundled" for name in catalog.configured):
            # A server serves the bundled snapshot until its sources arrive; a one-shot
            # command waits for them (from the shared cache, or fetched), once.
            await catalog.refresh()
        answer: Response
        match request:
            case CheckRequest():
                answer = await advisor.check(request)
            case EstimateRequest():
                answer = await advisor.estimate(request)
            case RecommendationRequest():
                answer = await advisor.recommend(request)
        return answer
    except DomainError as exc:
        raise ClientError(_domain_message(exc)) from None
    finally:
        await catalog.close()


def run_in_process(request: Request) -> Response:
    """Answer with the embedded service: the catalog the environment configures
    (``GPU_ADVISOR_SOURCES``, ``REDIS_URL``...; bundled by default) and the same core.

    Raises:
        ClientError: invalid settings, or a request the service rejects (naming the field).
    """
    return asyncio.run(_answer_in_process(request))


def _problem_detail(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict) and body.get("detail"):
        return str(body["detail"])
    return str(body)[:500]


def run_remote(command: Command, request: Request, url: str, timeout_seconds: float) -> Response:
    """POST the request to ``url`` (a running gpu-advisor) and decode its answer.

    Raises:
        ClientError: unreachable, timed out, a 4xx/5xx (with the problem's detail) or an
            answer that is not the endpoint's response.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ClientError(f"--url must be an http(s) URL such as http://127.0.0.1:8000: {url!r}")
    endpoint = url.rstrip("/") + command.path
    try:
        with httpx.Client(timeout=timeout_seconds) as client:
            answer = client.post(
                endpoint,
                content=msgspec.json.encode(request),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            )
    except httpx.TimeoutException:
        raise ClientError(f"{endpoint} did not answer within {timeout_seconds:g} s") from None
    except httpx.HTTPError as exc:
        raise ClientError(f"service unreachable at {url}: {exc}") from None
    if answer.status_code != 200:
        raise ClientError(f"{_problem_detail(answer)} (HTTP {answer.status_code} from {endpoint})")
    try:
        decoded: Response = msgspec.json.decode(answer.content, type=command.response_type)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ClientError(f"{endpoint} answered something else than a result: {exc}") from None
    return decoded


__all__ = [
    "ClientError",
    "SpecError",
    "encode_json",
    "read_baseline",
    "read_spec",
    "run_in_process",
    "run_remote",
]
