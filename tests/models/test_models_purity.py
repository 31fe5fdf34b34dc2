"""The model-resolution core stays pure (DESIGN: no HTTP, Redis, logging, clock, environment or
file I/O in the core): its modules import only these."""

from __future__ import annotations

import ast
from pathlib import Path

import gpu_advisor.core.models as models_package

ALLOWED = {
    "__future__",
    "collections.abc",
    "copy",
    "difflib",
    "math",
    "types",
    "typing",
    "msgspec",
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_models_modules_import_only_pure_dependencies():
    folder = Path(models_package.__file__).parent
    modules = sorted(folder.glob("*.py"))
    assert len(modules) >= 10
    for path in modules:
        for name in _imports(path):
            assert name in ALLOWED or name.startswith("gpu_advisor.core."), (path.name, name)
            assert not name.startswith(("gpu_advisor.api", "gpu_advisor.catalog")), path.name
