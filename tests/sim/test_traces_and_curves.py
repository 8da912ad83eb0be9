"""Trace replay and the shape of the synthetic curves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym import SAMPLE_TRACE, KDeclineRule, SimConfig, Simulator
from evalstop_gym.sim.calibration import CALIBRATIONS
from evalstop_gym.sim.synthetic_curves import gao_shape
from evalstop_gym.sim.traces import read_trace
from evalstop_gym.sim.workloads import RLHF


def test_gao_shape_peaks_at_one_and_returns_to_zero_at_e() -> None:
    x = np.linspace(0.01, 3, 3000)
    y = gao_shape(x)
    assert x[np.argmax(y)] == pytest.approx(1.0, abs=1e-2)
    assert y.max() == pytest.approx(1.0, abs=1e-4)
    assert gao_shape(np.array([np.e]))[0] == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), cal=st.sampled_from(sorted(CALIBRATIONS)))
def test_hacking_peaks_inside_healthy_monotone(seed: int, cal: str) -> None:
    sim = Simulator(SimConfig(calibration=cal, n_jobs=80), seed)
    c, b = sim.curves, sim.batch
    k = c.true_eval.shape[1]
    for i in range(len(b)):
        te = c.true_eval[i]
        if b.hacking[i]:
            assert 0 < c.peak_progress[i] < 1
            top = int(np.argmax(te))
            assert top < k - 1  # the noise-free peak is inside the run
            assert te[-1] < te.max()
        elif b.job_type[i] != RLHF or CALIBRATIONS[cal].healthy_drop == (0.0, 0.0):
            assert np.all(np.diff(te) > 0)  # healthy: improves to the end
        else:  # a healthy run of a regime whose healthy runs may decline a little
            worst = CALIBRATIONS[cal].healthy_drop[1] * CALIBRATIONS[cal].rlhf_amplitude[1]
            assert te.max() - te[-1] <= worst
        # The proxy keeps rising for every job; the loss falls (or plateaus).
        assert np.all(np.diff(c.proxy[i]) > 0)
        assert b.job_type[i] == RLHF or not b.hacking[i]


def test_loss_is_independent_of_the_hack_label() -> None:
    sim = Simulator(SimConfig(n_jobs=2000, eval_noise=0.0), 0)
    c, b = sim.curves, sim.batch
    rl = b.job_type == RLHF
    late = c.loss[:, -1] - c.loss[:, -4]
    hk, hl = late[rl & b.hacking], late[rl & ~b.hacking]
    # Same distribution of late loss improvement for hacking and healthy runs.
    assert abs(hk.mean() - hl.mean()) < 3 * np.sqrt(hk.var() / len(hk) + hl.var() / len(hl))


def test_noise_draws_are_shared_across_noise_levels() -> None:
    a = Simulator(SimConfig(eval_noise=0.02, n_jobs=30), 9).curves
    b = Simulator(SimConfig(eval_noise=0.04, n_jobs=30), 9).curves
    np.testing.assert_allclose(b.obs_eval - b.true_eval, 2 * (a.obs_eval - a.true_eval))
    np.testing.assert_array_equal(a.true_eval, b.true_eval)


def test_sample_trace_replays_arrivals_gpus_and_durations() -> None:
    rows = read_trace(SAMPLE_TRACE)
    sim = Simulator(SimConfig(trace=SAMPLE_TRACE, num_gpus=16), 0)
    np.testing.assert_allclose(sim.batch.arrival_h, rows.arrival_s / 3600)
    np.testing.assert_allclose(sim.batch.duration_h, rows.duration_s / 3600)
    np.testing.assert_array_equal(sim.batch.gpus, rows.gpus)
    m = sim.run(KDeclineRule(2))
    assert m["n_jobs"] == len(rows.gpus)


def test_sample_trace_cluster_filter_and_n_jobs() -> None:
    rows = read_trace(SAMPLE_TRACE)
    n_cl = int(np.sum(rows.cluster == "6214e9"))
    sim = Simulator(SimConfig(trace=SAMPLE_TRACE, trace_cluster="6214e9", num_gpus=16), 0)
    assert len(sim.jobs) == n_cl
    sim = Simulator(SimConfig(trace=SAMPLE_TRACE, n_jobs=7, num_gpus=16), 0)
    assert len(sim.jobs) == 7


def test_real_philly_trace_busiest_cluster(philly_path: str) -> None:
    cfg = SimConfig(trace=philly_path, trace_cluster="6214e9", n_jobs=3000)
    sim = Simulator(cfg, 0, record_events=True)
    m = sim.run(KDeclineRule(2))
    assert m["n_jobs"] == 3000
    assert all(0 <= e.free_gpus <= 64 for e in sim.events or [])
    assert read_trace(philly_path).gpus.shape == (82247,)
