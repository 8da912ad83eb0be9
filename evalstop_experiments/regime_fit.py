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
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.corpus.analysis import (
    CRITERION_STATS,
    GOLD_NOISE,
    LATE_RISE_STATS,
    CorpusNoise,
    bootstrap_statistics,
    corpus_curves,
    corpus_noise,
    criterion_check,
    curve_labels,
    curve_statistics,
    late_rise_statistics,
)
from evalstop_gym.corpus.format import CurveTraceError, json_lines, read_traces
from evalstop_gym.corpus.packaged import DATA_DIR, ENGLISH_CORPUS, TRL_CORPUS, corpus_path
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.calibration import CALIBRATIONS, get_calibration
from evalstop_gym.sim.synthetic_curves import rlhf_true_curves
from evalstop_gym.suite import task_hack_fraction

from .early_auc import sim_early_auc

#: The simulated regime's noise-free early-eval AUC (p <= 0.1 and <= 0.2) may not exceed this.
EARLY_AUC_MAX = 0.65
#: RLHF runs sampled from the regime (its statistics' own sampling error is then ~0.01).
REGIME_RUNS = 8000
#: The corpus the ``grounded`` regime is fitted to (the command's default) and the one it
#: prints beside it: the two real corpora disagree (their drop intervals do not overlap), so
#: one regime cannot pass both; the English corpus (three trainers, real text, a human-rated
#: gold, more runs) is the one fitted.
FIT_CORPUS = ENGLISH_CORPUS
BESIDE_CORPUS = TRL_CORPUS


def resolve_corpus(corpus: str | os.PathLike[str] | None) -> str:
    """Path of a corpus given by packaged name (``"english_rlhf"``) or JSONL path (None: :data:`FIT_CORPUS`)."""
    if corpus is None:
        return str(corpus_path(FIT_CORPUS))
    name = str(corpus)
    if os.path.isfile(name):
        return name
    if (DATA_DIR / f"{name}.jsonl").is_file():
        return str(corpus_path(name))
    shipped = sorted(p.stem for p in DATA_DIR.glob("*.jsonl"))
    raise ConfigError("corpus", name, f"a JSONL file or a packaged corpus, one of {shipped}")


@dataclass(frozen=True)
class CorpusSide:
    """A corpus's side of the criterion.

    Attributes:
        name: The corpus as given (packaged name or path).
        runs: Its number of runs.
        stats: ``{stat: (value, low, high)}`` (95 % bootstrap interval over runs), the
            criterion's statistics and :data:`~evalstop_gym.corpus.analysis.LATE_RISE_STATS`.
        noise: Its gold's and its eval's noise in units of its mean gain.
    """

    name: str
    runs: int
    stats: dict[str, tuple[float, float, float]]
    noise: CorpusNoise


@dataclass(frozen=True)
class RegimeFit:
    """The criterion's verdict on one calibration.

    Attributes:
        calibration: The calibration's name.
        corpus: ``{stat: (value, low, high)}`` of the corpus (95 % bootstrap interval).
        regime: ``{stat: value}`` of the regime's sampled curves (the late-rise statistics
            and ``mean_gain``, the sampled runs' mean peak - start, included).
        passed: ``{stat: inside the corpus's interval}``.
        early_auc: The simulated regime's noise-free early-eval AUC at p <= 0.1 and 0.2.
        label_agreement: Share of sampled runs whose drawn label the corpus's rule gives too.
        side: The fitted corpus (its name, size and noise); None when built by hand.
        beside: Another corpus's side, printed as a finding (never part of the verdict).
        beside_regime: The regime's statistics on that corpus's grid, with its gold noise.
    """

    calibration: str
    corpus: dict[str, tuple[float, float, float]]
    regime: dict[str, float]
    passed: dict[str, bool]
    early_auc: dict[str, float]
    label_agreement: float
    side: CorpusSide | None = None
    beside: CorpusSide | None = None
    beside_regime: dict[str, float] | None = None

    @property
    def ok(self) -> bool:
        """Every statistic inside its interval and the early-eval AUC at most the bound."""
        return all(self.passed.values()) and all(
            v <= EARLY_AUC_MAX for v in self.early_auc.values()
        )

    @property
    def implied_eval_noise(self) -> float:
        """The eval noise sd that gives the regime the corpus's eval noise over mean gain (NaN if unrecorded)."""
        if self.side is None:
            return float("nan")
        return float(self.side.noise.eval * self.regime.get("mean_gain", float("nan")))


def corpus_side(
    corpus: str | os.PathLike[str] | None, *, reps: int = 2000, seed: int = 0
) -> tuple[CorpusSide, np.ndarray]:
    """(the corpus's side of the criterion, its progress grid)."""
    path = resolve_corpus(corpus)
    traces = read_traces(path)
    gold, progress = corpus_curves(traces)
    stats = bootstrap_statistics(gold, progress, reps=reps, seed=seed)
    stats.update(
        bootstrap_statistics(gold, progress, reps=reps, seed=seed, statistic=late_rise_statistics)
    )
    name = str(corpus) if corpus is not None else FIT_CORPUS
    return CorpusSide(name, len(traces), stats, corpus_noise(traces)), progress


def regime_statistics(
    calibration: str,
    progress: np.ndarray,
    *,
    hack_fraction: float,
    runs: int = REGIME_RUNS,
    seed: int = 0,
    gold_noise: float | None = None,
) -> tuple[dict[str, float], float]:
    """The criterion's statistics of a calibration's RLHF curves on ``progress``.

    Runs hack with probability ``hack_fraction``; their noise-free curves get gold-like
    noise (``gold_noise``, default :data:`~evalstop_gym.corpus.analysis.GOLD_NOISE`, x the
    mean gain) and are labelled by the corpus's rule.

    Returns:
        ``(statistics, share of runs whose drawn label the rule agrees with)``; the
        statistics hold the criterion's, the late-rise ones and ``mean_gain``.
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
    noise = GOLD_NOISE if gold_noise is None else float(gold_noise)
    curves = curves + noise * gain * rng.standard_normal(curves.shape)
    labels = curve_labels(curves)
    stats = curve_statistics(curves, progress, labels)
    stats.update(late_rise_statistics(curves, progress, labels))
    stats["mean_gain"] = float(np.mean(curves.max(axis=1) - curves[:, 0]))
    return stats, float(np.mean(labels == hacking))


def fit_regime(
    corpus: str | None = None,
    calibration: str = "grounded",
    *,
    runs: int = REGIME_RUNS,
    reps: int = 2000,
    seed: int = 0,
    auc_seeds: int = 10,
    beside: str | None = None,
) -> RegimeFit:
    """Check ``calibration`` against the corpus (name or path; default :data:`FIT_CORPUS`).

    The regime's curves carry the corpus's own gold noise (its recorded ``gold_noise_sd``
    over its mean gain).  ``beside`` (a corpus name or path) adds that corpus's intervals to
    the table, as a finding: the verdict is the fitted corpus's alone.
    """
    hf = task_hack_fraction(calibration)
    side, progress = corpus_side(corpus, reps=reps, seed=seed)
    stats, agreement = regime_statistics(
        calibration, progress, hack_fraction=hf, runs=runs, seed=seed, gold_noise=side.noise.gold
    )
    other, other_stats = None, None
    if beside is not None:
        other, grid = corpus_side(beside, reps=reps, seed=seed)
        other_stats = regime_statistics(
            calibration, grid, hack_fraction=hf, runs=runs, seed=seed, gold_noise=other.noise.gold
        )[0]
    auc = {
        f"p<={p}": sim_early_auc(calibration, None, range(auc_seeds), p)["noise_free"]
        for p in (0.1, 0.2)
    }
    ci = side.stats
    return RegimeFit(
        calibration, ci, stats, criterion_check(ci, stats), auc, agreement, side, other, other_stats
    )


def _cell(stat: tuple[float, float, float] | None) -> str:
    if stat is None:
        return f"{'':7s} {'':17s}"
    v, lo, hi = stat
    return f"{v:7.3f} [{lo:6.3f}, {hi:6.3f}]"


def format_fit(fit: RegimeFit) -> str:
    """The verdict as a table: corpus value [CI], regime value, pass/fail (and the other corpus)."""
    name = fit.side.name if fit.side is not None else "the corpus"
    lines = [f"regime {fit.calibration!r} against {name} (95 % bootstrap CI over runs)"]
    if fit.side is not None:
        n = fit.side.noise
        gold = f"{n.gold:.3f}" + ("" if n.gold_recorded else " (not recorded: the default)")
        lines.append(
            f"corpus: {fit.side.runs} runs; noise / mean gain: gold {gold}, eval {n.eval:.3f}"
            f" -> the regime's eval noise for that ratio: {fit.implied_eval_noise:.3f}"
        )
    head = f"{'statistic':24s} {'corpus':>7s} {'CI':>17s} {'regime':>7s}  verdict"
    if fit.beside is not None:
        head += (
            f"  | {fit.beside.name + ' (' + str(fit.beside.runs) + ' runs)':>25s} {'regime':>7s}"
        )
    lines.append(head)

    def row(k: str, verdict: str) -> str:
        line = f"{k:24s} {_cell(fit.corpus.get(k))} {fit.regime[k]:7.3f}  {verdict:7s}"
        if fit.beside is not None and fit.beside_regime is not None:
            other, value = fit.beside.stats.get(k), fit.beside_regime[k]
            inside = other is not None and other[1] <= value <= other[2]
            line += f"| {_cell(other)} {value:7.3f}  {'inside' if inside else 'outside'}"
        return line.rstrip()

    for k in CRITERION_STATS:
        lines.append(row(k, "pass" if fit.passed[k] else "FAIL"))
    for k in LATE_RISE_STATS:
        if k in fit.regime and k in fit.corpus:
            lines.append(row(k, "(shown)"))
    for k, v in fit.early_auc.items():
        verdict = "pass" if v <= EARLY_AUC_MAX else "FAIL"
        lines.append(
            f"{'sim early AUC ' + k:24s} {'':7s} {'<= ' + str(EARLY_AUC_MAX):>17s} {v:7.3f}  {verdict}"
        )
    lines.append(f"drawn label = corpus rule's label on {fit.label_agreement:.1%} of sampled runs")
    if fit.beside is not None:
        lines.append(
            f"({fit.beside.name}'s columns: the regime on its grid with its gold noise; a finding,"
            " not part of the verdict)"
        )
    lines.append("criterion: " + ("PASS" if fit.ok else "FAIL"))
    return "\n".join(lines)


def add_parser(sub: Any) -> None:
    """Add ``fit-regime`` to the ``curves`` subcommands (``sub`` is their subparsers action)."""
    f = sub.add_parser(
        "fit-regime",
        help="check a calibration's curve statistics against a real corpus's (exit 1 on a miss)",
    )
    f.add_argument(
        "--corpus",
        default=None,
        help=f"corpus with gold curves: a packaged name (e.g. {FIT_CORPUS}, {TRL_CORPUS}) "
        f"or a JSONL path (default: {FIT_CORPUS}, the one 'grounded' is fitted to)",
    )
    f.add_argument(
        "--beside",
        default=None,
        help=f"another corpus (name or path) whose intervals are printed beside, as a finding "
        f"(default: {BESIDE_CORPUS} when fitting to the default corpus; 'none' for no column)",
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
    resolve_corpus(args.corpus)  # a bad name fails before any work
    beside = args.beside
    if beside is None:
        beside = BESIDE_CORPUS if args.corpus in (None, FIT_CORPUS) else None
    elif beside.lower() == "none":
        beside = None
    else:
        resolve_corpus(beside)
    fit = fit_regime(
        args.corpus,
        args.calibration,
        runs=args.runs,
        reps=args.reps,
        seed=args.seed,
        auc_seeds=args.auc_seeds,
        beside=beside,
    )
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


#: The regime fitted to a packaged corpus, by the corpus's name: a prior refitted on that
#: corpus's runs keeps that regime's family (its rise rates, its healthy decline).
#: The English twin (runs drawn from a model of the English train runs) keeps the same family.
FITTED_REGIMES: dict[str, str] = {FIT_CORPUS: "grounded", "english_twin": "grounded"}


def prior_base(kw: dict[str, Any]) -> str:
    """The calibration whose family a prior refitted on env kwargs ``kw``'s runs keeps.

    The regime fitted to their corpus (:data:`FITTED_REGIMES`, by the JSONL's name: the
    English runs keep ``grounded``'s family, whose healthy runs may still gain late), else
    ``hard``.  A twin's runs under another name (the twin set to another recipe, written
    to a file of its own) keep the family of the corpus they model (their
    ``meta["twin_of"]``): by its name alone the twin at eval batch 64 took ``hard``'s.
    """
    curves = kw.get("curves")
    name = os.path.splitext(os.path.basename(str(curves)))[0] if curves else ""
    if name in FITTED_REGIMES or not curves:
        return FITTED_REGIMES.get(name, "hard")
    try:
        _, first = next(json_lines(Path(str(curves))), (0, {}))
    except CurveTraceError:
        return "hard"  # not a trace file: the corpus's own reader says why, where it is read
    meta = first.get("meta")
    if not isinstance(meta, dict) or meta.get("source") != "twin":
        return "hard"
    return FITTED_REGIMES.get(str(meta.get("twin_of", "")).partition(":")[0], "hard")


def fit_prior_on_task(kw: dict[str, Any], seeds: Any, base: str | None = None) -> Any:
    """:func:`prior_from_curves` on the true RLHF curves of episodes of env kwargs ``kw``.

    For a held-out task pass its *train* kwargs (``evalstop_gym.suite.tuning_kwargs``):
    the curves are then the train runs as that task replays them (its map, warp and
    jitter included), on validation seeds.  ``base`` (default :func:`prior_base`) gives
    the family and every range the curves do not set.
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
    return prior_from_curves(c, y, np.arange(1, k + 1) / k, base or prior_base(kw))


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
