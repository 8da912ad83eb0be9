"""The held-out replay reads the opt-in signals and the hidden proxy at the eval's warped points."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers the env)
from evalstop_gym.sim.real_curves import job_runs, load_corpus
from evalstop_gym.sim.signals import WARP_ATTR, signal_rows
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import suite_task


def _replayed_jobs():
    """(curves, job, its corpus run, its warp, the warped progress points) of each RLHF job."""
    kw = dict(suite_task("trl-heldout"), n_jobs=40, obs_fields=["kl"])
    env = gym.make("EvalStop-v0", **kw)
    env.reset(seed=3)
    sim = env.unwrapped.core.sim
    curves = sim.curves
    warps = getattr(curves, WARP_ATTR)
    hacking, healthy = load_corpus(kw["curves"], "test")
    runs = {t.run_id: t for t in (*hacking, *healthy)}
    k = curves.true_eval.shape[1]
    for j in np.flatnonzero(sim.batch.job_type == RLHF):
        t = runs[job_runs(curves)[j]]
        power = float(warps[j])
        yield curves, j, t, power, (np.arange(1, k + 1) / k) ** power


def test_signals_follow_the_jobs_time_warp():
    checked = 0
    for curves, j, t, power, q in _replayed_jobs():
        x = t.step / float(t.step[-1])
        # The true eval is an affine map of the gold at the warped points...
        gold = np.interp(q, x, t.gold)
        design = np.column_stack([gold, np.ones(len(q))])
        coef, *_ = np.linalg.lstsq(design, curves.true_eval[j], rcond=None)
        assert np.allclose(design @ coef, curves.true_eval[j], atol=1e-9)
        # ...and the KL shown is the run's KL at the same points.
        if t.kl is not None:
            got = signal_rows(curves, "kl", slice(j, j + 1))[0]
            assert np.array_equal(got, np.interp(q, x, t.kl))
            checked += power != 1.0
    assert checked > 0


def test_hidden_proxy_follows_the_jobs_time_warp():
    # The proxy is never observed, but an analysis that reads it must see it on the same
    # clock as the gold it is compared with.
    checked = 0
    for curves, j, t, power, q in _replayed_jobs():
        if t.proxy is None or power == 1.0:
            continue
        x = t.step / float(t.step[-1])
        assert np.array_equal(curves.proxy[j], np.interp(q, x, t.proxy))
        checked += 1
    assert checked > 0
