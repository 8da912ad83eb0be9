"""``EpisodeCore.info_metrics`` at an episode's end: ``episode_metrics`` without its None entries."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.envs import EvalStopEnv


def _reference(env: EvalStopEnv) -> dict:
    """What ``info_metrics`` was written as: the full metrics, the None entries dropped."""
    return {k: v for k, v in env.core.episode_metrics().items() if v is not None}


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"deprioritize": True},
        {"costs": "realistic"},
        {"reward": "system"},
        {"reward_timing": "delayed", "workload": "light-rlhf"},
    ],
    ids=["default", "deprioritize", "costs", "system", "delayed"],
)
def test_info_metrics_at_the_end_are_the_defined_episode_metrics(kw: dict) -> None:
    # Played to the end with seeded random actions, several episodes each: the same
    # keys in the same order and the same values (a metric a short episode leaves
    # undefined, such as the detection delay, is left out by both).
    env = EvalStopEnv(n_jobs=12, **kw)
    rng = np.random.default_rng(5)
    left_out = 0
    for seed in range(6):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, done, _, info = env.step(int(rng.integers(0, env.action_space.n)))
        want = _reference(env)
        got = env.core.info_metrics()
        assert list(got) == list(want)
        assert all(type(got[k]) is type(want[k]) and got[k] == want[k] for k in want)
        assert info["episode_metrics"] == got
        left_out += len(env.core.episode_metrics()) - len(got)
    assert left_out > 0
