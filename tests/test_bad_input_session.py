"""Bad input to this session's features: paging-overlap, auto's hilp_nodes, copy engines, with_recomputable.

Each case gives a typed error naming the problem; on the command line a one-line error, a non-zero exit and
no ``-o`` file. The accepted neighbours of the refused inputs are solved and their schedules simulated.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from offload_cases import c1_graph
from typer.testing import CliRunner

from remat_models.cli import app as cli_app
from remat_models.core.schedule import simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError, GraphError, InputTypeError, RematError
from remat_models.extensions.overlap_paging import OverlapPaging
from remat_models.extensions.paging import Paging
from remat_models.io import write_graph
from remat_models.planning.plan import plan

OVERLAP = TransferModel(out_bw=2, in_bw=2, mode="overlap")
SOLVE = ("solve", "-b", "9", "--time-limit", "5")


@pytest.fixture(scope="module")
def c1_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("session") / "c1.json"
    write_graph(c1_graph(), path)
    return path


def _refused(args: list[str], message: str, out: Path) -> None:
    """The command raises a RematError containing ``message`` (``main`` prints it as one line) and writes no ``out``."""
    result = CliRunner().invoke(cli_app.app, args)
    assert isinstance(result.exception, RematError), result.output
    assert message in str(result.exception)
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-f", "checkmate", "--with", "paging-overlap:bww=2"], "unknown transfer option 'bww'"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=-1"], "out_bw must be a positive finite number, got -1"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=0"], "out_bw must be a positive finite number, got 0"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=NaN"], "out_bw must be a positive finite number, got nan"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=inf"], "out_bw must be a positive finite number, got inf"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2,latency=-1"], "out_latency must be a finite number >= 0"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2,latency=inf"], "out_latency must be a finite number"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=abc"], "out_bw='abc' is not a number"),
        (["-f", "checkmate", "--with", "paging-overlap"], "transfer options need a bandwidth"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2,mode=serial"], "use paging for mode='serial'"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2,fetches=x"], "paging-overlap fetches must be a whole"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2,min_bytes=-3"], "paging-overlap min_bytes: cannot read"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2,nodes=zz"], "unknown node 'zz'"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2,nodes=[9]"], "node index 9 outside the 4-node graph"),
        (["-f", "checkmate", "--with", "paging-overlap:bw=2", "--with", "paging:bw=2"], "one paging extension"),
        (["-f", "checkmate", "--with", "paging:bw=2", "--with", "paging:bw=2"], "one paging extension per model"),
        (["-f", "checkmate", "--backend", "cpsat", "--with", "paging-overlap:bw=1e-300"], "past the 2^53"),
        (["-f", "checkmate", "--backend", "highs", "--with", "paging-overlap:bw=1e-15"], "the clocks may reach"),
        (
            ["-f", "checkmate", "--backend", "cpsat", "--with", "paging:bw=1e-300"],
            "paging: a transfer takes 4e+300 model",
        ),
        (["-f", "checkmate", "--approx", "lp-rounding", "--with", "paging-overlap:bw=2"], "takes no extensions"),
        (["-f", "moccasin", "--with", "paging-overlap:bw=2"], "does not support 'moccasin'"),
        (["-f", "monet", "--with", "paging-overlap:bw=2"], "does not support 'monet'"),
        (["-f", "hilp", "--with", "paging-overlap:bw=2"], "does not support 'hilp'"),
        (["-f", "moccasin", "--transfer", "bw=2,mode=overlap"], "does not support 'moccasin'"),
        (["-f", "monet", "--transfer", "bw=2,mode=overlap"], "does not support 'monet'"),
        (["-f", "hilp", "--transfer", "bw=2,mode=overlap"], "does not support 'hilp'"),
        (["-f", "checkmate", "--transfer", "bw=2,mode=overlapp"], "mode must be one of"),
        (["-f", "checkmate", "--transfer", "bw=2,mode=overlap", "--with", "paging-overlap:bw=3"], "differs"),
        (["-m", "auto", "-O", "hilp_nodes=-1"], "auto option hilp_nodes must be >= 0, got -1"),
        (["-m", "auto", "-O", "hilp_nodes=abc"], "auto option hilp_nodes='abc': expected int"),
        (["-m", "auto", "-O", "hilp_nodes=1.5"], "auto option hilp_nodes=1.5: expected int"),
        (["-m", "auto", "-O", "hilp_node=3"], "-O hilp_node is not an option of auto"),
        (["-m", "auto", "--transfer", "bw=0,mode=overlap"], "out_bw must be a positive finite number, got 0"),
        (["-m", "fastsa", "-O", "copies=abc"], "FastSA option copies='abc': expected int, got str"),
        (["-m", "fastsa", "-O", "copies=1.5"], "FastSA option copies=1.5: expected int"),
        (["-m", "fastsa", "-O", "copies=true"], "FastSA option copies=True: expected int, got bool"),
        (["-m", "fastsa", "-O", "copies=100000000000"], "FastSA copies must be at most 65,536"),
        (["-m", "fastsa", "-O", "p_fetch=nan"], "FastSA option p_fetch='nan': expected float"),
    ],
)
def test_solve_refuses(c1_file: Path, tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "plan.json"
    _refused([SOLVE[0], str(c1_file), *SOLVE[1:], *args, "-o", str(out)], message, out)


@pytest.mark.parametrize("suffix", ["lp", "mps", "mzn"])
def test_export_and_compare_refuse(c1_file: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"model.{suffix}"
    _refused(
        ["export", str(c1_file), "-b", "9", "-o", str(out), "-f", "moccasin", "--with", "paging-overlap:bw=2"],
        "does not support 'moccasin'",
        out,
    )
    _refused(
        ["export", str(c1_file), "-b", "9", "-o", str(out), "--with", "paging-overlap:bw=-2"],
        "out_bw must be a positive finite number",
        out,
    )
    _refused(
        ["compare", str(c1_file), "-b", "9", "--methods", "checkmate/highs", "--with", "paging-overlap:bw=NaN"],
        "got nan",
        out,
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["-f", "checkmate", "--with", "paging-overlap:bw=2", "--with", "paging:bw=2"],
            "error: one paging extension per model: paging after paging-overlap",
        ),
        (
            ["-f", "hilp", "--transfer", "bw=2,mode=overlap"],
            "error: extension 'paging-overlap' does not support 'hilp'; it supports checkmate",
        ),
        (["-O", "hilp_nodes=-1"], "error: auto option hilp_nodes must be >= 0, got -1"),
    ],
)
def test_the_real_command_prints_one_line(c1_file: Path, tmp_path: Path, args: list[str], line: str) -> None:
    out = tmp_path / "plan.json"
    run = subprocess.run(
        [sys.executable, "-m", "remat_models.cli.app", SOLVE[0], str(c1_file), *SOLVE[1:], *args, "-o", str(out)],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": ""},
        check=False,
    )
    assert run.returncode == 1 and not out.exists()
    assert run.stderr.strip() == line, run.stderr


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: OverlapPaging(TransferModel(out_bw=2, in_bw=2)), ConfigurationError, "use paging for mode='serial'"),
        (lambda: Paging(OVERLAP), ConfigurationError, "use paging-overlap (Checkmate)"),
        (lambda: OverlapPaging("bw=2"), ConfigurationError, "needs a TransferModel, got 'bw=2'"),
        (lambda: OverlapPaging(OVERLAP, bw=3), ConfigurationError, "not both: ['bw']"),
        (lambda: OverlapPaging(OVERLAP, nodes=2.5), ConfigurationError, "nodes must be node names or indices, got 2.5"),
        (lambda: OverlapPaging(OVERLAP, fetches="x"), InputTypeError, "fetches must be a whole number, got 'x'"),
        (lambda: OverlapPaging(OVERLAP, fetches=1.7), InputTypeError, "fetches must be a whole number, got 1.7"),
        (lambda: OverlapPaging(OVERLAP, min_bytes=-1), ConfigurationError, "min_bytes: cannot read size -1"),
    ],
)
def test_paging_arguments(make: Any, error: type[RematError], message: str) -> None:
    with pytest.raises(error) as caught:
        make()
    assert message in str(caught.value)


def test_one_node_index_is_a_node_list() -> None:
    assert OverlapPaging(OVERLAP, nodes=1).paged_nodes(c1_graph()).tolist() == [1]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"formulation": "checkmate", "extensions": [OverlapPaging(OVERLAP), Paging(bw=2)]}, "one paging extension"),
        ({"formulation": "checkmate", "backend": "cpsat", "extensions": [OverlapPaging(bw=1e-300)]}, "past the 2^53"),
        ({"formulation": "moccasin", "transfer": OVERLAP}, "does not support 'moccasin'"),
        ({"formulation": "checkmate", "transfer": "bw=2"}, "transfer must be a TransferModel"),
        ({"method": "auto", "options": {"hilp_nodes": -1}}, "hilp_nodes must be >= 0"),
        ({"method": "auto", "options": {"hilp_nodes": "5"}}, "hilp_nodes='5': expected int"),
        ({"method": "auto", "options": {"hilp_nodes": None}}, "hilp_nodes=None: expected int"),
        ({"method": "auto", "options": {"offload_share": float("nan")}}, "offload_share is a share in (0, 1]"),
        ({"method": "auto", "options": {"cheapen_share": -0.1}}, "cheapen_share is a share in [0, 1], got -0.1"),
    ],
)
def test_plan_refuses(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        plan(c1_graph(), 9, time_limit=2, **arguments)
    assert message in str(caught.value)


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_the_accepted_neighbours_solve(backend: str) -> None:
    """A slow link below the limit pages nothing (23, recompute only); transfer= overlap on Checkmate pages (16)."""
    graph = c1_graph()
    slow = plan(graph, 9, formulation="checkmate", backend=backend, extensions=[OverlapPaging(bw=1e-12)], time_limit=20)
    overlap = plan(graph, 9, formulation="checkmate", backend=backend, transfer=OVERLAP, time_limit=20)
    assert simulate(graph, slow.schedule, TransferModel(out_bw=1e-12, in_bw=1e-12, mode="overlap")).total_cost == 23
    assert simulate(graph, overlap.schedule, OVERLAP).total_cost == overlap.simulation.total_cost == 16
    assert simulate(graph, overlap.schedule, OVERLAP).peak <= 9


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        ([True, False], "recomputable has 2 entries for 4 nodes"),
        ([1, 0, 1, 1], "must hold True/False for each node, got int64"),
        ("abcd", "must hold True/False for each node"),
        ({"zz": False}, "unknown node 'zz'"),
        ({7: False}, "unknown node 7"),
        ({"a": "no"}, "recomputable['a'] must be True or False, got 'no'"),
    ],
)
def test_with_recomputable_refuses(mask: Any, message: str) -> None:
    with pytest.raises(GraphError) as caught:
        c1_graph().with_recomputable(mask)
    assert message in str(caught.value)


def test_with_recomputable_keeps_the_graph_valid() -> None:
    graph = c1_graph()
    fixed = graph.with_recomputable({"a": False})
    assert fixed.recomputable.tolist() == [False, True, True, True] and graph.recomputable.all()
    assert graph.with_recomputable(np.ones(4, dtype=bool)) is graph


@pytest.fixture(scope="module")
def mlp() -> tuple[Any, ...]:
    torch = pytest.importorskip("torch")
    import remat_models.torch as rt
    from remat_models.heuristics.idle_offload import page_idle_values
    from remat_models.torch.api import fixed_tensors

    path = Path(__file__).resolve().parents[1] / "examples" / "models.py"
    spec = importlib.util.spec_from_file_location("remat_example_models_session", path)
    models = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = models
    spec.loader.exec_module(models)
    model, inputs, targets, loss_fn = models.EXAMPLES["mlp"]()
    torch_graph = rt.extract(model, inputs, loss_fn, targets, name="mlp")
    schedule = page_idle_values(torch_graph.graph, torch_graph.graph.order, min_gap=2)
    return torch, rt.Executor(torch_graph), schedule, fixed_tensors(model, torch_graph.traced, inputs, targets)


def test_copy_engines_refuse_what_they_cannot_run(mlp: tuple[Any, ...]) -> None:
    from remat_models.torch.copy_engine import StreamCopies, SyncCopies

    torch, executor, schedule, fixed = mlp
    overlap = TransferModel(out_bw=1e6, in_bw=1e6, mode="overlap")
    for copies, message in (
        ("stream", "copies must be a SyncCopies or StreamCopies instance, got 'stream'"),
        (SyncCopies, "copies must be a SyncCopies or StreamCopies instance, got <class"),
        (True, "got True"),
        (SyncCopies(torch.device("meta")), "copies run on meta, but the fixed tensors are on cpu"),
    ):
        with pytest.raises(ConfigurationError) as caught:
            executor.run(schedule, fixed, transfer=overlap, copies=copies)
        assert message in str(caught.value)
    with pytest.raises(ConfigurationError, match="transfer must be a TransferModel or None, got 'bw=2'"):
        executor.run(schedule, fixed, transfer="bw=2")
    with pytest.raises(ConfigurationError, match=r"needs a torch device such as 'cuda:0', got 3\.5"):
        SyncCopies(3.5)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigurationError, match="copy streams need a CUDA device"):
            StreamCopies("cuda")
    result = executor.run(schedule, fixed, transfer=overlap, copies=SyncCopies("cpu"))  # a device string is fine
    simulation = simulate(executor.tg.graph, schedule, overlap)
    assert result.host_peak == simulation.host_peak > 0
