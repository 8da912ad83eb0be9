"""Run (cell, seed) tasks through :class:`evalstop_gym.parallel.Executor`, resumably.

Every finished task is written at once, atomically (temporary file, then
``os.replace``), to ``OUT/raw/<experiment>/<cell key>/seed<seed>.json``.  A
rerun with ``resume=True`` skips what is on disk, so an interrupted run (Ctrl-C,
a killed worker) loses nothing that finished.  Each task is a pure function of
(cell, seed), so every backend produces bit-identical files.

Cells of different experiments often hold the same episode (E1's EvalStop is
E5's ``k = 2`` and E11's homogeneous cluster; E3's noise levels are E6's and
E7's synthetic ones): :func:`run_tasks` simulates each distinct (policy, env,
seed) once and writes its metrics into every cell that holds it, which gives the
same files as simulating it per cell (the episode depends on nothing else).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baselines.evaluate import run_episode
from evalstop_gym.fileio import atomic_write
from evalstop_gym.parallel import Executor
from evalstop_gym.sim.metrics import METRIC_KEYS

from .cells import Cell

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


def episode_key(task: Task) -> str:
    """What a task's episode depends on: the policy (kind and parameters), the env and the seed.

    Labels, sweep names and the experiment only name the row, so two cells with the same
    key hold the same episode.
    """
    cell, seed = task
    return json.dumps([cell.policy.kind, cell.policy.params, cell.env, seed], sort_keys=True)


def timed_task(task: Task) -> tuple[dict[str, Any], float]:
    """:func:`run_task` and the CPU seconds it took in the process that ran it."""
    t0 = time.process_time()
    row = run_task(task)
    return row, time.process_time() - t0


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
    """How many tasks were already on disk and how many ran now; invalid files recomputed.

    ``ran`` counts the tasks whose result was written now, ``simulated`` the distinct
    episodes behind them (fewer when cells share an episode).
    """

    done_before: int = 0
    ran: int = 0
    redone: list[Path] = field(default_factory=list)
    simulated: int = 0


#: ``on_result(task, cpu_seconds, reused)``: called for every task of :func:`run_tasks`.
ResultHook = Callable[[Task, float, bool], None]


def run_tasks(
    tasks: list[Task],
    out: Path,
    *,
    executor: Executor | None = None,
    progress: Callable[[int], None] | None = None,
    on_result: ResultHook | None = None,
) -> RunStats:
    """Run every task whose result file is missing or invalid; call ``progress(n)`` as they end.

    An existing file that is not a valid result of its (cell, seed) is recomputed and listed
    in the returned ``redone``.  Tasks holding the same episode (:func:`episode_key`) are
    simulated once.

    ``progress`` is called once with the number of tasks already on disk, then with 1
    after each new result is written.  ``on_result(task, cpu, reused)`` is called for each
    task on disk (``cpu`` 0, ``reused`` True), then for each written one with its share of
    the CPU seconds its episode took in the worker.
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
        elif on_result is not None:
            on_result((c, s), 0.0, True)
    st = RunStats(done_before=len(tasks) - len(todo), redone=redone)
    if progress and st.done_before:
        progress(st.done_before)
    holders: dict[str, list[Task]] = {}
    for task in todo:
        holders.setdefault(episode_key(task), []).append(task)
    groups = list(holders.values())
    for i, (row, cpu) in executor.imap(timed_task, [g[0] for g in groups]):
        st.simulated += 1
        for cell, seed in groups[i]:
            # The episode's metrics with each holder's own fields: what run_task gives it.
            _store(out, cell, seed, {**row, **cell.row_fields()})
            st.ran += 1
            if on_result is not None:
                on_result((cell, seed), cpu / len(groups[i]), False)
            if progress is not None:
                progress(1)
    return st


def load_results(out: Path, cells: list[Cell], seeds: list[int]) -> list[dict[str, Any]]:
    """Every task's row, in (cell, seed) order; raises if one is missing."""
    rows = []
    for cell in cells:
        for seed in seeds:
            with open(task_path(out, cell, seed)) as fh:
                rows.append(json.load(fh))
    return rows
