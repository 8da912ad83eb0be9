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

That per-run map (``curve_scale="run"``, the default) uses each run's own
future (its peak, its lowest loss): the observed level then says how close a
run is to its peak.  ``curve_scale="corpus"`` maps every run of a corpus by one
common affine map fixed from the corpus as a whole (:class:`CorpusMap`: the
median first gold value -> 0.3, the median gold gain -> 0.6; the loss's median
first value -> 1 and its median range -> 0.8), so no run's own future enters
its scaling.

Subsets: ``curve_split`` ("all", default; "train"; "test") keeps one side of the
corpus's fixed split (:func:`evalstop_gym.corpus.split.split_runs`).

Noise: ``curve_noise="recorded"`` (default) replays the run's measured eval;
``"fresh"`` observes the run's gold (measured on many more samples, so nearly
noise-free) plus fresh Gaussian noise at the run's measured eval sd
(``meta["eval_noise_sd"]``, under the same map), drawn from the episode's noise
stream, so no two episodes of a run show the same sequence.

Jitter: ``curve_jitter`` (default 0) moves each RLHF job's common map by a draw
of its own: the start by ``jitter`` x the corpus's between-run sd of first gold
values (mapped), the gain by a log-normal factor of sd ``jitter`` x the
between-run sd of log gains.  The spread is the corpus's own, so a jittered run
looks like another run of the corpus; its level no longer names the run.

Warp: ``curve_warp`` (default 0) moves each RLHF job's run in time: checkpoint
progress p replays the run at p ** g, with log g normal of sd ``warp`` x the
corpus's between-run sd of the log peak positions of its hacking runs, so a
recognised run no longer says when it will peak (its peak moves from q to
q ** (1 / g); the spread is the corpus's own).
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..corpus import CurveTrace, peak_progress, read_traces, resample
from ..corpus.analysis import GAIN_FLOOR_FRACTION
from ..corpus.split import check_side, select, split_runs
from ..errors import ConfigError
from ..fileio import file_identity
from .signals import attach_signals
from .synthetic_curves import Curves
from .workloads import RLHF, JobBatch

BASE, GAIN, LOSS_FLOOR = 0.3, 0.6, 0.2
#: How a corpus run is mapped into eval units (``SimConfig.curve_scale``).
CURVE_SCALES: tuple[str, ...] = ("run", "corpus")
#: What a corpus run's observed eval is (``SimConfig.curve_noise``).
CURVE_NOISES: tuple[str, ...] = ("recorded", "fresh")
#: Where the common map puts the corpus's median first loss, and how far its median range.
LOSS_START, LOSS_SPAN = 1.0, 1.0 - LOSS_FLOOR
#: Largest ``curve_jitter`` (in between-run spreads).
MAX_CURVE_JITTER = 3.0


@dataclass(frozen=True)
class CorpusMap:
    """One affine map for every run of a corpus, fixed from the corpus as a whole.

    eval units = ``BASE + eval_factor * (x - gold_start)`` for gold and eval, and
    loss units = ``LOSS_START + loss_factor * (loss - loss_start)``.  Each constant is
    a median over the corpus's runs (first gold value, gold gain = peak less first
    value, first loss, loss range), so it carries nothing of one run's own future.

    Attributes:
        gold_start: Median first gold value.
        eval_factor: ``GAIN`` / the median gold gain.
        loss_start: Median first loss.
        loss_factor: ``LOSS_SPAN`` / the median loss range (0 when every run's loss is
            constant: the loss then reads ``LOSS_START``).
        start_sd: Between-run sd of the first gold values, in eval units.
        log_gain_sd: Between-run sd of the log gold gains (runs that gain).
        log_peak_sd: Between-run sd of the log peak positions of the hacking runs.
    """

    gold_start: float
    eval_factor: float
    loss_start: float
    loss_factor: float
    start_sd: float
    log_gain_sd: float
    log_peak_sd: float = 0.0

    @classmethod
    def fit(cls, traces: tuple[CurveTrace, ...] | list[CurveTrace]) -> CorpusMap:
        """The map of a corpus (every run, whatever the split)."""
        golds = [t.gold for t in traces if t.gold is not None]
        starts = np.array([float(g[0]) for g in golds])
        gains = np.array([float(np.max(g)) - float(g[0]) for g in golds])
        gain = float(np.median(gains))
        if not gain > 0:
            raise ConfigError(
                "curves",
                f"median gold gain {gain:g}",
                "a corpus whose median run gains (gold peak above its first value)",
            )
        spans = np.array([float(np.max(t.loss)) - float(np.min(t.loss)) for t in traces])
        span = float(np.median(spans))
        factor = GAIN / gain
        rising = gains[gains > 0]
        peaks = np.array(
            [peak_progress(t.gold, t.step) for t in traces if t.label and t.gold is not None]
        )
        peaks = peaks[peaks > 0]
        return cls(
            gold_start=float(np.median(starts)),
            eval_factor=factor,
            loss_start=float(np.median([float(t.loss[0]) for t in traces])),
            loss_factor=LOSS_SPAN / span if span > 0 else 0.0,
            start_sd=factor * float(np.std(starts)),
            log_gain_sd=float(np.std(np.log(rising))) if len(rising) > 1 else 0.0,
            log_peak_sd=float(np.std(np.log(peaks))) if len(peaks) > 1 else 0.0,
        )

    def evals(self, x: np.ndarray) -> np.ndarray:
        """Gold or eval values in eval units."""
        return BASE + self.eval_factor * (x - self.gold_start)

    def losses(self, x: np.ndarray) -> np.ndarray:
        """Loss values in loss units."""
        return LOSS_START + self.loss_factor * (x - self.loss_start)


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


def load_corpus(
    path: str, split: str = "all"
) -> tuple[tuple[CurveTrace, ...], tuple[CurveTrace, ...]]:
    """The corpus's (hacking, healthy) runs on side ``split`` of its fixed split, read once."""
    p = os.path.abspath(os.fspath(path))
    hacking, healthy = _load(p, file_identity(p))
    if check_side(split) == "all":
        return hacking, healthy
    return _side(p, file_identity(p), split)


@functools.lru_cache(maxsize=8)
def _side(
    path: str, identity: tuple[int, ...], split: str
) -> tuple[tuple[CurveTrace, ...], tuple[CurveTrace, ...]]:
    hacking, healthy = _load(path, identity)
    runs = split_runs(hacking + healthy)
    return tuple(select(hacking, runs, split)), tuple(select(healthy, runs, split))


def corpus_map(path: str) -> CorpusMap:
    """The common map of the corpus at ``path`` (all its runs), computed once per file version."""
    p = os.path.abspath(os.fspath(path))
    return _map(p, file_identity(p))


@functools.lru_cache(maxsize=4)
def _map(path: str, identity: tuple[int, ...]) -> CorpusMap:
    hacking, healthy = _load(path, identity)
    return CorpusMap.fit(hacking + healthy)


def corpus_eval_noise(path: str, split: str = "all") -> float:
    """The median measured eval sd (``meta["eval_noise_sd"]``) of a side's runs, in eval units.

    0 when no run states it.  What a model of a fresh-noise replay assumes.
    """
    hacking, healthy = load_corpus(path, split)
    sds = [run_noise_sd(t) for t in hacking + healthy]
    return corpus_map(path).eval_factor * float(np.median(sds)) if sds else 0.0


def run_noise_sd(t: CurveTrace) -> float:
    """A run's measured eval sd (its ``meta["eval_noise_sd"]``; else its eval's RMS off gold)."""
    sd = t.meta.get("eval_noise_sd") if t.meta else None
    if isinstance(sd, int | float) and math.isfinite(sd) and sd >= 0:
        return float(sd)
    assert t.gold is not None
    return float(np.sqrt(np.mean((t.eval - t.gold) ** 2)))


def job_runs(curves: Curves) -> list[str | None]:
    """The corpus run each job of an episode replays (None: a synthetic job)."""
    runs = getattr(curves, RUN_IDS, None)
    return [None] * curves.obs_eval.shape[0] if runs is None else list(runs)


#: The attribute of an episode's :class:`Curves` that holds each job's run id.
RUN_IDS = "corpus_run_ids"


def apply_real_curves(
    curves: Curves,
    batch: JobBatch,
    path: str,
    eval_noise: float,
    rng: np.random.Generator,
    noise_rng: np.random.Generator,
    config: Any = None,
) -> None:
    """Replace the RLHF rows of ``curves`` (in place) by runs of the corpus at ``path``.

    ``config`` (a :class:`~evalstop_gym.sim.config.SimConfig`) supplies ``curve_scale``, ``curve_split``, ``curve_noise`` and
    ``curve_jitter`` (None: their defaults, the per-run map of the whole corpus's
    recorded evals).
    """
    scale = "run" if config is None else config.curve_scale
    split = "all" if config is None else config.curve_split
    noise = "recorded" if config is None else config.curve_noise
    jitter = 0.0 if config is None else float(config.curve_jitter)
    warp = 0.0 if config is None else float(config.curve_warp)
    if scale == "run" and noise == "recorded" and jitter == 0.0 and warp == 0.0:
        _apply_per_run(curves, batch, path, eval_noise, rng, noise_rng, split)
    else:
        _apply_common(
            curves, batch, path, eval_noise, rng, noise_rng, split, noise, (jitter, warp), scale
        )


def _pool(
    batch: JobBatch, j: int, path: str, hacking: tuple, healthy: tuple
) -> tuple[CurveTrace, ...]:
    pool = hacking if batch.hacking[j] else healthy
    if not pool:
        kind = "hacking" if batch.hacking[j] else "healthy"
        raise ConfigError("curves", path, f"a corpus with at least one {kind} run")
    return pool


def _apply_common(
    curves: Curves,
    batch: JobBatch,
    path: str,
    eval_noise: float,
    rng: np.random.Generator,
    noise_rng: np.random.Generator,
    split: str,
    noise: str,
    jitter_warp: tuple[float, float],
    scale: str,
) -> None:
    """The options' replay: a common (or per-run) map, fresh noise, per-job jitter and warp."""
    jitter, warp = jitter_warp
    hacking, healthy = load_corpus(path, split)
    cmap = corpus_map(path)
    k = curves.true_eval.shape[1]
    n = len(batch)
    picks = rng.random(n)
    z = noise_rng.standard_normal(curves.obs_eval.shape)
    fresh = noise_rng.standard_normal(curves.obs_eval.shape) if noise == "fresh" else None
    shift = jitter * cmap.start_sd * rng.standard_normal(n) if jitter else np.zeros(n)
    stretch = np.exp(jitter * cmap.log_gain_sd * rng.standard_normal(n)) if jitter else np.ones(n)
    power = np.exp(warp * cmap.log_peak_sd * rng.standard_normal(n)) if warp else np.ones(n)
    runs: list[str | None] = [None] * n
    for j in np.flatnonzero(batch.job_type == RLHF):
        pool = _pool(batch, j, path, hacking, healthy)
        t = pool[int(picks[j] * len(pool))]
        runs[j] = t.run_id
        ev, loss, gold = _warped(t, k, float(power[j]))
        if scale == "corpus":
            start, factor = cmap.gold_start, cmap.eval_factor
        else:
            start, factor = float(t.gold[0]), GAIN / gold_gain(t)
        factor = factor * stretch[j]
        true = BASE + shift[j] + factor * (gold - start)
        curves.true_eval[j] = true
        if fresh is not None:
            curves.obs_eval[j] = true + factor * run_noise_sd(t) * fresh[j] + eval_noise * z[j]
        else:
            curves.obs_eval[j] = BASE + shift[j] + factor * (ev - start) + eval_noise * z[j]
        if scale == "corpus":
            curves.loss[j] = cmap.losses(loss)
        else:
            curves.loss[j] = _run_loss(t, loss)
        curves.proxy[j] = np.nan if t.proxy is None else resample_proxy(t, k, float(power[j]))
        attach_signals(curves, j, t, float(power[j]))
        peak = peak_progress(t.gold, t.step) ** (1.0 / float(power[j]))
        curves.peak_progress[j] = peak if batch.hacking[j] else np.inf
    setattr(curves, RUN_IDS, runs)


def _warped(t: CurveTrace, k: int, power: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eval, loss, gold) of ``t`` at checkpoint progress (i / k) ** power (1: :func:`resample`)."""
    if power == 1.0:
        _, ev, loss, gold = resample(t, k)
        assert gold is not None
        return ev, loss, gold
    assert t.gold is not None
    x = t.step.astype(np.float64) / float(t.step[-1])
    q = (np.arange(1, k + 1, dtype=np.float64) / k) ** power
    return np.interp(q, x, t.eval), np.interp(q, x, t.loss), np.interp(q, x, t.gold)


def _run_loss(t: CurveTrace, loss: np.ndarray) -> np.ndarray | float:
    """The per-run loss map: first value 1, lowest :data:`LOSS_FLOOR` (constant: 1)."""
    l0, lmin = float(t.loss[0]), float(np.min(t.loss))
    span = l0 - lmin
    return LOSS_FLOOR + (1 - LOSS_FLOOR) * (loss - lmin) / span if span > 0 else 1.0


def _apply_per_run(
    curves: Curves,
    batch: JobBatch,
    path: str,
    eval_noise: float,
    rng: np.random.Generator,
    noise_rng: np.random.Generator,
    split: str,
) -> None:
    """The published replay: each run's own map, its recorded evals (frozen: same bits)."""
    hacking, healthy = load_corpus(path, split)
    k = curves.true_eval.shape[1]
    picks = rng.random(len(batch))
    z = noise_rng.standard_normal(curves.obs_eval.shape)
    runs: list[str | None] = [None] * len(batch)
    for j in np.flatnonzero(batch.job_type == RLHF):
        pool = hacking if batch.hacking[j] else healthy
        if not pool:
            kind = "hacking" if batch.hacking[j] else "healthy"
            raise ConfigError("curves", path, f"a corpus with at least one {kind} run")
        t = pool[int(picks[j] * len(pool))]
        runs[j] = t.run_id
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
    setattr(curves, RUN_IDS, runs)


def resample_proxy(t: CurveTrace, k: int, power: float = 1.0) -> np.ndarray:
    """The proxy-reward series of ``t`` at checkpoint progress ``(i / k) ** power``.

    ``power`` is the held-out replay's time warp, so the hidden proxy stays on the same
    clock as the eval, loss and gold it replays (1: ``k`` evenly spaced checkpoints).
    """
    x = t.step / float(t.step[-1])
    q = np.arange(1, k + 1) / k
    return np.interp(q if power == 1.0 else q**power, x, t.proxy)
