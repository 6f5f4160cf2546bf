"""StreamCopies' ordering, checked on CPU with a stream-race checker; the executor picks the copy engine.

torch 2.13's CPU streams cannot record events (``torch.Stream("cpu").record_event`` raises; ``torch.cpu.Stream``
and ``torch.cpu.Event`` are no-ops), so the streams and events here are the checker's: vector clocks per
stream, and a ``TorchDispatchMode`` that sees every real ATen op the executor and the engine run (on
whichever stream is current) with the storages it reads and writes. It reports a race when two streams
touch a storage (one writing) with no event between them, and when a storage is released (by the compute
stream: the caching allocator reuses a freed block there at once; by the host for host buffers) before
every copy that touched it is ordered before that point. The copies themselves are real (CPU tensors).
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import FreeHost, Prefetch, Schedule, simulate  # noqa: E402
from remat_models.core.transfer import TransferModel  # noqa: E402
from remat_models.errors import ConfigurationError  # noqa: E402
from remat_models.heuristics.idle_offload import page_idle_values  # noqa: E402
from remat_models.torch.api import fixed_tensors  # noqa: E402
from remat_models.torch.copy_engine import (  # noqa: E402
    StreamApi,
    StreamCopies,
    SyncCopies,
    copy_engine_for,
)

torch.set_num_threads(1)
MODELS_FILE = Path(__file__).resolve().parents[1] / "examples" / "models.py"
_spec = importlib.util.spec_from_file_location("remat_example_models_copies", MODELS_FILE)
models = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_models_copies"] = models
_spec.loader.exec_module(models)
OVERLAP = TransferModel(out_bw=1e6, in_bw=1e6, host_capacity=1 << 30, mode="overlap")


class _Stream:
    def __init__(self, checker: StreamChecker, name: str) -> None:
        self.checker, self.name = checker, name

    def wait_event(self, event: _Event) -> None:
        self.checker.join(self.name, event.clock)


class _Event:
    """Completes on its second ``query`` (so the engine sees copies in flight), or on ``synchronize``."""

    def __init__(self, checker: StreamChecker) -> None:
        self.checker, self.clock, self.queries = checker, Counter(), 0

    def record(self, stream: _Stream) -> None:
        self.checker.poll()
        self.clock = Counter(self.checker.clocks[stream.name])

    def query(self) -> bool:
        self.queries += 1
        if self.queries > 1:
            self.synchronize()
        return self.queries > 1

    def synchronize(self) -> None:
        self.checker.join("host", self.clock)


class StreamChecker(TorchDispatchMode):
    """Vector clocks per stream (and the host); every ATen op's storage reads and writes; races found."""

    def __init__(self) -> None:
        super().__init__()
        self.clocks: dict[str, Counter] = defaultdict(Counter)
        self.current = "compute"
        self.history: dict[int, list[tuple[str, int, bool]]] = defaultdict(list)  # ptr -> (actor, tick, write)
        self.owner: dict[int, str] = {}  # ptr -> stream current when the storage was allocated
        self.refs: dict[int, StorageWeakRef] = {}
        self.races: list[str] = []
        self.streams = 0
        self.ops = Counter()
        self.api = StreamApi(
            compute=_Stream(self, "compute"),
            new_stream=self._stream,
            new_event=lambda: _Event(self),
            use=self.use,
            pin=False,
        )

    def _stream(self) -> _Stream:
        self.streams += 1
        return _Stream(self, f"copy{self.streams}")

    @contextmanager
    def use(self, stream: _Stream) -> Iterator[None]:
        before, self.current = self.current, stream.name
        try:
            yield
        finally:
            self.current = before

    def join(self, actor: str, clock: Counter) -> None:
        """``actor`` waits for everything ``clock`` has seen."""
        self.poll()
        mine = self.clocks[actor]
        for other, tick in clock.items():
            mine[other] = max(mine[other], tick)

    def poll(self) -> None:
        """Check the storages released since the last call: the compute stream or the host releases them."""
        for ptr in [p for p, ref in self.refs.items() if ref.expired()]:
            releaser = "compute" if self.owner.pop(ptr) == "compute" else "host"
            seen = self.clocks[releaser]
            for actor, tick, _ in self.history.pop(ptr, []):
                if actor != releaser and seen[actor] < tick:
                    self.races.append(f"{releaser} releases a storage {actor} touched, without waiting for it")
            del self.refs[ptr]

    def access(self, storage: torch.UntypedStorage, write: bool, what: str) -> None:
        if not storage.nbytes():
            return
        self.poll()
        ptr, actor = storage.data_ptr(), self.current
        clock = self.clocks[actor]
        clock[actor] += 1
        for other, tick, wrote in self.history[ptr]:
            if other != actor and (wrote or write) and clock[other] < tick:
                self.races.append(f"{what}: {actor} and {other} touch one storage with no event between them")
        self.history[ptr].append((actor, clock[actor], write))

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func.overloadpacket is torch.ops.aten.set_:  # metadata only
            return func(*args, **kwargs)
        schema = func._schema
        written = {
            id(value)
            for i, arg in enumerate(schema.arguments)
            if arg.alias_info is not None and arg.alias_info.is_write
            for value in tree_flatten(args[i] if i < len(args) else kwargs.get(arg.name))[0]
        }
        for value in tree_flatten((args, kwargs))[0]:
            if isinstance(value, torch.Tensor):
                self.access(value.untyped_storage(), id(value) in written, str(func))
        out = func(*args, **kwargs)
        self.ops[self.current] += 1
        results = out if isinstance(out, (tuple, list)) else (out,)
        for ret, value in zip(schema.returns, results, strict=False):
            if isinstance(value, torch.Tensor) and ret.alias_info is None and value.untyped_storage().nbytes():
                storage = value.untyped_storage()
                self.access(storage, True, f"{func} allocates")
                self.owner[storage.data_ptr()] = self.current
                self.refs[storage.data_ptr()] = StorageWeakRef(storage)
        return out


def _with_free_host(schedule: Schedule) -> Schedule:
    """FreeHost(v) right after v's last Prefetch (the prefetch may still read the host buffer)."""
    last = {step.node: k for k, step in enumerate(schedule.steps) if isinstance(step, Prefetch)}
    steps = []
    for k, step in enumerate(schedule.steps):
        steps.append(step)
        if last.get(step.node) == k:
            steps.append(FreeHost(step.node))
    return Schedule(tuple(steps))


@pytest.fixture(scope="module", params=["mlp", "unet"])
def paged(request) -> tuple:
    model, inputs, targets, loss_fn = models.EXAMPLES[request.param]()
    torch_graph = rt.extract(model, inputs, loss_fn, targets, name=request.param)
    graph = torch_graph.graph
    schedule = _with_free_host(page_idle_values(graph, graph.order, min_gap=2))
    fixed = fixed_tensors(model, torch_graph.traced, inputs, targets)
    executor = rt.Executor(torch_graph)
    return (
        executor,
        schedule,
        fixed,
        executor.run(schedule, fixed, transfer=OVERLAP, copies=SyncCopies(fixed[0].device)),
    )


def _run_checked(paged: tuple, engine: type[StreamCopies]) -> tuple[Any, StreamChecker]:
    executor, schedule, fixed, _ = paged
    checker = StreamChecker()
    with checker:
        result = executor.run(schedule, fixed, transfer=OVERLAP, copies=engine(torch.device("cpu"), checker.api))
    return result, checker


def test_stream_copies_keep_every_copy_ordered_and_the_results_exact(paged: tuple) -> None:
    executor, schedule, _, sync = paged
    simulation = simulate(executor.tg.graph, schedule, OVERLAP)
    assert simulation.offloads and simulation.prefetches and any(isinstance(s, FreeHost) for s in schedule.steps)
    result, checker = _run_checked(paged, StreamCopies)
    assert checker.races == []
    assert checker.streams == 2 and checker.ops["copy1"] and checker.ops["copy2"]  # both copy streams worked
    assert torch.equal(result.loss, sync.loss)
    for got, want in zip(result.grads, sync.grads, strict=True):
        assert (got is None) == (want is None)
        assert want is None or torch.equal(got, want)
    assert (result.timeline == sync.timeline).all() and result.host_peak == sync.host_peak == simulation.host_peak


class _ReadsEarly(StreamCopies):
    def read(self, v: int) -> None:  # no wait for the prefetch
        self.ready.pop(v, None)


class _FreesEarly(StreamCopies):
    def free(self, v: int) -> None:  # drops the device copy while its offload may read it
        self.read(v)
        self.unsaved.pop(v, None)


class _ReleasesHostEarly(StreamCopies):
    def free_host(self, v: int, host: Any) -> None:  # drops the pinned buffer with copies in flight
        super().free_host(v, host)
        self.retiring.pop()


class _CopiesIntoBusyMemory(StreamCopies):
    def _mark(self, stream: Any) -> Any:  # the copy streams wait for no compute work
        event = super()._mark(stream)
        return self.api.new_event() if stream is self.compute else event


@pytest.mark.parametrize("engine", [_ReadsEarly, _FreesEarly, _ReleasesHostEarly, _CopiesIntoBusyMemory])
def test_the_checker_finds_each_missing_wait(paged: tuple, engine: type[StreamCopies]) -> None:
    _, checker = _run_checked(paged, engine)
    assert checker.races


def test_the_executor_picks_copy_streams_only_on_cuda_in_overlap_mode() -> None:
    cpu = torch.device("cpu")
    serial = TransferModel(out_bw=1.0, in_bw=1.0)
    for transfer in (None, serial, OVERLAP):
        assert type(copy_engine_for(cpu, transfer)) is SyncCopies
    if not torch.cuda.is_available():
        with pytest.raises(ConfigurationError, match="CUDA"):
            StreamCopies(cpu)
    else:
        cuda = torch.device("cuda")
        assert type(copy_engine_for(cuda, serial)) is SyncCopies
        assert type(copy_engine_for(cuda, OVERLAP)) is StreamCopies
