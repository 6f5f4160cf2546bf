"""Pools that run isolated bench tasks: a local pool (threads, each waiting on its own process) and Dask."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from remat_models.bench.isolate import run_isolated, stop_running
from remat_models.bench.store import ResultStore, finished_ids
from remat_models.bench.sweep import RunSpec
from remat_models.errors import ConfigurationError

log = logging.getLogger(__name__)

Record = dict[str, Any]


class RunPool(Protocol):
    """Runs tasks (``RunSpec.to_task()``) and yields their records as they finish."""

    def map(self, tasks: Sequence[dict[str, Any]]) -> Iterator[Record]:
        """Yield one record per task, in completion order."""
        ...


@dataclass(frozen=True)
class LocalPool:
    """``jobs`` runs at a time on this machine, each in its own process."""

    jobs: int = 1

    def map(self, tasks: Sequence[dict[str, Any]]) -> Iterator[Record]:
        """Yield one record per task, in completion order."""
        if self.jobs < 1:
            raise ConfigurationError(f"--jobs must be at least 1, got {self.jobs}")
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="remat-bench") as pool:
            futures = [pool.submit(run_isolated, task) for task in tasks]
            yielded = set()
            try:
                for future in as_completed(futures):
                    yielded.add(future)
                    yield future.result()
            except KeyboardInterrupt:  # SIGINT, or SIGTERM made one: the stopped runs are recorded as interrupted
                _stop(futures)
                for future in as_completed([f for f in futures if not f.cancelled() and f not in yielded]):
                    yield future.result()
                raise
            finally:  # interrupted (or the consumer stopped): drop queued runs, stop running ones
                _stop(futures)


def _stop(futures: Sequence[Future[Record]]) -> None:
    """Cancel the queued runs and stop the running ones."""
    for future in futures:
        future.cancel()
    if not all(future.done() for future in futures):
        log.warning("sweep interrupted: stopped %d running processes", stop_running())


@dataclass(frozen=True)
class DaskPool:
    """Runs on a Dask distributed cluster (``tcp://HOST:PORT``); each task still gets its own process there."""

    address: str
    connect_timeout: float = 20.0  # seconds to reach the scheduler

    def map(self, tasks: Sequence[dict[str, Any]]) -> Iterator[Record]:
        """Yield one record per task, in completion order."""
        try:
            from distributed import Client
            from distributed import as_completed as dask_completed
        except ImportError as error:
            raise ConfigurationError("--scheduler needs Dask: pip install 'remat_models[bench]'") from error
        try:
            client = Client(self.address, timeout=f"{self.connect_timeout}s")
        except OSError as error:
            raise ConfigurationError(f"cannot reach the Dask scheduler at {self.address}: {error}") from error
        try:
            keys = [f"remat-bench-{task['run_id']}" for task in tasks]
            futures = client.map(run_isolated, tasks, key=keys, pure=False) if tasks else []
            for future in dask_completed(futures):
                yield future.result()
        finally:
            client.close()


def make_pool(jobs: int = 1, scheduler: str | None = None) -> RunPool:
    """The Dask pool when a scheduler address is given, else the local pool."""
    return DaskPool(scheduler) if scheduler else LocalPool(jobs)


def run_sweep(
    runs: Sequence[RunSpec],
    results: str | Path,
    pool: RunPool | None = None,
    *,
    retry_failed: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> list[Record]:
    """Run what ``results`` does not hold yet, appending each record as it finishes; return the new records.

    The results file is checked to be writable and locked before the first run (see ``ResultStore.exclusive``).

    ``on_start(pending, skipped)`` is called once before the first run, ``on_record`` after each.
    """
    store = ResultStore(results)
    with store.exclusive():  # writable, and no other sweep runs the same jobs meanwhile
        done = finished_ids(store.read(), retry_failed=retry_failed)
        pending = [run for run in runs if run.run_id not in done]
        skipped = len(runs) - len(pending)
        log.info("%d runs, %d already in %s, %d to run", len(runs), skipped, store.path, len(pending))
        if on_start is not None:
            on_start(len(pending), skipped)
        records = []
        for record in (pool or LocalPool()).map([run.to_task() for run in pending]):
            store.append(record)
            records.append(record)
            if on_record is not None:
                on_record(record)
    return records
