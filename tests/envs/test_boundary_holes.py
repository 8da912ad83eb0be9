"""Holes in the information boundary, one test each: closed, or documented and shown true."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from gymnasium import spaces

from baselines import evaluate
from evalstop_gym import SimConfig, Simulator
from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.sim.calibration import PAPER

SMALL = {"n_jobs": 40, "scheduler": "fifo"}
JITTERED = replace(PAPER, name="paper-jitter", step_time_jitter=0.3)


class _Cheat:
    """The ten-line exploit: read the hidden labels through the env handed to ``check_env``."""

    name = "cheat"

    def __init__(self) -> None:
        self.env = None
        self.spaces_seen: list[object] = []

    def check_env(self, env) -> None:
        self.env = env

    def check_observation_space(self, space) -> None:
        self.spaces_seen.append(space)

    def reset(self) -> None:
        pass

    def act(self, obs) -> int:
        if self.env is None:
            return 0
        sim = self.env.unwrapped.sim
        return int(bool(sim.job(sim.pending_job_id).hacking))


def test_evaluate_never_hands_the_env_to_a_policy() -> None:
    cheat = _Cheat()
    row = evaluate(cheat, [0], **SMALL)[0]
    assert cheat.env is None
    (space,) = cheat.spaces_seen
    assert isinstance(space, spaces.Dict) and not hasattr(space, "unwrapped")
    assert row["recall"] == 0.0  # it never stopped: it had nothing to cheat with


def test_the_exploit_is_real_when_given_the_env() -> None:
    env = EvalStopEnv(**SMALL)
    cheat = _Cheat()
    cheat.check_env(env)
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, _, done, _, info = env.step(cheat.act(obs))
    m = info["episode_metrics"]
    assert m["precision"] == 1.0 and m["recall"] == 1.0


def _run(env: EvalStopEnv, seed: int, policy) -> tuple[list[float], list[list[int]]]:
    """Rewards of an episode and, per step, the jobs that left the cluster during it."""
    obs, _ = env.reset(seed=seed)
    rewards, left, done = [], [], False
    while not done:
        before = len(env.sim.finished_order)
        obs, r, done, _, _ = env.step(policy(obs))
        rewards.append(r)
        left.append(env.sim.finished_order[before:])
    return rewards, left


def _k_decline(obs) -> int:
    return int(obs["consecutive_declines"][0] >= 2)


def _job_value(env: EvalStopEnv, jid: int) -> float:
    """V_end - V_1 of one finished job (the class docstring's closed form)."""
    sim, price = env.sim, env.gpu_hour_price
    job, true = sim.jobs[jid], sim.curves.true_eval[jid]
    first = job.duration * sim.work_fraction(jid, 1)
    return true[job.delivered] - true[0] - price * job.gpus * (job.work_done - first)


@pytest.mark.parametrize("calibration", ["paper", JITTERED])
def test_delayed_reward_pays_each_job_when_it_leaves_and_keeps_the_return(calibration) -> None:
    kw = {**SMALL, "gpu_hour_price": 1e-3, "calibration": calibration}
    dense_env, delayed_env = EvalStopEnv(**kw), EvalStopEnv(reward_timing="delayed", **kw)
    dense, _ = _run(dense_env, 3, _k_decline)
    delayed, left = _run(delayed_env, 3, _k_decline)
    for r, jobs in zip(delayed, left):
        assert r == pytest.approx(sum(_job_value(delayed_env, j) for j in jobs), abs=1e-12)
    closed = sum(_job_value(delayed_env, j) for j in range(len(delayed_env.sim.jobs)))
    assert sum(delayed) == pytest.approx(closed, rel=1e-9)
    assert sum(dense) == pytest.approx(sum(delayed), rel=1e-9)
    assert delayed_env.episode_metrics()["return"] == pytest.approx(sum(delayed), rel=1e-9)


def _auc(pos: list[float], neg: list[float]) -> float:
    pos_a, neg_a = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(np.mean(pos_a > neg_a) + 0.5 * np.mean(pos_a == neg_a))


def test_dense_reward_leaks_the_label_and_delayed_does_not() -> None:
    """The documented leak: the dense reward of the first 'continue' separates hacking runs."""
    by_timing = {}
    for timing in ("dense", "delayed"):
        env = EvalStopEnv(n_jobs=200, reward_timing=timing)
        hack, ok = [], []
        obs, _ = env.reset(seed=0)
        done = False
        while not done:
            job = env.sim.jobs[env.sim.pending_job_id]
            first_rlhf = job.job_type == 2 and job.ckpt_done == 1
            obs, r, done, _, _ = env.step(0)
            if first_rlhf:
                (hack if job.hacking else ok).append(r)
        by_timing[timing] = _auc(hack, ok)
    assert abs(by_timing["dense"] - 0.5) > 0.3  # reveals the label
    assert abs(by_timing["delayed"] - 0.5) < 0.15  # pays other jobs' settled values only


def _checkpoint_gaps(calibration) -> tuple[np.ndarray, np.ndarray]:
    """K x (gap between two consecutive evals) and the true duration, for every such pair."""
    sim = Simulator(
        SimConfig(n_jobs=60, scheduler="fifo", calibration=calibration), 0, record_events=True
    )
    sim.run()
    last: dict[int, float] = {}
    est, true = [], []
    for ev in sim.events:
        if ev.kind == "eval":
            if ev.jid in last:
                job = sim.jobs[ev.jid]
                est.append(job.n_ckpt * (ev.time - last[ev.jid]))
                true.append(job.duration)
            last[ev.jid] = ev.time
    return np.asarray(est), np.asarray(true)


def test_time_h_gives_the_true_duration_unless_step_times_jitter() -> None:
    est, true = _checkpoint_gaps("paper")
    assert np.allclose(est, true, rtol=1e-9)  # the hole, with jitter off (paper's figures)
    est, true = _checkpoint_gaps(JITTERED)
    assert np.median(np.abs(est / true - 1)) > 0.1
    est, true = _checkpoint_gaps("hard")  # on in the benchmark's hard regime
    assert np.median(np.abs(est / true - 1)) > 0.1
    est, true = _checkpoint_gaps("realistic")
    assert np.allclose(est, true, rtol=1e-9)


def test_jitter_keeps_each_jobs_run_time_and_the_closed_form() -> None:
    sim = Simulator(SimConfig(n_jobs=60, scheduler="fifo", calibration=JITTERED), 0)
    sim.run()
    for job in sim.jobs:
        assert job.gpu_hours == pytest.approx(job.gpus * job.duration, rel=1e-9)
    env = EvalStopEnv(gpu_hour_price=1e-3, calibration=JITTERED, **SMALL)
    rewards, _ = _run(env, 1, _k_decline)
    closed = sum(_job_value(env, j) for j in range(len(env.sim.jobs)))
    assert sum(rewards) == pytest.approx(closed, rel=1e-9)


def test_mask_reveals_progress_without_the_progress_field() -> None:
    """Documented as inherent: the count of observed evals is the count of checkpoints done."""
    env = EvalStopEnv(obs_fields="job_type,evals", n_jobs=10)
    assert "progress" not in env.observation_space.spaces
    obs, _ = env.reset(seed=0)
    w, done = env.window, False
    while not done:
        job = env.sim.jobs[env.sim.pending_job_id]
        assert obs["evals"][w:].sum() == min(job.ckpt_done, w)
        obs, _, done, _, _ = env.step(0)
    assert "inherent" in EvalStopEnv.__doc__
