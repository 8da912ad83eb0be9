"""``evalstop-gym curves fit-regime``: a calibration's curves against a real corpus's, statistic by statistic.

The criterion is written down in docs/CALIBRATION.md ("The grounded regime: the criterion")
and in :mod:`evalstop_gym.corpus.analysis` (:data:`~evalstop_gym.corpus.analysis.CRITERION_STATS`):
each statistic of the regime's RLHF curves, sampled on the corpus's own progress grid and
labelled by the corpus's rule, must lie inside the corpus's 95 % bootstrap interval over
runs.  Besides, the simulated regime's noise-free early-eval AUC
(:mod:`evalstop_experiments.early_auc`) must stay at or below :data:`EARLY_AUC_MAX`.
No stopper is run: a regime is fitted against real runs, never against scores.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalstop_gym.corpus.analysis import (
    CRITERION_STATS,
    GOLD_NOISE,
    bootstrap_statistics,
    corpus_curves,
    criterion_check,
    curve_labels,
    curve_statistics,
)
from evalstop_gym.corpus.format import read_traces
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.calibration import CALIBRATIONS, get_calibration
from evalstop_gym.sim.synthetic_curves import rlhf_true_curves
from evalstop_gym.suite import task_hack_fraction

from .early_auc import sim_early_auc

#: The simulated regime's noise-free early-eval AUC (p <= 0.1 and <= 0.2) may not exceed this.
EARLY_AUC_MAX = 0.65
#: RLHF runs sampled from the regime (its statistics' own sampling error is then ~0.01).
REGIME_RUNS = 8000


@dataclass(frozen=True)
class RegimeFit:
    """The criterion's verdict on one calibration.

    Attributes:
        calibration: The calibration's name.
        corpus: ``{stat: (value, low, high)}`` of the corpus (95 % bootstrap interval).
        regime: ``{stat: value}`` of the regime's sampled curves.
        passed: ``{stat: inside the corpus's interval}``.
        early_auc: The simulated regime's noise-free early-eval AUC at p <= 0.1 and 0.2.
        label_agreement: Share of sampled runs whose drawn label the corpus's rule gives too.
    """

    calibration: str
    corpus: dict[str, tuple[float, float, float]]
    regime: dict[str, float]
    passed: dict[str, bool]
    early_auc: dict[str, float]
    label_agreement: float

    @property
    def ok(self) -> bool:
        """Every statistic inside its interval and the early-eval AUC at most the bound."""
        return all(self.passed.values()) and all(
            v <= EARLY_AUC_MAX for v in self.early_auc.values()
        )


def regime_statistics(
    calibration: str,
    progress: np.ndarray,
    *,
    hack_fraction: float,
    runs: int = REGIME_RUNS,
    seed: int = 0,
) -> tuple[dict[str, float], float]:
    """The criterion's statistics of a calibration's RLHF curves on ``progress``.

    Runs hack with probability ``hack_fraction``; their noise-free curves get gold-like
    noise (:data:`~evalstop_gym.corpus.analysis.GOLD_NOISE` x the mean gain) and are
    labelled by the corpus's rule.

    Returns:
        ``(statistics, share of runs whose drawn label the rule agrees with)``.
    """
    cal = get_calibration(calibration)
    if cal.rlhf_shape != "rise-decline":
        raise ConfigError(
            "calibration", cal.name, "a 'rise-decline' calibration (its curves start at p = 0)"
        )
    rng = np.random.default_rng(seed)
    hacking = rng.random(runs) < hack_fraction
    curves = rlhf_true_curves(cal, progress, hacking, rng)
    gain = sum(cal.rlhf_amplitude) / 2
    curves = curves + GOLD_NOISE * gain * rng.standard_normal(curves.shape)
    labels = curve_labels(curves)
    return curve_statistics(curves, progress, labels), float(np.mean(labels == hacking))


def fit_regime(
    corpus: str | None = None,
    calibration: str = "grounded",
    *,
    runs: int = REGIME_RUNS,
    reps: int = 2000,
    seed: int = 0,
    auc_seeds: int = 10,
) -> RegimeFit:
    """Check ``calibration`` against the corpus (default: the packaged TRL corpus)."""
    path = corpus or str(corpus_path(TRL_CORPUS))
    gold, progress = corpus_curves(read_traces(path))
    ci = bootstrap_statistics(gold, progress, reps=reps, seed=seed)
    stats, agreement = regime_statistics(
        calibration, progress, hack_fraction=task_hack_fraction(calibration), runs=runs, seed=seed
    )
    auc = {
        f"p<={p}": sim_early_auc(calibration, None, range(auc_seeds), p)["noise_free"]
        for p in (0.1, 0.2)
    }
    return RegimeFit(calibration, ci, stats, criterion_check(ci, stats), auc, agreement)


def format_fit(fit: RegimeFit) -> str:
    """The verdict as a table: corpus value [CI], regime value, pass/fail."""
    lines = [
        f"regime {fit.calibration!r} against the corpus (95 % bootstrap CI over runs)",
        f"{'statistic':24s} {'corpus':>7s} {'CI':>17s} {'regime':>7s}  verdict",
    ]
    for k in CRITERION_STATS:
        v, lo, hi = fit.corpus[k]
        verdict = "pass" if fit.passed[k] else "FAIL"
        lines.append(f"{k:24s} {v:7.3f} [{lo:6.3f}, {hi:6.3f}] {fit.regime[k]:7.3f}  {verdict}")
    for k, v in fit.early_auc.items():
        verdict = "pass" if v <= EARLY_AUC_MAX else "FAIL"
        lines.append(
            f"{'sim early AUC ' + k:24s} {'':7s} {'<= ' + str(EARLY_AUC_MAX):>17s} {v:7.3f}  {verdict}"
        )
    lines.append(f"drawn label = corpus rule's label on {fit.label_agreement:.1%} of sampled runs")
    lines.append("criterion: " + ("PASS" if fit.ok else "FAIL"))
    return "\n".join(lines)


def add_parser(sub: Any) -> None:
    """Add ``fit-regime`` to the ``curves`` subcommands (``sub`` is their subparsers action)."""
    f = sub.add_parser(
        "fit-regime",
        help="check a calibration's curve statistics against a real corpus's (exit 1 on a miss)",
    )
    f.add_argument(
        "--corpus", default=None, help="JSONL corpus with gold curves (default: the TRL corpus)"
    )
    f.add_argument(
        "--calibration",
        default="grounded",
        choices=sorted(c for c, cal in CALIBRATIONS.items() if cal.rlhf_shape == "rise-decline"),
    )
    f.add_argument("--runs", type=int, default=REGIME_RUNS, help="RLHF runs sampled")
    f.add_argument("--reps", type=int, default=2000, help="bootstrap replicates")
    f.add_argument(
        "--auc-seeds", type=int, default=10, help="episodes of the simulated early-eval AUC"
    )
    f.add_argument("--seed", type=int, default=0, help="seed of the sample and the bootstrap")
    f.set_defaults(fit_regime=run)


def run(args: argparse.Namespace) -> int:
    """Run ``curves fit-regime``; 0 if the criterion passes, else 1."""
    for name in ("runs", "reps", "auc_seeds"):
        if getattr(args, name) < 1:
            raise ConfigError(name, getattr(args, name), "an integer >= 1")
    fit = fit_regime(args.corpus, args.calibration, runs=args.runs, reps=args.reps, seed=args.seed)
    print(format_fit(fit))
    return 0 if fit.ok else 1


#: The name of a prior refitted on a corpus's train runs (:func:`fit_prior`).
REFIT_NAME = "refit-train"


def fit_prior(corpus: str | None = None, side: str = "train", base: str = "hard") -> Any:
    """A ``rise-decline`` calibration refitted on one side of a corpus's split, in env units.

    The runs of ``side`` of :func:`evalstop_gym.corpus.split.split_runs` (never the test
    runs when ``side="train"``), mapped by the corpus's common map
    (:class:`evalstop_gym.sim.real_curves.CorpusMap`) and resampled at ``base``'s
    checkpoints, set the ranges :func:`prior_from_curves` reads off them.
    """
    from evalstop_gym.corpus.split import select, split_runs
    from evalstop_gym.sim.real_curves import corpus_map

    path = corpus or str(corpus_path(TRL_CORPUS))
    traces = read_traces(path, min_checkpoints=2)
    runs = select(traces, split_runs(traces), side)
    cmap = corpus_map(path)
    k = get_calibration(base).evals_per_job
    grid = np.arange(0, k + 1) / k
    curves = np.array([cmap.evals(np.interp(grid, t.step / t.step[-1], t.gold)) for t in runs])
    labels = np.array([bool(t.label) for t in runs])
    if labels.all() or not labels.any():
        raise ConfigError("corpus", path, f"a {side} side with hacking and healthy runs")
    return prior_from_curves(curves, labels, grid, base)


def fit_prior_on_task(kw: dict[str, Any], seeds: Any, base: str = "hard") -> Any:
    """:func:`prior_from_curves` on the true RLHF curves of episodes of env kwargs ``kw``.

    For a held-out task pass its *train* kwargs (``evalstop_gym.suite.tuning_kwargs``):
    the curves are then the train runs as that task replays them (its map, warp and
    jitter included), on validation seeds.
    """
    import gymnasium as gym

    from evalstop_gym.sim.workloads import RLHF

    curves, labels = [], []
    for seed in seeds:
        env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
        try:
            env.reset(seed=int(seed))
            sim = env.unwrapped.sim  # type: ignore[attr-defined]
            rl = np.flatnonzero(sim.batch.job_type == RLHF)
            curves.append(sim.curves.true_eval[rl])
            labels.append(sim.batch.hacking[rl].astype(bool))
        finally:
            env.close()
    c, y = np.concatenate(curves), np.concatenate(labels)
    k = c.shape[1]
    return prior_from_curves(c, y, np.arange(1, k + 1) / k, base)


def prior_from_curves(
    curves: np.ndarray,
    labels: np.ndarray,
    progress: np.ndarray,
    base: str = "hard",
    healthy_drop: bool = False,
) -> Any:
    """A ``rise-decline`` calibration whose ranges are these curves' 10-90 % quantile ranges.

    The start (``rlhf_base``), the gain (``rlhf_amplitude``), a hacking run's loss from
    peak to end in gains (``hack_drop``) and a hacking run's peak position
    (``hack_onset``, from 0.1 before it); with ``healthy_drop`` a healthy run's loss
    too (from 0).  The rise constants and everything else are ``base``'s.  The
    healthy decline is left out by default: on the held-out task's train runs (its
    validation seeds) Bayes with it refitted scores 0.38 of the CurveOracle, without
    it 0.47 (with ``hard``'s prior 0.36): a prior that expects healthy runs to sag
    stops them on noise.
    """
    from dataclasses import replace

    starts = curves[:, 0]
    peak = curves.max(axis=1)
    gains = peak - starts
    rel = np.where(gains > 0, (peak - curves[:, -1]) / np.maximum(gains, 1e-12), 0.0)
    peaks = progress[np.argmax(curves, axis=1)]

    def q(x: np.ndarray) -> tuple[float, float]:
        a, b = np.quantile(x, [0.1, 0.9])
        return float(a), float(b)

    drop, onset, gain = q(rel[labels]), q(peaks[labels]), q(gains)
    cal = get_calibration(base)
    return replace(
        cal,
        name=REFIT_NAME,
        rlhf_base=q(starts),
        rlhf_amplitude=(max(gain[0], 1e-3), max(gain[1], 2e-3)),
        hack_drop=(max(drop[0], 0.05), max(drop[1], 0.1)),
        healthy_drop=(0.0, max(q(rel[~labels])[1], 0.0)) if healthy_drop else cal.healthy_drop,
        hack_onset=(max(onset[0] - 0.1, 0.0), min(max(onset[1], onset[0]), 1.0)),
    )
