"""Shared pytest fixtures."""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from remat_models.io import linear_chain, write_graph

SHARED_DIR = Path(os.environ.get("REMAT_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))

# Modules whose tests check an outcome reached within a wall-clock or CPU limit (auto's members, start-up and
# grace times, signals sent once a solver runs, sweeps' grace, the torch APIs' 5 s planning): under
# ``pytest -n 2`` (``make test``) each runs alone (marked ``exclusive``); every other test shares the two cores
# with one other test.
EXCLUSIVE_MODULES = (
    "test_auto",
    "test_time_limits",
    "test_limits_extreme_34",  # test_limits_bad_input marks its own timed test
    "test_interrupt",
    "test_block_options",
    "test_offload",
    "test_child_processes",
    "test_deadline",
    "test_moccasin_deadline",
    "test_bench",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``exclusive`` the tests of :data:`EXCLUSIVE_MODULES` (prefixes of the module names)."""
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__.startswith(EXCLUSIVE_MODULES):
            item.add_marker(pytest.mark.exclusive)


class CpuShare:
    """This xdist worker's use of the machine: shared with the other workers or sole, by ``flock`` on two files.

    A worker waiting for sole use holds the gate, so the others start no test meanwhile (no starvation). Sole use is
    kept from one ``exclusive`` test to the next one of this worker, so a run of them (a module) waits once for the
    other worker's current test to end instead of before each test.
    """

    def __init__(self, folder: Path) -> None:
        self.gate = open(folder / "gate.lock", "a")  # noqa: SIM115 (held for the worker's life)
        self.cpu = open(folder / "cpu.lock", "a")  # noqa: SIM115
        self.exclusive: bool | None = None  # None: not held

    def hold(self, exclusive: bool) -> None:
        """Take the shared or sole use (sole use already held serves both)."""
        if self.exclusive or self.exclusive == exclusive:
            return
        self.release()
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.cpu, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(self.gate, fcntl.LOCK_UN)
        self.exclusive = exclusive

    def release(self) -> None:
        """Give up what is held."""
        if self.exclusive is None:
            return
        fcntl.flock(self.cpu, fcntl.LOCK_UN)  # explicit: a forked child may still hold the descriptions open
        if self.exclusive:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        self.exclusive = None


_NEXT_ITEM = pytest.StashKey[pytest.Item | None]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Record each test's successor, which ``cpu_share`` reads to keep sole use for a next ``exclusive`` test."""
    item.stash[_NEXT_ITEM] = nextitem
    yield


def _exclusive(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("exclusive") is not None


@pytest.fixture(scope="session")
def cpu_share_lock(tmp_path_factory: pytest.TempPathFactory) -> CpuShare | None:
    """This worker's :class:`CpuShare` on the xdist workers' common base folder; None without xdist."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return None
    return CpuShare(tmp_path_factory.getbasetemp().parent)


@pytest.fixture(autouse=True)
def cpu_share(request: pytest.FixtureRequest, cpu_share_lock: CpuShare | None) -> Iterator[None]:
    """Under xdist, an ``exclusive`` test runs alone; the others run side by side."""
    if cpu_share_lock is None:
        yield
        return
    cpu_share_lock.hold(_exclusive(request.node))
    yield
    if not (_exclusive(request.node) and _exclusive(request.node.stash.get(_NEXT_ITEM, None))):
        cpu_share_lock.release()


@pytest.fixture(scope="session", autouse=True)
def numba_kernels_cached() -> None:
    """numba's on-disk cache filled before the first test, as ``make setup`` does (seconds when it is already filled).

    Cold, each process of the first tests (``auto``'s workers, the CLI's) compiles the kernels itself: 20-90 s on
    two busy cores, past the deadlines of the ``auto`` tests' members. A graph sent to a worker arrives unpickled,
    its arrays writable: the kernels compiled for a local Graph's read-only arrays do not match it, so the warm
    start's baselines and the three-way planner also run here on such a copy (as the workers do).
    """
    from remat_models.core.graph import Graph
    from remat_models.core.transfer import TransferModel
    from remat_models.heuristics.fastsa import fastsa
    from remat_models.heuristics.least_peak import least_peak
    from remat_models.heuristics.three_way import three_way
    from remat_models.heuristics.warmup import compile_kernels
    from remat_models.planning.warm_start import auto_init, fast_baselines

    compile_kernels()
    edges = [(i, i + 1) for i in range(5)] + [(0, 5), (1, 4)]
    local = Graph.from_arrays([f"v{i}" for i in range(6)], [1.0] * 6, [2] * 6, edges, name="warmup")
    received = pickle.loads(pickle.dumps(local))  # as a worker gets it
    for graph in (local, received):  # no time limit: under load a limit ends the search before every kernel ran
        fast_baselines(graph, 8)
        least_peak(graph, 0, time_limit=None)
        auto_init(graph, 8, time_limit=None)
        fastsa(graph, 8, iterations=(256, 256))
        three_way(graph, 8, TransferModel(out_bw=2, in_bw=2))


@pytest.fixture(scope="session")
def c1_auto_offload(cpu_share_lock: CpuShare | None):
    """``auto`` with C1's transfer model at 9 B (spec C1): one run, inspected by three tests (files: test_offload_zoo,
    test_offload_three_way, test_auto_members), each checking its own properties of it.

    20 s: the offload worker's three-way search gets the last 30 % less a second, and a worker still importing
    under load got nothing at 8-10 s; auto returns once every member has reported (seconds on this graph).
    """
    from offload_cases import c1_graph, c1_transfer

    from remat_models.planning.plan import plan

    if cpu_share_lock is not None:  # set up before the test's own share is taken (or while sole use is kept)
        cpu_share_lock.hold(exclusive=True)  # the first test using it, exclusive too, keeps it
    return plan(c1_graph(), 9, "auto", transfer=c1_transfer(), time_limit=20)


@pytest.fixture(scope="session", autouse=True)
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder of the test run's own (the torch APIs cache plans under ``$XDG_CACHE_HOME`` by default)."""
    folder = tmp_path_factory.mktemp("cache")
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(scope="session")
def shared_graphs_dir() -> Path:
    """The benchmark graphs folder (``$REMAT_SHARED/graphs``, default ``../shared/graphs``); skip if absent."""
    graphs = SHARED_DIR / "graphs"
    if not graphs.is_dir():
        pytest.skip(f"benchmark graphs folder {graphs} is absent (set REMAT_SHARED to the shared folder)")
    return graphs


@pytest.fixture(scope="session")
def shared_reference_dir() -> Path:
    """The published tables (``$REMAT_SHARED/reference``, default ``../shared/reference``); skip if absent."""
    reference = SHARED_DIR / "reference"
    if not reference.is_dir():
        pytest.skip(f"published reference folder {reference} is absent (set REMAT_SHARED to the shared folder)")
    return reference


@pytest.fixture
def chain8(tmp_path: Path) -> Path:
    """``remat graph generate chain --size 8`` written to a graph file in the test's folder."""
    path = tmp_path / "chain8.json"
    write_graph(linear_chain(8), path)
    return path
