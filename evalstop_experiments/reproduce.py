"""``evalstop-gym reproduce``: the paper's experiments E1-E7 and E10, end to end.

Runs every (cell, seed) through :func:`baselines.evaluate`'s code path on a
local process pool or Ray (:class:`evalstop_gym.parallel.Executor`), writes
each result as it finishes, then aggregates into ``OUT/E*.csv`` (one row per
cell and seed), ``OUT/E*_summary.csv`` (mean and 95 % CI per cell),
``OUT/REPORT.md`` and PNG plots.

The experiments come from :data:`STAGES`: each stage turns the options into
cells (training models or generating a corpus first when it must) and may add
header lines and plots.  A new experiment appends a stage (and, for its own
REPORT.md section, an entry of :data:`evalstop_experiments.report.SECTIONS`).

Progress: one line per experiment as it finishes, also when the output is piped,
and each experiment's wall and CPU time in ``OUT/timings.json`` and REPORT.md
(:mod:`evalstop_experiments.progress`).  A stage's time counts for the
experiments it served: those of the cells, report rows and header entries it
added.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import platform
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalstop_gym.fileio import atomic_write
from evalstop_gym.parallel import Executor

from .experiments import EXPERIMENTS, Cell, base_env, build_cells
from .progress import ExperimentTiming, Reporter, RunClock, cpu_seconds, load_average
from .report import add_deltas, summarise, write_csvs, write_report
from .runner import RunStats, discard_written, load_results, run_tasks, task_path

#: ``--quick``: under two minutes on two quiet cores (``benchmarks/bench_reproduce.py``).
QUICK = {"seeds": 10, "n_jobs": 150}
#: 50 seeds: 95 % intervals on E1's precision / recall / FPR of about ±1 point.
DEFAULT = {"seeds": 50, "n_jobs": None}


@dataclass(frozen=True)
class ReproduceOptions:
    """What :func:`reproduce` runs and how.

    Args:
        quick: Fewer seeds, shorter episodes, smaller E6/E7 budgets.
        seeds: Seeds per cell (default 50; quick 10); at least 2.
        n_jobs: Jobs per episode (default: the workload's; quick 150).
        experiments: Subset of experiment ids (default: all).
        backend: ``local`` or ``ray``; see :class:`~evalstop_gym.parallel.Executor`.
        workers: Parallel workers (default: every core).
        address: An existing Ray cluster.
        resume: Reuse finished (cell, seed) results in ``OUT/raw``.
        fresh: Delete first the results in ``OUT/raw`` the package wrote (its manifest).
        extra_cells: More cells to run beside the experiments'.
        progress: Print a line per experiment as it finishes (plus rich bars on a terminal).
        env: Environment keyword arguments on top of E1's setting.
        learned: Run E6 (None: if selected by ``experiments``).
        train_timesteps: E6's training budget per model.
        real_curves: Run E7 (None: if selected by ``experiments``).
        curves: E7's corpus (JSONL); generated into ``OUT/curves`` if None.
        deprioritisation: Run E10 (None: if selected by ``experiments``).
    """

    quick: bool = False
    seeds: int | None = None
    n_jobs: int | None = None
    experiments: tuple[str, ...] | None = None
    backend: str = "local"
    workers: int | None = None
    address: str | None = None
    resume: bool = False
    fresh: bool = False
    extra_cells: tuple[Cell, ...] = ()
    progress: bool = True
    env: dict[str, Any] = field(default_factory=dict)
    learned: bool | None = None
    train_timesteps: int | None = None
    real_curves: bool | None = None
    curves: str | None = None
    deprioritisation: bool | None = None

    def __post_init__(self) -> None:
        """Normalise sequences to tuples and refuse fewer than two seeds."""
        if self.experiments is not None:
            object.__setattr__(self, "experiments", tuple(self.experiments))
        object.__setattr__(self, "extra_cells", tuple(self.extra_cells or ()))
        object.__setattr__(self, "env", dict(self.env or {}))
        if self.n_seeds < 2:
            raise ValueError(
                f"seeds={self.n_seeds} is not allowed: at least 2 (for confidence intervals)"
            )
        Executor(self.backend, self.workers, self.address)  # validates them

    @property
    def n_seeds(self) -> int:
        """Seeds per cell."""
        return self.seeds if self.seeds is not None else (QUICK if self.quick else DEFAULT)["seeds"]

    @property
    def jobs_per_episode(self) -> int | None:
        """Jobs per episode (None: the workload's default)."""
        return (
            self.n_jobs if self.n_jobs is not None else (QUICK if self.quick else DEFAULT)["n_jobs"]
        )

    @property
    def overrides(self) -> dict[str, Any]:
        """Environment keyword arguments every experiment puts on top of E1's setting."""
        jobs = self.jobs_per_episode
        return {**self.env, **({"n_jobs": jobs} if jobs is not None else {})}

    @property
    def executor(self) -> Executor:
        """Where every fan-out of the run goes."""
        return Executor(self.backend, self.workers, self.address)

    def wants(self, exp: str, flag: bool | None = None) -> bool:
        """Whether experiment ``exp`` runs (``flag`` overrides the ``experiments`` subset)."""
        if flag is not None:
            return flag
        return self.experiments is None or exp in self.experiments


@dataclass
class Plan:
    """The cells of a run plus what the report says about how they were made."""

    cells: list[Cell] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Called after the run with (out, summary); returns more plots.
    plots: list[Callable[[Path, list[dict[str, Any]]], Path]] = field(default_factory=list)
    #: Rows beside the cells' summary that only REPORT.md shows (their own ``experiment``).
    report_rows: list[dict[str, Any]] = field(default_factory=list)
    #: Experiments whose stage work (models, corpus) was found in ``OUT`` instead of redone.
    reused: set[str] = field(default_factory=set)

    def experiments(self) -> set[str]:
        """The experiments the plan holds so far: of its cells, report rows and header keys."""
        return (
            {c.experiment for c in self.cells}
            | {str(r["experiment"]) for r in self.report_rows if "experiment" in r}
            | (set(self.header) & set(EXPERIMENTS))
        )


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


Stage = Callable[[Path, ReproduceOptions, Plan], None]


def scripted_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E1-E5: the scripted policies on the synthetic workload."""
    special = {"E6", "E7", "E8", "E9", "E10", "E11"}
    chosen = None if opts.experiments is None else [e for e in opts.experiments if e not in special]
    if chosen != []:
        plan.cells += build_cells(opts.overrides, chosen)


def learned_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E6: train (or reuse) the learned stoppers, then run them beside the scripted ones."""
    from . import e6

    if not opts.wants("E6", opts.learned):
        return
    if not e6.available():
        plan.notes.append(
            "E6 skipped: stable-baselines3 and torch are not installed (pip install -e '.[train]')."
        )
        return
    out.mkdir(parents=True, exist_ok=True)
    models = e6.train_models(
        out, quick=opts.quick, executor=opts.executor, timesteps=opts.train_timesteps
    )
    if not any(m["trained_now"] for m in models.values()):
        plan.reused.add("E6")
    plan.cells += e6.e6_cells(opts.overrides, models)
    plan.header["E6 training"] = "; ".join(
        f"{Path(p).stem}: {m['algo'].upper()}, {m['timesteps']} steps in "
        f"{m['train_seconds']:.0f} s, kept the best evaluation (at {m['selected_at']})"
        for p, m in models.items()
    )
    plan.plots.append(lambda out, summary: _learning_curve_plot(out, models))


#: ``--quick``'s E7 corpus, shipped (``evalstop_gym/corpus/data``): the 24 micro-RLHF runs
#: ``--quick`` used to generate with torch (seed 0), byte for byte.
QUICK_CORPUS = "micro_rlhf_quick"


def real_curves_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E7: generate (or read) a micro-RLHF corpus and rerun E1 and the noise sweep on it."""
    from . import e7

    if not opts.wants("E7", opts.real_curves):
        return
    target = e7.corpus_file(out, quick=opts.quick)
    if opts.curves is None and target.exists():
        plan.reused.add("E7")
    elif opts.curves is None and opts.quick:
        _copy_quick_corpus(target)
    elif opts.curves is None and not e7.available():
        plan.notes.append(
            "E7 skipped: generating real curves needs torch (pip install -e '.[train]')."
        )
        return
    out.mkdir(parents=True, exist_ok=True)
    corpus = (
        Path(opts.curves)
        if opts.curves
        else e7.ensure_corpus(out, quick=opts.quick, executor=opts.executor)
    )
    plan.cells += e7.e7_cells(opts.overrides, corpus)
    info = e7.corpus_summary(corpus)
    plan.header["E7 corpus"] = (
        f"{info['runs']} micro-RLHF runs, {info['hacking']} hacking; hacking peaks at "
        f"progress quartiles {', '.join(f'{v:.2f}' for v in info['peak_quartiles'])}; "
        f"Gao-law fit R² quartiles {', '.join(f'{v:.2f}' for v in info['gao_r2_quartiles'])}"
        + (" (shipped with the package: --quick does not generate it)" if opts.quick else "")
    )


def _copy_quick_corpus(target: Path) -> None:
    """Put the shipped quick corpus at ``target`` after checking its SHA-256 against its sidecar."""
    from evalstop_gym.corpus.packaged import corpus_path, load_corpus

    load_corpus(QUICK_CORPUS)  # raises if its bytes differ from the sidecar's SHA-256
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, corpus_path(QUICK_CORPUS).read_bytes())


def real_scores_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E7's scores: every stopper on both real corpora, NoStop = 0 and the Oracle = 1."""
    from . import e7

    if not opts.wants("E7", opts.real_curves):
        return
    micro = Path(opts.curves) if opts.curves else e7.corpus_file(out, quick=opts.quick)
    corpora = e7.score_corpora(micro if micro.exists() else None, quick=opts.quick)
    rows = e7.e7_scores(
        corpora,
        quick=opts.quick,
        seeds=opts.seeds,
        n_jobs=opts.jobs_per_episode,
        executor=opts.executor,
    )
    files = e7.write_e7_scores(out, rows)
    plan.report_rows += rows
    plan.header["E7 scores"] = (
        f"stoppers on {', '.join(corpora)} against the Oracle: {files[-1].name}"
    )


def suite_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E8: the benchmark suite, written at once to ``OUT/E8.csv`` and ``OUT/E8.md``."""
    from . import e8

    if not opts.wants("E8"):
        return
    corpus = opts.curves or next(iter(sorted((out / "curves").glob("traces_*.jsonl"))), None)
    files = e8.reproduce_e8(
        out, quick=opts.quick, seeds=opts.seeds, n_jobs=opts.n_jobs, curves=corpus
    )
    plan.header["E8"] = f"the benchmark suite's normalised scores: {files[1].name}" + (
        f"; where each stopper stops: {', '.join(p.name for p in files[2:])}" if files[2:] else ""
    )


def pools_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E11: E1's setting on heterogeneous GPU pools, both placements, beside the homogeneous."""
    from . import e11

    if opts.wants("E11"):
        plan.cells += e11.e11_cells(opts.overrides)


def deprioritisation_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E10: EvalStop vs Deprioritize across schedulers and loads, and the cluster's costs."""
    from . import e10

    if opts.wants("E10", opts.deprioritisation):
        plan.cells += e10.e10_cells(opts.overrides, quick=opts.quick)


def generalisation_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E9: learned stoppers trained on one regime or a mixture, tested on the others."""
    from . import e9

    e9.stage(out, opts, plan)


#: The stages of a run, in order.  A new experiment appends its own.  E6's training comes
#: after the :data:`BACKGROUND` stages (which need E7's corpus), so that they run beside it.
STAGES: list[Stage] = [
    scripted_stage,
    real_curves_stage,
    real_scores_stage,
    suite_stage,
    learned_stage,
    pools_stage,
    deprioritisation_stage,
    generalisation_stage,
]


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
    clock = RunClock(Reporter(opts.progress))
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
            out, report_rows, header=_header(opts, plan), plots=plots, timings=(timings, run)
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
    """Run the stages (the :data:`BACKGROUND` ones beside the rest), then every episode."""
    with _Background(opts, clock) as background:
        parts: list[Plan | Future[Any]] = []
        for stage in STAGES:
            if background.takes(stage):
                parts.append(background.submit(stage, out, opts))
            else:
                parts.append(_run_stage(stage, out, opts, clock))
                background.poll()
        cells = [c for part in parts if isinstance(part, Plan) for c in part.cells]
        cells += list(opts.extra_cells)
        stats = _run(out, opts, cells, seeds, clock, background.poll)
        plan = _merge([part if isinstance(part, Plan) else background.wait(part) for part in parts])
    plan.cells += list(opts.extra_cells)
    return plan, stats


def _run_stage(stage: Stage, out: Path, opts: ReproduceOptions, clock: RunClock) -> Plan:
    """Run one stage on a plan of its own, booking its time to the experiments it added."""
    plan = Plan()
    _start_line(stage, opts, clock)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    stage(out, opts, plan)
    _book(stage, plan, time.perf_counter() - t0, cpu_seconds() - cpu0, clock)
    return plan


def _book(
    stage: Stage, plan: Plan, wall: float, cpu: float, clock: RunClock, background: bool = False
) -> None:
    """Book a finished stage's wall and CPU time to the experiments its plan holds."""
    served = plan.experiments()
    clock.with_cells |= {c.experiment for c in plan.cells}
    if served:
        clock.stage_done(
            sorted(served),
            _part_name(stage),
            wall,
            cpu,
            with_cells=clock.with_cells,
            reused=plan.reused,
            background=background,
            quiet=background,  # announced when it ended (Background._announce)
        )


def _merge(parts: list[Plan]) -> Plan:
    """One plan from the stages' own, in stage order."""
    plan = Plan()
    for part in parts:
        plan.cells += part.cells
        plan.header.update(part.header)
        plan.notes += part.notes
        plan.plots += part.plots
        plan.report_rows += part.report_rows
        plan.reused |= part.reused
    return plan


#: Stages that only read files earlier stages wrote and add no cells or plots, whose work is
#: serial or narrow (E8 runs in one process): with a local pool of two or more workers they
#: run in a process of their own while the next stages and the episodes go on, so the cores
#: stay busy.  Their results are the same either way (each is a pure function of its inputs).
BACKGROUND: set[str] = {"real_scores_stage", "suite_stage"}


class _Background:
    """A one-process pool for the :data:`BACKGROUND` stages of a run, and their bookkeeping."""

    def __init__(self, opts: ReproduceOptions, clock: RunClock) -> None:
        """Use a background process only with a local pool of 2+ workers and no run-time stoppers."""
        from . import e8

        self.clock = clock
        self.enabled = (
            opts.backend == "local" and opts.executor.width(2) > 1 and not e8.EXTRA_STOPPERS
        )
        self.pool: ProcessPoolExecutor | None = None
        self.pending: dict[Future[Any], Stage] = {}

    def __enter__(self) -> _Background:
        """Start nothing yet: the process starts with the first background stage."""
        return self

    def __exit__(self, *exc: object) -> None:
        """End the process (cancelling what has not started if the run failed)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=exc[0] is not None)

    def takes(self, stage: Stage) -> bool:
        """Whether ``stage`` runs in the background process."""
        return self.enabled and getattr(stage, "__name__", "") in BACKGROUND

    def submit(self, stage: Stage, out: Path, opts: ReproduceOptions) -> Future[Any]:
        """Start ``stage`` in the background process."""
        if self.pool is None:
            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        fut = self.pool.submit(_stage_in_process, stage.__name__, out, opts)
        self.pending[fut] = stage
        fut.add_done_callback(functools.partial(self._announce, stage))
        return fut

    def _announce(self, stage: Stage, fut: Future[Any]) -> None:
        """Say at once that a background stage is done (booked later, in the main thread)."""
        if fut.cancelled() or fut.exception() is not None:
            return  # the main thread raises it
        plan, wall, cpu = fut.result()
        served = sorted(plan.experiments())
        for exp in served:
            share = wall / len(served)
            t = ExperimentTiming(exp, share, cpu / len(served), background=True)
            t.parts[_part_name(stage)] = share
            self.clock.reporter.line(f"[{exp}] done: {t.summary()}")

    def poll(self) -> None:
        """Book the background stages that have finished (their progress lines)."""
        for fut in [f for f in self.pending if f.done()]:
            self.wait(fut)

    def wait(self, fut: Future[Any]) -> Plan:
        """A background stage's plan, once it is done (booked on first sight)."""
        t0 = time.perf_counter()
        plan, wall, cpu = fut.result()
        self.clock.waited_s += time.perf_counter() - t0
        stage = self.pending.pop(fut, None)
        if stage is not None:
            _book(stage, plan, wall, cpu, self.clock, background=True)
        return plan


def _stage_in_process(name: str, out: Path, opts: ReproduceOptions) -> tuple[Plan, float, float]:
    """Run the stage ``name`` in this (background) process: its plan, wall and CPU seconds."""
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    plan = Plan()
    globals()[name](out, opts, plan)
    if plan.cells or plan.plots:
        raise RuntimeError(f"{name} added cells or plots: it cannot run in the background")
    return plan, time.perf_counter() - t0, cpu_seconds() - cpu0


def _part_name(stage: Stage) -> str:
    """What a stage's work is called in the progress lines and the timing table."""
    fn = getattr(stage, "__name__", "stage")
    return _LONG_STAGES[fn][1] if fn in _LONG_STAGES else fn.removesuffix("_stage")


#: Stages that can take minutes before their experiment's episodes, with (experiment, name
#: of their work, the option that switches them off): they get a start line.
_LONG_STAGES = {
    "learned_stage": ("E6", "models", "learned"),
    "real_curves_stage": ("E7", "corpus", "real_curves"),
}


def _start_line(stage: Stage, opts: ReproduceOptions, clock: RunClock) -> None:
    """Announce a long stage that is about to run (the episodes' lines come much later)."""
    fn = getattr(stage, "__name__", "")
    if fn in _LONG_STAGES:
        exp, part, flag = _LONG_STAGES[fn]
        if opts.wants(exp, getattr(opts, flag)) and not (exp == "E7" and opts.quick):
            doc = (stage.__doc__ or "").split("\n")[0].removeprefix(f"{exp}: ")
            clock.reporter.line(f"[{exp}] {part}, starting: {doc}")


def _check_experiments(opts: ReproduceOptions) -> None:
    unknown = sorted(set(opts.experiments or ()) - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"experiments={unknown} unknown: choose among {sorted(EXPERIMENTS)}")


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
    if opts.fresh:  # only the results the manifest says the package wrote
        discard_written(out)
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


def _learning_curve_plot(out: Path, models: dict[str, dict[str, Any]]) -> Path:
    from .plots import plot_learning_curves

    curves = {
        f"{m['algo'].upper()}[{m['variant']}] σ={m['sigma']}": [
            tuple(x) for x in m["learning_curve"]
        ]
        for m in models.values()
    }
    refs = {
        f"EvalStop σ={m['sigma']}": m["evalstop_reference"]
        for m in models.values()
        if m.get("evalstop_reference") is not None
    }
    return plot_learning_curves(curves, out / "e6_learning_curves.png", refs)


__all__ = ["STAGES", "Plan", "ReproduceOptions", "ReproduceResult", "reproduce"]
