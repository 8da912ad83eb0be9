"""Generate a corpus of micro-RLHF runs in parallel, and fit Gao et al.'s law to a corpus.

Command line (wired into ``evalstop-gym curves``; also ``python -m evalstop_corpora.micro_rlhf``)::

    evalstop-gym curves generate --runs 252 --out runs/curves [--seed 0] [--workers 2]
                                 [--backend local|ray] [--address HOST:PORT]
    evalstop-gym curves fit --traces runs/curves/traces.jsonl --out runs/curves

Sweep grid (:data:`SWEEP_GRID`, 7 x 3 x 4 x 3 = 252 cells): proxy preference pairs ``n_pairs``
in {16, 32, 64, 128, 256, 1024, 4096}, proxy hidden width ``proxy_hidden`` in {0 (linear), 8,
64}, KL penalty ``kl_beta`` in {0, 0.03, 0.1, 0.3}, policy learning rate ``lr`` in {5e-4, 1e-3,
2e-3}. Run ``i`` of a corpus with seed ``S`` takes cell ``perm[i % 252]`` of a permutation drawn
from ``S`` and run seed ``S * 100_000 + i`` (:func:`evalstop_corpora.grid.grid_runs`, the rule
of both generators), so 252 runs cover the grid exactly once and every run of every corpus has
its own seed.

This module imports torch only inside the functions that run training, so building the CLI
parser stays cheap.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evalstop_corpora import generate_and_report
from evalstop_corpora.grid import grid_runs
from evalstop_gym.corpus import (
    CurveTrace,
    CurveTraceError,
    GaoFit,
    fit_gao_trace,
    peak_progress,
    read_traces,
    write_traces,
)
from evalstop_gym.fileio import atomic_open, atomic_savefig, atomic_write, refuse_overwrite
from evalstop_gym.parallel import Executor

if TYPE_CHECKING:
    from evalstop_corpora.micro_rlhf.train import MicroRLHFConfig

#: The swept hyperparameters and their values (see module docstring).
SWEEP_GRID: dict[str, tuple[int, ...] | tuple[float, ...]] = {
    "n_pairs": (16, 32, 64, 128, 256, 1024, 4096),
    "proxy_hidden": (0, 8, 64),
    "kl_beta": (0.0, 0.03, 0.1, 0.3),
    "lr": (5e-4, 1e-3, 2e-3),
}
#: File name of the corpus inside the ``--out`` folder.
TRACES_FILE = "traces.jsonl"


def sweep_configs(n_runs: int, seed: int = 0, **overrides: Any) -> list[MicroRLHFConfig]:
    """The configurations of a corpus of ``n_runs`` runs over :data:`SWEEP_GRID`.

    Args:
        n_runs: Number of runs.
        seed: Corpus seed (cell order and run seeds).
        **overrides: Other :class:`MicroRLHFConfig` fields, the same for every run (e.g. a
            shorter ``steps`` for tests); a swept field given here replaces the grid's value
            (:func:`~evalstop_corpora.grid.grid_runs`).

    Returns:
        One config per run, in run order.
    """
    from evalstop_corpora.micro_rlhf.train import MicroRLHFConfig

    runs = grid_runs(SWEEP_GRID, n_runs, seed, overrides)
    return [MicroRLHFConfig(seed=run_seed, **fields) for run_seed, fields in runs]


def _run_one(config: MicroRLHFConfig) -> tuple[CurveTrace, float]:
    """Worker body: one run and its wall-clock time (kept out of the trace: it is not seeded)."""
    from evalstop_corpora.micro_rlhf.train import run_micro_rlhf

    started = time.perf_counter()
    trace = run_micro_rlhf(config)
    return trace, time.perf_counter() - started


def _progress_bar(total: int, enabled: bool, backend: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=f"micro-RLHF ({backend})", unit="run")


def generate_corpus(
    n_runs: int,
    out_path: str | os.PathLike[str],
    *,
    seed: int = 0,
    workers: int | None = None,
    backend: str = "local",
    address: str | None = None,
    progress: bool = True,
    configs: Sequence[MicroRLHFConfig] | None = None,
    timings: list[float] | None = None,
    executor: Executor | None = None,
) -> list[CurveTrace]:
    """Run a corpus of micro-RLHF runs in parallel and write it as JSONL.

    Args:
        n_runs: Number of runs (ignored when ``configs`` is given).
        out_path: JSONL file to write (atomically) with :func:`write_traces`.
        seed: Corpus seed, see :func:`sweep_configs`.
        workers: Parallel processes (local) or CPUs of a local Ray cluster; default: all cores.
        backend: ``"local"`` (a process pool) or ``"ray"`` (one Ray task per run).
        address: Address of an existing Ray cluster (Ray backend only); default: start a local
            one.
        progress: Show a progress bar.
        configs: Explicit run configurations instead of the sweep grid.
        timings: If given, the wall-clock seconds of each run are appended to it, in run order.
        executor: Where to run, instead of ``workers``, ``backend`` and ``address``.

    Returns:
        The traces in run order, each labelled by ``label_hacking`` on its gold curve. Both
        backends return identical traces for identical configurations.
    """
    executor = executor or Executor(backend, workers, address)
    configs = list(configs) if configs is not None else sweep_configs(n_runs, seed)
    if not configs:
        raise ValueError("nothing to run: n_runs must be >= 1")
    # Workers run with one BLAS/OpenMP thread (evalstop_gym.parallel.WORKER_ENV): a fixed
    # thread count keeps float reductions, hence sampled tokens, identical across backends.
    with _progress_bar(len(configs), progress, executor.backend) as bar:
        results = executor.map(_run_one, configs, progress=bar.update)
    traces = [trace for trace, _ in results]
    if timings is not None:
        timings.extend(seconds for _, seconds in results)
    write_traces(traces, out_path)
    return traces


# --------------------------------------------------------------------------------------------
# Gao et al. law over a corpus
# --------------------------------------------------------------------------------------------


def fit_corpus(traces: Sequence[CurveTrace]) -> list[dict[str, Any]]:
    """Fit ``R(d) = d (alpha - beta ln d)`` to every trace with gold and KL curves.

    Args:
        traces: The corpus.

    Returns:
        One row per fitted trace: ``run_id``, ``label`` ("hacking"/"healthy"/""), ``alpha``,
        ``beta``, ``r2``, ``peak_progress`` (position of the gold maximum), ``d_final``
        (final ``sqrt(KL)``), ``gold_gain_max`` and the swept hyperparameters when known.
    """
    rows = []
    for tr in traces:
        if tr.gold is None or tr.kl is None:
            continue
        try:
            fit: GaoFit = fit_gao_trace(tr)
        except ValueError:
            continue  # fewer than 2 checkpoints away from the initial policy: nothing to fit
        rows.append(
            {
                "run_id": tr.run_id,
                "label": "" if tr.label is None else ("hacking" if tr.label else "healthy"),
                "alpha": fit.alpha,
                "beta": fit.beta,
                "r2": fit.r2,
                "peak_progress": peak_progress(tr.gold, tr.step),
                "d_final": float(np.sqrt(max(tr.kl[-1], 0.0))),
                "gold_gain_max": float(tr.gold.max() - tr.gold[0]),
                **{k: tr.meta[k] for k in SWEEP_GRID if k in tr.meta},
            }
        )
    return rows


def summarize(traces: Sequence[CurveTrace], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Corpus figures: hacking fraction, peak positions, Gao-fit R^2, alpha and beta.

    Args:
        traces: The corpus.
        rows: :func:`fit_corpus` of it.

    Returns:
        A JSON-serialisable dict.
    """

    def quartiles(values: Sequence[float]) -> list[float] | None:
        return (
            [round(float(q), 4) for q in np.quantile(values, [0.25, 0.5, 0.75])] if values else None
        )

    labelled = [t for t in traces if t.label is not None]
    hacking = [t for t in labelled if t.label]
    peaks = [peak_progress(t.gold, t.step) for t in hacking if t.gold is not None]
    out: dict[str, Any] = {
        "runs": len(traces),
        "labelled": len(labelled),
        "hacking": len(hacking),
        "hacking_fraction": round(len(hacking) / len(labelled), 4) if labelled else None,
        "peak_progress_quartiles_hacking": quartiles(peaks),
        "fitted": len(rows),
    }
    for name, subset in (
        ("all", rows),
        ("hacking", [r for r in rows if r["label"] == "hacking"]),
        ("healthy", [r for r in rows if r["label"] == "healthy"]),
    ):
        r2 = [r["r2"] for r in subset if np.isfinite(r["r2"])]
        out[f"r2_quartiles_{name}"] = quartiles(r2)
        out[f"alpha_quartiles_{name}"] = quartiles([r["alpha"] for r in subset])
        out[f"beta_quartiles_{name}"] = quartiles([r["beta"] for r in subset])
    return out


def plot_fits(
    traces: Sequence[CurveTrace], rows: Sequence[dict[str, Any]], path: str | os.PathLike[str]
) -> None:
    """Plot gold gain vs ``sqrt(KL)`` with the Gao fits, the R^2 histogram and alpha vs beta.

    Args:
        traces: The corpus.
        rows: :func:`fit_corpus` of it.
        path: PNG file to write.
    """
    from matplotlib import colormaps
    from matplotlib.figure import Figure  # no pyplot: the caller's backend stays as it is

    by_id = {t.run_id: t for t in traces}
    fig = Figure(figsize=(11, 8.5))
    axes = fig.subplots(2, 2)
    for ax, label in ((axes[0, 0], "hacking"), (axes[0, 1], "healthy")):
        subset = [r for r in rows if r["label"] == label]
        # At most 12 runs per panel, spread over the corpus: 200 overlaid curves are unreadable.
        shown = (
            [subset[i] for i in np.linspace(0, len(subset) - 1, min(12, len(subset))).astype(int)]
            if subset
            else []
        )
        colours = colormaps["viridis"](np.linspace(0, 0.9, max(len(shown), 1)))
        for row, colour in zip(shown, colours, strict=False):
            tr = by_id[row["run_id"]]
            d = np.sqrt(np.maximum(tr.kl, 0.0))  # a signed KL estimate may dip below 0
            ax.plot(d, tr.gold - tr.gold[0], "o", ms=3, color=colour, alpha=0.7)
            grid = np.linspace(1e-3, d.max(), 100)
            ax.plot(grid, grid * (row["alpha"] - row["beta"] * np.log(grid)), "-", color=colour)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_title(f"{label} runs ({len(shown)} of {len(subset)}): dots data, lines fit")
        ax.set_xlabel(r"$d=\sqrt{\mathrm{KL}(\pi\,\|\,\pi_0)}$")
        ax.set_ylabel("gold gain over initial policy")
    r2 = np.array([r["r2"] for r in rows if np.isfinite(r["r2"])])
    axes[1, 0].hist(np.clip(r2, -1, 1), bins=40, color="tab:blue")
    axes[1, 0].set_title(
        f"Gao-fit $R^2$ (median {np.median(r2):.3f}; clipped at -1)" if r2.size else "no fits"
    )
    axes[1, 0].set_xlabel("$R^2$")
    for label, colour in (("hacking", "tab:red"), ("healthy", "tab:green")):
        subset = [r for r in rows if r["label"] == label]
        axes[1, 1].scatter(
            [r["alpha"] for r in subset], [r["beta"] for r in subset], s=8, c=colour, label=label
        )
    axes[1, 1].set_xlabel(r"$\alpha$")
    axes[1, 1].set_ylabel(r"$\beta$")
    axes[1, 1].set_title(r"fitted $R(d)=d(\alpha-\beta\ln d)$")
    axes[1, 1].legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, path, dpi=110)


def write_fit_table(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write :func:`fit_corpus` rows as CSV (columns of the first row, floats to 6 digits)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0]) if rows else ["run_id", "label", "alpha", "beta", "r2"]
    for row in rows:  # runs from other sources may lack the sweep columns
        fields += [k for k in row if k not in fields]
    with atomic_open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})


def _format_summary(summary: dict[str, Any]) -> str:
    def q(key: str) -> str:
        v = summary.get(key)
        return "n/a" if v is None else f"{v[1]:.3g} (quartiles {v[0]:.3g} .. {v[2]:.3g})"

    n_hack, n_lab = summary["hacking"], summary["labelled"]
    return "\n".join(
        [
            f"runs: {summary['runs']}, labelled {n_lab}, hacking {n_hack}"
            + (f" ({100 * n_hack / n_lab:.1f}%)" if n_lab else ""),
            "peak position of hacking runs (fraction of run): "
            + q("peak_progress_quartiles_hacking"),
            f"Gao fit on {summary['fitted']} runs: median R2 {q('r2_quartiles_all')}",
            f"  hacking: R2 {q('r2_quartiles_hacking')}",
            f"  healthy: R2 {q('r2_quartiles_healthy')}",
            f"  alpha {q('alpha_quartiles_all')}",
            f"  beta  {q('beta_quartiles_all')}",
            f"  beta of hacking runs {q('beta_quartiles_hacking')}",
        ]
    )


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> Any:
    """Add the ``generate`` and ``fit`` subcommands to a ``curves`` parser.

    Args:
        parser: The parser of the ``curves`` command; :func:`run` dispatches on
            ``args.curves_command``.
    """
    sub = parser.add_subparsers(dest="curves_command", required=True)
    g = sub.add_parser("generate", help="run a corpus of micro-RLHF runs, write OUT/traces.jsonl")
    g.add_argument("--runs", type=int, required=True, help="number of runs (252 = the full grid)")
    g.add_argument("--out", required=True, help="output folder")
    g.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    g.add_argument(
        "--workers", type=int, default=None, help="parallel workers (default: all cores)"
    )
    g.add_argument("--backend", choices=("local", "ray"), default="local")
    g.add_argument("--address", default=None, help="address of an existing Ray cluster")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument(
        "--source",
        choices=("micro", "trl", "english"),
        default="micro",
        help="micro: micro-RLHF runs; trl: GRPO runs by TRL; english: GRPO, RLOO and online DPO "
        "runs of an English GPT-2 with VADER gold (trl and english need the 'trl' extra)",
    )
    g.add_argument("--quick", action="store_true", help="trl and english: short runs, for CI")
    f = sub.add_parser(
        "fit", help="fit Gao et al.'s law to every run: CSV table, PNG plot, summary"
    )
    f.add_argument("--traces", required=True, help="JSONL trace file (e.g. OUT/traces.jsonl)")
    f.add_argument(
        "--out",
        required=True,
        help="output folder for gao_fits.csv, gao_fits.png, gao_summary.json",
    )
    return sub  # the command line adds subcommands of other layers (fit-regime, replay) to it


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``curves`` command.

    Args:
        args: Namespace from a parser set up by :func:`add_arguments`.

    Returns:
        Process exit status (0 on success).
    """
    out = Path(args.out)
    if args.curves_command == "generate":
        from evalstop_gym.errors import ConfigError

        # Every source, before any run or folder (the English source checks it too).
        if args.runs < 1:
            raise ConfigError("runs", args.runs, "an integer >= 1")
        if args.workers is not None and args.workers < 1:
            raise ConfigError("workers", args.workers, "an integer >= 1, or left out (all cores)")
    if args.curves_command == "generate" and getattr(args, "source", "micro") == "trl":
        from evalstop_corpora.trl.generate import run_cli

        return run_cli(args)
    if args.curves_command == "generate":
        make = functools.partial(generate_corpus, args.runs, out / TRACES_FILE, seed=args.seed)
        return generate_and_report(make, args, out / TRACES_FILE)
    if args.curves_command == "fit":
        written = [out / name for name in ("gao_fits.csv", "gao_fits.png", "gao_summary.json")]
        refuse_overwrite("out", str(out), written, "a folder without an earlier fit's files")
        traces = read_traces(args.traces)
        rows = fit_corpus(traces)
        if not rows:
            raise CurveTraceError(f"{args.traces}: no run has both 'gold' and 'kl' curves to fit")
        summary = summarize(traces, rows)
        write_fit_table(rows, out / "gao_fits.csv")
        plot_fits(traces, rows, out / "gao_fits.png")
        atomic_write(out / "gao_summary.json", json.dumps(summary, indent=2) + "\n")
        print(_format_summary(summary))
        print(f"wrote {out / 'gao_fits.csv'}, {out / 'gao_fits.png'}, {out / 'gao_summary.json'}")
        return 0
    raise ValueError(f"unknown curves command {args.curves_command!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m evalstop_corpora.micro_rlhf {generate,fit} ...``.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        Process exit status.
    """
    parser = argparse.ArgumentParser(prog="curves", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ValueError as exc:  # CurveTraceError included: a message, not a traceback
        print(f"curves: error: {exc}", file=sys.stderr)
        return 2


__all__ = [
    "SWEEP_GRID",
    "TRACES_FILE",
    "add_arguments",
    "fit_corpus",
    "generate_corpus",
    "main",
    "plot_fits",
    "run",
    "summarize",
    "sweep_configs",
    "write_fit_table",
]
