"""The README's Python code blocks run as written, in order, from the repository root (issue 17)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_blocks() -> list[str]:
    return BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_has_python_blocks() -> None:
    assert len(readme_blocks()) >= 3


def test_readme_python_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="the README's PyTorch block needs the torch extra")
    monkeypatch.chdir(ROOT)  # the blocks use paths relative to the repository root
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for number, code in enumerate(readme_blocks(), 1):
        exec(compile(code, f"README.md python block {number}", "exec"), namespace)
    assert "step" in namespace and "result" in namespace
