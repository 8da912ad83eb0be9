"""The vectorised episode draws and tables give, bit for bit, what the code they replaced gave.

``tests/oracles/reference_draws.py`` keeps that code; here both run on the same
generators with inputs that vary (workloads, mixes, sizes, calibrations,
windows, observation fields), and every array must match in dtype and bytes.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import reference_draws as ref
from conftest import hand_jobs
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.envs.tables import observation_rows
from evalstop_gym.sim.boundary import BOUNDARY_FIELDS
from evalstop_gym.sim.calibration import CALIBRATIONS
from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.sim.synthetic_curves import sample_curves
from evalstop_gym.sim.workloads import WORKLOADS, Workload, assign_types, generate_jobs


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_fields(a: object, b: object, names: tuple[str, ...]) -> None:
    for name in names:
        assert _same(getattr(a, name), getattr(b, name)), name


mixes = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)).filter(any)
seeds = st.integers(0, 2**63 - 2)


@settings(max_examples=40, deadline=None)
@given(
    seed=seeds,
    name=st.sampled_from(sorted(WORKLOADS)),
    mix=st.none() | mixes,
    n_jobs=st.integers(1, 300),
    load=st.sampled_from((0.01, 0.5, 0.9, 3.0)),
    hack=st.floats(0.0, 1.0),
    num_gpus=st.sampled_from((16, 64, 1000)),
)
def test_generate_jobs_matches_one_pass_per_type(
    seed: int,
    name: str,
    mix: tuple[int, int, int] | None,
    n_jobs: int,
    load: float,
    hack: float,
    num_gpus: int,
) -> None:
    wl = replace(WORKLOADS[name], n_jobs=n_jobs, load=load, hack_fraction=hack)
    if mix is not None:
        wl = replace(wl, type_mix=tuple(m / sum(mix) for m in mix))
    new = generate_jobs(wl, num_gpus, np.random.default_rng(seed))
    old = ref.generate_jobs(wl, num_gpus, np.random.default_rng(seed))
    _same_fields(new, old, ("arrival_h", "job_type", "gpus", "duration_h", "estimate_h", "hacking"))


def test_generate_jobs_of_an_unhashable_workload() -> None:
    wl = Workload("custom", [0.2, 0.3, 0.5], n_jobs=50)  # type: ignore[arg-type]
    new = generate_jobs(wl, 64, np.random.default_rng(3))
    old = ref.generate_jobs(wl, 64, np.random.default_rng(3))
    _same_fields(new, old, ("job_type", "gpus", "duration_h"))


@settings(max_examples=40, deadline=None)
@given(seed=seeds, mix=mixes, n=st.integers(0, 500), hack=st.floats(0.0, 1.0))
def test_types_match_generator_choice(
    seed: int, mix: tuple[int, int, int], n: int, hack: float
) -> None:
    fracs = tuple(m / sum(mix) for m in mix)
    rng_new, rng_old = np.random.default_rng(seed), np.random.default_rng(seed)
    for a, b in zip(
        assign_types(rng_new, n, fracs, hack), ref.assign_types(rng_old, n, fracs, hack)
    ):
        assert _same(a, b)
    assert rng_new.random() == rng_old.random()  # the stream is left where choice left it


@settings(max_examples=40, deadline=None)
@given(
    seed=seeds,
    # the frozen calibrations, the ones the reference code implements
    cal_name=st.sampled_from(sorted(set(CALIBRATIONS) & {"paper", "realistic", "hard"})),
    workload=st.sampled_from(sorted(WORKLOADS)),
    n_jobs=st.integers(1, 250),
    noise=st.sampled_from((0.0, 0.02, 0.5)),
    shape=st.sampled_from(("gao", "rise-decline")),
    k=st.integers(2, 25),
)
def test_sample_curves_match_per_family_rows(
    seed: int, cal_name: str, workload: str, n_jobs: int, noise: float, shape: str, k: int
) -> None:
    cal = replace(CALIBRATIONS[cal_name], rlhf_shape=shape, evals_per_job=k)
    batch = generate_jobs(
        replace(WORKLOADS[workload], n_jobs=n_jobs), 64, np.random.default_rng(seed)
    )
    new = sample_curves(
        batch, cal, noise, np.random.default_rng(seed + 1), np.random.default_rng(seed + 2)
    )
    old = ref.sample_curves(
        batch, cal, noise, np.random.default_rng(seed + 1), np.random.default_rng(seed + 2)
    )
    names = ("progress", "true_eval", "obs_eval", "loss", "proxy", "peak_progress")
    _same_fields(new, old, names)


fields = st.lists(st.sampled_from(BOUNDARY_FIELDS), min_size=1, unique=True).map(
    lambda fs: tuple(f for f in BOUNDARY_FIELDS if f in fs)
)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    fields=fields,
    n=st.integers(0, 12),
    k=st.integers(2, 12),
    window=st.integers(1, 12),
    scale=st.sampled_from((1.0, 30.0)),
)
def test_observation_rows_match_the_gathered_table(
    seed: int, fields: tuple[str, ...], n: int, k: int, window: int, scale: float
) -> None:
    window = min(window, k)
    rng = np.random.default_rng(seed)
    args = (
        fields,
        rng.integers(0, 3, n),
        rng.integers(0, k, (n, k)),
        rng.standard_normal((n, k)) * scale,  # beyond the bounds at scale 30: clipped
        np.abs(rng.standard_normal((n, k))) * scale,
        window,
        3,
        {"evals": (-10.0, 10.0), "loss": (0.0, 10.0)},
    )
    new, old = observation_rows(*args), ref.observation_rows(*args)
    assert _same(new, old) and new.flags.c_contiguous


@settings(max_examples=30, deadline=None)
@given(
    times=st.lists(st.sampled_from((0.0, 0.5, 1.0, 2.5)), min_size=1, max_size=12),
    seed=st.integers(0, 100),
)
def test_arrivals_in_time_then_job_order(times: list[float], seed: int) -> None:
    n = len(times)
    sim = Simulator(SimConfig(), seed, jobs=hand_jobs(times, [1] * n, [1.0] * n))
    order = sorted(range(n), key=times.__getitem__)
    assert list(zip(sim._arrival_times, sim._arrival_jobs)) == [(times[i], i) for i in order]
    assert len(sim._arrival_times) == n + 1 and sim._arrival_times[n] == math.inf


def test_tables_reused_across_episodes_equal_fresh_ones() -> None:
    """An env's second episode (tables overwritten in place) shows what a new env shows."""
    used, fresh = EvalStopEnv(n_jobs=30), EvalStopEnv(n_jobs=30)
    first, _ = used.reset(seed=1)
    kept = {k: v.copy() for k, v in first.items()}
    actions = np.random.default_rng(0).integers(0, 2, 400).tolist()
    for env in (used, fresh):
        obs, _ = env.reset(seed=2)
        trace = [obs]
        for action in actions:
            obs, reward, done, _, _ = env.step(action)
            trace.append((obs, reward))
            if done:
                break
        if env is used:
            used_trace = trace
    assert repr(used_trace) == repr(trace)
    assert all(np.array_equal(first[k], kept[k]) for k in kept)  # handed out: not overwritten
