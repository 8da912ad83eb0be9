"""Training-side signals of real runs: what a trainer logs beside its eval and loss.

A platform running RLHF jobs sees more than the evals: the trainer's own logs carry the
proxy reward and its spread, the KL to the reference policy, the policy's entropy, the
completion length and the clip ratio (TRL's per-step keys, read into a
:class:`~evalstop_gym.corpus.CurveTrace` by the loaders).  The paper's boundary leaves
them out; a stopper may ask for them with ``obs_fields`` (off by default).

Only real runs carry them: an RLHF job on a corpus run (``SimConfig(curves=...)``)
shows the signals its run logged, resampled onto the job's checkpoints as its evals
are; a job on a run that did not log one (TRL logs no KL at ``beta=0``) and a synthetic
job (LoRA, DPO, or any job without a corpus) have none, and their observation marks
them absent.  The hidden state stays hidden: the synthetic
simulator's ``proxy`` curve, the gold curve, labels and durations are not signals.

The simulator records which run each RLHF job replays (:func:`attach_signals`, one
call per job while the real curves are applied) and tabulates a signal only when an
observation needs it (:func:`signal_rows`), so an episode that asks for none pays
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np

from ..corpus import CurveTrace
from ..errors import ConfigError
from .synthetic_curves import Curves

#: The signals a stopper may observe, in observation order.
SIGNAL_FIELDS: tuple[str, ...] = (
    "reward",
    "reward_std",
    "kl",
    "entropy",
    "completion_length",
    "clip_ratio",
)
#: The trace series each signal is read from (``reward`` is the logged proxy reward).
TRACE_SERIES: dict[str, str] = {
    "reward": "proxy",
    "reward_std": "reward_std",
    "kl": "kl",
    "entropy": "entropy",
    "completion_length": "completion_length",
    "clip_ratio": "clip_ratio",
}
#: Bound of an observed signal value (float32 observation space); a logged signal beyond
#: it (a completion length of a million tokens) is clipped.
SIGNAL_BOUND = 1e6


#: Attribute of a :class:`Curves` holding each job's time warp (the held-out replay's).
WARP_ATTR = "signal_warp"


def attach_signals(curves: Curves, j: int, trace: CurveTrace, power: float = 1.0) -> None:
    """Record that job ``j`` of ``curves`` replays the corpus run ``trace``.

    Called by :func:`~evalstop_gym.sim.real_curves.apply_real_curves` for each RLHF job;
    nothing is resampled here (see :func:`signal_rows`).  ``power``: the replay's time warp
    (checkpoint ``i`` of ``k`` shows the run at progress ``(i / k) ** power``), so that the
    signals are read at the same points of the run as its eval and loss.
    """
    runs = curves.signal_runs
    if runs is None:
        runs = curves.signal_runs = [None] * curves.obs_eval.shape[0]
    runs[j] = trace
    if power != 1.0:
        warps = getattr(curves, WARP_ATTR, None)
        if warps is None:
            warps = [1.0] * curves.obs_eval.shape[0]
            setattr(curves, WARP_ATTR, warps)
        warps[j] = power


def trace_signal(trace: CurveTrace, name: str) -> np.ndarray | None:
    """The logged series of signal ``name`` of a run, at its own checkpoints (None if absent)."""
    return getattr(trace, TRACE_SERIES[name])


def resample_signal(trace: CurveTrace, name: str, k: int, power: float = 1.0) -> np.ndarray:
    """Signal ``name`` of ``trace`` at ``k`` checkpoints of progress ``(i / k) ** power``.

    NaN where the run did not log it.  The same linear interpolation in progress
    (``step / last step``) as the run's eval and loss (:func:`~evalstop_gym.corpus.resample`;
    ``power`` the held-out replay's time warp, 1 for none).
    """
    series = trace_signal(trace, name)
    if series is None:
        return np.full(k, np.nan)
    x = trace.step.astype(np.float64) / float(trace.step[-1])
    q = np.arange(1, k + 1, dtype=np.float64) / k
    if power != 1.0:
        q = q**power
    return np.interp(q, x, series)


def signal_rows(curves: Curves, name: str, rows: slice) -> np.ndarray:
    """(m, K) float64: signal ``name`` of the jobs ``rows``; NaN where a job's run has none."""
    n, k = curves.obs_eval[rows].shape
    out = np.full((n, k), np.nan)
    runs = curves.signal_runs
    if runs is None:
        return out
    warps = getattr(curves, WARP_ATTR, None)
    warp = warps[rows] if warps is not None else [1.0] * n
    for i, trace in enumerate(runs[rows]):
        if trace is not None and trace_signal(trace, name) is not None:
            out[i] = resample_signal(trace, name, k, float(warp[i]))
    return out


def logged_signals(traces: Iterable[CurveTrace]) -> tuple[str, ...]:
    """The signals at least one of ``traces`` logged, in :data:`SIGNAL_FIELDS` order."""
    traces = list(traces)
    return tuple(s for s in SIGNAL_FIELDS if any(trace_signal(t, s) is not None for t in traces))


def check_signal_fields(
    fields: Sequence[str],
    curves: str | os.PathLike[str] | None,
    traces: Iterable[CurveTrace] = (),
) -> None:
    """Refuse a signal in ``fields`` that no run of the episode's curves logged (ConfigError).

    ``curves``: the corpus path of ``SimConfig(curves=...)`` (None: synthetic curves,
    which carry no signal); ``traces``: its runs.  A signal some runs logged is allowed:
    a job on a run without it sees it absent (mask 0), as a synthetic job does.
    """
    wanted = [f for f in fields if f in SIGNAL_FIELDS]
    if not wanted:
        return
    if curves is None:
        raise ConfigError(
            "obs_fields",
            wanted[0],
            "a boundary field: synthetic curves log no training-side signal "
            "(signals need curves=PATH, a corpus of real runs that logged them)",
        )
    logged = logged_signals(traces)
    for f in wanted:
        if f not in logged:
            raise ConfigError(
                "obs_fields",
                f,
                f"a boundary field or a signal some run of {os.fspath(curves)} logged "
                f"({', '.join(logged) or 'none'})",
            )
