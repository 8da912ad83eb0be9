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
"""

from __future__ import annotations

import contextlib
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalstop_gym.parallel import Executor

from .experiments import EXPERIMENTS, Cell, base_env, build_cells
from .report import add_deltas, summarise, write_csvs, write_report
from .runner import discard_written, load_results, run_tasks, task_path

#: ``--quick``: about a minute on two cores.
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
        progress: Show a progress bar.
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
    plan.cells += e6.e6_cells(opts.overrides, models)
    plan.header["E6 training"] = "; ".join(
        f"{Path(p).stem}: {m['algo'].upper()}, {m['timesteps']} steps in "
        f"{m['train_seconds']:.0f} s, kept the best evaluation (at {m['selected_at']})"
        for p, m in models.items()
    )
    plan.plots.append(lambda out, summary: _learning_curve_plot(out, models))


def real_curves_stage(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E7: generate (or read) a micro-RLHF corpus and rerun E1 and the noise sweep on it."""
    from . import e7

    if not opts.wants("E7", opts.real_curves):
        return
    if opts.curves is None and not e7.available():
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
    )


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


#: The stages of a run, in order.  A new experiment appends its own.
STAGES: list[Stage] = [
    scripted_stage,
    learned_stage,
    real_curves_stage,
    real_scores_stage,
    suite_stage,
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
    t0 = time.perf_counter()
    out = Path(out)
    if options is not None and kwargs:
        raise TypeError(f"give either options or keyword options, not both: {sorted(kwargs)}")
    opts = options or ReproduceOptions(**kwargs)
    _check_experiments(opts)
    plan = Plan()
    for stage in STAGES:
        stage(out, opts, plan)
    plan.cells += list(opts.extra_cells)
    seeds = list(range(opts.n_seeds))
    stats = _run(out, opts, plan.cells, seeds)
    rows = load_results(out, plan.cells, seeds)
    add_deltas(rows)
    summary = summarise(rows)
    files = write_csvs(out, rows, summary)
    from .plots import make_plots

    plots = make_plots(out, summary, base_env(opts.overrides))
    plots += [make(out, summary) for make in plan.plots]
    report_rows = summary + plan.report_rows
    files.append(write_report(out, report_rows, header=_header(opts, plan), plots=plots))
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
    )


def _check_experiments(opts: ReproduceOptions) -> None:
    unknown = sorted(set(opts.experiments or ()) - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"experiments={unknown} unknown: choose among {sorted(EXPERIMENTS)}")


def _run(out: Path, opts: ReproduceOptions, cells: list[Cell], seeds: list[int]):
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
    if not opts.progress:
        return run_tasks(tasks, out, executor=opts.executor)
    with _progress_bar(f"{len(cells)} cells × {len(seeds)} seeds", len(tasks)) as advance:
        return run_tasks(tasks, out, executor=opts.executor, progress=advance)


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
    if plan.notes:
        header["skipped"] = " ".join(plan.notes)
    return header


def _learning_curve_plot(out: Path, models: dict[str, dict[str, Any]]) -> Path:
    from baselines.train import plot_learning_curves

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


@contextlib.contextmanager
def _progress_bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar; yields ``advance(n)``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ) as bar:
        tid = bar.add_task(description, total=total)
        yield lambda n: bar.advance(tid, n)


__all__ = ["STAGES", "Plan", "ReproduceOptions", "ReproduceResult", "reproduce"]
