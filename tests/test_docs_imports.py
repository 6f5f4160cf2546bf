"""Every import the README's and docs' Python examples show resolves (modules moved: docs/architecture.md)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _imports(page: Path) -> list[tuple[str, str | None]]:
    """(module, name or None) of every ``remat_models`` import in the page's parseable Python blocks."""
    found: list[tuple[str, str | None]] = []
    for code in BLOCK.findall(page.read_text(encoding="utf-8")):
        try:
            tree = ast.parse(code)
        except SyntaxError:  # a fragment (e.g. a class body shown alone): its imports are checked where whole
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("remat_models"):
                found += [(str(node.module), alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(alias.name, None) for alias in node.names if alias.name.startswith("remat_models")]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_documented_import_resolves(page: Path) -> None:
    if page.name in ("torch.md", "README.md"):
        pytest.importorskip("torch", reason="the page imports remat_models.torch")
    imports = _imports(page)
    missing = [
        f"{module}:{name}"
        for module, name in imports
        if name is not None and not hasattr(importlib.import_module(module), name)
    ]
    for module, name in imports:
        if name is None:
            importlib.import_module(module)
    assert missing == []
