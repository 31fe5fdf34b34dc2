"""Write the OpenAPI document the app serves at /schema to openapi/openapi.json.

Run after changing a route or a request/response type: ``make openapi``. A test fails when the
committed file differs from what the app serves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpu_advisor.asgi import build
from gpu_advisor.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "openapi" / "openapi.json"


def render() -> str:
    """The served document as stable, indented JSON (sorted keys, trailing newline)."""
    app = build(Settings())
    return json.dumps(app.openapi_schema.to_schema(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
