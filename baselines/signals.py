"""Detectors of reward hacking on training-side signals, on evals, and on both.

The paper's stoppers see the evals and the loss (the boundary).  A trainer logs more:
the proxy reward, the KL to the reference policy, the policy's entropy (TRL's
per-step keys, observed with ``obs_fields``; :mod:`evalstop_gym.sim.signals`).  The
detectors here stop a job when one of those signals shows the pattern reward hacking
is said to leave (Gao et al. 2023; the "Audit or Early Warning?" benchmark):

* :class:`SignalCusum` -- a one-sided CUSUM (Page, 1954) on a signal's successive
  differences (``order=1``: the signal rises or falls faster than ``drift``) or on
  their differences (``order=2``: it accelerates): KL acceleration, entropy collapse,
  proxy-reward rise;
* :class:`AnyOf` -- stop when any of several detectors fires (evals *and* signals);
* :class:`LearnedDetector` -- a logistic regression on features of the signals (and,
  if asked, the evals), fitted on labelled runs (:meth:`LearnedDetector.fit`; scikit-learn),
  applied with numpy only.

Every detector is boundary-respecting: it reads the observation only, and its
``obs_fields`` lists the signals it needs (what an env or a scoring run must add).  A
job without the signal (a synthetic LoRA or DPO job) is never stopped by a signal
detector.  :func:`run_observations` gives a corpus run's observations exactly as the
env shows them, so detectors can be tuned and measured on runs directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evalstop_gym.corpus import CurveTrace
from evalstop_gym.corpus.analysis import resample
from evalstop_gym.envs.core import BOUNDS, ObservationLayout, signal_windows
from evalstop_gym.envs.tables import observation_rows, observed
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.boundary import BOUNDARY_FIELDS
from evalstop_gym.sim.checkpoints import checkpoint_tables
from evalstop_gym.sim.real_curves import BASE, GAIN, LOSS_FLOOR, CorpusMap, gold_gain
from evalstop_gym.sim.signals import SIGNAL_FIELDS, resample_signal
from evalstop_gym.sim.workloads import JOB_TYPES, RLHF

from .policies import Obs, need_field

#: The direction in which each signal is said to move when a run starts to hack: the KL
#: and the proxy reward climb, the entropy collapses, completions grow, clipping grows.
HACKING_DIRECTION: dict[str, int] = {
    "reward": 1,
    "reward_std": -1,
    "kl": 1,
    "entropy": -1,
    "completion_length": 1,
    "clip_ratio": 1,
}


def _check_signal(signal: str) -> str:
    if signal not in SIGNAL_FIELDS:
        raise ConfigError(
            "signal", signal, f"one of the training-side signals {list(SIGNAL_FIELDS)}"
        )
    return signal


def signal_cusum(values: np.ndarray, direction: int, drift: float, order: int = 1) -> float:
    """The CUSUM statistic of a signal's ``order``-th differences in ``direction`` (+1 or -1).

    With d_i the differences, S_i = max(0, S_{i-1} + direction * d_i - drift); the
    statistic after the values given (oldest first).  Fewer than ``order + 1`` values: 0.
    """
    d = np.diff(np.asarray(values, dtype=float), n=order)
    s = 0.0
    for x in direction * d:
        s = max(0.0, s + x - drift)
    return s


class SignalCusum:
    """Stop when the CUSUM of one signal's moves in its hacking direction exceeds ``threshold``.

    Args:
        signal: The observed signal (``"kl"``, ``"entropy"``, ``"reward"``, ...).
        threshold: The statistic above which to stop (> 0, the signal's units).
        drift: Moves up to this size per checkpoint are forgiven (>= 0).
        order: 1 on the differences (a rise or fall), 2 on their differences (acceleration).
        direction: +1 (rise) or -1 (fall); default :data:`HACKING_DIRECTION`.
    """

    def __init__(
        self,
        signal: str,
        threshold: float,
        drift: float = 0.0,
        order: int = 1,
        direction: int | None = None,
    ) -> None:
        """Validate the arguments; see the class docstring."""
        self.signal = _check_signal(signal)
        if not isinstance(threshold, int | float) or not threshold > 0:
            raise ConfigError("threshold", threshold, "a number > 0 (the signal's units)")
        if not isinstance(drift, int | float) or not drift >= 0:
            raise ConfigError("drift", drift, "a number >= 0 (the signal's units)")
        if order not in (1, 2):
            raise ConfigError("order", order, "1 (differences) or 2 (acceleration)")
        direction = HACKING_DIRECTION[signal] if direction is None else direction
        if direction not in (1, -1):
            raise ConfigError("direction", direction, "+1 (rise) or -1 (fall)")
        self.threshold, self.drift = float(threshold), float(drift)
        self.order, self.direction = order, direction
        self.obs_fields: tuple[str, ...] = (signal,)
        self.name = f"CUSUM[{signal}{'' if order == 1 else ' accel'}]"

    def reset(self) -> None:
        """Stateless: the statistic is rebuilt from the observed window."""

    def statistic(self, obs: Obs) -> float:
        """The CUSUM statistic over the signal's observed values (0 for a job without it)."""
        values = observed(need_field(obs, self.signal, self.name))
        return signal_cusum(values, self.direction, self.drift, self.order)

    def act(self, obs: Obs) -> int:
        """1 when :meth:`statistic` exceeds the threshold."""
        return int(self.statistic(obs) > self.threshold)

    def __repr__(self) -> str:
        """Its parameters."""
        return (
            f"SignalCusum({self.signal!r}, threshold={self.threshold:.4g}, "
            f"drift={self.drift:.4g}, order={self.order}, direction={self.direction:+d})"
        )


class AnyOf:
    """Stop when any of ``detectors`` fires (e.g. the eval CUSUM or a signal's)."""

    def __init__(self, detectors: Sequence[object], name: str | None = None) -> None:
        """At least one detector, each with ``reset()`` and ``act(obs)``."""
        if not detectors:
            raise ConfigError("detectors", detectors, "at least one detector")
        self.detectors = tuple(detectors)
        fields: list[str] = []
        for d in self.detectors:
            fields += [f for f in getattr(d, "obs_fields", ()) if f not in fields]
        self.obs_fields = tuple(fields)
        self.name = name or " or ".join(getattr(d, "name", type(d).__name__) for d in detectors)

    def reset(self) -> None:
        """Reset every detector."""
        for d in self.detectors:
            d.reset()  # type: ignore[attr-defined]

    def act(self, obs: Obs) -> int:
        """1 when any detector says 1 (each is asked, so stateful ones stay in step)."""
        return int(max(int(d.act(obs)) == 1 for d in self.detectors))  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        """Its members."""
        return f"AnyOf({list(self.detectors)!r})"


# --------------------------------------------------------------------------------------------
# The learned detector
# --------------------------------------------------------------------------------------------


def _series_features(x: np.ndarray) -> list[float]:
    """Level change, last slope, last acceleration and drawdown of a series seen so far."""
    if x.size == 0:
        return [0.0, 0.0, 0.0, 0.0]
    slope = x[-1] - x[-2] if x.size > 1 else 0.0
    accel = x[-1] - 2 * x[-2] + x[-3] if x.size > 2 else 0.0
    return [float(x[-1] - x[0]), float(slope), float(accel), float(np.max(x) - x[-1])]


def features(obs: Obs, signals: Sequence[str], evals: bool) -> np.ndarray:
    """The learned detector's features of one observation (the past only).

    Per signal (and for the evals if ``evals``): change since the first checkpoint, last
    slope, last acceleration, drop below the running maximum; then the progress.
    """
    out: list[float] = []
    for s in signals:
        out += _series_features(observed(obs[s]))
    if evals:
        out += _series_features(observed(obs["evals"]))
    out.append(float(obs["progress"][0]))
    return np.asarray(out)


# --------------------------------------------------------------------------------------------
# A job's observations at once
#
# The observations an env shows a job after its checkpoints 1, 2, ..., m hold the job's
# history so far: with a window of at least m slots (``eval_window=None``, every corpus
# task, and :func:`run_observations`) observation c shows the first values of the last
# one's, as many as its mask marks.  A statistic of every prefix is then one pass over the
# last observation's values, in the same float operations as the per-observation code; a
# window shorter than the history (it drops old values) takes the per-observation code.


def _masks(observations: Sequence[Obs], field: str) -> np.ndarray | None:
    """(m, W) the presence masks of ``field`` in a job's observations (None: a window of fewer
    than m slots, or the field missing: the per-observation code then decides)."""
    last = observations[-1].get(field)
    if last is None or len(last) // 2 < len(observations):
        return None
    w = len(last) // 2
    return np.array([o[field][w:] for o in observations])


def _history(observations: Sequence[Obs], field: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, counts): the present values of ``field`` in a job's last observation (oldest
    first) and how many of them each observation shows (None: see :func:`_masks`)."""
    masks = _masks(observations, field)
    if masks is None:
        return None
    return observed(observations[-1][field]), (masks > 0.5).sum(axis=1)


def _prefix_features(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(m, 4): :func:`_series_features` of ``x[:n]`` for each n of ``counts``."""
    out = np.zeros((len(counts), 4))
    if not len(x):
        return out
    level = (x - x[0]).astype(float)
    slope = np.concatenate([[0.0], np.diff(x).astype(float)])
    accel = np.zeros(len(x))
    if len(x) > 2:
        accel[2:] = (x[2:] - 2 * x[1:-1] + x[:-2]).astype(float)
    drawdown = (np.maximum.accumulate(x) - x).astype(float)
    seen = counts > 0
    at = counts[seen] - 1
    out[seen] = np.stack([level[at], slope[at], accel[at], drawdown[at]], axis=1)
    return out


def features_table(observations: Sequence[Obs], signals: Sequence[str], evals: bool) -> np.ndarray:
    """(m, F): :func:`features` of each of a job's observations after its checkpoints 1, 2, ...
    (in order), the same numbers."""
    fields = [*signals, *(["evals"] if evals else [])]
    if not observations:
        return np.zeros((0, 4 * len(fields) + 1))
    hist = [_history(observations, f) for f in fields]
    if any(h is None for h in hist):
        return np.array([features(o, signals, evals) for o in observations])
    cols = [_prefix_features(x, n) for x, n in hist]  # type: ignore[misc]
    progress = np.array([float(o["progress"][0]) for o in observations])
    return np.concatenate([*cols, progress[:, None]], axis=1)


def _running_cusum(values: np.ndarray, direction: int, drift: float, order: int) -> np.ndarray:
    """(len + 1,): entry n the :func:`signal_cusum` of ``values[:n]`` (the same recursion)."""
    d = np.diff(np.asarray(values, dtype=float), n=order)
    out = np.zeros(len(values) + 1)
    s = 0.0
    for j, x in enumerate(direction * d):
        s = max(0.0, s + x - drift)
        out[j + order + 1] = s
    return out


def job_statistics(detector: object, observations: Sequence[Obs]) -> np.ndarray | None:
    """(m,): the statistic a :class:`SignalCusum` or :class:`~baselines.changepoint.Cusum`
    compares, for each of a job's observations after its checkpoints 1, 2, ... (in order);
    the same numbers as one call per observation.  None for any other detector."""
    from .changepoint import Cusum, cusum_statistic

    if type(detector) is SignalCusum:
        field = detector.signal
    elif type(detector) is Cusum:
        field = "evals"
    else:
        return None
    if not observations:
        return np.zeros(0)
    hist = _history(observations, field)
    if hist is None:
        if type(detector) is Cusum:
            return np.array(
                [cusum_statistic(observed(o["evals"]), detector.drift) for o in observations],
                dtype=float,
            )
        return np.array([detector.statistic(o) for o in observations], dtype=float)
    x, counts = hist
    if type(detector) is Cusum:
        # The eval CUSUM is the falls' first-difference CUSUM: s - d is s + (-d) to the bit.
        running = _running_cusum(x, -1, detector.drift, 1)
    else:
        running = _running_cusum(x, detector.direction, detector.drift, detector.order)
    return running[counts]


def stop_flags(detector: object, observations: Sequence[Obs]) -> np.ndarray:
    """(m,) bool: whether ``detector`` says stop at each of a job's observations after its
    checkpoints 1, 2, ... (in order), as ``act`` says it.

    At once for the stateless detectors of this module, :class:`~baselines.changepoint.Cusum`
    and ``NoStop``; any other (``EvalStop`` among them) is asked one observation at a time
    (after ``reset()``), every observation.
    """
    from .changepoint import Cusum
    from .policies import NoStop

    kind = type(detector)
    if kind in (SignalCusum, Cusum):
        stats = job_statistics(detector, observations)
        return np.asarray(stats > detector.threshold, dtype=bool)  # type: ignore[operator, attr-defined]
    if kind is LearnedDetector:
        return detector.probabilities(observations) > detector.threshold  # type: ignore[attr-defined]
    if kind is AnyOf:
        flags = np.zeros(len(observations), dtype=bool)
        for d in detector.detectors:  # type: ignore[attr-defined]
            flags |= stop_flags(d, observations)
        return flags
    if kind is NoStop:
        return np.zeros(len(observations), dtype=bool)
    detector.reset()  # type: ignore[attr-defined]
    return np.array([int(detector.act(o)) == 1 for o in observations], dtype=bool)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class LearnedDetector:
    """Stop when a logistic model's probability that the run is past a hacking peak exceeds ``threshold``.

    Fitted by :meth:`fit` (scikit-learn) on labelled runs; applied with numpy only (the
    standardisation and the linear model's coefficients are held here), so it pickles and
    plays anywhere.  Attributes are the fitted model.
    """

    signals: tuple[str, ...]
    evals: bool
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float
    name: str = "Learned"

    @property
    def obs_fields(self) -> tuple[str, ...]:
        """The signals it reads."""
        return self.signals

    def reset(self) -> None:
        """Stateless."""

    def probability(self, obs: Obs) -> float:
        """The model's probability that the job is past a hacking run's peak."""
        if any(not np.any(obs[s][len(obs[s]) // 2 :]) for s in self.signals):
            return 0.0  # a job without the signals (synthetic): never stopped
        z = (features(obs, self.signals, self.evals) - self.mean) / self.scale
        return float(1.0 / (1.0 + np.exp(-(z @ self.coef + self.intercept))))

    def act(self, obs: Obs) -> int:
        """1 when :meth:`probability` exceeds the threshold."""
        return int(self.probability(obs) > self.threshold)

    def probabilities(self, observations: Sequence[Obs]) -> np.ndarray:
        """(m,): :meth:`probability` of each of a job's observations after its checkpoints
        1, 2, ... (in order), the same numbers, its features computed at once
        (:func:`features_table`)."""
        m = len(observations)
        if m == 0:
            return np.zeros(0)
        masks = [_masks(observations, s) for s in self.signals]
        if any(mk is None for mk in masks):
            return np.array([self.probability(o) for o in observations], dtype=float)
        skip = np.zeros(m, dtype=bool)
        for mk in masks:
            skip |= ~mk.any(axis=1)  # type: ignore[union-attr]
        z = (features_table(observations, self.signals, self.evals) - self.mean) / self.scale
        out = np.zeros(m)
        for c in np.flatnonzero(~skip):
            out[c] = float(1.0 / (1.0 + np.exp(-(z[c] @ self.coef + self.intercept))))
        return out

    @classmethod
    def fit(
        cls,
        observations: Sequence[Sequence[Obs]],
        past_peak: Sequence[np.ndarray],
        signals: Sequence[str],
        evals: bool = False,
        threshold: float = 0.5,
        name: str = "Learned",
        c: float = 1.0,
    ) -> LearnedDetector:
        """Fit the model on runs' observations and their labels (scikit-learn).

        Args:
            observations: Per run, its observations at its checkpoints (:func:`run_observations`).
            past_peak: Per run, a bool per checkpoint: the run hacks and the checkpoint is at or
                after its gold peak (the checkpoints a stop is right at).
            signals: The signals it reads; ``evals``: the evals too.
            threshold: The probability above which it stops (tune it on held-back runs).
            name: Its display name.
            c: Inverse L2 regularisation strength of the logistic regression.
        """
        from sklearn.linear_model import LogisticRegression

        signals = tuple(_check_signal(s) for s in signals)
        x = np.concatenate(
            [features_table(run, signals, evals) for run in observations]
            or [np.zeros((0, 4 * (len(signals) + evals) + 1))]
        )
        y = np.concatenate([np.asarray(p, dtype=bool) for p in past_peak])
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale == 0] = 1.0
        model = LogisticRegression(C=c, max_iter=2000, class_weight="balanced")
        model.fit((x - mean) / scale, y)
        return cls(
            signals,
            evals,
            mean,
            scale,
            model.coef_[0].copy(),
            float(model.intercept_[0]),
            float(threshold),
            name,
        )

    def __repr__(self) -> str:
        """Its inputs and threshold (the coefficients are data)."""
        return (
            f"LearnedDetector(signals={list(self.signals)}, evals={self.evals}, "
            f"threshold={self.threshold:.3g})"
        )


# --------------------------------------------------------------------------------------------
# Corpus runs as the env shows them
# --------------------------------------------------------------------------------------------


def observed_run(
    trace: CurveTrace, k: int, scale: CorpusMap | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(eval, loss) of a corpus run on ``k`` checkpoints, as an RLHF job on it observes them.

    The simulator's maps (:mod:`evalstop_gym.sim.real_curves`): by default each run's own
    (the published replay: the gold starts at ``BASE`` and gains ``GAIN``, the eval on the
    same map, the loss from 1 down to ``LOSS_FLOOR``); with ``scale`` the corpus's common
    map (the held-out tasks' ``curve_scale="corpus"``, which no run's own peak enters).
    No extra eval noise, warp or jitter: the run's recorded evals.
    """
    _, ev, loss, _ = resample(trace, k)
    assert trace.gold is not None
    if scale is not None:
        return scale.evals(ev), scale.losses(loss)
    g0 = float(trace.gold[0])
    evals = BASE + GAIN / gold_gain(trace) * (ev - g0)
    l0, lmin = float(trace.loss[0]), float(np.min(trace.loss))
    span = l0 - lmin
    rel = LOSS_FLOOR + (1 - LOSS_FLOOR) * (loss - lmin) / span if span > 0 else np.ones(k)
    return evals, rel


def run_observations(
    traces: Sequence[CurveTrace],
    k: int,
    signals: Sequence[str] = (),
    scale: CorpusMap | None = None,
) -> list[list[dict[str, np.ndarray]]]:
    """Per run, the observation an RLHF job on it gets after each of its ``k`` checkpoints.

    The env's own rows (:func:`~evalstop_gym.envs.tables.observation_rows`, the signal
    windows of :mod:`evalstop_gym.envs.core`) with every boundary field and ``signals``,
    the whole history in the window (the corpus tasks' ``eval_window=None``); evals and
    losses on each run's own map, or on the common map ``scale`` (:func:`observed_run`).
    """
    fields = (*BOUNDARY_FIELDS, *(s for s in SIGNAL_FIELDS if s in signals))
    layout = ObservationLayout(fields, k, k)
    pairs = [observed_run(t, k, scale) for t in traces]
    obs_eval = np.array([p[0] for p in pairs]).reshape(len(traces), k)
    loss = np.array([p[1] for p in pairs]).reshape(len(traces), k)
    _, declines = checkpoint_tables(obs_eval)
    rows = observation_rows(
        layout.boundary,
        np.full(len(traces), RLHF),
        declines,
        obs_eval,
        loss,
        k,
        len(JOB_TYPES),
        BOUNDS,
    )
    if layout.signals:
        parts = [
            signal_windows(np.array([resample_signal(t, s, k) for t in traces]), k)
            for s in layout.signals
        ]
        rows = np.concatenate([rows, *parts], axis=2)
    return [[layout.split(rows[i, c].copy()) for c in range(k)] for i in range(len(traces))]


def first_stop(detector: object, observations: Sequence[Obs]) -> int | None:
    """The 0-based checkpoint at which ``detector`` stops a run (None: it runs to the end).

    Asked after every checkpoint but the last (the env's decisions: a job that reaches its
    last checkpoint has finished).
    """
    detector.reset()  # type: ignore[attr-defined]
    if decides_per_job(detector):  # every decision at once (:func:`stop_flags`)
        fired = np.flatnonzero(stop_flags(detector, observations[:-1]))
        return int(fired[0]) if len(fired) else None
    for c, obs in enumerate(observations[:-1]):
        if int(detector.act(obs)) == 1:  # type: ignore[attr-defined]
            return c
    return None


def decides_per_job(detector: object) -> bool:
    """Whether ``detector``'s decision on a job reads that job's current observation alone
    (no state across calls or jobs): this module's detectors, ``Cusum``, ``EvalStop`` and
    ``NoStop``, and an :class:`AnyOf` of them.  A job's decisions are then
    :func:`stop_flags` of its observations, and an episode's ends each job's first stop."""
    from .changepoint import Cusum
    from .policies import EvalStop, NoStop

    if type(detector) is AnyOf:
        return all(decides_per_job(d) for d in detector.detectors)  # type: ignore[attr-defined]
    return type(detector) in (SignalCusum, Cusum, LearnedDetector, EvalStop, NoStop)
