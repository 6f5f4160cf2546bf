"""Issue #34, limits: Gurobi holds its time limit (a large timed solve runs in the hard-deadline child) and a model
above a size-limited license is refused before it is lowered or built (a minute of gurobipy's build before)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from test_backends import _market_split

import remat_models.backends.base as backend_base
import remat_models.backends.gurobi as gurobi
from remat_models.backends import SolveLimits, get_backend
from remat_models.core.budget import parse_budget
from remat_models.errors import ModelTooLargeError
from remat_models.formulations.moccasin.formulation import MOCCASIN
from remat_models.io.generators import linear_chain, transformer
from remat_models.model import SolveStatus
from remat_models.planning.plan import plan

MARGIN = 4.0  # seconds on top of 1.1 x limit + 2 s: the machine is shared

pytestmark = pytest.mark.skipif(not gurobi.GurobiBackend.available(), reason="gurobipy is not installed")


def allowed(limit: float) -> float:
    """The wall time a run with ``limit`` may take here."""
    return 1.1 * limit + 2.0 + MARGIN


@pytest.fixture
def size_limited() -> None:
    """Skip unless the license in use is size-limited (pip's gurobipy)."""
    if not gurobi.size_limited_license():
        pytest.skip("a full Gurobi license: no size limit")


@pytest.mark.usefixtures("size_limited")
def test_a_model_above_the_license_is_refused_before_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Moccasin on chain16 lowers to 329k columns (time-indexed reservoirs): refused without lowering it."""
    graph = linear_chain(16)
    built = MOCCASIN.build(graph, parse_budget("60%", graph))

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("lowered or built although the license cannot take the model")

    monkeypatch.setattr(backend_base, "lower", never)
    monkeypatch.setattr(gurobi, "build", never)
    with pytest.raises(ModelTooLargeError, match="size limit of the license") as err:
        get_backend("gurobi").solve(built.model, SolveLimits(time_limit=5))
    assert err.value.estimate["variables"] > gurobi.LICENSE_SIZE


@pytest.mark.usefixtures("size_limited")
def test_moccasin_windows_on_gurobi_hold_the_limit_on_9607_nodes() -> None:
    """Each window of the 9,607-node transformer lowers to 1-12 M columns; gurobipy built one for 40-120 s before
    Gurobi refused it. Now each is refused in milliseconds and the plan ends with the warm start."""
    graph = transformer(400)  # remat graph generate transformer --size 400
    started = time.perf_counter()
    result = plan(graph, parse_budget("50%", graph), formulation="moccasin", backend="gurobi", time_limit=8)
    assert time.perf_counter() - started <= allowed(8)
    assert result.status.value == "within_budget"


def test_a_large_timed_solve_is_killed_at_the_hard_deadline_with_its_incumbent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A solve counted as large runs in the hard-deadline child: Gurobi told to run 100 s (``TimeLimit``, a solver
    option, wins over the time limit) is killed at the limit, and the start it was given comes back."""
    monkeypatch.setattr(backend_base, "ISOLATE_SIZE", 0)  # every solve counts as large
    model = _market_split(m_rows=6, n=60)  # 72 columns: within a size-limited license; hours to prove
    x = np.zeros(60)
    a = model.row_batches[0]
    hint = {"x": x, "sp": np.zeros(6), "sm": _rhs(a)}  # no item chosen: each row's slack is its whole rhs
    limits = SolveLimits(time_limit=2.0, solver_options={"TimeLimit": 100.0})
    started = time.perf_counter()
    result = get_backend("gurobi").solve(model, limits, hints=hint)
    assert time.perf_counter() - started <= allowed(2.0)
    killed_at = re.search(r"killed at the hard deadline \(([\d.]+) s\)", result.log or "")
    assert killed_at is not None and float(killed_at.group(1)) <= 2.0  # the limit, the lowering and fork included
    assert result.status is SolveStatus.FEASIBLE  # the start, or a better incumbent the child sent
    assert model.check(result.values) == []
    assert result.objective <= float(_rhs(a).sum())


def _rhs(batch: object) -> np.ndarray:
    """The right-hand sides of the market split's rows."""
    return np.asarray(batch.lb, dtype=np.float64)  # type: ignore[attr-defined]
