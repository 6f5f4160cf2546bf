"""Issue 30: no string naming a formulation family appears in ``remat_models`` outside its package and the registry.

Code outside a family asks the registry (``get_formulation(name)``) for the capabilities the family declares on
``FormulationBase`` (``paging_part``, ``peak_model``, ``supports_impls``, ``overlap_paging``, ``chooses_save_sets``,
...) instead of testing names. A string literal whose value is a family's name, or ``NAME/...`` (a method such as
``"checkmate/highs"``), counts; docstrings and comments do not (their text is not such a literal).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from remat_models.errors import ConfigurationError

PACKAGE = Path(__file__).resolve().parents[1] / "remat_models"
FAMILIES = {  # formulation name -> its package under remat_models/formulations/
    "checkmate": "checkmate",
    "checkmate-impls": "checkmate",
    "moccasin": "moccasin",
    "hilp": "hilp",
    "monet": "monet",
    "saveset-exact": "saveset",
    "saveset-intervals": "saveset",
}
REGISTRY = "formulations/__init__.py"
NAMED = re.compile(rf"^({'|'.join(sorted(map(re.escape, FAMILIES), key=len, reverse=True))})(/[\w.-]*)?$")

# (file under remat_models/, family named) -> (how many literals, why it stays). Empty: every lookup that named a
# family is now a capability on FormulationBase or a role in the registry (issue #30); an entry here needs a reason.
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {}


def named_literals() -> Counter[tuple[str, str]]:
    """(file, family) -> count of string literals naming the family outside its package and the registry."""
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == REGISTRY:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = NAMED.match(node.value)
                if match and not relative.startswith(f"formulations/{FAMILIES[match[1]]}/"):
                    found[relative, match[1]] += 1
    return found


def test_no_formulation_name_outside_its_family_and_the_registry() -> None:
    found = named_literals()
    new = {key: count for key, count in found.items() if count > ALLOWED.get(key, (0, ""))[0]}
    assert new == {}, f"formulation names tested outside their family (declare a capability instead): {new}"


def test_the_allow_list_holds_no_stale_entry() -> None:
    """An entry whose literals are gone (or fewer) is tightened, so the list only shrinks."""
    found = named_literals()
    stale = {key: (count, found[key]) for key, (count, _) in ALLOWED.items() if found[key] < count}
    assert stale == {}, f"allow-list entries to lower or remove ((allowed, found)): {stale}"


def test_the_check_sees_a_name_test() -> None:
    code = 'if name == "moccasin/cpsat" or kind in ("hilp", "x"):\n    """About "checkmate"."""\n'
    values = [n.value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert [v for v in values if NAMED.match(v)] == ["moccasin/cpsat", "hilp"]


def test_a_registered_formulation_takes_its_roles_and_a_bad_role_is_refused(monkeypatch) -> None:
    import remat_models.formulations as registry

    for table in ("_REGISTRY", "_AUTO_ROLES", "_LEAF_SOLVERS", "_PAPER_FAMILIES"):
        monkeypatch.setattr(registry, table, type(getattr(registry, table))(getattr(registry, table)))
    target = "remat_models.formulations.checkmate.formulation:CHECKMATE"
    registry.register_formulation("mine", target, auto_role="small", leaf_solver=True, paper_family="mine_milp")
    assert registry.auto_formulation("small") == "mine" and "mine" in registry.leaf_formulations()
    assert registry.paper_family("mine") == "mine_milp" and registry.get_formulation("mine") is not None
    with pytest.raises(ConfigurationError, match="auto_role must be one of small, large, every, got 'tiny'"):
        registry.register_formulation("other", target, auto_role="tiny")  # type: ignore[arg-type]
    assert "other" not in registry.formulation_names()
