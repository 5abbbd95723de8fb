"""Running independent pieces of work on any ``concurrent.futures.Executor``.

Planners split work into independent items (QuerySmasher's residual sub-problems, the
mechanisms of one comparison, batches of census trials) and hand them to
:func:`map_ordered` with an executor instead of looping themselves, so that the same algorithm
runs in-process (:class:`SerialExecutor`), on a local process pool (:func:`local_pool`), or on a
Dask cluster (:func:`dask_executor`, with the optional ``dask`` extra). No private protocol:
anything with ``submit`` returning ``concurrent.futures.Future`` works. ``fn`` must be a
picklable top-level function and the items picklable values for anything out of process.

Progress and cancellation go through the futures: ``on_result`` runs in the caller's process as
items finish, and an exception there (or a cancelled :class:`~engine.progress.Progress`)
cancels every pending future; Dask also drops the cancelled tasks from its workers' queues.

Example:
    >>> map_ordered(SerialExecutor(), abs, [-1, 2, -3])
    [1, 2, 3]
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import socket
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

import cloudpickle

from engine.errors import Cancelled, SpecError
from engine.progress import Progress

T = TypeVar("T")
R = TypeVar("R")

#: ``on_result(index, result)`` is called in the caller's process as each item finishes (in
#: completion order); an exception raised there (e.g. ``Cancelled``) stops the map.
ResultCallback = Callable[[int, Any], None]

#: The environment variable that names a Dask scheduler (``tcp://host:port``) to plan on.
SCHEDULER_VARIABLE = "DPWB_SCHEDULER"
#: Seconds allowed to reach a Dask scheduler before giving up.
CONNECT_TIMEOUT = 5.0
#: Seconds between checks of a Progress for cancellation while remote items run.
_POLL_SECONDS = 0.2
_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


#: Dask settings of the local clusters started here (README "Running on a cluster" gives the
#: same as a configuration file for ``dask worker``), each measured on this project's work:
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    # the statistical profiler samples every worker thread each 10 ms: it slowed a 20 s
    # QuerySmasher SDP (a Python-level loop) by 55 %
    "distributed.worker.profile.enabled": False,
    # the nannies' MALLOC_TRIM_THRESHOLD_ pins glibc's mmap threshold at 128 KiB, so every
    # larger numpy temporary is mapped and unmapped anew: a census trial batch took 17,000
    # page faults and 30 % more CPU than in a pool worker (None: glibc's adaptive default)
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    # event-loop health ticks (20 ms), memory polls (100 ms) and system metrics (500 ms) kept
    # an idle 2-worker cluster at 6.5 % of a core, most of it in this process, whose event
    # loop competes with the planner for the GIL; these intervals bring it to 1.1 %
    "distributed.admin.tick.interval": "200ms",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


class WorkerLost(RuntimeError):  # noqa: N818 -- reads as "worker lost: what happened"
    """A worker process died while it ran an item (killed, out of memory, crashed)."""


class SerialExecutor(Executor):
    """Runs each call in the calling process when it is submitted (no pickling).

    :func:`map_ordered` runs the items one after the other so that ``on_result`` can stop
    the map between two items.
    """

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future:
        """Run ``fn(*args, **kwargs)`` now; the returned future is already done."""
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the future carries it, as a pool's would
            future.set_exception(exc)
        return future


def _limit_blas_threads(threads: int) -> None:
    # Runs first in every spawned worker: libraries loaded later read the environment, those
    # already loaded (numpy may be, through the re-imported __main__) are limited in place.
    for var in _BLAS_VARS:
        os.environ[var] = str(threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)


#: Linux prctl option: the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def _end_with_parent() -> None:
    """Have the kernel kill this worker when the process that started it dies (Linux;
    elsewhere the worker ends with its pool). A parent stopped by a signal (a killed CLI run,
    a stopped ``panel serve``) runs no exit handlers, and a pool worker holds both ends of its
    task queue, so it would otherwise compute and wait for ever.

    The kernel watches the thread that started the worker: pools are started and shut down
    within one call, or (the explorer's planners) from threads that live as long as the
    process."""
    with contextlib.suppress(OSError, AttributeError):  # no libc prctl: not Linux
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGKILL)


def _start_worker(
    threads: int, initializer: Callable[..., None] | None, initargs: tuple[Any, ...]
) -> None:
    _end_with_parent()
    _limit_blas_threads(threads)
    if initializer is not None:
        initializer(*initargs)


def local_pool(
    max_workers: int | None = None,
    blas_threads: int = 1,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> ProcessPoolExecutor:
    """The default local executor: a pool of ``spawn``-started worker processes.

    Spawn, because forking a process whose BLAS or GUI threads are running can deadlock, and
    it behaves the same on every platform. Each worker limits its BLAS to ``blas_threads``
    threads: several processes that each start one BLAS thread per core oversubscribe the
    machine. Workers die with the process that started them (Linux). Shut it down with
    ``shutdown()`` or a ``with`` block.

    Args:
        max_workers: number of processes (default: the number of CPUs).
        blas_threads: BLAS threads per worker (default 1).
        initializer: called as ``initializer(*initargs)`` in each worker once its BLAS is
            limited (e.g. to keep shared-memory arrays, which only pass to a process as it
            starts).
        initargs: its arguments.
    """
    workers = max(1, int(max_workers or os.cpu_count() or 1))
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(int(blas_threads), initializer, tuple(initargs)),
    )


def worker_count(executor: Executor) -> int:
    """How many items ``executor`` runs at once (1 when it cannot tell)."""
    if isinstance(executor, ProcessPoolExecutor):
        return int(executor._max_workers)  # no public accessor in concurrent.futures
    client = getattr(executor, "_client", None)  # distributed's ClientExecutor
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return 1


def shared(executor: Executor, value: T) -> T:
    """``value`` as an argument that many items of one map carry, sent to the workers once.

    On a Dask executor the value is scattered to every worker and the returned future stands
    for it: an item that holds it (at the top level or inside a tuple, list or dict) gets the
    value back on the worker, without the value travelling with every task (a 17 KB census
    hierarchy cost Dask 1.5 ms of scheduler CPU per task). Anywhere else it is ``value``
    itself (a process pool pickles items anyway). Keep the result referenced until the map
    is over.
    """
    client = getattr(executor, "_client", None)  # distributed's ClientExecutor
    if client is None:
        return value
    return client.scatter(value, broadcast=True, hash=False)


def in_worker_process() -> bool:
    """True inside a pool or cluster worker process (nested pools would oversubscribe)."""
    return multiprocessing.parent_process() is not None


def default_executor(heavy_items: int, workers: int | None = None) -> Executor:
    """The executor a planner should use for ``heavy_items`` expensive independent items.

    ``workers`` = 0 or 1 forces serial execution; None picks a process pool only when there
    are at least two heavy items and more than one CPU (starting processes costs about a
    second, which only pays off for expensive items). Inside a worker process the answer is
    always serial: the pool or cluster that runs this item already uses the cores.
    """
    cpus = os.cpu_count() or 1
    if in_worker_process() or (workers is not None and workers <= 1):
        return SerialExecutor()
    if workers is None and (heavy_items < 2 or cpus < 2):
        return SerialExecutor()
    return local_pool(max_workers=min(workers or cpus, max(heavy_items, 1)))


def map_ordered(
    executor: Executor,
    fn: Callable[[T], R],
    items: Iterable[T],
    on_result: ResultCallback | None = None,
    progress: Progress | None = None,
    costs: Sequence[float] | None = None,
) -> list[R]:
    """``[fn(item) for item in items]`` on ``executor``, results in item order.

    Args:
        executor: any ``concurrent.futures.Executor``.
        fn: a picklable top-level function of one item.
        items: the items.
        on_result: called as ``on_result(index, result)`` in this process as items finish.
        progress: while out-of-process items run, a cancel of it raises ``Cancelled`` here.
        costs: the relative cost of each item (any unit): out of process the costliest are
            submitted first, so that a long item does not start last and finish alone.

    Raises:
        WorkerLost: a worker process died under an item (after the executor's own retries).
        Cancelled: ``progress`` was cancelled or ``on_result`` raised it; every pending item
            is cancelled first.
    """
    items = list(items)
    return map_after(
        executor, fn, lambda index, _: items[index], [()] * len(items), on_result, progress, costs
    )


def map_after(
    executor: Executor,
    fn: Callable[[T], R],
    make_item: Callable[[int, Mapping[int, R]], T],
    needs: Sequence[Collection[int]],
    on_result: ResultCallback | None = None,
    progress: Progress | None = None,
    costs: Sequence[float] | None = None,
) -> list[R]:
    """:func:`map_ordered` of items that need other items' results: item ``i`` is built as
    ``make_item(i, finished)`` (``finished``: the results so far, by index) as soon as every
    item in ``needs[i]`` has finished, and submitted at once; the others do not wait for it.

    Args:
        executor: any ``concurrent.futures.Executor``.
        fn: a picklable top-level function of one item.
        make_item: builds item ``i`` from the finished results.
        needs: for each item, the indices of the items it needs (no cycles).
        on_result: called as ``on_result(index, result)`` in this process as items finish.
        progress: while out-of-process items run, a cancel of it raises ``Cancelled`` here.
        costs: the relative cost of each item: among the ready ones the costliest go first.

    Returns:
        The results in item order.

    Raises:
        ValueError: ``needs`` names an item that does not exist or forms a cycle.
        WorkerLost, Cancelled: as :func:`map_ordered`.
    """
    count = len(needs)
    _check_needs(needs)
    results: dict[int, R] = {}
    if isinstance(executor, SerialExecutor):
        waiting = list(range(count))  # in item order: reports and cancels stay in order
        while waiting:
            index = next(i for i in waiting if all(j in results for j in needs[i]))
            waiting.remove(index)
            results[index] = fn(make_item(index, results))
            if on_result is not None:
                on_result(index, results[index])
        return [results[i] for i in range(count)]
    waiting = sorted(range(count), key=lambda i: -costs[i]) if costs else list(range(count))
    # Plans close over local functions (reconstructors) that pickle cannot send back from a
    # process pool; cloudpickle can, and Dask uses it already.
    by_value = isinstance(executor, ProcessPoolExecutor)
    futures: dict[Future, int] = {}

    def submit_ready() -> set[Future]:
        ready = [i for i in waiting if all(j in results for j in needs[i])]
        submitted = set()
        for index in ready:
            waiting.remove(index)
            item = make_item(index, results)
            future = (
                executor.submit(_call_by_value, cloudpickle.dumps((fn, item)))
                if by_value
                else executor.submit(fn, item)
            )
            futures[future] = index
            submitted.add(future)
        return submitted

    try:
        pending = submit_ready()
        while pending:
            done, pending = wait(
                pending,
                timeout=None if progress is None else _POLL_SECONDS,
                return_when=FIRST_COMPLETED,
            )
            for future in done:
                index = futures[future]
                value = future.result()
                results[index] = cloudpickle.loads(value) if by_value else value
                if on_result is not None:
                    on_result(index, results[index])
            if progress is not None and progress.cancelled:
                raise Cancelled("cancelled while remote items ran")
            if done and waiting:
                pending |= submit_ready()
    except BaseException as exc:
        for future in futures:
            future.cancel()
        if _is_lost_worker(exc):
            raise WorkerLost(
                f"a worker process died while it ran {fn.__name__} "
                f"({type(exc).__name__}); nothing was returned for this run, "
                "start it again"
            ) from exc
        raise
    return [results[i] for i in range(count)]


def _check_needs(needs: Sequence[Collection[int]]) -> None:
    """ValueError unless ``needs`` names existing items and has no cycle."""
    count = len(needs)
    for index, wanted in enumerate(needs):
        bad = [j for j in wanted if not 0 <= j < count or j == index]
        if bad:
            raise ValueError(f"needs: item {index} needs {bad}, not another of {count} items")
    done: set[int] = set()
    while len(done) < count:
        ready = {i for i in range(count) if i not in done and set(needs[i]) <= done}
        if not ready:
            raise ValueError(f"needs: items {sorted(set(range(count)) - done)} form a cycle")
        done |= ready


def _call_by_value(call: bytes) -> bytes:
    fn, item = cloudpickle.loads(call)
    return cloudpickle.dumps(fn(item))


def _is_lost_worker(exc: BaseException) -> bool:
    # KilledWorker is distributed's (optional, imported lazily): matched by name.
    return isinstance(exc, BrokenProcessPool) or type(exc).__name__ == "KilledWorker"


def dask_client(
    scheduler: str | None = None,
    workers: int | None = None,
    field: str = "--scheduler",
    timeout: float = CONNECT_TIMEOUT,
) -> Any:
    """A ``distributed.Client`` on an existing scheduler, or on a new local cluster.

    Args:
        scheduler: the scheduler address (``tcp://host:port``); None starts a
            ``LocalCluster`` of ``workers`` single-threaded processes on 127.0.0.1.
        workers: processes of the local cluster (default: the number of CPUs).
        field: the setting that gave the address, named in errors.
        timeout: seconds allowed to reach the scheduler.

    Raises:
        SpecError: Dask is not installed, or the scheduler is unreachable or malformed.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise SpecError(
            f"{field}: Dask is not installed (pip install 'dpworkbench[dask]')"
        ) from exc
    if scheduler is None:
        import dask

        with dask.config.set(LOCAL_CLUSTER_CONFIG):
            cluster = LocalCluster(
                n_workers=max(1, int(workers or os.cpu_count() or 1)),
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                # the scheduler's health routes on a free port, not 8787 (another cluster's)
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            )
        return Client(cluster)
    _probe(scheduler, field, timeout)
    try:
        return Client(scheduler, timeout=timeout)
    except Exception as exc:  # OSError, TimeoutError, ValueError: all mean "cannot use it"
        raise SpecError(
            f"{field}: {scheduler!r} is not a usable Dask scheduler ({_first_line(exc)})"
        ) from exc


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _probe(scheduler: str, field: str, timeout: float) -> None:
    """Fail fast on a malformed or unreachable TCP address, before a ``Client`` exists (a
    Client that failed to connect spends seconds closing itself when it is collected)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(scheduler)
        host, port = parse_host_port(location, default_port=8786)
    except (ValueError, TypeError) as exc:
        raise SpecError(
            f"{field}: {scheduler!r} is not a scheduler address like "
            f"tcp://127.0.0.1:8786 ({_first_line(exc)})"
        ) from exc
    if scheme not in ("tcp", "tls"):
        return
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise SpecError(
            f"{field}: cannot reach the Dask scheduler {scheduler!r} within "
            f"{timeout:g} s ({_first_line(exc)})"
        ) from exc


def dask_executor(client: Any) -> Executor:
    """``client``'s ``concurrent.futures`` executor (every submission is a new task)."""
    return client.get_executor(pure=False)


@contextmanager
def executor_for(
    workers: int | None = None, scheduler: str | None = None, field: str = "--scheduler"
) -> Iterator[Executor | None]:
    """The executor that front doors ask for, closed on exit.

    ``scheduler`` (an address) gives a Dask cluster's executor, ``workers`` >= 2 a local
    process pool of that size; neither gives None (the planners' own default).
    """
    if scheduler:
        client = dask_client(scheduler, field=field)
        try:
            yield dask_executor(client)
        finally:
            client.close()
    elif workers is not None and workers >= 2:
        with local_pool(workers) as pool:
            yield pool
    else:
        yield None


def scheduler_from_environment() -> str | None:
    """The scheduler address in ``DPWB_SCHEDULER`` (None when unset or blank)."""
    return os.environ.get(SCHEDULER_VARIABLE, "").strip() or None
