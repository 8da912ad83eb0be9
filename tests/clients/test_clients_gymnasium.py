"""What RL libraries expect of a Gymnasium env, checked with Gymnasium alone.

EvalStopFlat-v0, the ``human`` render mode, ``action_masks()``, finite ``info``,
``__version__``, and the CleanRL-style snippet of docs/CLIENTS.md.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import warnings
from importlib.metadata import version

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.utils.env_match import check_environments_match
from gymnasium.vector import AutoresetMode
from readme_snippets import run_snippet

import evalstop_gym
from evalstop_gym import METRIC_KEYS
from evalstop_gym.envs import EpisodeMetricsInfo, EvalStopEnv, EvalStopFlatEnv

SMALL = {"n_jobs": 12, "num_gpus": 16}


def _run(env: gym.Env, seed: int, policy) -> tuple[list, dict]:
    """Run one episode; return the observations and the final info."""
    obs, info = env.reset(seed=seed)
    seen, done = [obs], False
    while not done:
        obs, _, terminated, truncated, info = env.step(policy(obs))
        seen.append(obs)
        done = terminated or truncated
    return seen, info


def test_flat_id_and_module_id_are_registered() -> None:
    for env_id in ("EvalStopFlat-v0", "evalstop_gym:EvalStopFlat-v0"):
        env = gym.make(env_id, **SMALL)
        assert isinstance(env.unwrapped, EvalStopFlatEnv)
        assert isinstance(env.observation_space, gym.spaces.Box)
        assert env.observation_space.dtype == np.float32


@pytest.mark.parametrize("obs_fields", [None, "evals,consecutive_declines", ["loss"]])
def test_flat_observation_is_flatten_observation_of_the_dict_env(obs_fields) -> None:
    flat = gym.make("EvalStopFlat-v0", obs_fields=obs_fields, eval_window=4, **SMALL)
    ref = gym.wrappers.FlattenObservation(
        gym.make("EvalStop-v0", obs_fields=obs_fields, eval_window=4, **SMALL)
    )
    assert flat.observation_space == ref.observation_space
    rng = np.random.default_rng(3)
    actions = rng.integers(0, 2, 10_000).tolist()
    a_it, b_it = iter(actions), iter(actions)
    a_obs, a_info = _run(flat, 5, lambda _o: next(a_it))
    b_obs, b_info = _run(ref, 5, lambda _o: next(b_it))
    assert len(a_obs) == len(b_obs) > 2
    for x, y in zip(a_obs, b_obs):
        assert x.dtype == np.float32 and flat.observation_space.contains(x)
        np.testing.assert_array_equal(x, y)
    assert a_info == b_info


def test_gymnasium_check_env_passes_on_the_flat_env() -> None:
    # Through make, so that the checker also tries every render mode.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make("EvalStopFlat-v0", **SMALL).unwrapped)


@pytest.mark.parametrize("env_id", ["EvalStop-v0", "EvalStopFlat-v0"])
def test_check_environments_match_on_two_identical_envs(env_id: str) -> None:
    # Long enough to cross several episode ends (and their episode_metrics).
    a, b = gym.make(env_id, n_jobs=4, num_gpus=16), gym.make(env_id, n_jobs=4, num_gpus=16)
    check_environments_match(a, b, num_steps=200, seed=7)


def test_info_is_finite_and_episode_metrics_keys_are_fixed() -> None:
    env = gym.make("EvalStop-v0", **SMALL)
    key_sets = set()
    undefined_seen = False
    for seed, policy in [(0, lambda o: 0), (1, lambda o: 1), (2, lambda o: 0), (3, lambda o: 1)]:
        _, info = _run(env, seed, policy)
        metrics = info["episode_metrics"]
        assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
        full = env.unwrapped.episode_metrics()
        key_sets.add(frozenset(full))
        assert set(METRIC_KEYS) <= set(full)
        # info holds exactly the defined metrics of the full record.
        assert metrics == {k: v for k, v in full.items() if v is not None}
        undefined_seen |= any(v is None for v in full.values())
    assert len(key_sets) == 1
    assert undefined_seen  # NoStop: precision is undefined, so the None path is exercised


def test_episode_metrics_info_wrapper_gives_every_metric_key() -> None:
    env = EpisodeMetricsInfo(gym.make("EvalStop-v0", **SMALL))
    _, info = _run(env, 0, lambda o: 0)  # NoStop: precision undefined
    assert set(METRIC_KEYS) <= set(info)
    assert info["precision"] is None and info["recall"] == 0.0


def test_human_render_prints_the_text_view_once_per_step(capsys) -> None:
    env = gym.make("EvalStop-v0", render_mode="human", **SMALL)
    # gym.make adds no pygame HumanRendering wrapper: the env renders itself.
    assert not any(isinstance(w, gym.wrappers.HumanRendering) for w in _wrappers(env))
    env.reset(seed=0)
    assert env.render() is None
    env.step(0)
    assert env.render() is None
    out = capsys.readouterr().out
    assert out.count("GPUs [") == 2  # the reset and the step, not the render() calls
    assert "deciding:" in out


def _wrappers(env: gym.Env) -> list[gym.Env]:
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(env)
        env = env.env
    return chain


def test_human_render_on_the_flat_env_prints_too(capsys) -> None:
    env = gym.make("EvalStopFlat-v0", render_mode="human", **SMALL)
    env.reset(seed=0)
    assert "GPUs [" in capsys.readouterr().out


@pytest.mark.parametrize("env_id", ["EvalStop-v0", "EvalStopFlat-v0"])
def test_action_masks_allow_both_actions_at_every_step(env_id: str) -> None:
    env = gym.make(env_id, **SMALL)
    env.reset(seed=0)
    masks = env.get_wrapper_attr("action_masks")
    done = False
    while not done:
        mask = masks()
        assert mask.dtype == bool and mask.tolist() == [True, True]
        _, _, done, _, _ = env.step(1)


def test_version_comes_from_the_installed_metadata() -> None:
    assert evalstop_gym.__version__ == version("evalstop-gym")
    assert re.fullmatch(r"\d+(\.\d+)*.*", evalstop_gym.__version__)


def test_flat_spec_json_round_trip_and_pickle() -> None:
    env = gym.make("EvalStopFlat-v0", obs_fields="evals,progress", **SMALL)
    spec = gym.envs.registration.EnvSpec.from_json(env.spec.to_json())
    assert spec == env.spec and json.loads(env.spec.to_json())["reward_threshold"] is None
    again = gym.make(spec)
    o1, _ = env.reset(seed=4)
    env.step(0)
    clone = pickle.loads(pickle.dumps(env))
    np.testing.assert_array_equal(again.reset(seed=4)[0], o1)
    np.testing.assert_array_equal(env.step(1)[0], clone.step(1)[0])


@pytest.mark.parametrize(
    ("vectorization_mode", "autoreset_mode"),
    [
        ("sync", AutoresetMode.NEXT_STEP),
        ("sync", AutoresetMode.SAME_STEP),
        ("sync", AutoresetMode.DISABLED),
        ("async", AutoresetMode.NEXT_STEP),
    ],
)
def test_make_vec_on_the_flat_env(vectorization_mode: str, autoreset_mode) -> None:
    envs = gym.make_vec(
        "evalstop_gym:EvalStopFlat-v0",
        num_envs=2,
        vectorization_mode=vectorization_mode,
        vector_kwargs={"autoreset_mode": autoreset_mode},
        n_jobs=4,
        num_gpus=16,
    )
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, *envs.single_observation_space.shape)
        ended = 0
        for _ in range(200):
            obs, reward, terminated, truncated, _ = envs.step(np.zeros(2, dtype=np.int64))
            assert np.isfinite(obs).all() and np.isfinite(reward).all()
            if autoreset_mode == AutoresetMode.DISABLED and terminated.any():
                envs.reset(options={"reset_mask": terminated})
            ended += int(terminated.sum())
        assert ended > 0
    finally:
        envs.close()


def test_cleanrl_snippet_from_the_readme() -> None:
    ns = run_snippet("cleanrl")
    assert len(ns["returns"]) >= 8
    assert all(math.isfinite(float(r)) for r in ns["returns"])


def test_rl_zoo_hyperparameters_load_from_the_installed_package() -> None:
    pytest.importorskip("yaml")
    import importlib

    for algo in ("a2c", "ppo", "dqn"):
        table = importlib.import_module(f"baselines.hyperparams.{algo}").hyperparams
        assert table["EvalStop-v0"]["policy"] == "MultiInputPolicy"
        assert table["EvalStopFlat-v0"]["policy"] == "MlpPolicy"
        # JobEpisodes (PPO's training wrapper) replays Dict observations: not on the flat env.
        own = ("policy", "env_wrapper")
        flat = {k: v for k, v in table["EvalStopFlat-v0"].items() if k not in own}
        assert flat == {k: v for k, v in table["EvalStop-v0"].items() if k not in own}


def test_flat_env_rejects_what_the_dict_env_rejects() -> None:
    with pytest.raises(evalstop_gym.ConfigError, match="obs_fields"):
        EvalStopFlatEnv(obs_fields="bogus")
    env = EvalStopFlatEnv(**SMALL)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    assert isinstance(env.dict_env, EvalStopEnv)
