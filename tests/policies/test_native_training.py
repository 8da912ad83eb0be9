"""Training on the batched env (``vec="native"``) gives the model SB3's DummyVecEnv gives."""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")


def _train(out: Path, vec: str) -> tuple[bytes, list]:
    from baselines.training import train

    res = train(
        out,
        algo="dqn",
        timesteps=1_200,
        n_envs=3,
        env_kwargs={"eval_noise": 0.12, "n_jobs": 12},
        hyperparams={"learning_starts": 200},
        seed=5,
        progress=False,
        eval_freq=200,
        eval_episodes=2,
        vec=vec,
    )
    with zipfile.ZipFile(res.path) as z:
        return z.read("policy.pth"), res.learning_curve


def test_the_native_vec_env_trains_the_same_model_to_the_bit(tmp_path: Path) -> None:
    dummy = _train(tmp_path / "dummy.zip", "dummy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor does it warn that the eval env differs
        native = _train(tmp_path / "native.zip", "native")
    assert native[1] == dummy[1]  # the same learning curve
    assert native[0] == dummy[0]  # the same weights, byte for byte
