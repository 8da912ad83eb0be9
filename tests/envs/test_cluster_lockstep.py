"""EvalStopCluster-v0 steps exactly as its frozen reference does: every observation, reward,
flag and ``info``, and ``per_job_actions`` gives the same actions from the same calls.

The reference (``tests/oracles/reference_cluster_env.py``) is the env as it was before its
observation became record views of one copy; the two run side by side on the same seeds.
An observation handed out earlier must never change afterwards (users keep them in replay
buffers), so every observation of an episode is checked again at its end.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import hand_jobs

from baselines import Deprioritize, EvalStop
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.envs import EvalStopClusterEnv, per_job_actions
from evalstop_gym.envs import core as core_module
from tests.oracles import reference_cluster_env as ref

CASES: list[tuple[int, int, dict[str, Any]]] = [
    (0, 32, {"n_jobs": 40}),
    (1, 3, {"n_jobs": 40}),  # more jobs than slots
    (2, 8, {"n_jobs": 30, "calibration": "hard", "eval_noise": 0.12}),
    (3, 16, {"n_jobs": 40, "obs_fields": ("evals", "progress"), "eval_window": 4}),
    (4, 6, {"n_jobs": 40, "load": 1.6, "scheduler": "fifo"}),
    (5, 12, {"n_jobs": 40, "costs": "realistic", "reward_timing": "delayed"}),
    (6, 10, {"n_jobs": 24, "curves": str(corpus_path(TRL_CORPUS)), "obs_fields": ["kl"]}),
    (7, 5, {"n_jobs": 30, "scheduler": "tiresias", "reward": "system"}),
    (8, 4, {"n_jobs": 30, "obs_fields": ("progress",)}),  # a single job field
]
#: The cases whose observation has what the scripted policies read.
SCRIPTED = [c for c in CASES if "obs_fields" not in c[2] or c[0] == 6]


def _same_obs(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _same_info(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert list(a) == list(b)
    for k in a:
        if isinstance(a[k], dict):
            _same_info(a[k], b[k])
        else:
            assert type(a[k]) is type(b[k]) and (a[k] == b[k] or a[k] != a[k] != b[k]), k


def _lockstep(env, reference, seeds, choose) -> int:
    """Step both on ``seeds``; ``choose(obs, rng)`` gives (action, reference action)."""
    steps = 0
    rng = np.random.default_rng(sum(seeds))
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        robs, rinfo = reference.reset(seed=seed)
        kept = [(obs, {k: v.copy() for k, v in obs.items()})]
        _same_obs(obs, robs)
        _same_info(info, rinfo)
        done = False
        while not done:
            action, raction = choose(obs, robs, rng)
            np.testing.assert_array_equal(action, raction)
            obs, r, done, trunc, info = env.step(action)
            robs, rr, rdone, rtrunc, rinfo = reference.step(raction)
            assert (type(r), r, done, trunc) == (type(rr), rr, rdone, rtrunc)
            _same_obs(obs, robs)
            _same_info(info, rinfo)
            kept.append((obs, {k: v.copy() for k, v in obs.items()}))
            steps += 1
        for handed, copy in kept:  # nothing handed out was written again
            _same_obs(handed, copy)
    return steps


def _random(max_jobs: int):
    def choose(obs, robs, rng):
        a = rng.choice(3, size=max_jobs, p=[0.8, 0.1, 0.1]).astype(np.int64)
        return a, a.copy()

    return choose


def _scripted(policy):
    def choose(obs, robs, rng):
        return per_job_actions(obs, policy.act), ref.per_job_actions(robs, policy.act)

    return choose


@pytest.mark.parametrize(("seed", "max_jobs", "kwargs"), CASES)
def test_random_actions_step_as_the_reference(seed, max_jobs, kwargs) -> None:
    env = EvalStopClusterEnv(max_jobs=max_jobs, **kwargs)
    reference = ref.ReferenceClusterEnv(max_jobs=max_jobs, **kwargs)
    assert _lockstep(env, reference, [seed, seed + 100], _random(max_jobs)) > 0


@pytest.mark.parametrize(("seed", "max_jobs", "kwargs"), SCRIPTED)
def test_scripted_policies_step_as_the_reference(seed, max_jobs, kwargs) -> None:
    env = EvalStopClusterEnv(max_jobs=max_jobs, **kwargs)
    reference = ref.ReferenceClusterEnv(max_jobs=max_jobs, **kwargs)
    policy = EvalStop(2) if seed % 2 else Deprioritize(2)
    assert _lockstep(env, reference, [seed], _scripted(policy)) > 0


def test_simultaneous_checkpoints_step_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Epochs of two jobs (hand-made coinciding checkpoints), with random and scripted actions."""
    k = 10
    evals = [[0.1, 0.2, 0.3, 0.25, 0.2, 0.15, 0.1, 0.1, 0.1, 0.1]] * 2 + [[0.5] * k] * 2
    jobs = hand_jobs([0.0] * 4, [8] * 4, [5.0] * 4, evals=evals, k=k)

    real = core_module.Simulator
    monkeypatch.setattr(
        core_module, "Simulator", lambda c, seed, **kw: real(c, seed, jobs=jobs, **kw)
    )
    for max_jobs in (4, 1):
        kwargs = {"num_gpus": 16, "scheduler": "fifo"}
        env = EvalStopClusterEnv(max_jobs=max_jobs, **kwargs)
        reference = ref.ReferenceClusterEnv(max_jobs=max_jobs, **kwargs)
        _lockstep(env, reference, [0, 1], _random(max_jobs))
        _lockstep(env, reference, [2], _scripted(EvalStop(2)))
        obs, info = env.reset(seed=0)
        assert info["epoch_jobs"] == 2
        assert obs["decide"][:2].tolist() == [1.0] * min(2, max_jobs)


def test_per_job_actions_on_hand_made_observations() -> None:
    """Deciding slots anywhere (not only a prefix), values other than 0 and 1, a plain dict."""
    env = EvalStopClusterEnv(n_jobs=30, max_jobs=6)
    obs, _ = env.reset(seed=3)
    seen, rseen = [], []
    policy = EvalStop(2)
    for decide in ([0, 1, 0, 1, 1, 0], [0.6, 0, 0, 0, 0, 0.51], [0.5] * 6, [0] * 6, [1] * 6):
        mine = {k: v.copy() for k, v in obs.items()}
        mine["decide"] = np.asarray(decide, np.float32)
        a = per_job_actions(mine, lambda o: seen.append(o) or policy.act(o))
        b = ref.per_job_actions(mine, lambda o: rseen.append(o) or policy.act(o))
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype and a.shape == b.shape
    assert len(seen) == len(rseen) > 0
    for o, ro in zip(seen, rseen):
        _same_obs(o, ro)


def test_a_pickled_env_steps_on_as_the_reference() -> None:
    """Mid-episode, a pickled copy (whose buffers' views are rebuilt) goes on like the original."""
    import pickle

    env = EvalStopClusterEnv(n_jobs=30, max_jobs=6)
    reference = ref.ReferenceClusterEnv(n_jobs=30, max_jobs=6)
    rng = np.random.default_rng(11)
    env.reset(seed=9)
    reference.reset(seed=9)
    for _ in range(40):
        a = rng.choice(3, size=6, p=[0.85, 0.1, 0.05]).astype(np.int64)
        env.step(a)
        reference.step(a)
    env = pickle.loads(pickle.dumps(env))
    done = False
    while not done:
        a = rng.choice(3, size=6, p=[0.85, 0.1, 0.05]).astype(np.int64)
        obs, r, done, _, info = env.step(a)
        robs, rr, rdone, _, rinfo = reference.step(a)
        _same_obs(obs, robs)
        _same_info(info, rinfo)
        assert (r, done) == (rr, rdone)


def test_action_masks_allow_every_action_only_on_deciding_slots() -> None:
    env = EvalStopClusterEnv(n_jobs=30, max_jobs=5)
    obs, _ = env.reset(seed=2)
    rng = np.random.default_rng(2)
    done = False
    while not done:
        mask = env.action_masks()
        assert mask.shape == (15,) and mask.dtype == bool
        k = int(obs["decide"].sum())
        expected = np.zeros((5, 3), dtype=bool)
        expected[:, 0] = True
        expected[:k] = True
        np.testing.assert_array_equal(mask, expected.reshape(-1))
        mask[:] = False  # a mask handed out is the caller's
        assert env.action_masks()[0]
        obs, _, done, _, _ = env.step(rng.choice(2, size=5, p=[0.9, 0.1]).astype(np.int64))
