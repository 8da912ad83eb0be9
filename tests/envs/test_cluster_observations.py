"""EvalStopCluster-v0's incremental observation equals the frozen rebuild-everything one."""

from __future__ import annotations

import numpy as np
import pytest

from baselines import EvalStop
from evalstop_gym.envs import EvalStopClusterEnv, per_job_actions
from tests.oracles import reference_cluster


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize(
    ("seed", "max_jobs", "kwargs"),
    [
        (0, 32, {}),
        (1, 3, {}),
        (2, 8, {"calibration": "hard", "eval_noise": 0.12}),
        (3, 16, {"obs_fields": ("job_type", "evals", "progress"), "eval_window": 4}),
        (4, 6, {"load": 1.6}),
    ],
)
def test_observations_match_the_frozen_implementation(seed, max_jobs, kwargs) -> None:
    env = EvalStopClusterEnv(n_jobs=40, max_jobs=max_jobs, **kwargs)
    rng = np.random.default_rng(seed)
    kept = []
    for episode in range(2):  # the second reset must forget the first episode's rows
        obs, _ = env.reset(seed=seed * 10 + episode)
        _same(obs, reference_cluster.observe(env))
        done = False
        while not done:
            if rng.random() < 0.1:
                kept.append(({k: v.copy() for k, v in obs.items()}, obs))
            action = rng.choice(3, size=max_jobs, p=[0.8, 0.1, 0.1]).astype(np.int64)
            obs, _, done, _, _ = env.step(action)
            _same(obs, reference_cluster.observe(env))
    # An observation handed out earlier is never written again.
    assert kept
    for copy, obs in kept:
        _same(copy, obs)


def test_per_job_actions_match_the_frozen_implementation() -> None:
    env, policy = EvalStopClusterEnv(n_jobs=30, max_jobs=5), EvalStop(2)
    obs, _ = env.reset(seed=5)
    seen: list[dict[str, np.ndarray]] = []
    done = False
    while not done:
        a = per_job_actions(obs, policy.act)
        b = reference_cluster.per_job_actions(obs, lambda o: seen.append(o) or policy.act(o))
        np.testing.assert_array_equal(a, b)
        obs, _, done, _, _ = env.step(a)
    assert seen and all(list(o) == list(seen[0]) for o in seen)
