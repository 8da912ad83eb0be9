"""RLHF jobs on real training curves from a trace corpus (``SimConfig(curves=PATH)``).

Each RLHF job keeps its hack label from the workload (so ``hack_fraction``
keeps its meaning) and is given a run of the corpus with the same label,
drawn at random, resampled onto the job's checkpoints.  The run's *measured*
eval becomes the job's observed eval (plus ``eval_noise`` of extra Gaussian
noise, 0 by default), its gold curve the hidden true eval, its training loss
the observed loss.  LoRA and DPO jobs keep their synthetic curves.

Scales: every run is mapped affinely so that its gold score starts at 0.3 and
peaks at 0.9 (a gain of 0.6 eval units, as the synthetic RLHF curves), so that
eval noise means the same in both; its loss so that its first value is 1 and
its lowest 0.2 (relative losses, as the synthetic ones).  Both maps preserve
the shape: peaks, declines and plateaus are the run's own.  A run whose gold
hardly rises above its first value (it peaks at once) has its gain floored at
:data:`GAIN_FLOOR_FRACTION` of its gold's range, with a warning naming it, so
its scale stays sane (never ~1e9); a run whose gold is constant is refused.
"""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np

from ..corpus import CurveTrace, peak_progress, read_traces, resample
from ..errors import ConfigError
from ..fileio import file_identity
from .signals import attach_signals
from .synthetic_curves import Curves
from .workloads import RLHF, JobBatch

BASE, GAIN, LOSS_FLOOR = 0.3, 0.6, 0.2
#: A run's gold gain (peak less first value) counts as at least this share of its gold's
#: range (peak less lowest value).  Every run of the shipped corpora gains more (the
#: least, 0.136), so their scales are unchanged.
GAIN_FLOOR_FRACTION = 0.1


def gold_gain(trace: CurveTrace) -> float:
    """The gain the run's gold is scaled by: peak less first value, floored (see module doc)."""
    gold = trace.gold
    assert gold is not None
    g0, gmax = float(gold[0]), float(np.max(gold))
    return max(gmax - g0, GAIN_FLOOR_FRACTION * (gmax - float(np.min(gold))))


@functools.lru_cache(maxsize=4)
def _load(
    path: str, identity: tuple[int, ...]
) -> tuple[tuple[CurveTrace, ...], tuple[CurveTrace, ...]]:
    del identity  # the cache key only: a rewritten file (same size, old mtime) is read again
    traces = read_traces(path, min_checkpoints=2)
    for t in traces:
        if t.gold is None or t.label is None:
            raise ConfigError(
                "curves",
                path,
                f"a corpus whose runs all have gold and label (run {t.run_id!r} lacks them)",
            )
        _check_gain(path, t)
    hacking = tuple(t for t in traces if t.label)
    healthy = tuple(t for t in traces if not t.label)
    return hacking, healthy


def _check_gain(path: str, t: CurveTrace) -> None:
    """Refuse a run with constant gold; warn (once per file version) when its gain is floored."""
    assert t.gold is not None
    g0, gmax, gmin = float(t.gold[0]), float(np.max(t.gold)), float(np.min(t.gold))
    if not gmax > gmin:
        raise ConfigError(
            "curves",
            path,
            f"a corpus whose runs' gold varies (run {t.run_id!r} has constant gold {g0:g}, "
            "which no scale maps to a gain of 0.6)",
        )
    if gmax - g0 < GAIN_FLOOR_FRACTION * (gmax - gmin):
        warnings.warn(
            f"{path}: run {t.run_id!r}: its gold rises only {gmax - g0:g} above its first value "
            f"{g0:g}; it is scaled by a floored gain of {gold_gain(t):g} "
            f"({GAIN_FLOOR_FRACTION:g} of its range)",
            UserWarning,
            stacklevel=4,
        )


def load_corpus(path: str) -> tuple[tuple[CurveTrace, ...], tuple[CurveTrace, ...]]:
    """The corpus's (hacking, healthy) runs, read once per file version."""
    p = os.path.abspath(os.fspath(path))
    return _load(p, file_identity(p))


def apply_real_curves(
    curves: Curves,
    batch: JobBatch,
    path: str,
    eval_noise: float,
    rng: np.random.Generator,
    noise_rng: np.random.Generator,
) -> None:
    """Replace the RLHF rows of ``curves`` (in place) by runs of the corpus at ``path``."""
    hacking, healthy = load_corpus(path)
    k = curves.true_eval.shape[1]
    picks = rng.random(len(batch))
    z = noise_rng.standard_normal(curves.obs_eval.shape)
    for j in np.flatnonzero(batch.job_type == RLHF):
        pool = hacking if batch.hacking[j] else healthy
        if not pool:
            kind = "hacking" if batch.hacking[j] else "healthy"
            raise ConfigError("curves", path, f"a corpus with at least one {kind} run")
        t = pool[int(picks[j] * len(pool))]
        _, ev, loss, gold = resample(t, k)
        assert gold is not None
        g0 = float(t.gold[0])
        scale = GAIN / gold_gain(t)
        curves.true_eval[j] = BASE + scale * (gold - g0)
        curves.obs_eval[j] = BASE + scale * (ev - g0) + eval_noise * z[j]
        l0, lmin = float(t.loss[0]), float(np.min(t.loss))
        span = l0 - lmin
        curves.loss[j] = LOSS_FLOOR + (1 - LOSS_FLOOR) * (loss - lmin) / span if span > 0 else 1.0
        curves.proxy[j] = np.nan if t.proxy is None else resample_proxy(t, k)
        curves.peak_progress[j] = peak_progress(t.gold, t.step) if batch.hacking[j] else np.inf
        attach_signals(curves, j, t)


def resample_proxy(t: CurveTrace, k: int) -> np.ndarray:
    """The proxy-reward series of ``t`` resampled at ``k`` evenly spaced checkpoints."""
    x = t.step / float(t.step[-1])
    return np.interp(np.arange(1, k + 1) / k, x, t.proxy)
