"""Content negotiation for the planning answers: JSON by default, an aligned text table for
``Accept: text/plain`` (curl-friendly; the same renderer as the CLI's ``--format table``).

Handlers return :func:`negotiated`; their operation class :class:`TextTableOperation` adds
the ``text/plain`` media type to the documented 200 answer, so the OpenAPI document lists both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import mimeparse  # type: ignore[import-untyped]
from litestar import Request, Response
from litestar.enums import MediaType
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIResponse, OpenAPIType, Schema
from litestar.openapi.spec.operation import Operation

from gpu_advisor.advisor import ServedAnswer
from gpu_advisor.render.report import report_for
from gpu_advisor.render.text import render_text

VARY: Final = {"Vary": "Accept"}


def wants_text(request: Request[Any, Any, Any]) -> bool:
    """True when the client prefers ``text/plain`` over JSON: the offered type with the higher
    quality wins, each taking the quality of the most specific media range that matches it,
    and ``q=0`` means "not acceptable" (RFC 9110 section 12.5.1; python-mimeparse's
    ``best_match``). JSON wins ties and is the answer when the header is absent, unparsable or
    refuses both (the API does not answer 406)."""
    accept = request.headers.get("accept")
    if not accept:
        return False
    try:
        # in increasing order of preference: JSON wins a tie
        # media types compare case-insensitively (RFC 9110 section 8.3.1); mimeparse does not
        offered = [MediaType.TEXT.value, MediaType.JSON.value]
        chosen: str = mimeparse.best_match(offered, accept.lower())
    except ValueError:  # a media range without a slash ("Accept: text")
        return False
    return chosen == MediaType.TEXT.value


def negotiated(request: Request[Any, Any, Any], answer: ServedAnswer[Any]) -> Response[Any]:
    """``answer`` as JSON, or as the text table when the client asks for ``text/plain``.

    The JSON body comes from :meth:`ServedAnswer.json`: a repeated request's body is encoded
    once, not per request (the same bytes Litestar's msgspec encoding of the struct gives)."""
    if wants_text(request):
        return Response(
            render_text(report_for(answer.value())),
            media_type=MediaType.TEXT,
            headers=VARY,
        )
    return Response(answer.json(), media_type=MediaType.JSON, headers=VARY)


@dataclass
class TextTableOperation(Operation):
    """An operation whose 200 answer is also offered as ``text/plain``."""

    def __post_init__(self) -> None:
        ok = (self.responses or {}).get("200")
        if isinstance(ok, OpenAPIResponse) and ok.content is not None:
            ok.content[MediaType.TEXT.value] = OpenAPIMediaType(
                schema=Schema(
                    type=OpenAPIType.STRING,
                    description=(
                        "The same answer as an aligned text table (send Accept: text/plain)."
                    ),
                )
            )
