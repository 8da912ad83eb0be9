"""E12's detectors, tuned on the train runs: the eval CUSUM, a CUSUM per signal, learned ones.

:func:`tune_threshold` picks a threshold for J (recall - FPR) or the utility;
:func:`tune_cusums` and :func:`fit_learned` tune each family; :func:`detectors_for` makes
every :class:`Detector` E12 reports (evals only, each signal, learned, both).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines import Cusum, EvalStop
from baselines.changepoint import cusum_statistic
from baselines.signals import AnyOf, LearnedDetector, SignalCusum
from evalstop_gym.envs.tables import observed

from .runs import Price, Runs, detector_stats, stop_utility, stops_at, youden

#: The drifts tried for each CUSUM, in units of the median absolute move of its input.
DRIFTS = (0.0, 0.5, 1.0)
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
