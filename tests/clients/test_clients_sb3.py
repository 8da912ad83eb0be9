"""Stable-Baselines3 and sb3-contrib train on both ids with no adaptation code."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
from readme_snippets import run_snippet

import evalstop_gym  # noqa: F401

sb3_contrib = pytest.importorskip("sb3_contrib")
pytest.importorskip("stable_baselines3")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = {"n_jobs": 12, "num_gpus": 16}


@pytest.mark.slow
def test_sb3_snippet_from_the_readme() -> None:
    returns = run_snippet("sb3")["returns"]
    assert set(returns) == {"PPO", "MaskablePPO", "RecurrentPPO"}
    assert all(math.isfinite(r) for r in returns.values())


def test_maskable_ppo_reads_action_masks_without_an_action_masker() -> None:
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
    from stable_baselines3.common.env_util import make_vec_env

    for env_id, policy in (("EvalStop-v0", "MultiInputPolicy"), ("EvalStopFlat-v0", "MlpPolicy")):
        venv = make_vec_env(f"evalstop_gym:{env_id}", n_envs=2, env_kwargs=SMALL)
        assert is_masking_supported(venv)
        assert get_action_masks(venv).tolist() == [[True, True], [True, True]]
        model = sb3_contrib.MaskablePPO(policy, venv, n_steps=64, batch_size=64, seed=0)
        model.learn(256)
        assert all(math.isfinite(ep["r"]) for ep in model.ep_info_buffer)


def test_make_vec_env_builds_and_steps_the_cluster_env() -> None:
    # make_vec_env asks for render_mode="rgb_array" and retries only on a TypeError.
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("EvalStopCluster-v0", n_envs=2, env_kwargs={**SMALL, "max_jobs": 8})
    assert venv.render_mode == "rgb_array"
    venv.seed(0)
    venv.reset()
    assert is_masking_supported(venv)
    for _ in range(40):  # long enough for an episode to end and auto-reset
        masks = get_action_masks(venv).reshape(2, 8, 3)
        venv.step(masks[:, :, 1].astype("int64"))  # stop every deciding job
    assert venv.get_images()[0].shape == (32 + 6 * 8, 320, 3)


def test_monitor_logs_the_metrics_of_a_truncated_episode() -> None:
    # Monitor(info_keywords=...) reads each key at every episode end, truncated ones too.
    from stable_baselines3.common.monitor import Monitor

    from evalstop_gym import METRIC_KEYS
    from evalstop_gym.envs import EpisodeMetricsInfo

    env = gym.make("EvalStop-v0", max_episode_steps=5, **SMALL)
    env = Monitor(EpisodeMetricsInfo(env), info_keywords=(*METRIC_KEYS, "episode_metrics_partial"))
    env.reset(seed=0)
    for _ in range(5):
        *_, truncated, info = env.step(0)
    assert truncated and info["episode"]["episode_metrics_partial"] is True
    assert set(METRIC_KEYS) <= set(info["episode"])


@pytest.mark.parametrize(
    ("algo", "kwargs"),
    [
        ("QRDQN", {"learning_starts": 50, "buffer_size": 1000}),
        ("TRPO", {"n_steps": 128, "batch_size": 64}),
        pytest.param("RecurrentPPO", {"n_steps": 64, "batch_size": 64}, marks=pytest.mark.slow),
    ],
)
def test_other_contrib_algorithms_train_on_the_dict_env(algo: str, kwargs: dict) -> None:
    policy = "MultiInputLstmPolicy" if algo == "RecurrentPPO" else "MultiInputPolicy"
    env = gym.make("EvalStop-v0", **SMALL)
    model = getattr(sb3_contrib, algo)(policy, env, seed=0, **kwargs).learn(300)
    assert len(model.ep_info_buffer) > 0
    assert all(math.isfinite(ep["r"]) for ep in model.ep_info_buffer)
