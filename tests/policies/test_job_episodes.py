"""JobEpisodes: the per-job view of EvalStop-v0's utility used to train learned stoppers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalstop_gym  # noqa: F401
from baselines.policies import EvalStop, NoStop, StopAtProgress
from evalstop_gym.envs.wrappers import JobEpisodes
from evalstop_gym.suite import suite_task

POLICIES = [NoStop(), EvalStop(2), StopAtProgress(0.5)]


def _cluster_return(kw: dict, seed: int, policy) -> float:
    env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, r, done, _, _ = env.step(policy.act(obs))
        total += r
    return total


def _job_returns(kw: dict, seed: int, policy) -> float:
    env = JobEpisodes(gym.make("EvalStop-v0", disable_env_checker=True, **kw))
    obs, _ = env.reset(seed=seed)
    total = 0.0
    for j in range(kw["n_jobs"]):
        if j:
            obs, info = env.reset()
            assert info["job"] == j
        done = False
        while not done:
            obs, r, done, _, _ = env.step(policy.act(obs))
            total += r
    return total


@settings(max_examples=4, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    task=st.sampled_from(["hard-0.05", "paper-0.12"]),
    which=st.integers(0, len(POLICIES) - 1),
)
def test_job_episode_returns_sum_to_the_cluster_return(seed: int, task: str, which: int) -> None:
    kw = {**suite_task(task), "n_jobs": 8}
    policy = POLICIES[which]
    assert _job_returns(kw, seed, policy) == pytest.approx(
        _cluster_return(kw, seed, policy), rel=1e-9, abs=1e-9
    )


def test_a_job_episode_shows_that_jobs_own_observations() -> None:
    kw = {**suite_task("hard-0.12"), "n_jobs": 5}
    env = JobEpisodes(gym.make("EvalStop-v0", disable_env_checker=True, **kw))
    obs, _ = env.reset(seed=4)
    base = env.unwrapped
    for i in range(1, base.sim.n_ckpt - 1):
        ref = base.observation_at(0, i)
        assert all(np.array_equal(obs[k], ref[k]) for k in ref)
        obs, _, done, _, _ = env.step(0)
        assert not done
    _, _, done, _, _ = env.step(0)
    assert done


def test_job_episodes_refuse_the_system_reward() -> None:
    with pytest.raises(ValueError, match="reward='utility'"):
        JobEpisodes(gym.make("EvalStop-v0", reward="system", n_jobs=3))
