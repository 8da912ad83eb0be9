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

A worker gets one seed of a scripted cell at a time, but every seed of a learned cell at
once (:attr:`~evalstop_experiments.cells.PolicySpec.plays_seeds_together`): the model is
loaded once for them, and a model that decides in a batch plays them side by side
(:func:`baselines.evaluate.run_episodes`), with the rows each seed played alone gives.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baselines.binding import for_task
from baselines.evaluate import run_episodes
from evalstop_gym.errors import EvalStopError
from evalstop_gym.fileio import atomic_write, read_regular, sha256_bytes
from evalstop_gym.parallel import Executor
from evalstop_gym.sim.metrics import METRIC_KEYS

from .cells import Cell

Task = tuple[Cell, int]
#: Seeds of one cell that one worker plays in one go.
Unit = tuple[Cell, tuple[int, ...]]


def task_path(out: Path, cell: Cell, seed: int) -> Path:
    """Where the result of (cell, seed) is stored under ``out``."""
    return out / "raw" / cell.experiment / cell.key / f"seed{seed}.json"


def run_task(task: Task) -> dict[str, Any]:
    """One (cell, seed): the episode's metrics plus the cell's typed fields."""
    cell, seed = task
    return run_unit((cell, (seed,)))[0]


def run_unit(unit: Unit) -> list[dict[str, Any]]:
    """:func:`run_task` of each seed of one cell, in order, the policy built once for them."""
    cell, seeds = unit
    policy = for_task(cell.policy.build(), cell.env)
    return [{**row, **cell.row_fields()} for row in run_episodes(policy, list(seeds), cell.env)]


def episode_key(task: Task) -> str:
    """What a task's episode depends on: the policy (kind and parameters), the env and the seed.

    Labels, sweep names and the experiment only name the row, so two cells with the same
    key hold the same episode.
    """
    cell, seed = task
    return json.dumps([cell.policy.kind, cell.policy.params, cell.env, seed], sort_keys=True)


def timed_unit(unit: Unit) -> tuple[list[dict[str, Any]], float]:
    """:func:`run_unit` and the CPU seconds it took in the process that ran it."""
    t0 = time.process_time()
    rows = run_unit(unit)
    return rows, time.process_time() - t0


def work_units(episodes: list[Task], width: int = 1) -> list[tuple[Unit, list[int]]]:
    """The units that play ``episodes`` (distinct ones), each with the indices it plays.

    The seeds of one learned cell go together
    (:attr:`~evalstop_experiments.cells.PolicySpec.plays_seeds_together`), in the order
    first met, at most ``ceil(learned episodes / width)`` to a unit: on ``width`` workers
    (a wide Ray cluster) the learned episodes still spread over all of them, and on a
    few a whole cell is one unit.  Every other episode is a unit of its own.
    """
    learned = sum(cell.policy.plays_seeds_together for cell, _ in episodes)
    most = max(1, -(-learned // max(1, width)))
    units: list[tuple[Cell, list[int], list[int]]] = []  # (cell, seeds, indices)
    together: dict[str, int] = {}  # the unit still taking a cell's seeds
    for i, (cell, seed) in enumerate(episodes):
        # What the episodes of one cell share: its episode key without the seed.
        key = json.dumps([cell.policy.kind, cell.policy.params, cell.env], sort_keys=True)
        if cell.policy.plays_seeds_together:
            if key in together and len(units[together[key]][1]) < most:
                _, seeds, held = units[together[key]]
                seeds.append(seed)
                held.append(i)
                continue
            together[key] = len(units)
        units.append((cell, [seed], [i]))
    return [((cell, tuple(seeds)), held) for cell, seeds, held in units]


#: The list of result files this package wrote under ``OUT/raw``, one ``<sha256>  <relative
#: path>`` line each (``sha256sum`` format): ``--fresh`` deletes these and nothing else, and
#: ``--resume`` reuses a listed file only if its content still has the listed digest.
MANIFEST = "MANIFEST.txt"
#: The names of the package's own files under ``OUT/raw``: ``<experiment>/<cell>/seed<N>.json``
#: results and ``stages/<experiment>.json`` records of whole experiments.
RESULT_NAME = re.compile(r"^seed\d+\.json$")
#: Folder of ``OUT/raw`` holding a record per finished row-only experiment (see reproduce).
STAGES = "stages"
#: The largest result file read back (a result is about 2 kB).
MAX_RESULT_BYTES = 16 * 2**20
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class Manifest:
    """``OUT/raw/MANIFEST.txt``: what the package wrote under ``OUT/raw``, with digests.

    A file is listed *before* it is written (the line holds the digest of the bytes about to
    be written), so a kill at any point leaves no written file unlisted: at worst a listed
    file is missing, which ``--resume`` recomputes and ``--fresh`` skips.  One writer: the
    process holding the output folder's lock.  Lines of older manifests hold a path alone.
    """

    def __init__(self, raw: Path) -> None:
        """Read the manifest of ``raw`` (none yet: empty)."""
        self.raw = raw
        self.path = raw / MANIFEST
        #: Relative path -> the digest of its last write (None: listed without one).
        self.digests: dict[str, str | None] = {}
        try:
            text = read_regular(self.path, max_line=None, field="manifest").decode(
                "utf-8", "replace"
            )
        except FileNotFoundError:
            return
        for line in text.split("\n"):
            digest, sep, rel = line.partition("  ")
            if sep and _DIGEST.match(digest):
                self.digests[rel] = digest
            elif line.strip():
                self.digests[line] = None

    def rel(self, path: Path) -> str:
        """``path`` relative to ``OUT/raw``, as the manifest lists it."""
        return path.relative_to(self.raw).as_posix()

    def digest(self, path: Path) -> str | None:
        """The digest listed for ``path`` (None: unlisted, or listed without one)."""
        return self.digests.get(self.rel(path))

    def listed(self, path: Path) -> bool:
        """Whether the package wrote ``path`` (it is in the manifest)."""
        return self.rel(path) in self.digests

    def write(self, path: Path, data: bytes) -> None:
        """List ``path`` with the digest of ``data``, then write ``data`` to it atomically."""
        rel, digest = self.rel(path), sha256_bytes(data)
        self.raw.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{digest}  {rel}\n")
        self.digests[rel] = digest
        atomic_write(path, data)


def _encode(data: dict[str, Any]) -> bytes:
    # repr-exact floats: reruns and both backends give identical files.
    return json.dumps(data, sort_keys=True, allow_nan=True).encode("utf-8")


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically and durably (fsync, then rename)."""
    atomic_write(path, _encode(data))


def _store(manifest: Manifest, out: Path, cell: Cell, seed: int, row: dict[str, Any]) -> None:
    """List one result in the manifest, with its digest, then write it atomically."""
    manifest.write(task_path(out, cell, seed), _encode(row))


def package_files(out: Path, experiments: set[str] | None = None) -> list[Path]:
    """The files under ``OUT/raw`` named as the package names its own (listed or not).

    ``experiments``: only those of these experiments (results under ``raw/<id>/`` and the
    record ``raw/stages/<id>.json``); None: every one.
    """
    raw = out / "raw"
    found: list[Path] = []
    if not raw.is_dir():
        return found
    for top in sorted(raw.iterdir()):
        if not top.is_dir() or top.is_symlink():
            continue
        if top.name == STAGES:
            found += [
                p
                for p in sorted(top.glob("*.json"))
                if experiments is None or p.stem in {stage_name(e) for e in experiments}
            ]
        elif experiments is None or top.name in experiments:
            found += [p for p in sorted(top.rglob("seed*.json")) if RESULT_NAME.match(p.name)]
    return found


def stage_name(experiment: str) -> str:
    """The file stem of ``experiment``'s record in ``OUT/raw/stages``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", experiment)


def check_fresh(out: Path, experiments: set[str] | None = None) -> list[Path]:
    """What ``--fresh`` would delete; raises, deleting nothing, if it must refuse.

    Refuses when a file named as the package's results (of ``experiments``) is not in the
    manifest: someone else put it there, so it is neither deleted nor silently mixed in.
    """
    manifest = Manifest(out / "raw")
    foreign = [p for p in package_files(out, experiments) if not manifest.listed(p)]
    if foreign:
        raise FileExistsError(
            f"{len(foreign)} results in {out / 'raw'} (e.g. {foreign[0]}) are not in its "
            f"manifest, so --fresh leaves them: move them away"
        )
    raw = (out / "raw").resolve()
    mine = []
    for rel in manifest.digests:
        p = out / "raw" / rel
        # Only regular files inside OUT/raw: a listed path now a link or a folder is left.
        if rel and p.is_file() and not p.is_symlink() and p.resolve().is_relative_to(raw):
            mine.append(p)
    return mine


def discard_written(out: Path, experiments: set[str] | None = None) -> int:
    """Delete the files the manifest lists (``--fresh``); return how many.

    Everything is checked first (:func:`check_fresh`): a refusal deletes nothing.  Files under
    ``OUT/raw`` that the package did not write are left where they are; folders are removed
    only once empty.
    """
    mine = check_fresh(out, experiments)
    raw = out / "raw"
    for p in mine:
        p.unlink(missing_ok=True)
        for folder in p.parents:
            if folder == raw or any(folder.iterdir()):
                break
            folder.rmdir()
    (raw / MANIFEST).unlink(missing_ok=True)
    return len(mine)


def _read_result(path: Path) -> bytes | None:
    try:
        return read_regular(path, max_bytes=MAX_RESULT_BYTES, field="result")
    except (OSError, EvalStopError):
        return None


def _valid_content(data: bytes | None, cell: Cell, seed: int) -> bool:
    if data is None:
        return False
    try:
        row = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    if not isinstance(row, dict):
        return False
    if (row.get("cell"), row.get("experiment"), row.get("seed")) != (
        cell.key,
        cell.experiment,
        seed,
    ):
        return False
    return all(
        isinstance(row.get(k), int | float) and not isinstance(row.get(k), bool)
        for k in METRIC_KEYS
    )


def result_is_valid(path: Path, cell: Cell, seed: int) -> bool:
    """Whether ``path`` holds a reusable result of (cell, seed): its keys and every metric."""
    return _valid_content(_read_result(path), cell, seed)


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
    note: Callable[[str], None] | None = None,
) -> RunStats:
    """Run every task whose result file is missing or invalid; call ``progress(n)`` as they end.

    An existing file that is not a valid result of its (cell, seed), or whose content differs
    from the digest the manifest recorded when it was written, is recomputed and listed in
    the returned ``redone`` (the digest case also with a ``note(line)``).  Tasks holding the same episode (:func:`episode_key`) are
    simulated once.

    ``progress`` is called once with the number of tasks already on disk, then with 1
    after each new result is written.  ``on_result(task, cpu, reused)`` is called for each
    task on disk (``cpu`` 0, ``reused`` True), then for each written one with its share of
    the CPU seconds its episode took in the worker.
    """
    executor = executor or Executor()
    manifest = Manifest(out / "raw")
    todo, redone = [], []
    for c, s in tasks:
        p = task_path(out, c, s)
        if not p.exists():
            todo.append((c, s))
            continue
        data = _read_result(p)
        listed = manifest.digest(p)
        if listed is not None and data is not None and sha256_bytes(data) != listed:
            # Valid JSON with a flipped digit or zeroed metrics is still not what was written.
            todo.append((c, s))
            redone.append(p)
            if note is not None:
                note(
                    f"{p}: its content differs from the digest recorded when it was written; "
                    "recomputed"
                )
        elif not _valid_content(data, c, s):  # empty, truncated, another cell's, a metric missing
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
    units = work_units([g[0] for g in groups], executor.full_width)
    for u, (rows, cpu) in executor.imap(timed_unit, [unit for unit, _ in units]):
        for row, i in zip(rows, units[u][1]):
            st.simulated += 1
            for cell, seed in groups[i]:
                # The episode's metrics with each holder's own fields: what run_task gives it.
                _store(manifest, out, cell, seed, {**row, **cell.row_fields()})
                st.ran += 1
                if on_result is not None:
                    on_result((cell, seed), cpu / len(rows) / len(groups[i]), False)
                if progress is not None:
                    progress(1)
    return st


def load_results(out: Path, cells: list[Cell], seeds: list[int]) -> list[dict[str, Any]]:
    """Every task's row, in (cell, seed) order; raises if one is missing."""
    rows = []
    for cell in cells:
        for seed in seeds:
            path = task_path(out, cell, seed)
            rows.append(json.loads(read_regular(path, max_bytes=MAX_RESULT_BYTES, field="result")))
    return rows
