"""``evalstop-gym reproduce``: every experiment of :data:`~evalstop_experiments.experiments.EXPERIMENTS`, end to end.

Runs every (cell, seed) through :func:`baselines.evaluate`'s code path on a
local process pool or Ray (:class:`evalstop_gym.parallel.Executor`), writes
each result as it finishes, then aggregates into ``OUT/E*.csv`` (one row per
cell and seed), ``OUT/E*_summary.csv`` (mean and 95 % CI per cell),
``OUT/REPORT.md`` and PNG plots.

Each :class:`~evalstop_experiments.plan.Experiment` that runs builds its part
of the plan in the list's order (training models or generating a corpus first
when it must); a ``background`` one builds it in a process of its own
(:meth:`Executor.beside <evalstop_gym.parallel.Executor.beside>`) while the
next ones and the episodes go on.  This module is orchestration only: it names
no experiment.

Progress: one line per experiment as it finishes, also when the output is piped,
and each experiment's wall and CPU time in ``OUT/timings.json`` and REPORT.md
(:mod:`evalstop_experiments.progress`).  An experiment's stage time counts for
it and for the experiments of the cells and rows it added.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.errors import EvalStopError
from evalstop_gym.fileio import (
    atomic_write,
    folder_lock,
    read_regular,
    remove_orphan_temporaries,
    sha256_bytes,
)
from evalstop_gym.parallel import Beside

from .cells import Cell, base_env
from .experiments import EXPERIMENTS, REPORT_ORDER, TITLES
from .plan import Experiment, Plan, ReproduceOptions
from .progress import ExperimentTiming, Reporter, RunClock, cpu_seconds, load_average
from .report import write_report
from .runner import (
    MANIFEST,
    STAGES,
    Manifest,
    RunStats,
    discard_written,
    load_results,
    package_files,
    run_tasks,
    stage_name,
    task_path,
)
from .summary import add_deltas, summarise, write_csvs


@dataclass
class ReproduceResult:
    """What :func:`reproduce` wrote and how long it took; ``redone``: invalid results recomputed."""

    out: Path
    rows: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    files: list[Path]
    seconds: float
    ran: int
    reused: int
    redone: list[Path] = field(default_factory=list)
    #: Wall and CPU time per experiment (also in ``OUT/timings.json`` and REPORT.md).
    timings: list[ExperimentTiming] = field(default_factory=list)


def reproduce(
    out: str | Path = "results", options: ReproduceOptions | None = None, **kwargs: Any
) -> ReproduceResult:
    """Run the experiments and write the report; see the module docstring.

    Args:
        out: Output folder.
        options: What to run; or give :class:`ReproduceOptions`' fields as keywords.
    """
    t0, cpu0, load0 = time.perf_counter(), cpu_seconds(), load_average()
    out = Path(out)
    if options is not None and kwargs:
        raise TypeError(f"give either options or keyword options, not both: {sorted(kwargs)}")
    opts = options or ReproduceOptions(**kwargs)
    _check_experiments(opts)
    # A bad env value fails here, in one line, before any experiment starts a pool.
    EvalStopConfig.from_kwargs(**base_env(opts.overrides))
    # One run per output folder at a time, for the whole run: a second one (or a --fresh)
    # would delete or interleave the first one's results.
    with folder_lock(out, "another evalstop-gym reproduce run"):
        return _reproduce_locked(out, opts, (t0, cpu0, load0))


#: The names of the files ``reproduce`` writes at the top of its output folder: the report,
#: the timings, the experiments' tables and plots.
TOP_LEVEL_NAME = re.compile(
    r"^(REPORT\.md|timings\.json|example_curves\.png|E\d+[^/]*\.(csv|md|png)|e\d+_[^/]*\.png)$"
)


def foreign_outputs(out: Path) -> list[str]:
    """Files at the top of ``out`` named as ``reproduce`` names its own, in a folder it never
    used (no ``raw/MANIFEST.txt``): a run would overwrite them, and they are not its own."""
    if not out.is_dir() or (out / "raw" / MANIFEST).exists():
        return []
    return sorted(p.name for p in out.iterdir() if p.is_file() and TOP_LEVEL_NAME.match(p.name))


def _prepare(out: Path, opts: ReproduceOptions, clock: RunClock) -> None:
    """Refuse a used folder, or clean it for ``--resume`` / ``--fresh``, before any work."""
    foreign = foreign_outputs(out)
    if foreign:
        shown = ", ".join(foreign[:3]) + (
            f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        )
        raise FileExistsError(
            f"{out} holds {shown}, which reproduce writes but did not write there (the folder "
            "has no raw/MANIFEST.txt): choose another --out or move them"
        )
    selected = {e.id for e in EXPERIMENTS if e.runs(opts)} | {
        c.experiment for c in opts.extra_cells
    }
    if opts.resume or opts.fresh:  # this process holds the lock: no other writer is mid-write
        gone = remove_orphan_temporaries(out)
        if gone:
            clock.reporter.line(f"removed {len(gone)} temporary file(s) a killed run left in {out}")
    if opts.fresh:  # only the results the manifest says the package wrote; checked first
        discard_written(out, selected)
    elif not opts.resume:
        used = package_files(out, selected)
        if used:
            raw = out / "raw"
            exps = sorted(
                {p.stem if p.parent.name == STAGES else p.relative_to(raw).parts[0] for p in used}
            )
            raise FileExistsError(
                f"{len(used)} results of {', '.join(exps)} are already in {out / 'raw'}: "
                "pass --resume to reuse them, or --fresh to recompute everything"
            )


def _reproduce_locked(
    out: Path, opts: ReproduceOptions, start: tuple[float, float, float | None]
) -> ReproduceResult:
    """:func:`reproduce` once the output folder's lock is held."""
    t0, cpu0, load0 = start
    clock = RunClock(Reporter(opts.progress))
    _prepare(out, opts, clock)
    seeds = list(range(opts.n_seeds))
    plan, stats = _stages_and_episodes(out, opts, seeds, clock)
    rows = load_results(out, plan.cells, seeds)
    add_deltas(rows)
    summary = summarise(rows)
    files = write_csvs(out, rows, summary)
    from .plots import make_plots

    plots = make_plots(out, summary, base_env(opts.overrides))
    plots += [make(out, summary) for make in plan.plots]
    report_rows = summary + plan.report_rows
    timings = list(clock.timings.values())
    run = {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": cpu_seconds() - cpu0,
        "load_average": [load0, load_average()],
        "cores": os.cpu_count(),
        "episodes_simulated": stats.simulated,
        "waited_for_background_s": clock.waited_s,
    }
    files.append(_write_timings(out, timings, run))
    files.append(
        write_report(
            out,
            report_rows,
            header=_header(opts, plan),
            plots=plots,
            timings=(timings, run),
            experiments=REPORT_ORDER,
        )
    )
    files += plots
    return ReproduceResult(
        out,
        rows,
        summary,
        files,
        time.perf_counter() - t0,
        stats.ran,
        stats.done_before,
        stats.redone,
        timings,
    )


def _stages_and_episodes(
    out: Path, opts: ReproduceOptions, seeds: list[int], clock: RunClock
) -> tuple[Plan, RunStats]:
    """Build every experiment's plan (the ``background`` ones beside the rest), then run the episodes.

    One process pool serves this process's fan-outs (:meth:`Executor.kept`): E6's
    training, the stages' and the episodes' workers are spawned, and import torch and
    the package, once (a ``background`` experiment's fan-outs, in the process beside,
    have their own).
    """
    with opts.executor.kept(), opts.executor.beside() as beside:
        background = _Background(beside, clock)
        parts: list[tuple[Experiment, Plan | Future[Any], bool]] = []
        for exp in EXPERIMENTS:
            if not exp.runs(opts):
                continue
            cached = _cached_stage(exp, out, opts, clock) if opts.resume else None
            if cached is not None:
                _book(exp, cached, 0.0, 0.0, clock)
                parts.append((exp, cached, True))
            elif exp.background:
                parts.append((exp, background.submit(exp, out, opts), False))
            else:
                parts.append((exp, _build(exp, out, opts, clock), False))
                background.poll()
        cells = [c for _, part, _ in parts if isinstance(part, Plan) for c in part.cells]
        cells += list(opts.extra_cells)
        stats = _run(out, opts, cells, seeds, clock, background.poll)
        plan = Plan()
        for exp, part, reused in parts:
            built = part if isinstance(part, Plan) else background.wait(part)
            if not reused:
                _record_stage(exp, out, opts, built)
            plan.merge(built)
    plan.cells += list(opts.extra_cells)
    return plan, stats


# A row-only experiment (no cells, no plots: E7's scores, E8, E9) is its stage and nothing
# else, so a finished one is recorded in OUT/raw/stages/<id>.json: the options it ran with,
# its plan (header, notes, rows) and the digest of every file it wrote (those whose names
# start with its id: E8.csv, E8.md, E8_stops_*.png, e9_models/...).  --resume takes the plan
# from the record when the options and every digest still match, instead of redoing it.


def _stage_key(exp: Experiment, out: Path, opts: ReproduceOptions) -> str:
    """What a row-only experiment's result depends on, as a canonical JSON string."""
    from evalstop_gym import __version__

    corpus = opts.corpus_in(out)
    corpus_digest = None
    if corpus is not None and Path(corpus).is_file():
        corpus_digest = sha256_bytes(read_regular(corpus, max_line=None, field="curves"))
    key = {
        "experiment": exp.id,
        "version": __version__,
        "quick": opts.quick,
        "seeds": opts.n_seeds,
        "n_jobs": opts.jobs_per_episode,
        "explicit_seeds": opts.seeds,
        "explicit_n_jobs": opts.n_jobs,
        "env": opts.env,
        "learned": opts.learned,
        "train_timesteps": opts.train_timesteps,
        "real_curves": opts.real_curves,
        "deprioritisation": opts.deprioritisation,
        "curves": opts.curves,
        "corpus": corpus_digest,
        "extra_stoppers": [repr(x) for x in opts.extra_stoppers],
    }
    return json.dumps(key, sort_keys=True, default=repr)


def _stage_files(exp: Experiment, out: Path) -> dict[str, str]:
    """Every file under ``out`` (outside ``raw``) whose top-level name starts with the id."""
    prefix = stage_name(exp.id).lower()
    files: dict[str, str] = {}
    if not out.is_dir():
        return files
    for top in sorted(out.iterdir()):
        name = top.name.lower()
        rest = name[len(prefix) : len(prefix) + 1]
        if top.name == "raw" or not name.startswith(prefix) or rest.isdigit() or top.is_symlink():
            continue
        found = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for p in found:
            if p.is_symlink() or p.name.endswith(".tmp"):
                continue
            files[p.relative_to(out).as_posix()] = sha256_bytes(
                read_regular(p, max_bytes=2**31, max_line=None, field="output")
            )
    return files


def _same(a: Any, b: Any) -> bool:
    """Whether ``b`` (read back from JSON) stands for ``a``: same structure, same numbers.

    NumPy floats come back as Python floats of the same value (they print alike); a tuple
    would come back as a list, so a plan holding one is not recorded.
    """
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and list(a) == list(b)
            and all(isinstance(k, str) and _same(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, bool) or a is None or isinstance(a, str):
        return type(a) is type(b) and a == b
    if isinstance(a, int):
        return type(b) is int and a == b
    if isinstance(a, float):
        return isinstance(b, float) and (a == b or (a != a and b != b))
    return False


def _plan_payload(plan: Plan) -> dict[str, Any] | None:
    """The plan as JSON-ready data, or None if JSON would not give it back as it is."""
    data = {
        "header": plan.header,
        "notes": plan.notes,
        "report_rows": plan.report_rows,
        "reused": sorted(plan.reused),
    }
    try:
        back = json.loads(json.dumps(data, allow_nan=True))
    except (TypeError, ValueError, RecursionError):
        return None
    return back if _same(data, back) else None


def _stage_path(exp: Experiment, out: Path) -> Path:
    return out / "raw" / STAGES / f"{stage_name(exp.id)}.json"


def _record_stage(exp: Experiment, out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """Record a finished row-only experiment for ``--resume`` (others are not recorded)."""
    if plan.cells or plan.plots or plan.empty:
        return
    payload = _plan_payload(plan)
    if payload is None:
        return
    record = {
        "key": _stage_key(exp, out, opts),
        "files": _stage_files(exp, out),
        "plan": payload,
    }
    data = json.dumps(record, sort_keys=True, allow_nan=True).encode("utf-8")
    Manifest(out / "raw").write(_stage_path(exp, out), data)


def _cached_stage(
    exp: Experiment, out: Path, opts: ReproduceOptions, clock: RunClock
) -> Plan | None:
    """The recorded plan of a finished row-only experiment, if every check holds."""
    path = _stage_path(exp, out)
    if not path.is_file():
        return None
    try:
        data = read_regular(path, max_line=None, field="stage record")
        listed = Manifest(out / "raw").digest(path)
        if listed is None or sha256_bytes(data) != listed:
            clock.reporter.line(
                f"[{exp.id}] {path}: differs from the digest recorded when it was written; "
                f"running {exp.id} again"
            )
            return None
        record = json.loads(data.decode("utf-8"))
        if record["key"] != _stage_key(exp, out, opts):
            return None  # other options: its files are not this run's
        changed = [
            rel for rel, digest in record["files"].items() if _digest_of(out / rel) != digest
        ]
        if changed:
            clock.reporter.line(
                f"[{exp.id}] {out / changed[0]} changed or is missing since {exp.id} wrote it; "
                f"running {exp.id} again"
            )
            return None
        saved = record["plan"]
        return Plan(
            header=dict(saved["header"]),
            notes=list(saved["notes"]),
            report_rows=list(saved["report_rows"]),
            reused={*saved["reused"], exp.id},
        )
    except (OSError, EvalStopError, ValueError, KeyError, TypeError, AttributeError):
        return None  # an unreadable record: the experiment runs again


def _digest_of(path: Path) -> str | None:
    try:
        return sha256_bytes(read_regular(path, max_bytes=2**31, max_line=None, field="output"))
    except (OSError, EvalStopError):
        return None


def _build(exp: Experiment, out: Path, opts: ReproduceOptions, clock: RunClock) -> Plan:
    """Build one experiment's plan, booking its time to the experiments it served."""
    plan = Plan()
    if exp.announces(opts):
        clock.reporter.line(f"[{exp.id}] {exp.work}, starting: {exp.starting}")
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    exp.build(out, opts, plan)
    _book(exp, plan, time.perf_counter() - t0, cpu_seconds() - cpu0, clock)
    return plan


def _served(exp: Experiment, plan: Plan) -> set[str]:
    """The experiments a built plan serves: its own, and those of the cells and rows it added."""
    if plan.empty:
        return set()
    return (
        {exp.id}
        | {c.experiment for c in plan.cells}
        | {str(r["experiment"]) for r in plan.report_rows if "experiment" in r}
    )


def _book(
    exp: Experiment,
    plan: Plan,
    wall: float,
    cpu: float,
    clock: RunClock,
    background: bool = False,
) -> None:
    """Book a finished build's wall and CPU time to the experiments its plan serves."""
    served = _served(exp, plan)
    clock.with_cells |= {c.experiment for c in plan.cells}
    if served:
        clock.stage_done(
            sorted(served),
            exp.work or exp.id,
            wall,
            cpu,
            with_cells=clock.with_cells,
            reused=plan.reused,
            background=background,
            quiet=background,  # announced when it ended (_Background._announce)
        )


class _Background:
    """The ``background`` experiments of a run on :meth:`Executor.beside`, and their bookkeeping."""

    def __init__(self, beside: Beside, clock: RunClock) -> None:
        """Book through ``clock``; ``beside`` runs them (at once, here, when it has no process)."""
        self.beside = beside
        self.clock = clock
        self.pending: dict[Future[Any], Experiment] = {}

    def submit(self, exp: Experiment, out: Path, opts: ReproduceOptions) -> Future[Any]:
        """Start building ``exp``'s plan beside the rest (or build it now, with no process)."""
        fut = self.beside.submit(_build_apart, (exp, out, opts))
        if not self.beside.separate:  # it ran here, in line: booked like any other
            self.wait(fut, exp, background=False)
            return fut
        self.pending[fut] = exp
        fut.add_done_callback(functools.partial(self._announce, exp))
        return fut

    def _announce(self, exp: Experiment, fut: Future[Any]) -> None:
        """Say at once that a background experiment is done (booked later, in the main thread)."""
        if fut.cancelled() or fut.exception() is not None:
            return  # the main thread raises it
        plan, wall, cpu = fut.result()
        served = sorted(_served(exp, plan))
        for exp_id in served:
            share = wall / len(served)
            t = ExperimentTiming(exp_id, share, cpu / len(served), background=True)
            t.parts[exp.work or exp.id] = share
            self.clock.reporter.line(f"[{exp_id}] done: {t.summary()}")

    def poll(self) -> None:
        """Book the background experiments that have finished (their progress lines)."""
        for fut in [f for f in self.pending if f.done()]:
            self.wait(fut)

    def wait(
        self, fut: Future[Any], exp: Experiment | None = None, background: bool = True
    ) -> Plan:
        """A background experiment's plan, once it is done (booked on first sight)."""
        t0 = time.perf_counter()
        plan, wall, cpu = fut.result()
        self.clock.waited_s += time.perf_counter() - t0
        exp = self.pending.pop(fut, exp)
        if exp is not None:
            _book(exp, plan, wall, cpu, self.clock, background=background)
        return plan


def _build_apart(args: tuple[Experiment, Path, ReproduceOptions]) -> tuple[Plan, float, float]:
    """Build a background experiment's plan (in its own process): the plan, wall and CPU seconds."""
    exp, out, opts = args
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    plan = Plan()
    exp.build(out, opts, plan)
    if plan.cells or plan.plots:
        raise RuntimeError(f"{exp.id} added cells or plots: it cannot run in the background")
    return plan, time.perf_counter() - t0, cpu_seconds() - cpu0


def _check_experiments(opts: ReproduceOptions) -> None:
    unknown = sorted(set(opts.experiments or ()) - set(TITLES))
    if unknown:
        raise ValueError(f"experiments={unknown} unknown: choose among {sorted(TITLES)}")


def _run(
    out: Path,
    opts: ReproduceOptions,
    cells: list[Cell],
    seeds: list[int],
    clock: RunClock,
    poll: Callable[[], None],
) -> RunStats:
    """Run the missing (cell, seed) tasks, refusing to mix with old results unless asked."""
    tasks = [(c, s) for c in cells for s in seeds]
    # --fresh deleted what the package wrote before any work (_prepare); what is left is not
    # the package's, and a plain run was refused there if this run's experiments had results.
    existing = sum(task_path(out, c, s).exists() for c, s in tasks)
    if existing and not opts.resume:
        hint = (
            "they are not in its manifest, so --fresh leaves them: move them away"
            if opts.fresh
            else "pass --resume to reuse them, or --fresh to recompute everything"
        )
        raise FileExistsError(
            f"{existing} of {len(tasks)} results are already in {out / 'raw'}: {hint}"
        )
    out.mkdir(parents=True, exist_ok=True)
    per_exp = Counter(c.experiment for c in cells)
    clock.reporter.line(
        f"episodes: {len(cells)} cells × {len(seeds)} seeds of {', '.join(per_exp)} "
        f"on {opts.executor.width(len(tasks))} worker(s)"
    )
    with clock.episodes(dict(per_exp), len(seeds)):
        return run_tasks(
            tasks,
            out,
            executor=opts.executor,
            note=clock.reporter.line,
            on_result=lambda task, cpu, reused: (
                poll(),
                clock.result(task[0].experiment, cpu, reused),
            ),
        )


def _write_timings(out: Path, timings: list[ExperimentTiming], run: dict[str, Any]) -> Path:
    """``OUT/timings.json``: the run's wall, CPU and load average, and each experiment's."""
    path = out / "timings.json"
    data = {"run": run, "experiments": [t.to_dict() for t in timings]}
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True))
    return path


def _header(opts: ReproduceOptions, plan: Plan) -> dict[str, Any]:
    jobs = opts.jobs_per_episode
    header: dict[str, Any] = {
        "seeds per cell": opts.n_seeds,
        "jobs per episode": jobs if jobs is not None else "workload default (200)",
        "environment": ", ".join(f"{k}={v}" for k, v in base_env(opts.overrides).items()),
        "cells": len(plan.cells),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        **plan.header,
    }
    if opts.quick:
        header["quick run"] = QUICK_NOTICE
    if plan.notes:
        header["skipped"] = " ".join(plan.notes)
    return header


#: What REPORT.md says a ``--quick`` run left out or took ready-made.
QUICK_NOTICE = (
    "a smoke-sized run of the same code: fewer seeds and shorter episodes; E6's models get "
    "20,000 steps and keep the best of five evaluations of 4 episodes (the full run: 300,000 "
    "steps, ten of 8); E7 reads the 24 micro-RLHF runs shipped with the package (what --quick "
    "generated with torch before, byte for byte; the full run generates 252) instead of "
    "generating them; E7's scores and E8 use their quick sizes. Confidence intervals are "
    "wide: read the full run's tables for the paper's comparisons."
)


__all__ = ["ReproduceOptions", "ReproduceResult", "reproduce"]
