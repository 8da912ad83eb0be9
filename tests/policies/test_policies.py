"""Scripted stoppers, the evaluate() runner, and the reward's closed forms."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from baselines import EvalStop, LossPlateau, NoStop, StopAtProgress, evaluate, scripted_policies
from evalstop_gym import METRIC_KEYS, ConfigError, KDeclineRule, Simulator
from evalstop_gym.envs import EvalStopEnv

SMALL = {"n_jobs": 40}


def _obs(declines=0, progress=0.5, job_type=2, losses=(), w=10):
    loss = np.zeros(2 * w, np.float32)
    if losses:
        n = len(losses)
        loss[w - n : w] = losses
        loss[2 * w - n :] = 1
    jt = np.zeros(3, np.float32)
    jt[job_type] = 1
    return {
        "job_type": jt,
        "consecutive_declines": np.array([declines], np.float32),
        "progress": np.array([progress], np.float32),
        "loss": loss,
    }


def test_scripted_policies_on_hand_made_observations() -> None:
    assert NoStop().act(_obs(declines=9)) == 0
    assert EvalStop(2).act(_obs(declines=1)) == 0
    assert EvalStop(2).act(_obs(declines=2)) == 1
    assert EvalStop(3).act(_obs(declines=2)) == 0
    assert StopAtProgress(0.65).act(_obs(progress=0.6)) == 0
    assert StopAtProgress(0.65).act(_obs(progress=0.7)) == 1
    assert StopAtProgress(0.65).act(_obs(progress=0.7, job_type=0)) == 0
    lp = LossPlateau(window=2, tolerance=0.05)
    assert lp.act(_obs(losses=(0.9, 0.8))) == 0  # not enough history
    assert lp.act(_obs(losses=(0.9, 0.8, 0.7))) == 0  # 22 % better
    assert lp.act(_obs(losses=(0.5, 0.49, 0.49))) == 1  # 2 % better


def test_policies_reject_bad_parameters_and_missing_fields() -> None:
    with pytest.raises(ConfigError, match="k=0"):
        EvalStop(0)
    with pytest.raises(ConfigError, match="threshold"):
        StopAtProgress(1.5)
    with pytest.raises(ConfigError, match="window"):
        LossPlateau(window=0)
    with pytest.raises(KeyError, match=r"consecutive_declines.*obs_fields"):
        EvalStop().act({"evals": np.zeros(20, np.float32)})


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("scheduler", ["srtf-est", "fifo", "loss-aware"])
def test_evalstop_reproduces_the_simulators_rule_decision_for_decision(k, scheduler) -> None:
    env = EvalStopEnv(scheduler=scheduler, **SMALL)
    policy = EvalStop(k)
    obs, _ = env.reset(seed=k)
    via_env: list[tuple[int, int, int]] = []
    done = False
    while not done:
        sim = env.sim
        jid, ckpt = sim.pending_job_id, sim.jobs[sim.pending_job_id].ckpt_done
        a = policy.act(obs)
        via_env.append((jid, ckpt, a))
        obs, _, done, _, info = env.step(a)
    # The same episode run in the simulator's tight loop with its own rule.
    sim = Simulator(env.config, env.sim.seed)
    rule = KDeclineRule(k)
    via_sim: list[tuple[int, int, int]] = []
    while (view := sim.advance()) is not None:
        jid = sim.pending_job_id
        a = int(rule(view))
        via_sim.append((jid, sim.jobs[jid].ckpt_done, a))
        sim.decide(a)
    assert via_env == via_sim
    m = sim.metrics()
    for key in METRIC_KEYS:
        np.testing.assert_equal(info["episode_metrics"].get(key, np.nan), m[key])


def test_evaluate_returns_every_metric_per_seed() -> None:
    rows = evaluate(EvalStop(), [0, 1, 2], **SMALL)
    assert [r["seed"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert set(METRIC_KEYS) <= set(r)
        assert r["policy"] == "EvalStop" and r["steps"] > 0
    again = evaluate(EvalStop(), [1], **SMALL)
    assert again[0] == rows[1]


def _episode(env: EvalStopEnv, act, seed: int) -> tuple[float, dict]:
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, r, done, _, info = env.step(act(env, obs))
        total += r
    return total, info["episode_metrics"]


def _delivered_quality(env: EvalStopEnv) -> np.ndarray:
    rec = env.sim.record()
    return rec.true_eval[np.arange(len(rec.delivered)), rec.delivered]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_utility_return_equals_closed_form(seed: int) -> None:
    env = EvalStopEnv(gpu_hour_price=1e-3, **SMALL)
    policy = EvalStop(2)
    total, m = _episode(env, lambda e, o: policy.act(o), seed)
    rec = env.sim.record()
    first_q = rec.true_eval[:, 0].sum()  # what checkpoint 1 delivered: no policy changes it
    first_gpu_h = (rec.gpus * rec.duration / rec.n_ckpt).sum()
    closed = _delivered_quality(env).sum() - first_q - 1e-3 * (m["gpu_hours"] - first_gpu_h)
    assert total == pytest.approx(closed, rel=1e-9)
    assert m["return"] == pytest.approx(total, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_system_return_equals_closed_form(seed: int) -> None:
    env = EvalStopEnv(reward="system", time_cost=0.02, quality_weight=2.0, **SMALL)
    policy = EvalStop(2)
    total, m = _episode(env, lambda e, o: policy.act(o), seed)
    rec = env.sim.record()
    jct = rec.finish - rec.arrival
    closed = -0.02 * jct.sum() + 2.0 * _delivered_quality(env).sum()
    # The time before the first decision is no action's consequence: it is excluded.
    closed += 0.02 * _area_before_first_decision(env)
    assert total == pytest.approx(closed, rel=1e-9)
    assert m["return"] == pytest.approx(total, rel=1e-9)


def _area_before_first_decision(env: EvalStopEnv) -> float:
    # Replay the episode to its first decision to measure that area.
    sim = Simulator(env.config, env.sim.seed)
    sim.advance()
    return sim.jobs_area


def _oracle(env: EvalStopEnv, obs) -> int:
    """Privileged, test-only: stop a hacking run at its first checkpoint past the peak."""
    job = env.sim.jobs[env.sim.pending_job_id]
    return int(job.hacking and job.ckpt_done / job.n_ckpt >= job.peak_progress)


@pytest.mark.parametrize("calibration", ["paper", "realistic"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_oracle_beats_every_scripted_policy_on_utility(calibration: str, seed: int) -> None:
    env = EvalStopEnv(calibration=calibration, n_jobs=60)
    oracle, _ = _episode(env, _oracle, seed)
    for p in scripted_policies():
        got, _ = _episode(env, lambda e, o, p=p: p.act(o), seed)
        assert oracle >= got, (p.name, oracle, got)


def test_observation_restriction_runs_evalstop() -> None:
    rows = evaluate(
        EvalStop(), [0], obs_fields=["job_type", "evals", "consecutive_declines"], **SMALL
    )
    assert rows[0]["recall"] > 0


def test_make_kwargs_reach_the_simulator() -> None:
    env = gym.make(
        "EvalStop-v0",
        workload="balanced",
        scheduler="tiresias",
        num_gpus=32,
        n_jobs=12,
        load=0.5,
        eval_noise=0.05,
        hack_fraction=0.3,
        eval_window=4,
    ).unwrapped
    env.reset(seed=0)
    c = env.sim.config
    assert (c.workload, c.scheduler, c.num_gpus, c.n_jobs, c.load) == (
        "balanced",
        "tiresias",
        32,
        12,
        0.5,
    )
    assert env.sim.eval_noise == 0.05 and env.sim.window == 4
    assert env.observation_space["evals"].shape == (8,)


@pytest.mark.parametrize("seeds", [5, "3", [], [-1], [1.5], [True], [2, 0, 2], None])
def test_evaluate_refuses_seeds_it_would_misread(seeds) -> None:
    """``seeds=[1.5]`` played seed 1, ``[True]`` seed 1, ``[2, 0, 2]`` seed 2 twice (two rows
    of one episode), ``5`` was a TypeError: each is now one line naming the seeds."""
    from evalstop_gym import ConfigError

    with pytest.raises(ConfigError, match=r"seeds=.* is not allowed: a non-empty iterable"):
        evaluate(EvalStop(k=2), seeds=seeds, n_jobs=5)
