"""Run (cell, seed) tasks through :class:`evalstop_gym.parallel.Executor`, resumably.

Every finished task is written at once, atomically (temporary file, then
``os.replace``), to ``OUT/raw/<experiment>/<cell key>/seed<seed>.json``.  A
rerun with ``resume=True`` skips what is on disk, so an interrupted run (Ctrl-C,
a killed worker) loses nothing that finished.  Each task is a pure function of
(cell, seed), so every backend produces bit-identical files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baselines.evaluate import run_episode
from evalstop_gym.fileio import atomic_write
from evalstop_gym.parallel import Executor
from evalstop_gym.sim.metrics import METRIC_KEYS

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
    """Write ``data`` as JSON to ``path`` atomically and durably (fsync, then rename)."""
    # repr-exact floats: reruns and both backends give identical files.
    atomic_write(path, json.dumps(data, sort_keys=True, allow_nan=True))


#: The list of result files this package wrote under ``OUT/raw`` (one relative path a line):
#: ``--fresh`` deletes these and nothing else.
MANIFEST = "MANIFEST.txt"


def _store(out: Path, cell: Cell, seed: int, row: dict[str, Any]) -> None:
    """Write one result atomically, then list it in the manifest (one writer: this process)."""
    path = task_path(out, cell, seed)
    write_atomic(path, row)
    with open(out / "raw" / MANIFEST, "a", encoding="utf-8") as fh:
        fh.write(path.relative_to(out / "raw").as_posix() + "\n")


def discard_written(out: Path) -> int:
    """Delete the result files the manifest lists (``--fresh``); return how many.

    Files under ``OUT/raw`` that the package did not write are left where they are; folders
    are removed only once empty.
    """
    raw = out / "raw"
    manifest = raw / MANIFEST
    if not manifest.exists():
        return 0
    n = 0
    for rel in dict.fromkeys(manifest.read_text(encoding="utf-8").split("\n")):
        p = raw / rel
        if rel and p.is_file() and p.resolve().is_relative_to(raw.resolve()):
            p.unlink()
            n += 1
            for folder in p.parents:
                if folder == raw or any(folder.iterdir()):
                    break
                folder.rmdir()
    manifest.unlink()
    return n


def result_is_valid(path: Path, cell: Cell, seed: int) -> bool:
    """Whether ``path`` holds a reusable result of (cell, seed): its keys and every metric."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    if (data.get("cell"), data.get("experiment"), data.get("seed")) != (
        cell.key,
        cell.experiment,
        seed,
    ):
        return False
    return all(
        isinstance(data.get(k), int | float) and not isinstance(data.get(k), bool)
        for k in METRIC_KEYS
    )


@dataclass
class RunStats:
    """How many tasks were already on disk and how many ran now; invalid files recomputed."""

    done_before: int = 0
    ran: int = 0
    redone: list[Path] = field(default_factory=list)


def run_tasks(
    tasks: list[Task],
    out: Path,
    *,
    executor: Executor | None = None,
    progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Run every task whose result file is missing or invalid; call ``progress(n)`` as they end.

    An existing file that is not a valid result of its (cell, seed) is recomputed and listed
    in the returned ``redone``.

    ``progress`` is called once with the number of tasks already on disk, then with 1
    after each new result is written.
    """
    executor = executor or Executor()
    todo, redone = [], []
    for c, s in tasks:
        p = task_path(out, c, s)
        if not p.exists():
            todo.append((c, s))
        elif not result_is_valid(p, c, s):  # empty, truncated, another cell's, a metric missing
            todo.append((c, s))
            redone.append(p)
    st = RunStats(done_before=len(tasks) - len(todo), redone=redone)
    if progress and st.done_before:
        progress(st.done_before)
    for i, row in executor.imap(run_task, todo, progress=progress):
        cell, seed = todo[i]
        _store(out, cell, seed, row)
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
