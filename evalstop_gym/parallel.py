"""One way to fan work out: a local process pool, a serial loop, or Ray.

Everything in the project that runs many independent tasks (experiment cells,
the benchmark, E6's model training, micro-RLHF corpora) goes through
:class:`Executor`, so every fan-out behaves the same:

- ``backend="local"``: a :class:`~concurrent.futures.ProcessPoolExecutor` with the
  *spawn* start method (forking a parent whose torch/OpenMP thread pools exist can
  deadlock), at most ``workers * 4`` tasks queued at a time, so Ctrl-C leaves no
  long queue behind.  With ``workers=1``, inside a daemonic process, or when the
  platform cannot start a pool, the tasks run serially in this process.
- ``backend="ray"``: one Ray task per item with :func:`ray_runtime_env` (the same
  environment variables as the local workers, and the source tree on the workers'
  path); Ray is imported only here, on demand.

Workers start with :data:`WORKER_ENV` (one BLAS/OpenMP thread each: the workers
already fill the cores, and a fixed thread count keeps float reductions, hence
results, identical across backends).  The variables are in the workers'
environment from their first instruction, before numpy or torch are imported.

Results are yielded as ``(index, result)`` pairs as they finish.

No process outlives the fan-out that started it (or the :meth:`Executor.kept` block
whose pool it belongs to), nor the program: a pool that finished is shut down and
joined; one left by an error or Ctrl-C cancels what has not started and terminates
its workers (a long task is not waited for); a worker whose parent died, even
killed outright, ends itself; and the *spawn* method's resource-tracker process,
which would otherwise linger past the program's exit, is stopped and reaped when
the program exits.

:meth:`Executor.kept` keeps one local pool open across the fan-outs of a block (a
``reproduce`` run trains models, builds stages and plays cells in turn): its
workers are spawned, and import numpy, torch or a corpus, once for all of them
instead of once per fan-out.  Tasks must not depend on what ran before them in a
worker (every task here seeds its own generators).  A fan-out that fails ends the
kept pool as it would its own; the next one starts a fresh pool.

:meth:`Executor.beside` runs single tasks in a process of their own while the
caller goes on with other work (a one-process spawn pool with
:data:`WORKER_ENV`), when there is a core to spare for it: a local backend of
two or more workers outside a daemonic process.  Otherwise each task runs at
once, in this process, and its future is already done when ``submit`` returns.

This module knows nothing of policies or experiments and imports no third-party package.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.resource_tracker
import multiprocessing.util
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

BACKENDS: tuple[str, ...] = ("local", "ray")

#: Environment of every worker process, local or Ray.
WORKER_ENV: dict[str, str] = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}

#: The folder holding the ``evalstop_gym`` package (the source tree's root).
SOURCE_ROOT = Path(__file__).resolve().parents[1]

#: Tasks in flight per worker: enough to keep workers busy, few enough to stop fast.
_WINDOW_PER_WORKER = 4


class BackendError(RuntimeError):
    """A backend cannot run tasks here (Ray missing, or not starting); the message says what to run."""


def ray_runtime_env(remote: bool = False) -> dict[str, Any]:
    """The Ray ``runtime_env`` every Ray task of the project runs with.

    Args:
        remote: The cluster is not this machine: ship the source tree's packages
            (``py_modules``) instead of pointing ``PYTHONPATH`` at them.

    Returns:
        ``{"env_vars": WORKER_ENV + PYTHONPATH}``, plus ``py_modules`` when remote.
    """
    path = os.pathsep.join(p for p in (str(SOURCE_ROOT), os.environ.get("PYTHONPATH")) if p)
    env: dict[str, Any] = {"env_vars": {**WORKER_ENV, "PYTHONPATH": path}}
    if remote:
        env["py_modules"] = sorted(
            str(p) for p in SOURCE_ROOT.iterdir() if (p / "__init__.py").is_file()
        )
    return env


@dataclass(frozen=True)
class Executor:
    """Where and how wide to run independent tasks.

    Args:
        backend: ``"local"`` (process pool, serial with one worker) or ``"ray"``.
        workers: Parallel workers (local) or CPUs of a Ray cluster started here;
            default: every core.
        address: Address of an existing Ray cluster (``backend="ray"`` only).

    Example:
        >>> list(Executor(workers=1).map(abs, [-1, 2, -3]))
        [1, 2, 3]
    """

    backend: str = "local"
    workers: int | None = None
    address: str | None = None

    def __post_init__(self) -> None:
        """Refuse an unknown backend, a worker count below 1, or a stray address."""
        if self.backend not in BACKENDS:
            raise ValueError(f"backend={self.backend!r} is not allowed: one of {list(BACKENDS)}")
        if self.workers is not None and (
            not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < 1
        ):
            raise ValueError(f"workers={self.workers!r} is not allowed: an integer >= 1 or None")
        if self.address is not None and self.backend != "ray":
            raise ValueError(f"address={self.address!r} is only allowed with backend='ray'")

    @property
    def full_width(self) -> int:
        """How many workers this executor runs at most: ``workers``, else every core."""
        return self.workers or os.cpu_count() or 1

    def width(self, n_tasks: int) -> int:
        """How many workers ``n_tasks`` tasks get (at least 1)."""
        return max(1, min(self.full_width, n_tasks))

    def imap(
        self,
        fn: Callable[[T], R],
        items: Iterable[T],
        *,
        progress: Callable[[int], None] | None = None,
    ) -> Iterator[tuple[int, R]]:
        """Yield ``(index, fn(item))`` as each task finishes, in completion order.

        ``fn`` must be a module-level function (workers import it by name).
        ``progress(1)`` is called after the caller has taken each result, so a
        progress callback that raises (Ctrl-C) never loses a handed-out result.
        Leaving the loop early cancels the tasks not yet started.
        """
        todo = list(items)
        if not todo:
            return
        if self.backend == "ray":
            results = _ray_imap(fn, todo, self.width(len(todo)), self.address)
        elif self.width(len(todo)) == 1 or multiprocessing.current_process().daemon:
            results = _serial_imap(fn, todo)
        else:
            # A kept pool of this executor's own width serves it; a narrower or wider
            # executor starts its own pool, so no fan-out runs wider than it was asked to.
            share = _kept is not None and _kept.workers == self.full_width
            results = _pool_imap(fn, todo, self.width(len(todo)), share)
        try:
            for pair in results:
                yield pair
                if progress is not None:
                    progress(1)
        finally:
            # End the fan-out now, not when a traceback holding this frame is freed:
            # its tasks must not stay in flight beside the next fan-out's.
            results.close()

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """A block whose local fan-outs (:meth:`imap`, :meth:`map`) share one process pool.

        The pool starts with the first fan-out that needs one and has
        :meth:`width` workers for any number of tasks; leaving the block shuts it down
        (terminating its workers if the block raised).  Only executors of the same width
        use it (others start a pool per fan-out, as outside a block), one fan-out at a
        time: fan-outs in the block must not interleave.  A nested block is the outer
        one; with Ray, one worker or inside a daemonic process the block changes nothing.
        """
        global _kept
        if _kept is not None or self.backend != "local":
            yield
            return
        failed = True
        try:
            _kept = _KeptPool(self.full_width)
            yield
            failed = False
        finally:
            kept, _kept = _kept, None
            if kept is not None:
                kept.end(finished=not failed)

    def beside(self) -> Beside:
        """A context for tasks run one at a time beside this process's work (see :class:`Beside`)."""
        separate = (
            self.backend == "local"
            and self.width(2) > 1
            and not multiprocessing.current_process().daemon
        )
        return Beside(separate)

    def map(
        self,
        fn: Callable[[T], R],
        items: Iterable[T],
        *,
        progress: Callable[[int], None] | None = None,
    ) -> list[R]:
        """``[fn(item) for item in items]``, computed in parallel, in input order."""
        todo = list(items)
        out: list[Any] = [None] * len(todo)
        for i, r in self.imap(fn, todo, progress=progress):
            out[i] = r
        return out


class Beside:
    """Tasks run in one process of their own, in submission order, beside the caller's work.

    ``separate=False`` (or a platform that cannot start a pool) runs each task at
    once in this process: ``submit`` then returns a future that is already done,
    holding the result or the exception.  Leaving the ``with`` block waits for the
    tasks, or cancels those not started if the block raised.

    Example:
        >>> with Executor(workers=1).beside() as b:
        ...     b.submit(abs, -3).result()
        3
    """

    def __init__(self, separate: bool) -> None:
        """Start nothing yet: the process starts with the first task."""
        self.separate = separate
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Beside:
        """The context itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """End the process (cancelling what has not started if the block failed)."""
        if self._pool is not None:
            _end_pool(self._pool, finished=exc[0] is None)
            self._pool = None

    def submit(self, fn: Callable[[T], R], item: T) -> Future[R]:
        """Start ``fn(item)`` (``fn`` module-level, ``item`` picklable); its future."""
        if self.separate and self._pool is None:
            with _worker_environment():  # the process is spawned with the first submission
                self._pool = _start_pool(1)
                if self._pool is not None:
                    return self._pool.submit(fn, item)
            self.separate = False
        if self._pool is not None:
            return self._pool.submit(fn, item)
        fut: Future[R] = Future()
        try:
            fut.set_result(fn(item))
        except Exception as e:  # the caller sees it from result(), as from a process
            fut.set_exception(e)
        return fut


def parallel_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, R]]:
    """Shorthand for ``Executor(backend, workers, address).imap(fn, items, progress=progress)``."""
    return Executor(backend, workers, address).imap(fn, items, progress=progress)


def _serial_imap(fn: Callable[[T], R], items: list[T]) -> Iterator[tuple[int, R]]:
    for i, item in enumerate(items):
        yield i, fn(item)


@contextlib.contextmanager
def _worker_environment() -> Iterator[None]:
    """Set :data:`WORKER_ENV` while worker processes are spawned (they copy ``os.environ``)."""
    saved = {k: os.environ.get(k) for k in WORKER_ENV}
    os.environ.update(WORKER_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _start_pool(workers: int) -> ProcessPoolExecutor | None:
    try:
        pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with_parent,
        )
    except (OSError, NotImplementedError, ImportError) as e:  # e.g. no semaphores in a sandbox
        warnings.warn(f"no process pool ({e}); running serially", RuntimeWarning, stacklevel=3)
        return None
    _stop_tracker_at_exit()
    return pool


def _ended(proc: Any) -> bool:
    """Whether a worker process has ended, also before its parent has read its status.

    ``exitcode`` stays None until the process's status is collected; a forkserver child's
    is collected by the forkserver, which on a busy machine can lag behind the death by a
    while, so on Linux a process that is gone from /proc or a zombie counts as ended too.
    """
    if proc.exitcode is not None:
        return True
    if not os.path.isdir("/proc"):
        return False
    try:
        with open(f"/proc/{proc.pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except (OSError, IndexError):
        return False


def _workers(pool: ProcessPoolExecutor) -> list[Any]:
    """The pool's worker processes: the executor's own record of them (what shutdown joins)."""
    return list((getattr(pool, "_processes", None) or {}).values())


def _end_pool(pool: ProcessPoolExecutor, *, finished: bool) -> None:
    """Shut ``pool`` down: join its idle workers, or (not finished) terminate them.

    After an error or Ctrl-C the tasks still running are not waited for (a training
    run can take minutes): what has not started is cancelled and the workers end.
    """
    if finished:
        pool.shutdown(wait=True)
        return
    processes = _workers(pool)
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=10)
        if proc.is_alive():  # pragma: no cover - a worker ignoring SIGTERM
            proc.kill()
            proc.join()
    # The executor's management thread notices the dead workers and exits.
    pool.shutdown(wait=True)


_tracker_hooked = False


def _exit_with_parent() -> None:
    """In a worker: end this process when its parent ends, however the parent ended.

    A parent killed outright (SIGKILL, the OOM killer, a CI timeout) runs no clean-up,
    and its idle workers would wait on their task queue for ever; a kept pool's workers
    are idle through whole stages of a run.
    """
    import threading
    from multiprocessing.connection import wait as wait_for

    parent = multiprocessing.parent_process()
    if parent is None:  # pragma: no cover - only ever run as a pool's initializer
        return

    def watch() -> None:
        wait_for([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _stop_tracker_at_exit() -> None:
    """Have the spawn resource tracker stopped and reaped when this program exits.

    Spawning a pool starts it (a child of this process that ends only after this
    process does, left to be reaped by whoever adopts it); stopping it at exit, after
    every pool has been shut down, leaves no process behind.
    """
    global _tracker_hooked
    if not _tracker_hooked:
        _tracker_hooked = True
        # A multiprocessing exit finaliser of the lowest priority: it runs after every
        # semaphore's own clean-up (priority 0).  Stopped earlier (a plain atexit hook runs
        # first), the tracker unlinks those semaphores itself and their clean-up then
        # prints a FileNotFoundError traceback at exit.
        multiprocessing.util.Finalize(None, _stop_tracker, exitpriority=-100)


def _stop_tracker() -> None:
    tracker = getattr(multiprocessing.resource_tracker, "_resource_tracker", None)
    stop = getattr(tracker, "_stop", None)
    if stop is not None:
        with contextlib.suppress(Exception):  # at exit: never mask the program's own outcome
            stop()


class _KeptPool:
    """The pool of an :meth:`Executor.kept` block: started on first use, ended with the block."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: ProcessPoolExecutor | None = None

    def get(self) -> ProcessPoolExecutor | None:
        """The open pool, started now if need be (None: no pool on this platform).

        A pool one of whose workers has died since its last fan-out (killed by the
        system, say) is broken for every later task: it is ended and a new one started.
        """
        pool = self.pool
        if pool is not None and (
            getattr(pool, "_broken", False) or any(_ended(p) for p in _workers(pool))
        ):
            self.end(finished=False)
        if self.pool is None:
            self.pool = _start_pool(self.workers)
        return self.pool

    def end(self, *, finished: bool) -> None:
        """Shut the pool down (see :func:`_end_pool`); a later :meth:`get` starts another."""
        if self.pool is not None:
            try:
                _end_pool(self.pool, finished=finished)
            finally:  # forgotten once joined: until then kept_workers_cpu still counts it
                self.pool = None


#: The pool of the :meth:`Executor.kept` block this process is in, if any.
_kept: _KeptPool | None = None


def kept_workers_cpu() -> float:
    """CPU seconds used so far by the live workers of the kept pool (:meth:`Executor.kept`).

    A pool's workers count in this process's ``RUSAGE_CHILDREN`` only once they are
    joined, which a kept pool's are at the end of its block: before that, what they have
    used is read from ``/proc`` (0 where there is none, or no kept pool).  The sum of
    the two is the CPU of every worker so far, each second counted once.
    """
    pool = _kept.pool if _kept is not None else None
    if pool is None:
        return 0.0
    ticks = 0
    for proc in _workers(pool):
        if proc.exitcode is not None:  # reaped: in RUSAGE_CHILDREN now
            continue
        try:
            with open(f"/proc/{proc.pid}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except (OSError, ValueError):  # no /proc, or the process has just ended
            continue
        # utime, stime and its own waited-for children's (fields 14 to 17), as its
        # RUSAGE_CHILDREN entry will have them once it is joined
        ticks += sum(int(f) for f in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK") if ticks else 0.0


def _pool_imap(
    fn: Callable[[T], R], items: list[T], workers: int, share: bool = False
) -> Iterator[tuple[int, R]]:
    kept = _kept if share else None
    pool = kept.get() if kept is not None else _start_pool(workers)
    if pool is None:
        yield from _serial_imap(fn, items)
        return
    pending: dict[Future[R], int] = {}
    it = iter(enumerate(items))
    finished = False
    try:
        # The pool spawns a process on a submission that finds no idle one, until it has
        # its workers (a kept pool: in whichever fan-out that happens), so every
        # submission is made inside the worker environment.
        with _worker_environment():
            for i, item in _take(it, workers * _WINDOW_PER_WORKER):
                pending[pool.submit(fn, item)] = i
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield pending.pop(fut), fut.result()
            with _worker_environment():
                for i, item in _take(it, len(done)):
                    pending[pool.submit(fn, item)] = i
        finished = True
    finally:
        if kept is None:
            _end_pool(pool, finished=finished)
        elif not finished:
            # An error or Ctrl-C: what has not started is cancelled, and the workers end
            # as a fan-out's own pool's would (a running task is not waited for).
            for fut in pending:
                fut.cancel()
            if kept.pool is pool:
                kept.end(finished=False)


def _take(it: Iterator[T], n: int) -> Iterator[T]:
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise BackendError(
            "backend='ray' needs Ray: pip install 'evalstop-gym[distributed]' "
            "(or use the local backend: --backend local)"
        ) from e
    return ray


def _ray_imap(
    fn: Callable[[T], R], items: list[T], workers: int, address: str | None
) -> Iterator[tuple[int, R]]:
    ray = _import_ray()
    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        try:
            if address:
                ray.init(address=address, **kw)
            else:
                ray.init(num_cpus=workers, **kw)
        except Exception as e:  # Ray's own startup errors have no common base class
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise BackendError(
                f"Ray did not start ({type(e).__name__}: {first}); "
                "the local backend runs the same tasks: --backend local"
            ) from e
    remote = address is not None and address not in ("local", "auto")
    task = ray.remote(num_cpus=1, runtime_env=ray_runtime_env(remote))(fn)
    refs: dict[Any, int] = {}
    it = iter(enumerate(items))
    try:
        for i, item in _take(it, workers * _WINDOW_PER_WORKER):
            refs[task.remote(item)] = i
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                yield refs.pop(ref), ray.get(ref)
            for i, item in _take(it, len(ready)):
                refs[task.remote(item)] = i
    finally:
        for ref in refs:
            ray.cancel(ref)
        if started:
            ray.shutdown()


__all__ = [
    "BACKENDS",
    "WORKER_ENV",
    "BackendError",
    "Beside",
    "Executor",
    "kept_workers_cpu",
    "parallel_map",
    "ray_runtime_env",
]
