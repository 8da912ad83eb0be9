"""E12's runs: one side of the split as the detectors see it, and what stopping them gives.

:class:`Runs` holds a side's traces, the observations the env shows each run, its labels
and peaks; :func:`stops_at` turns a statistic's matrix into first stops, :func:`youden`
scores them by recall - FPR, and :func:`stop_utility` by the utility the suite scores at
a :class:`Price` (:func:`task_price`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines import Cusum
from baselines.signals import SignalCusum, job_statistics, run_observations
from evalstop_gym.corpus import CurveTrace, peak_progress, resample
from evalstop_gym.corpus.split import cell_of
from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.sim.real_curves import GAIN, CorpusMap, corpus_map, gold_gain
from evalstop_gym.sim.workloads import RLHF, get_workload


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
