"""Run (cell, seed) tasks on a local process pool or on Ray, resumably.

Every finished task is written at once, atomically (temporary file, then
``os.replace``), to ``OUT/raw/<experiment>/<cell key>/seed<seed>.json``.  A
rerun with ``resume=True`` skips what is on disk, so an interrupted run (Ctrl-C,
a killed worker) loses nothing that finished.  Each task is a pure function of
(cell, seed), so both backends produce bit-identical files.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.evaluate import run_episode

from .experiments import Cell

Task = tuple[Cell, int]


def task_path(out: Path, cell: Cell, seed: int) -> Path:
    return out / "raw" / cell.experiment / cell.key / f"seed{seed}.json"


def _run(cell_dict: dict[str, Any], seed: int) -> dict[str, Any]:
    cell = Cell.from_dict(cell_dict)
    row = run_episode(cell.policy.build(), seed, **cell.env)
    row["policy"] = cell.policy.label
    row.update({"experiment": cell.experiment, "group": cell.group, "cell": cell.key})
    return row


def _worker(cell_dict: dict[str, Any], seed: int) -> dict[str, Any]:
    """Run one (cell, seed): the entry point of both backends' workers."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if cell_dict["policy"]["kind"] == "Learned":  # one thread per worker: no oversubscription
        import torch

        torch.set_num_threads(1)
    return _run(cell_dict, seed)


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            # repr-exact floats: reruns and both backends give identical files.
            json.dump(data, fh, sort_keys=True, allow_nan=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class RunStats:
    done_before: int = 0
    ran: int = 0


def run_tasks(
    tasks: list[Task],
    out: Path,
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Run every task whose result file is missing; call ``progress(1)`` per task."""
    todo = [(c, s) for c, s in tasks if not task_path(out, c, s).exists()]
    st = RunStats(done_before=len(tasks) - len(todo))
    if progress and st.done_before:
        progress(st.done_before)
    if not todo:
        return st
    if backend == "local":
        _run_local(todo, out, workers, progress, st)
    elif backend == "ray":
        _run_ray(todo, out, workers, address, progress, st)
    else:
        raise ValueError(f"backend={backend!r} is not allowed: 'local' or 'ray'")
    return st


def _run_local(
    todo: list[Task],
    out: Path,
    workers: int | None,
    progress: Callable[[int], None] | None,
    st: RunStats,
) -> None:
    workers = workers or os.cpu_count() or 1
    if workers == 1:
        for cell, seed in todo:
            write_atomic(task_path(out, cell, seed), _worker(cell.to_dict(), seed))
            st.ran += 1
            if progress:
                progress(1)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        it = iter(todo)
        pending: dict[Any, Task] = {}

        def submit(n: int) -> None:
            for cell, seed in itertools.islice(it, n):
                pending[pool.submit(_worker, cell.to_dict(), seed)] = (cell, seed)

        submit(workers * 4)  # a bounded window: Ctrl-C does not leave a huge queue behind
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                cell, seed = pending.pop(fut)
                write_atomic(task_path(out, cell, seed), fut.result())
                st.ran += 1
                if progress:
                    progress(1)
            submit(len(done))


def _run_ray(
    todo: list[Task],
    out: Path,
    workers: int | None,
    address: str | None,
    progress: Callable[[int], None] | None,
    st: RunStats,
) -> None:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise RuntimeError(
            "--backend ray needs Ray: pip install 'evalstop-gym[distributed]'"
        ) from e
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=workers or os.cpu_count(), **kw)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(_worker)
        refs = {remote.remote(c.to_dict(), s): (c, s) for c, s in todo}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                cell, seed = refs.pop(ref)
                write_atomic(task_path(out, cell, seed), ray.get(ref))
                st.ran += 1
                if progress:
                    progress(1)
    finally:
        if started:
            ray.shutdown()


def load_results(out: Path, cells: list[Cell], seeds: list[int]) -> list[dict[str, Any]]:
    """Every task's row, in (cell, seed) order; raises if one is missing."""
    rows = []
    for cell in cells:
        for seed in seeds:
            p = task_path(out, cell, seed)
            with open(p) as fh:
                rows.append(json.load(fh))
    return rows
