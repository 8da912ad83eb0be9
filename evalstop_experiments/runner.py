"""Run (cell, seed) tasks through :class:`evalstop_gym.parallel.Executor`, resumably.

Every finished task is written at once, atomically (temporary file, then
``os.replace``), to ``OUT/raw/<experiment>/<cell key>/seed<seed>.json``.  A
rerun with ``resume=True`` skips what is on disk, so an interrupted run (Ctrl-C,
a killed worker) loses nothing that finished.  Each task is a pure function of
(cell, seed), so every backend produces bit-identical files.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.evaluate import run_episode
from evalstop_gym.parallel import Executor

from .experiments import Cell

Task = tuple[Cell, int]


def task_path(out: Path, cell: Cell, seed: int) -> Path:
    """Where the result of (cell, seed) is stored under ``out``."""
    return out / "raw" / cell.experiment / cell.key / f"seed{seed}.json"


def run_task(task: Task) -> dict[str, Any]:
    """One (cell, seed): the episode's metrics plus the cell's typed fields."""
    cell, seed = task
    row = run_episode(cell.policy.build(), seed, **cell.env)
    row.update(cell.row_fields())
    return row


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` so that readers never see a partial file."""
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
    """How many tasks were already on disk and how many ran now."""

    done_before: int = 0
    ran: int = 0


def run_tasks(
    tasks: list[Task],
    out: Path,
    *,
    executor: Executor | None = None,
    progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Run every task whose result file is missing; call ``progress(n)`` as tasks are done.

    ``progress`` is called once with the number of tasks already on disk, then with 1
    after each new result is written.
    """
    executor = executor or Executor()
    todo = [(c, s) for c, s in tasks if not task_path(out, c, s).exists()]
    st = RunStats(done_before=len(tasks) - len(todo))
    if progress and st.done_before:
        progress(st.done_before)
    for i, row in executor.imap(run_task, todo, progress=progress):
        cell, seed = todo[i]
        write_atomic(task_path(out, cell, seed), row)
        st.ran += 1
    return st


def load_results(out: Path, cells: list[Cell], seeds: list[int]) -> list[dict[str, Any]]:
    """Every task's row, in (cell, seed) order; raises if one is missing."""
    rows = []
    for cell in cells:
        for seed in seeds:
            with open(task_path(out, cell, seed)) as fh:
                rows.append(json.load(fh))
    return rows
