"""``evalstop-gym reproduce``: the paper's experiments E1-E5, end to end.

Runs every (cell, seed) through :func:`baselines.evaluate`'s code path on a
local process pool or Ray, writes each result as it finishes, then aggregates
into ``OUT/E*.csv`` (one row per cell and seed), ``OUT/E*_summary.csv`` (mean
and 95 % CI per cell), ``OUT/REPORT.md`` and PNG plots.
"""

from __future__ import annotations

import platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .experiments import Cell, build_cells
from .plots import make_plots
from .report import add_deltas, summarise, write_csvs, write_report
from .runner import load_results, run_tasks, task_path

QUICK = {"seeds": 10, "n_jobs": 150}
#: 50 seeds: 95 % intervals on E1's precision / recall / FPR of about ±1 point.
DEFAULT = {"seeds": 50, "n_jobs": None}


@dataclass
class ReproduceResult:
    out: Path
    rows: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    files: list[Path]
    seconds: float
    ran: int
    reused: int


def reproduce(
    out: str | Path = "results",
    *,
    quick: bool = False,
    seeds: int | None = None,
    n_jobs: int | None = None,
    experiments: list[str] | None = None,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    fresh: bool = False,
    extra_cells: list[Cell] | None = None,
    progress: bool = True,
    env: dict[str, Any] | None = None,
    learned: bool | None = None,
    train_timesteps: int | None = None,
    real_curves: bool | None = None,
    curves: str | None = None,
) -> ReproduceResult:
    """Run the experiments and write the report; see the module docstring."""
    t0 = time.perf_counter()
    out = Path(out)
    preset = QUICK if quick else DEFAULT
    n_seeds = seeds if seeds is not None else preset["seeds"]
    if n_seeds < 2:
        raise ValueError(f"seeds={n_seeds} is not allowed: at least 2 (for confidence intervals)")
    jobs = n_jobs if n_jobs is not None else preset["n_jobs"]
    base_env: dict[str, Any] = dict(env or {})
    if jobs is not None:
        base_env["n_jobs"] = jobs
    from . import e6, e7

    scripted_exps = [e for e in experiments if e not in ("E6", "E7")] if experiments else None
    cells = build_cells(base_env, scripted_exps) if scripted_exps != [] else []
    cells += list(extra_cells or [])
    want_e6 = (experiments is None or "E6" in experiments) if learned is None else learned
    models: dict[str, dict[str, Any]] = {}
    e6_note = ""
    if want_e6 and not e6.available():
        e6_note = (
            "E6 skipped: stable-baselines3 and torch are not installed (pip install -e '.[train]')."
        )
    elif want_e6:
        out.mkdir(parents=True, exist_ok=True)
        models = e6.train_models(out, quick=quick, workers=workers, timesteps=train_timesteps)
        cells += e6.e6_cells(base_env, models)
    want_e7 = (experiments is None or "E7" in experiments) if real_curves is None else real_curves
    e7_info: dict[str, Any] = {}
    if want_e7 and curves is None and not e7.available():
        e6_note += " E7 skipped: generating real curves needs torch (pip install -e '.[train]')."
    elif want_e7:
        out.mkdir(parents=True, exist_ok=True)
        corpus = (
            Path(curves)
            if curves
            else e7.ensure_corpus(
                out, quick=quick, workers=workers, backend=backend, address=address
            )
        )
        cells += e7.e7_cells(base_env, corpus)
        e7_info = e7.corpus_summary(corpus)
    seed_list = list(range(n_seeds))
    tasks = [(c, s) for c in cells for s in seed_list]
    if fresh and (out / "raw").exists():
        shutil.rmtree(out / "raw")
    existing = sum(task_path(out, c, s).exists() for c, s in tasks)
    if existing and not resume:
        raise FileExistsError(
            f"{existing} of {len(tasks)} results are already in {out / 'raw'}: "
            "pass --resume to reuse them, or --fresh to recompute everything"
        )
    out.mkdir(parents=True, exist_ok=True)
    stats = _run_with_progress(tasks, out, backend, workers, address, progress, len(cells))
    rows = load_results(out, cells, seed_list)
    add_deltas(rows)
    summary = summarise(rows)
    files = write_csvs(out, rows, summary)
    env0 = {"workload": "heavy-rlhf", "scheduler": "srtf-est", **base_env}
    plots = make_plots(out, summary, env0)
    if models:
        plots.append(_learning_curve_plot(out, models, summary))
    header = {
        "seeds per cell": n_seeds,
        "jobs per episode": jobs if jobs is not None else "workload default (200)",
        "environment": ", ".join(f"{k}={v}" for k, v in env0.items()),
        "cells": len(cells),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
    }
    if models:
        header["E6 training"] = "; ".join(
            f"{Path(p).stem}: {m['algo'].upper()}, {m['timesteps']} steps in "
            f"{m['train_seconds']:.0f} s, kept the best evaluation (at {m['selected_at']})"
            for p, m in models.items()
        )
    if e6_note:
        header["skipped"] = e6_note.strip()
    if e7_info:
        header["E7 corpus"] = (
            f"{e7_info['runs']} micro-RLHF runs, {e7_info['hacking']} hacking; hacking peaks at "
            f"progress quartiles {', '.join(f'{v:.2f}' for v in e7_info['peak_quartiles'])}; "
            f"Gao-law fit R² quartiles {', '.join(f'{v:.2f}' for v in e7_info['gao_r2_quartiles'])}"
        )
    files.append(write_report(out, summary, header=header, plots=plots))
    files += plots
    return ReproduceResult(
        out, rows, summary, files, time.perf_counter() - t0, stats.ran, stats.done_before
    )


def _learning_curve_plot(out: Path, models: dict[str, dict[str, Any]], summary) -> Path:
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


def _run_with_progress(tasks, out, backend, workers, address, progress, n_cells):
    if not progress:
        return run_tasks(tasks, out, backend=backend, workers=workers, address=address)
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
        tid = bar.add_task(
            f"{n_cells} cells × {len(tasks) // max(n_cells, 1)} seeds", total=len(tasks)
        )
        return run_tasks(
            tasks,
            out,
            backend=backend,
            workers=workers,
            address=address,
            progress=lambda n: bar.advance(tid, n),
        )
