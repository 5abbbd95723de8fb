"""A tiny executor interface for independent sub-problems.

Mechanisms that split their planning into independent pieces (QuerySmasher's residual
sub-workloads, for example) hand the pieces to an :class:`Executor` instead of looping
themselves, so that the same algorithm runs serially in-process, on a local process pool, or on
a cluster. The contract is one method, ``map(fn, items, on_result=None) -> list`` with results
in item order; ``fn`` must be a picklable top-level function and ``items`` picklable values for
anything but the serial executor.

A Dask or Ray client fits the same shape without touching the algorithm, e.g.::

    class DaskExecutor:
        def __init__(self, client):
            self.client = client

        def map(self, fn, items, on_result=None):
            futures = self.client.map(fn, list(items), pure=False)
            for index, future in enumerate(futures):
                if on_result is not None:
                    on_result(index, future.result())
            return self.client.gather(futures)

Example:
    >>> SerialExecutor().map(abs, [-1, 2, -3])
    [1, 2, 3]
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: ``on_result(index, result)`` is called in the caller's process as each item finishes (in
#: completion order); an exception raised there (e.g. ``Cancelled``) stops the map.
ResultCallback = Callable[[int, Any], None]


class Executor(Protocol):
    """Anything that maps a function over independent items and returns results in order."""

    def map(self, fn: Callable[[T], R], items: Iterable[T],
            on_result: ResultCallback | None = None) -> list[R]:
        """``[fn(item) for item in items]``, possibly computed concurrently."""
        ...


class SerialExecutor:
    """Runs every item in the calling process, one after the other (no pickling)."""

    def map(self, fn: Callable[[T], R], items: Iterable[T],
            on_result: ResultCallback | None = None) -> list[R]:
        """Apply ``fn`` to each item in order; ``on_result`` is called after each."""
        out: list[R] = []
        for index, item in enumerate(items):
            result = fn(item)
            out.append(result)
            if on_result is not None:
                on_result(index, result)
        return out


class ProcessExecutor:
    """A local pool of worker processes (``concurrent.futures``) created on first use.

    Workers are started with the ``spawn`` method: forking a process whose BLAS or GUI
    threads are running can deadlock, and spawn behaves the same on every platform. Each
    worker limits its BLAS to ``blas_threads`` threads, because several processes that each
    start one BLAS thread per core oversubscribe the machine (spawned workers start during
    ``submit`` and inherit the environment set around it; BLAS reads it at import).

    Args:
        max_workers: number of processes (default: the number of CPUs).
        blas_threads: BLAS threads per worker (default 1).
    """

    def __init__(self, max_workers: int | None = None, blas_threads: int = 1) -> None:
        self.max_workers = max(1, int(max_workers or os.cpu_count() or 1))
        self.blas_threads = int(blas_threads)
        self._pool: ProcessPoolExecutor | None = None

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.max_workers,
                                             mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def map(self, fn: Callable[[T], R], items: Iterable[T],
            on_result: ResultCallback | None = None) -> list[R]:
        """Submit every item, collect results in item order, report each as it completes."""
        items = list(items)
        if not items:
            return []
        pool = self._ensure_pool()
        with _blas_threads_env(self.blas_threads):
            futures: dict[Future, int] = {pool.submit(fn, item): i
                                          for i, item in enumerate(items)}
        results: list[Any] = [None] * len(items)
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = futures[future]
                    results[index] = future.result()
                    if on_result is not None:
                        on_result(index, results[index])
        except BaseException:
            for future in pending:
                future.cancel()
            raise
        return results

    def close(self) -> None:
        """Shut the worker processes down (a later ``map`` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def _blas_threads_env(threads: int) -> Iterator[None]:
    # Spawned workers copy os.environ when they start; BLAS reads it when numpy is imported.
    saved = {var: os.environ.get(var) for var in _BLAS_VARS}
    try:
        for var in _BLAS_VARS:
            os.environ[var] = str(threads)
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def default_executor(heavy_items: int, workers: int | None = None) -> Executor:
    """The executor a planner should use for ``heavy_items`` expensive independent items.

    ``workers`` = 0 or 1 forces serial execution; None picks a process pool only when there
    are at least two heavy items and more than one CPU (starting processes costs about a
    second, which only pays off for expensive items).
    """
    cpus = os.cpu_count() or 1
    if workers is not None and workers <= 1:
        return SerialExecutor()
    if workers is None and (heavy_items < 2 or cpus < 2):
        return SerialExecutor()
    return ProcessExecutor(max_workers=min(workers or cpus, max(heavy_items, 1)))
