"""The leaner per-episode code gives, bit for bit, what the code it replaced gave.

``tests/oracles/reference_metrics.py`` keeps the episode metrics, the continue-gain
and checkpoint tables as they were; here both run on inputs that vary
(hypothesis), and every value must match in type and bits (NaN where NaN).
"""

from __future__ import annotations

import math
import struct
from dataclasses import replace

import numpy as np
import pytest
import reference_metrics as ref
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.sim.checkpoints import best_so_far, checkpoint_tables
from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.sim.metrics import EpisodeRecord, episode_metrics
from evalstop_gym.sim.utility import continue_gains
from evalstop_gym.sim.workloads import (
    DEFAULT_PROFILES,
    WORKLOADS,
    TypeProfile,
    Workload,
    _type_cdf,
)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _same_metrics(a: dict[str, float], b: dict[str, float]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert type(a[k]) is type(b[k]) is float, k
        assert _bits(a[k]) == _bits(b[k]) or (math.isnan(a[k]) and math.isnan(b[k])), k


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# Values with ties, both zeros and infinities among them, where the comparisons are touchy.
touchy = st.sampled_from((0.0, -0.0, 0.25, 0.5, 1.0, 2.0, math.inf))


@st.composite
def records(draw: st.DrawFn) -> EpisodeRecord:
    """A finished episode's outcome arrays, with ties and edge values mixed in."""
    n = draw(st.integers(1, 40))
    k = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**32))
    rng = np.random.default_rng(seed)

    def floats(shape: tuple[int, ...], scale: float) -> np.ndarray:
        x = np.round(rng.random(shape) * scale, draw(st.sampled_from((1, 3, 12))))
        if draw(st.booleans()):  # some exact edge values
            x.flat[: min(x.size, 3)] = [draw(touchy) for _ in range(min(x.size, 3))]
        return x

    arrival = floats((n,), 10.0)
    finish = arrival + floats((n,), 20.0)
    finish[~np.isfinite(finish)] = 5.0
    ckpt = rng.integers(1, k + 1, n)
    stopped = rng.random(n) < draw(st.floats(0.0, 1.0))
    peak = floats((n,), 1.5)
    peak[rng.random(n) < 0.3] = math.inf
    return EpisodeRecord(
        num_gpus=draw(st.sampled_from((1, 16, 64))),
        n_ckpt=k,
        arrival=arrival,
        finish=finish,
        first_start=np.minimum(finish, arrival + floats((n,), 3.0)),
        job_type=rng.integers(0, draw(st.sampled_from((1, 3, 4))), n),
        gpus=rng.integers(1, 17, n),
        duration=floats((n,), 10.0),
        hacking=rng.random(n) < draw(st.floats(0.0, 1.0)),
        peak_progress=peak,
        stopped=stopped,
        ckpt_done=ckpt,
        delivered=rng.integers(0, k, n),
        true_eval=floats((n, k), 1.0) - 0.25,
        gpu_hours=floats((n,), 100.0),
    )


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf x 0 in both: NaN
@settings(max_examples=200, deadline=None)
@given(r=records())
def test_episode_metrics_match_the_one_call_per_mask_code(r: EpisodeRecord) -> None:
    _same_metrics(episode_metrics(r), ref.episode_metrics(r))


@settings(max_examples=30, deadline=None)
@given(r=records(), where=st.integers(0, 39))
def test_unfinished_episode_refused_as_before(r: EpisodeRecord, where: int) -> None:
    r.finish[where % len(r.finish)] = math.nan
    for metrics in (episode_metrics, ref.episode_metrics):
        with pytest.raises(ValueError, match="finished episode"):
            metrics(r)


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(0, 30),
    k=st.integers(1, 14),
    ties=st.booleans(),
    deliver_best=st.booleans(),
)
def test_continue_gains_match_two_gathers(
    seed: int, n: int, k: int, ties: bool, deliver_best: bool
) -> None:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((n, k))
    if ties:
        obs = np.round(obs, 0)
    true = rng.standard_normal((n, k))
    best = best_so_far(obs)
    new = continue_gains(true, best, deliver_best=deliver_best)
    old = ref.continue_gains(true, best, deliver_best=deliver_best)
    assert _same(new, old)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    scheduler=st.sampled_from(("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")),
    deliver=st.sampled_from(("best", "final")),
    stop_rate=st.sampled_from((0.0, 0.2, 0.7)),
    n_jobs=st.integers(1, 40),
)
def test_simulated_episodes_metrics_match(
    seed: int, scheduler: str, deliver: str, stop_rate: float, n_jobs: int
) -> None:
    """Whole episodes (the engine's own records, random stops) give the old code's metrics."""
    sim = Simulator(SimConfig(scheduler=scheduler, deliver=deliver, n_jobs=n_jobs), seed)
    stops = np.random.default_rng(seed).random(10_000) < stop_rate
    i = 0
    while sim.next_decision() is not None:
        sim.decide(bool(stops[i % len(stops)]))
        i += 1
    expected = ref.episode_metrics(sim.record())
    expected.update(n_events=float(sim.n_events), n_decisions=float(sim.n_decisions))
    _same_metrics(sim.metrics(), expected)


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(0, 25),
    k=st.integers(1, 14),
    digits=st.integers(0, 3),
    odd=st.floats(0.0, 0.5),
)
def test_checkpoint_tables_match_the_step_by_step_loops(
    seed: int, n: int, k: int, digits: int, odd: float
) -> None:
    """Ties (rounded values), NaN, infinities and both zeros anywhere, the first column too."""
    rng = np.random.default_rng(seed)
    obs = np.round(rng.standard_normal((n, k)), digits)
    u = rng.random((n, k))
    for i, value in enumerate((math.nan, math.inf, -math.inf, -0.0, 0.0)):
        obs[(u >= i * odd / 5) & (u < (i + 1) * odd / 5)] = value
    best, declines = checkpoint_tables(obs)
    assert _same(best, ref.best_so_far(obs))
    assert _same(declines, ref.consecutive_declines(obs))


mixes = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)).filter(any)


@settings(max_examples=60, deadline=None)
@given(
    mix=mixes,
    as_list=st.booleans(),
    median=st.floats(0.1, 50.0),
    log_sd=st.floats(0.0, 2.0),
)
def test_cached_mix_lookups_equal_the_formulas(
    mix: tuple[int, int, int], as_list: bool, median: float, log_sd: float
) -> None:
    fracs = tuple(m / sum(mix) for m in mix)
    profiles = (*DEFAULT_PROFILES[:2], TypeProfile((8, 16), (0.6, 0.4), median, log_sd))
    wl = Workload("w", list(fracs) if as_list else fracs, profiles=profiles)  # type: ignore[arg-type]
    for _ in range(2):  # computed, then (hashable) from the cache
        expected = sum(m * p.mean_gpu_hours() for m, p in zip(fracs, profiles))
        assert _bits(wl.mean_gpu_hours()) == _bits(expected)
        cdf = (np.asarray(wl.type_mix) / sum(wl.type_mix)).cumsum()
        cdf /= cdf[-1]
        assert _same(_type_cdf(wl.type_mix), cdf)


def test_cached_cdf_is_read_only() -> None:
    """The cached cdf is shared by every episode of a mix: nobody may write it."""
    cdf = _type_cdf(WORKLOADS["heavy-rlhf"].type_mix)
    with pytest.raises(ValueError):
        cdf[0] = 0.5
    assert (
        replace(WORKLOADS["heavy-rlhf"]).mean_gpu_hours()
        == WORKLOADS["heavy-rlhf"].mean_gpu_hours()
    )
