"""Episodes cut short by a time limit: the metrics so far, and every other ``info`` unchanged."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401  (registers the envs)
from evalstop_gym import METRIC_KEYS
from evalstop_gym.envs import EpisodeMetricsInfo, EpisodeMetricsSoFar

SMALL = {"n_jobs": 12, "num_gpus": 16}


def _zero(env: gym.Env):
    space = env.action_space
    return np.zeros(space.shape, dtype=np.int64) if space.shape else 0


def _finished_keys(env_id: str, **kwargs) -> set[str]:
    env = gym.make(env_id, **SMALL, **kwargs)
    env.reset(seed=0)
    while not env.step(_zero(env))[2]:
        pass
    return set(env.unwrapped.episode_metrics())


@pytest.mark.parametrize("kwargs", [{}, {"deprioritize": True}, {"reward": "system"}])
def test_episode_metrics_mid_episode_cover_the_jobs_ended_so_far(kwargs) -> None:
    env = gym.make("EvalStop-v0", **SMALL, **kwargs)
    env.reset(seed=1)
    base = env.unwrapped
    first = base.episode_metrics()  # before any job has ended
    assert first["n_jobs"] == 0.0 and first["mean_jct_h"] is None and first["return"] == 0.0
    assert set(first) == _finished_keys("EvalStop-v0", **kwargs)
    rewards = []
    for i in range(12):
        rewards.append(env.step(i % 2)[1])  # stop every other decision: jobs end early
    m = base.episode_metrics()
    assert set(m) == set(first)
    sim = base.sim
    ended = ~np.isnan(sim.record().finish)
    assert 0 < m["n_jobs"] == ended.sum() == sim.n_done < sim.n_jobs
    assert m["n_decisions"] == 12.0
    assert m["gpu_hours"] == pytest.approx(sim.record().gpu_hours[ended].sum())
    if kwargs.get("reward") != "system":  # the system reward's parts start at reset
        assert m["return"] == pytest.approx(sum(rewards))


@pytest.mark.parametrize("env_id", ["EvalStop-v0", "EvalStopFlat-v0", "EvalStopCluster-v0"])
def test_truncated_episode_carries_its_metrics_so_far(env_id: str) -> None:
    env = EpisodeMetricsSoFar(gym.make(env_id, max_episode_steps=5, **SMALL))
    env.reset(seed=0)
    for _ in range(5):
        _, _, terminated, truncated, info = env.step(_zero(env))
    assert truncated and not terminated
    assert info["episode_metrics_partial"] is True
    so_far = env.unwrapped.episode_metrics()
    assert info["episode_metrics"] == {k: v for k, v in so_far.items() if v is not None}
    assert set(so_far) == _finished_keys(env_id)


def test_the_time_limit_alone_leaves_info_as_it_is() -> None:
    # The env cannot see Gymnasium's TimeLimit: its info is the env's own.
    env = gym.make("EvalStop-v0", max_episode_steps=3, **SMALL)
    env.reset(seed=0)
    for _ in range(3):
        *_, truncated, info = env.step(0)
    assert truncated and "episode_metrics" not in info


@pytest.mark.parametrize("wrapper", [EpisodeMetricsSoFar, EpisodeMetricsInfo])
def test_only_the_truncated_step_gets_new_keys(wrapper) -> None:
    plain, wrapped = gym.make("EvalStop-v0", **SMALL), wrapper(gym.make("EvalStop-v0", **SMALL))
    plain.reset(seed=2)
    wrapped.reset(seed=2)
    while True:
        a, b = plain.step(0), wrapped.step(0)
        np.testing.assert_equal(a[:4], b[:4])
        if not a[2]:
            assert a[4] == b[4]
        elif wrapper is EpisodeMetricsSoFar:
            assert a[4] == b[4] and "episode_metrics_partial" not in b[4]
            break
        else:
            assert "episode_metrics_partial" not in b[4]
            break


def test_episode_metrics_info_lifts_a_truncated_episodes_metrics() -> None:
    env = EpisodeMetricsInfo(gym.make("EvalStopFlat-v0", max_episode_steps=4, **SMALL))
    env.reset(seed=0)
    for _ in range(4):
        *_, truncated, info = env.step(0)
    assert truncated and info["episode_metrics_partial"] is True
    assert set(METRIC_KEYS) <= set(info)
    assert info["n_decisions"] == 4.0


def test_registered_with_the_wrapper_make_gives_truncated_metrics() -> None:
    # The wrapper is recordable, so an id can carry it outside make's TimeLimit.
    env_id = "EvalStopTruncationProbe-v0"
    gym.register(
        env_id,
        entry_point="evalstop_gym.envs:EvalStopEnv",
        additional_wrappers=(EpisodeMetricsSoFar.wrapper_spec(),),
    )
    try:
        env = gym.make(env_id, max_episode_steps=2, **SMALL)
        env.reset(seed=0)
        env.step(0)
        *_, truncated, info = env.step(0)
        assert truncated and info["episode_metrics_partial"] is True
    finally:
        del gym.registry[env_id]
