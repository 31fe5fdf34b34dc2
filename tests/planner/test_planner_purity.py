"""The planner stays pure core (DESIGN: no HTTP, Redis, logging, clock, environment or file
I/O): its modules import only the standard library's pure parts, msgspec, numpy and the core."""

from __future__ import annotations

import ast
from pathlib import Path

import gpu_advisor.core.planner as planner_package

ALLOWED = {"__future__", "collections.abc", "math", "typing", "msgspec", "numpy", "numpy.typing"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_planner_modules_import_only_pure_dependencies() -> None:
    folder = Path(planner_package.__file__).parent
    modules = sorted(folder.glob("*.py"))
    assert len(modules) >= 10
    for path in modules:
        for name in _imports(path):
            assert name in ALLOWED or name.startswith("gpu_advisor.core."), (path.name, name)
            assert not name.startswith(("gpu_advisor.api", "gpu_advisor.catalog")), path.name
