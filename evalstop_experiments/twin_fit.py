"""The English twin: fitted on the English corpus's train runs, checked, drawn and shipped.

The twin (:mod:`evalstop_gym.corpus.twin`) is fitted on the train runs of the fixed split of
``english_rlhf`` only; no test run and no stopper score is read.  Its criterion, fixed before
any panel was scored (docs/SIM_TO_REAL.md):

* every statistic of :data:`~evalstop_gym.corpus.analysis.CRITERION_STATS` of the twin's gold
  curves (the shipped draw) lies inside the train runs' 95 % bootstrap interval over runs;
* the bandwidth is the largest of :data:`BANDWIDTHS` that passes (1: the class Gaussians;
  smaller keeps more of each train run's own shape).

``python -m evalstop_experiments.twin_fit`` rebuilds ``english_twin.jsonl`` and its sidecar in
the package's data folder (deterministic; numpy only) and prints the criterion's table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.corpus.analysis import (
    CRITERION_STATS,
    bootstrap_statistics,
    corpus_curves,
    curve_statistics,
)
from evalstop_gym.corpus.format import CurveTrace, write_traces
from evalstop_gym.corpus.packaged import DATA_DIR, ENGLISH_CORPUS, load_corpus, write_sidecar
from evalstop_gym.corpus.split import select, split_runs
from evalstop_gym.corpus.twin import TwinModel, draw_twin, fit_twin

#: The shipped twin corpus (``evalstop_gym.corpus.packaged.load_corpus(TWIN_CORPUS)``).
TWIN_CORPUS = "english_twin"
#: Bandwidths tried, largest first: the twin takes the first that passes the criterion.
BANDWIDTHS: tuple[float, ...] = (1.0, 0.75, 0.5, 0.25)
#: Runs in the shipped twin, and the seed of its draw.
TWIN_RUNS, TWIN_SEED = 1000, 0


@dataclass(frozen=True)
class TwinFit:
    """The fitted twin, the bandwidth the criterion chose, and the criterion's table.

    Attributes:
        model: The class Gaussians, fitted on the train runs.
        bandwidth: The chosen bandwidth (None: none passed; the last is drawn and reported).
        table: ``(bandwidth, statistic, train value, low, high, twin value, inside)`` rows.
    """

    model: TwinModel
    bandwidth: float | None
    table: tuple[tuple[float, str, float, float, float, float, bool], ...]

    @property
    def drawn_bandwidth(self) -> float:
        """The bandwidth its corpus is drawn at: the chosen one, else the smallest tried."""
        return self.bandwidth if self.bandwidth is not None else BANDWIDTHS[-1]


def train_runs(corpus: str = ENGLISH_CORPUS) -> list[CurveTrace]:
    """The train runs of the shipped corpus's fixed split."""
    traces = load_corpus(corpus)
    return select(traces, split_runs(traces), "train")


def roughness(curves: np.ndarray, progress: Any = None, labels: Any = None) -> dict[str, float]:
    """How rough gold curves (runs, m) are: the median over runs of the mean absolute second
    difference (``gold_roughness``) and the share of steps that fall (``gold_decline_share``).
    The eval-decline counters read exactly this.  ``progress`` and ``labels`` are unused: the
    signature is a statistic of :func:`~evalstop_gym.corpus.analysis.bootstrap_statistics`."""
    d = np.diff(np.asarray(curves, dtype=float), axis=1)
    return {
        "gold_roughness": float(np.median(np.abs(np.diff(d, axis=1)).mean(axis=1))),
        "gold_decline_share": float(np.mean(d < 0)),
    }


def choose_bandwidth(
    runs: Sequence[CurveTrace],
    model: TwinModel,
    bandwidths: Sequence[float] = BANDWIDTHS,
    n_runs: int = TWIN_RUNS,
    seed: int = TWIN_SEED,
    extra: Callable[..., dict[str, float]] | None = None,
) -> TwinFit:
    """The criterion on ``model`` fitted on ``runs``: the largest bandwidth that passes it.

    ``extra`` adds a statistic of the gold curves (e.g. :func:`roughness`) to the criterion,
    each of its figures inside its 95 % bootstrap interval over ``runs``.
    """
    g, x = corpus_curves(runs)
    interval = bootstrap_statistics(g, x)
    names: tuple[str, ...] = CRITERION_STATS
    if extra is not None:
        more = bootstrap_statistics(g, x, statistic=extra)
        interval, names = {**interval, **more}, (*names, *more)
    rows, chosen = [], None
    for h in bandwidths:
        gt, xt = corpus_curves(draw_twin(model, n_runs, seed, bandwidth=h))
        stats = curve_statistics(gt, xt)
        if extra is not None:
            stats = {**stats, **extra(gt, xt)}
        ok = True
        for k in names:
            value, lo, hi = interval[k]
            inside = bool(lo <= stats[k] <= hi)
            ok &= inside
            rows.append((h, k, value, lo, hi, stats[k], inside))
        if ok:
            chosen = h
            break
    return TwinFit(model, chosen, tuple(rows))


def fit_english_twin(
    bandwidths: Sequence[float] = BANDWIDTHS, n_runs: int = TWIN_RUNS, seed: int = TWIN_SEED
) -> TwinFit:
    """Fit the twin on the English train runs and choose its bandwidth by the criterion."""
    runs = train_runs()
    model = fit_twin(runs, f"{ENGLISH_CORPUS}:train")
    return choose_bandwidth(runs, model, bandwidths, n_runs, seed)


def ship_twin(out_dir: str | Path = DATA_DIR) -> tuple[Path, TwinFit]:
    """Write the twin corpus (:data:`TWIN_RUNS` runs at the chosen bandwidth) and its sidecar."""
    fit = fit_english_twin()
    h = fit.drawn_bandwidth
    dest = Path(out_dir) / f"{TWIN_CORPUS}.jsonl"
    traces = draw_twin(fit.model, TWIN_RUNS, TWIN_SEED, bandwidth=h)
    write_traces(traces, dest)
    write_sidecar(
        dest,
        command="python -m evalstop_experiments.twin_fit",
        seed=TWIN_SEED,
        runs=len(traces),
        hacking=sum(bool(t.label) for t in traces),
        bandwidth=h,
        criterion_passed=fit.bandwidth is not None,
        fitted_on=fit.model.source,
    )
    return dest, fit


def criterion_markdown(fit: TwinFit, fitted: str = "train runs") -> str:
    """The criterion's table: each statistic's value on the ``fitted`` runs and its interval
    beside the twin's."""
    lines = [
        f"| bandwidth | statistic | {fitted} [95 % CI] | twin | inside |",
        "|---|---|---|---|---|",
    ]
    for h, k, v, lo, hi, t, inside in fit.table:
        lines.append(
            f"| {h:g} | {k} | {v:.3f} [{lo:.3f}, {hi:.3f}] | {t:.3f} | {'yes' if inside else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Rebuild the shipped twin (or one in ``--out``) and print the criterion's table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DATA_DIR), help="folder to write english_twin.jsonl in")
    args = ap.parse_args(argv)
    dest, fit = ship_twin(args.out)
    print(criterion_markdown(fit))
    print(f"bandwidth {fit.bandwidth} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
