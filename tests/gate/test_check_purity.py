"""The gate's core modules stay pure core (DESIGN: no HTTP, Redis, logging, clock, environment
or file I/O): they import only pure standard-library modules, msgspec and the core."""

from __future__ import annotations

import ast
from pathlib import Path

import gpu_advisor.core as core_package

ALLOWED = {"__future__", "collections.abc", "difflib", "typing", "msgspec"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_check_modules_import_only_pure_dependencies() -> None:
    modules = sorted(Path(core_package.__file__).parent.glob("check*.py"))
    assert [m.name for m in modules] == [
        "check.py",
        "check_explain.py",
        "check_nofit.py",
        "check_results.py",
        "check_target.py",
    ]
    for path in modules:
        for name in _imports(path):
            assert name in ALLOWED or name.startswith("gpu_advisor.core."), (path.name, name)
