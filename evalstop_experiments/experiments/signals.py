"""E12: which signal warns first on real runs -- the evals, the training-side signals, or both.

The paper's central claim is that eval scores are a better stopping signal than what a
trainer logs anyway (the loss, the reward model's score, the KL).  E12 measures it on
genuine RLHF runs: detectors that see only the evals (the paper's boundary), only a
training-side signal (a CUSUM on each: KL acceleration, entropy collapse, proxy-reward
rise; and a learned one on all of them), and both.

Protocol (:func:`e12`):

* the corpus's runs are split once by :func:`evalstop_gym.corpus.split.split_runs`
  (by grid cell, stratified by label); every threshold and model is fitted on the
  *train* runs, every figure is measured on the *test* runs;
* each run is seen as an RLHF job on it sees it (:func:`baselines.signals.run_observations`:
  the env's own observation rows, on the corpus task's checkpoints, the evals on the scale
  the scored task shows them: a held-out task's common map), and a detector's stop is the
  first checkpoint (before the last) at which it says stop;
* a threshold maximises recall - FPR on the train runs (Youden's J; ties: the earlier
  warning), the learned detector's on probabilities cross-fitted over train cells; every
  tuned detector is tuned a second time for the utility the suite scores (the true quality
  of the checkpoint it would deliver minus the GPU-hours it uses, at the held-out task's
  price and scale: :func:`stop_utility`), since a detector that tells hacking apart well
  need not stop where stopping pays;
* on the test runs: precision, recall, FPR (healthy runs stopped), the share of hacking
  runs warned at or before their gold peak, and the lead time (gold peak - stop; positive
  = before the peak) in progress units and in checkpoints, each with a 95 % bootstrap CI
  over runs;
* the normalised score (NoStop = 0, the Oracle = 1) through the suite's scoring on the
  held-out runs as a corpus task (:func:`heldout_task`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baselines import Cusum, EvalStop, NoStop
from baselines.changepoint import cusum_statistic
from baselines.curve_oracle import CurveOracle
from baselines.signals import (
    AnyOf,
    LearnedDetector,
    SignalCusum,
    decides_per_job,
    first_stop,
    job_statistics,
    run_observations,
    stop_flags,
)
from evalstop_gym.corpus import CurveTrace, peak_progress, resample, write_traces
from evalstop_gym.corpus.packaged import ENGLISH_CORPUS, TRL_CORPUS, load_corpus
from evalstop_gym.corpus.split import cell_of, select, split_runs
from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.envs.tables import observed
from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import atomic_open
from evalstop_gym.sim.real_curves import GAIN, CorpusMap, corpus_map, gold_gain
from evalstop_gym.sim.signals import SIGNAL_FIELDS, logged_signals, trace_signal
from evalstop_gym.sim.workloads import RLHF, get_workload
from evalstop_gym.suite import HELDOUT_TASKS, is_heldout, suite_task

from ..plan import Experiment, Plan, ReproduceOptions
from ..scoring import (
    CURVE_ORACLE,
    EXTRA,
    NOSTOP,
    ORACLE,
    JobObs,
    Stopper,
    episode_arrays,
    job_observations,
    normalised_score,
    play,
    reference_sums,
    run_bootstrap_score,
    unit_sums,
    utility_terms,
)

ID = "E12"
#: The shipped corpora E12 runs on (a later corpus joins by its packaged name).
CORPORA: tuple[str, ...] = (TRL_CORPUS, ENGLISH_CORPUS)
#: The corpus task whose env settings the held-out score uses (and whose K the runs take).
BASE_TASK = "trl-gao"
#: Seeds of the normalised score (the fewest a reported score uses) and with ``--quick``.
SCORE_SEEDS, QUICK_SCORE_SEEDS = 30, 6
#: Bootstrap resamples of the detection CIs.
N_BOOT = 2000
#: The drifts tried for each CUSUM, in units of the median absolute move of its input.
DRIFTS = (0.0, 0.5, 1.0)
#: What each boundary means in the table.
BOUNDARIES = ("evals", "signals", "both")
#: How a detector's threshold is chosen on the train runs: recall - FPR (Youden's J), or
#: the utility the suite scores (:func:`stop_utility`).
TUNINGS = ("J", "utility")
#: The suffix of a utility-tuned detector's name.
UTILITY_SUFFIX = " (utility-tuned)"
SIGNAL_TITLES = {
    "kl": "KL rise",
    "reward": "proxy-reward rise",
    "entropy": "entropy collapse",
    "reward_std": "reward-std collapse",
    "completion_length": "completion growth",
    "clip_ratio": "clip-ratio rise",
}


@dataclass
class Runs:
    """One side of the split: its traces and what the detectors see and are measured on."""

    traces: list[CurveTrace]
    observations: list[list[dict[str, np.ndarray]]]
    hacking: np.ndarray  # (n,) bool
    peak_ckpt: np.ndarray  # (n,) 0-based checkpoint of the resampled gold's peak
    peak_progress: np.ndarray  # (n,) the gold's true peak, progress in [0, 1]
    cells: list[str]
    gold: np.ndarray  # (n, K) the gold at the K checkpoints
    evals: np.ndarray  # (n, K) the recorded evals at the K checkpoints (what is observed)

    @classmethod
    def of(
        cls,
        traces: Sequence[CurveTrace],
        k: int,
        signals: Sequence[str],
        scale: CorpusMap | None = None,
    ) -> Runs:
        """The runs of ``traces`` on ``k`` checkpoints with ``signals`` observed.

        ``scale``: the common map the scored task shows the evals on (None: each run's own).
        """
        traces = list(traces)
        golds, evals = [], []
        for t in traces:
            _, ev, _, gold = resample(t, k)
            assert gold is not None
            golds.append(gold)
            evals.append(ev)
        gold_k = np.array(golds, dtype=float).reshape(len(traces), k)
        return cls(
            traces,
            run_observations(traces, k, signals, scale),
            np.array([bool(t.label) for t in traces]),
            np.argmax(gold_k, axis=1) if traces else np.zeros(0, dtype=int),
            np.array([peak_progress(t.gold, t.step) for t in traces]),
            [cell_of(t) for t in traces],
            gold_k,
            np.array(evals, dtype=float).reshape(len(traces), k),
        )

    def past_peak(self) -> list[np.ndarray]:
        """Per run, per checkpoint: a hacking run at or after its peak (where a stop is right)."""
        k = len(self.observations[0])
        return [h & (np.arange(k) >= p) for h, p in zip(self.hacking, self.peak_ckpt)]


def stat_matrix(stat: Callable[[dict[str, np.ndarray]], float], runs: Runs) -> np.ndarray:
    """(n, K - 1): ``stat`` of each run's observation after each checkpoint but the last."""
    return np.array([[stat(o) for o in run[:-1]] for run in runs.observations])


def detector_stats(probe: Cusum | SignalCusum, runs: Runs) -> np.ndarray:
    """:func:`stat_matrix` of the statistic ``probe`` compares (the eval CUSUM's or a signal
    CUSUM's): the same numbers, each run's in one pass (:func:`baselines.signals.job_statistics`)."""
    return np.array([job_statistics(probe, run[:-1]) for run in runs.observations], dtype=float)


def stops_at(stats: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """The first checkpoint whose statistic exceeds ``threshold``; -1: no stop.

    (n,) for one threshold; (n, C) for an array of C thresholds, column c for the c-th.
    """
    thr = np.asarray(threshold, dtype=float)
    fire = stats[:, :, None] > thr.reshape(1, 1, -1)
    out = np.where(fire.any(axis=1), fire.argmax(axis=1), -1)
    return out[:, 0] if thr.ndim == 0 else out


def youden(stops: np.ndarray, runs: Runs) -> tuple[Any, Any]:
    """(recall - FPR, mean lead in checkpoints of the stopped hacking runs) of ``stops``.

    ``stops`` (n,) gives two floats; (n, C) gives two (C,) arrays, one value per column.
    """
    one = stops.ndim == 1
    st = stops[:, None] if one else stops
    fired = st >= 0
    h = runs.hacking
    recall = fired[h].mean(axis=0) if h.any() else np.zeros(st.shape[1])
    fpr = fired[~h].mean(axis=0) if (~h).any() else np.zeros(st.shape[1])
    tp = fired & h[:, None]
    n_tp = tp.sum(axis=0)
    total = np.where(tp, runs.peak_ckpt[:, None] - st, 0).sum(axis=0)
    lead = np.where(n_tp > 0, total / np.maximum(n_tp, 1), -np.inf)
    j = recall - fpr
    return (float(j[0]), float(lead[0])) if one else (j, lead)


@dataclass(frozen=True)
class Price:
    """What a checkpoint costs and what a gold point is worth, in the held-out task's units.

    Attributes:
        per_checkpoint: GPU-hour price x an RLHF job's mean GPU-hours / K (eval units).
        scale: Eval units per gold unit: the corpus's common map, or None for each run's
            own scale (``GAIN`` / its gold gain: the per-run replay).
    """

    per_checkpoint: float
    scale: float | None


def task_price(kw: dict[str, Any]) -> Price:
    """The :class:`Price` of the env kwargs ``kw`` (a corpus task)."""
    config = EvalStopConfig.from_kwargs(**kw)
    sim = config.sim_config
    hours = get_workload(sim.workload).profiles[RLHF].mean_gpu_hours()
    k = sim.resolved_calibration().evals_per_job
    scale = corpus_map(kw["curves"]).eval_factor if kw.get("curve_scale") == "corpus" else None
    return Price(config.gpu_hour_price * hours / k, scale)


def stop_utility(stops: np.ndarray, runs: Runs, price: Price) -> Any:
    """Mean utility over ``runs`` of stopping run r after checkpoint ``stops[r]`` (-1: never).

    A stopped (or finished) run delivers its best observed checkpoint so far (ties: the
    earlier), worth its gold in eval units, and has paid ``price.per_checkpoint`` for each
    checkpoint it ran: the per-job utility the suite's score is made of, on the runs' own
    recorded evals.  ``stops`` (n,) gives a float; (n, C) a (C,) array, one per column.
    """
    n, k = runs.gold.shape
    one = stops.ndim == 1
    st = stops[:, None] if one else stops
    if n == 0:
        out = np.zeros(st.shape[1])
        return float(out[0]) if one else out
    end = np.where(st < 0, k - 1, st)
    # best_at[r, e]: run r's best observed checkpoint among 0..e (a strict rise moves it).
    best_at = np.zeros((n, k), dtype=int)
    for e in range(1, k):
        prev = best_at[:, e - 1]
        rise = runs.evals[:, e] > runs.evals[np.arange(n), prev]
        best_at[:, e] = np.where(rise, e, prev)
    best = np.take_along_axis(best_at, end, axis=1)
    if price.scale is None:
        scale = np.array([GAIN / gold_gain(t) for t in runs.traces])
    else:
        scale = np.full(n, price.scale)
    delivered = np.take_along_axis(runs.gold, best, axis=1)
    value = scale[:, None] * delivered - price.per_checkpoint * (end + 1)
    out = value.mean(axis=0)
    return float(out[0]) if one else out


def tune_threshold(
    stats: np.ndarray, runs: Runs, price: Price | None = None
) -> tuple[float, float, float]:
    """(threshold, criterion, lead) maximising the criterion on ``runs``, ties to the larger lead.

    The criterion is J (recall - FPR), or with ``price`` the mean :func:`stop_utility`;
    among equal (criterion, lead) the first candidate (the lowest threshold) is kept.
    """
    values = np.unique(stats[np.isfinite(stats)])
    # A threshold just below each observed value fires at it; above the largest, never.
    cands = [*(np.nextafter(v, -np.inf) for v in values), float(values.max()) + 1.0]
    if len(cands) > 400:
        cands = [*np.quantile(values, np.linspace(0, 1, 400)), cands[-1]]
    thr = np.array(cands, dtype=float)
    stops = stops_at(stats, thr)
    j, lead = youden(stops, runs)
    if price is not None:
        j = stop_utility(stops, runs, price)
    best = (-np.inf, -np.inf, cands[-1])
    for c in range(len(cands)):
        if (float(j[c]), float(lead[c])) > best[:2]:
            best = (float(j[c]), float(lead[c]), float(thr[c]))
    return best[2], best[0], best[1]


def _scale(runs: Runs, field: str, order: int = 1) -> float:
    """The median absolute ``order``-th move of ``field`` over the train runs (drift unit)."""
    moves = []
    for run in runs.observations:
        last = run[-1][field]
        k = len(last) // 2
        moves.append(np.abs(np.diff(last[:k][last[k:] > 0.5], n=order)))
    allm = np.concatenate(moves) if moves else np.zeros(1)
    m = float(np.median(allm)) if allm.size else 0.0
    return m if m > 0 else float(np.mean(allm)) if allm.size and np.mean(allm) > 0 else 1.0


@dataclass
class Detector:
    """A tuned detector of E12: its policy, boundary, family and train figures."""

    name: str
    boundary: str
    policy: Any
    obs_fields: tuple[str, ...]
    train_j: float  # the tuning criterion on the train runs (J, or the mean utility)
    tuning: str = "J"


def tune_cusums(train: Runs, signals: Sequence[str], price: Price | None = None) -> list[Detector]:
    """The eval CUSUM and each signal's CUSUM(s), thresholds and drifts tuned on ``train``.

    For J, or with ``price`` for the utility (:func:`tune_threshold`).
    """
    out = []
    tuning = "J" if price is None else "utility"
    eval_unit = _scale(train, "evals")
    best: tuple[float, float, Any] | None = None
    for drift in DRIFTS:
        probe = Cusum(threshold=1.0, drift=drift * eval_unit)
        stats = detector_stats(probe, train)
        thr, j, lead = tune_threshold(stats, train, price)
        if best is None or (j, lead) > best[:2]:
            best = (j, lead, Cusum(threshold=max(thr, 1e-12), drift=drift * eval_unit))
    assert best is not None
    out.append(Detector("CUSUM on evals", "evals", best[2], (), best[0], tuning))
    for signal in signals:
        orders = (1, 2) if signal == "kl" else (1,)
        for order in orders:
            unit = _scale(train, signal, order)
            chosen: tuple[float, float, Any] | None = None
            for drift in DRIFTS:
                probe = SignalCusum(signal, 1.0, drift * unit, order)
                stats = detector_stats(probe, train)
                thr, j, lead = tune_threshold(stats, train, price)
                if chosen is None or (j, lead) > chosen[:2]:
                    det = SignalCusum(signal, max(thr, 1e-12), drift * unit, order)
                    chosen = (j, lead, det)
            assert chosen is not None
            title = "KL acceleration" if order == 2 else SIGNAL_TITLES[signal]
            name = f"CUSUM: {title}"
            out.append(Detector(name, "signals", chosen[2], (signal,), chosen[0], tuning))
    return out


def _eval_cusum(probe: Cusum, obs: dict[str, np.ndarray]) -> float:
    """The eval CUSUM's statistic (the one :class:`baselines.Cusum` compares)."""
    return cusum_statistic(observed(obs["evals"]), probe.drift)


def fit_learned(
    train: Runs,
    signals: Sequence[str],
    evals: bool,
    name: str,
    folds: int = 4,
    prices: Sequence[Price | None] = (None,),
) -> list[Detector]:
    """The learned detector on ``signals`` (and the evals), one per tuning of ``prices``.

    Its threshold is tuned on probabilities cross-fitted over train cells, for J (None) or
    for the utility at a :class:`Price`; the probabilities and the final fit are shared.
    """
    cells = sorted(set(train.cells))
    rng = np.random.default_rng(0)
    order = list(rng.permutation(len(cells)))
    fold_of = {cells[i]: n % folds for n, i in enumerate(order)}
    past = train.past_peak()
    probs = np.zeros((len(train.traces), len(train.observations[0]) - 1))
    for f in range(folds):
        held = [i for i, c in enumerate(train.cells) if fold_of[c] == f]
        fit = [i for i, c in enumerate(train.cells) if fold_of[c] != f]
        if not held or not fit or len({bool(np.any(past[i])) for i in fit}) < 2:
            continue
        model = LearnedDetector.fit(
            [train.observations[i] for i in fit], [past[i] for i in fit], signals, evals
        )
        for i in held:
            probs[i] = model.probabilities(train.observations[i][:-1])
    final = LearnedDetector.fit(train.observations, past, signals, evals, 0.5, name)
    boundary = "both" if evals else "signals"
    out = []
    for price in prices:
        thr, j, _ = tune_threshold(probs, train, price)
        thr = float(min(max(thr, 0.0), 1.0))
        model = dataclasses.replace(final, threshold=thr)
        tuning = "J" if price is None else "utility"
        out.append(Detector(name, boundary, model, tuple(signals), j, tuning))
    return out


def detectors_for(
    train: Runs,
    signals: Sequence[str],
    common: Sequence[str] | None = None,
    prices: Sequence[Price | None] = (None,),
) -> list[Detector]:
    """Every detector of E12, tuned on ``train``: evals only, each signal, learned, both.

    ``signals``: those some run logged (a CUSUM each); ``common``: those every run logged
    (the learned detectors' inputs; default ``signals``).  One set per entry of
    ``prices``: None tunes for J (with the untuned EvalStop(k=2) first), a :class:`Price`
    for the utility (names ending in :data:`UTILITY_SUFFIX`).
    """
    common = tuple(signals if common is None else common)
    learned = {
        evals: fit_learned(train, common, evals, title, prices=prices) if common else []
        for evals, title in ((False, "Learned (signals)"), (True, "Learned (signals + evals)"))
    }
    out: list[Detector] = []
    for n, price in enumerate(prices):
        cusums = tune_cusums(train, signals, price)
        part = [*cusums]
        if price is None:
            part.insert(0, Detector("EvalStop(k=2)", "evals", EvalStop(2), (), float("nan"), "–"))
        if common:
            part.append(learned[False][n])
        if signals:
            sig = [d for d in cusums if d.boundary == "signals"]
            best = max(sig, key=lambda d: d.train_j)
            both = AnyOf([cusums[0].policy, best.policy], name=f"evals or {best.name}")
            name = f"CUSUM on evals or {best.name}"
            part.append(Detector(name, "both", both, best.obs_fields, float("nan"), best.tuning))
        if common:
            part.append(learned[True][n])
        if price is not None:
            part = [dataclasses.replace(d, name=d.name + UTILITY_SUFFIX) for d in part]
        out += part
    return out


@functools.lru_cache(maxsize=8)
def _resamples(n: int, n_boot: int, seed: int) -> np.ndarray:
    """The ``n_boot`` resamples of ``n`` runs :func:`_boot` draws, one per row (read-only).

    Drawn one resample at a time, as the bootstrap always drew them (a single draw of
    shape ``(n_boot, n)`` takes other values from the generator); every statistic of
    every detector resamples the same rows, so they are drawn once.
    """
    rng = np.random.default_rng(seed)
    rows = np.array([rng.integers(0, n, n) for _ in range(n_boot)]).reshape(n_boot, n)
    rows.flags.writeable = False
    return rows


def _boot(
    values: Callable[[np.ndarray], float],
    n: int,
    n_boot: int = N_BOOT,
    seed: int = 0,
    batch: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[float, float]:
    """95 % percentile CI of ``values(index)`` over ``n_boot`` resamples of n runs.

    ``batch(rows)``, when given, computes ``values`` of every resample at once (a row of
    ``rows`` per resample) and must give the very same numbers.
    """
    rows = _resamples(n, n_boot, seed)
    draws = batch(rows) if batch is not None else np.array([values(i) for i in rows], float)
    draws = draws[np.isfinite(draws)]
    if not draws.size:
        return float("nan"), float("nan")
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def _share(hits: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Per row, the share of ``of``'s True entries where ``hits`` is True (NaN: none).

    Integer counts divided once: the numbers ``hits[of].mean()`` gives row by row (a
    mean of booleans is their exact count over their number).
    """
    num, den = (hits & of).sum(axis=1), of.sum(axis=1)
    return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def detection_row(det: Detector, test: Runs, n_boot: int = N_BOOT) -> dict[str, Any]:
    """Precision, recall, FPR, warned-before-peak share and lead times on ``test``, with CIs."""
    stops = np.array([_first_stop(det.policy, run) for run in test.observations])
    k = len(test.observations[0])
    fired = stops >= 0
    h = test.hacking
    lead_p = test.peak_progress - (stops + 1) / k
    lead_c = (test.peak_ckpt - stops).astype(float)

    def prec(i: np.ndarray) -> float:
        f, hh = fired[i], h[i]
        return float((f & hh).sum() / f.sum()) if f.sum() else float("nan")

    def rec(i: np.ndarray) -> float:
        return float(fired[i][h[i]].mean()) if h[i].any() else float("nan")

    def fpr(i: np.ndarray) -> float:
        return float(fired[i][~h[i]].mean()) if (~h[i]).any() else float("nan")

    def early(i: np.ndarray) -> float:
        hh = h[i]
        return float((fired[i] & (lead_c[i] >= 0))[hh].mean()) if hh.any() else float("nan")

    # The same statistics over a matrix of resamples (a row each), for the bootstrap.
    batches: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "precision": lambda r: _share(h[r], fired[r]),
        "recall": lambda r: _share(fired[r], h[r]),
        "fpr": lambda r: _share(fired[r], ~h[r]),
        "warned_before_peak": lambda r: _share(fired[r] & (lead_c[r] >= 0), h[r]),
    }

    def lead(arr: np.ndarray) -> Callable[[np.ndarray], float]:
        def f(i: np.ndarray) -> float:
            tp = (fired & h)[i]
            return float(arr[i][tp].mean()) if tp.any() else float("nan")

        return f

    n = len(stops)
    row: dict[str, Any] = {
        "experiment": ID,
        "detector": det.name,
        "boundary": det.boundary,
        "params": repr(det.policy),
        "n_test": n,
        "n_hacking": int(h.sum()),
        "train_j": det.train_j,
        "tuning": det.tuning,
    }
    all_i = np.arange(n)
    for key, fn in (
        ("precision", prec),
        ("recall", rec),
        ("fpr", fpr),
        ("warned_before_peak", early),
        ("lead_progress", lead(lead_p)),
        ("lead_ckpt", lead(lead_c)),
    ):
        row[key] = fn(all_i)
        row[f"{key}_lo"], row[f"{key}_hi"] = _boot(fn, n, n_boot, batch=batches.get(key))
    return row


def _first_stop(policy: Any, observations: Sequence[dict[str, np.ndarray]]) -> int:
    stop = first_stop(policy, observations)
    return -1 if stop is None else stop


def heldout_task(
    test: Sequence[CurveTrace], folder: Path, corpus: str = ""
) -> tuple[str, dict[str, Any]]:
    """(name, env kwargs) of the task the held-out runs are scored on.

    The suite's held-out task of a packaged corpus (``evalstop_gym.suite.HELDOUT_TASKS``:
    the test side of the same split, CurveOracle its reference); for any other corpus
    ``trl-gao``'s settings on the held-out runs alone, written to ``folder/heldout.jsonl``.
    """
    for name, packaged in HELDOUT_TASKS.items():
        if packaged == corpus:
            return name, suite_task(name, split="test")
    path = folder / "heldout.jsonl"
    write_traces(test, path)
    return f"{BASE_TASK} on the held-out runs", suite_task(BASE_TASK, curves=str(path))


def train_task(corpus: str = "") -> dict[str, Any]:
    """The env kwargs whose price and scale a utility-tuned detector is tuned for.

    The train side of the corpus's held-out task (``evalstop_gym.suite.HELDOUT_TASKS``), or
    ``trl-gao``'s settings for any other corpus (each run on its own scale).
    """
    for name, packaged in HELDOUT_TASKS.items():
        if packaged == corpus:
            return suite_task(name, split="train")
    return suite_task(BASE_TASK)


def score_stoppers(detectors: Sequence[Detector]) -> list[Stopper]:
    """The stoppers :func:`score_rows` scores: NoStop, every detector, both references."""
    stoppers = [Stopper(NOSTOP, "NoStop", NoStop())]
    for d in detectors:
        env = {"obs_fields": list(d.obs_fields)} if d.obs_fields else {}
        stoppers.append(Stopper(EXTRA, d.name, d.policy, env))
    # Both privileged references: a held-out task is normalised to the CurveOracle,
    # another corpus task to the Oracle (scoring.reference_for).
    stoppers.append(Stopper(CURVE_ORACLE, "CurveOracle", CurveOracle()))
    stoppers.append(Stopper(ORACLE, "Oracle", None))
    return stoppers


def score_rows(
    detectors: Sequence[Detector], kw: dict[str, Any], seeds: Sequence[int]
) -> dict[str, tuple[float, float, float]]:
    """Detector name -> (normalised score, CI low, CI high) on the env kwargs ``kw``.

    The numbers :func:`~evalstop_experiments.scoring.score_task` gives for
    :func:`score_stoppers` (a test compares them), without playing the per-job
    detectors: each job's end is its first stop on the observations the env shows it
    (:func:`per_job_runs`); only the privileged references are played.
    """
    stoppers = score_stoppers(detectors)
    heldout = is_heldout(kw)
    runs = []
    observations: dict[Any, list[JobObs]] = {}
    for st in stoppers:
        if decides_per_job(st.policy):
            runs.append(per_job_runs(st, kw, seeds, heldout, observations))
        else:
            terms = kw if heldout else None
            runs.append([play({**kw, **st.env}, s, st.policy, job_terms=terms) for s in seeds])
    _, u0, uref, groups, units = reference_sums(kw, seeds, stoppers, runs)
    out: dict[str, tuple[float, float, float]] = {}
    for st, rs in zip(stoppers, runs):
        u = [r["utility"] for r in rs]
        got = normalised_score(u, u0, uref)
        if units is not None:
            su = unit_sums(groups, [r["job_terms"] for r in rs])
            got = (got[0], *run_bootstrap_score(su, units[0], units[1])[1:])
        out[st.name] = got
    return out


def per_job_runs(
    st: Stopper,
    kw: dict[str, Any],
    seeds: Sequence[int],
    heldout: bool,
    observations: dict[Any, list[JobObs]] | None = None,
) -> list[dict[str, Any]]:
    """Per seed, the ``utility`` (and with ``heldout`` the ``job_terms``) a played episode of
    the per-job stopper ``st`` gives, from each job's first stop on its observations.

    A job's observations are the env's rows (:func:`~evalstop_experiments.scoring.job_observations`
    with the stopper's own ``env``), decided as ``act`` decides them
    (:func:`baselines.signals.stop_flags`); a job never stopped ends at its last checkpoint
    (the env asks every job after each checkpoint but its last: no truncation).  The utility is the episode's
    (:func:`evalstop_gym.sim.metrics.honest_metrics`: the terms V_end - V_1 summed by
    ``np.sum``), the job terms :func:`~evalstop_experiments.scoring.play`'s.
    ``observations`` keeps the jobs' observations by env and seed for the next stopper.
    """
    out = []
    cache = {} if observations is None else observations
    play_kw = {**kw, **st.env}
    for s in seeds:
        key = (repr(sorted(play_kw.items())), int(s))
        if key not in cache:
            cache[key] = job_observations(play_kw, int(s))
        jobs = cache[key]
        values = episode_arrays(kw, int(s)).values
        ends = np.full(len(jobs), values.shape[1])
        for j, job in enumerate(jobs):
            fired = np.flatnonzero(stop_flags(st.policy, job.obs))
            if len(fired):
                ends[j] = fired[0] + 1
        terms = utility_terms(values, ends)
        row: dict[str, Any] = {"utility": float(np.sum(terms))}
        if heldout:
            row["job_terms"] = terms
        out.append(row)
    return out


def e12(
    traces: Sequence[CurveTrace],
    *,
    corpus: str = "corpus",
    score_seeds: Sequence[int] = (),
    n_jobs: int | None = None,
    folder: str | os.PathLike[str] | None = None,
    n_boot: int = N_BOOT,
) -> list[dict[str, Any]]:
    """E12's rows on one corpus: every detector's held-out detection figures and score.

    Args:
        traces: The corpus (every run with gold and label).
        corpus: Its name in the rows.
        score_seeds: Seeds of the normalised score (none: no score).
        n_jobs: Jobs per scoring episode (None: the task's).
        folder: Where the held-out corpus is written for scoring (default: a temporary one).
        n_boot: Bootstrap resamples of the detection CIs.
    """
    traces = list(traces)
    if any(t.gold is None or t.label is None for t in traces):
        raise ConfigError("traces", corpus, "a corpus whose every run has gold and label")
    base = suite_task(BASE_TASK)
    k = EvalStopConfig.from_kwargs(**base).sim_config.resolved_calibration().evals_per_job
    split = split_runs(traces)
    signals = logged_signals(traces)
    common = [s for s in signals if all(trace_signal(t, s) is not None for t in traces)]
    logged = ", ".join(
        f"{s} {sum(trace_signal(t, s) is not None for t in traces)}/{len(traces)}" for s in signals
    )
    # Tuned and measured on the evals as the scored task shows them: a held-out task's
    # common map (each run's own map would hand a threshold every run's gain).
    tuning = train_task(corpus)
    scale = corpus_map(tuning["curves"]) if tuning.get("curve_scale") == "corpus" else None
    train = Runs.of(select(traces, split, "train"), k, signals, scale)
    test = Runs.of(select(traces, split, "test"), k, signals, scale)
    price = task_price(tuning)
    detectors = detectors_for(train, signals, common, (None, price))
    rows = [detection_row(d, test, n_boot) for d in detectors]
    scores: dict[str, tuple[float, float, float]] = {}
    task = ""
    if score_seeds:
        with tempfile.TemporaryDirectory() as tmp:
            where = Path(folder) if folder is not None else Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            task, kw = heldout_task(test.traces, where, corpus)
            if n_jobs is not None:
                kw["n_jobs"] = n_jobs
            scores = score_rows(detectors, kw, list(score_seeds))
    missing = [s for s in SIGNAL_FIELDS if s not in signals]
    for r in rows:
        r["corpus"] = corpus
        r["signals"] = ",".join(signals)
        r["signals_missing"] = ",".join(missing)
        r["signals_logged"] = logged
        r["n_train"] = len(train.traces)
        r["k"] = k
        sc = scores.get(r["detector"], (float("nan"),) * 3)
        r["score"], r["score_lo"], r["score_hi"] = sc
        r["score_seeds"] = len(score_seeds)
        r["score_task"] = task
    return rows


#: The columns of ``E12.csv``, in order.
COLUMNS = (
    "corpus", "boundary", "detector", "precision", "precision_lo", "precision_hi", "recall",
    "recall_lo", "recall_hi", "fpr", "fpr_lo", "fpr_hi", "warned_before_peak",
    "warned_before_peak_lo", "warned_before_peak_hi", "lead_progress", "lead_progress_lo",
    "lead_progress_hi", "lead_ckpt", "lead_ckpt_lo", "lead_ckpt_hi", "score", "score_lo",
    "score_hi", "score_seeds", "n_train", "n_test", "n_hacking", "k", "train_j", "tuning", "signals",
    "signals_missing", "signals_logged", "score_task", "params",
)  # fmt: skip


def write_e12(out: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``OUT/E12.csv``."""
    path = Path(out) / "E12.csv"
    with atomic_open(path, "w") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E12 on every corpus of :data:`CORPORA`: detection on held-out runs and their score."""
    n = QUICK_SCORE_SEEDS if opts.quick else SCORE_SEEDS
    rows: list[dict[str, Any]] = []
    for name in CORPORA:
        folder = Path(out) / "E12" / name
        rows += e12(
            load_corpus(name),
            corpus=name,
            score_seeds=range(n),
            n_jobs=opts.jobs_per_episode,
            folder=folder,
        )
    path = write_e12(out, rows)
    plan.report_rows += rows
    plan.header[ID] = f"detectors on held-out runs of {', '.join(CORPORA)}: {path.name}"


def _ci(r: dict[str, Any], key: str, digits: int = 2, pct: bool = False) -> str:
    v, lo, hi = r.get(key), r.get(f"{key}_lo"), r.get(f"{key}_hi")
    if v is None or not np.isfinite(v):
        return "–"
    f = 100.0 if pct else 1.0
    d = 0 if pct else digits
    if lo is None or not np.isfinite(lo):
        return f"{f * v:.{d}f}"
    return f"{f * v:.{d}f} [{f * lo:.{d}f}, {f * hi:.{d}f}]"


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E12 section: one table per corpus, a row per detector."""
    rows = [s for s in summary if s.get("experiment") == ID]
    if not rows:
        return []
    lines = [
        f"## E12 — {EXPERIMENT.title}",
        "",
        "Held-out runs of the fixed split by grid cell (thresholds and models fitted on the "
        "train runs). Recall, FPR and 'warned ≤ peak' in %; lead = gold peak − stop "
        "(positive: before the peak) over the hacking runs stopped; [95 % bootstrap CI over "
        "runs]. Tuned for: recall − FPR (J) or the suite's utility on the train runs. Score: the "
        "suite's normalised score on the held-out runs (NoStop 0, its reference 1).",
        "",
    ]
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        rs = [r for r in rows if r["corpus"] == corpus]
        r0 = rs[0]
        lines += [
            f"**{corpus}**: {r0['n_train']} train / {r0['n_test']} test runs "
            f"({r0['n_hacking']} hacking), {r0['k']} checkpoints; signals (runs that "
            f"logged them): {r0['signals_logged'] or 'none'}"
            + (f" (not logged: {r0['signals_missing']})" if r0["signals_missing"] else "")
            + f"; score on {r0['score_seeds']} seeds of {r0['score_task'] or '–'}.",
            "",
            "| boundary | detector | tuned for | precision | recall % | FPR % | warned ≤ peak % | "
            "lead (progress) | lead (ckpts) | score |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        order = {t: i for i, t in enumerate(("–", *TUNINGS))}
        for r in sorted(
            rs, key=lambda r: (order.get(r["tuning"], 0), BOUNDARIES.index(r["boundary"]))
        ):
            lines.append(
                f"| {r['boundary']} | {r['detector']} | {r['tuning']} | {_ci(r, 'precision')} | "
                f"{_ci(r, 'recall', pct=True)} | {_ci(r, 'fpr', pct=True)} | "
                f"{_ci(r, 'warned_before_peak', pct=True)} | {_ci(r, 'lead_progress')} | "
                f"{_ci(r, 'lead_ckpt', 1)} | {_ci(r, 'score')} |"
            )
        lines.append("")
    return lines


EXPERIMENT = Experiment(
    ID,
    "Which signal warns first on real runs: evals, training-side signals or both",
    12,
    build,
    section=section,
    background=True,
    work="signal_detectors",
)
