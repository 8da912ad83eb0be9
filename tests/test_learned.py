"""Learned stoppers: a short SB3 training run, save/load, and the common evaluate() path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from baselines import EvalStop, evaluate
from baselines.learned import Learned, read_meta
from baselines.train import train
from evalstop_cli.main import main
from evalstop_gym.envs import EvalStopEnv

ENV = {"n_jobs": 15}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("models") / "ppo.zip"
    res = train(out, timesteps=3000, n_envs=2, env_kwargs=ENV, eval_freq=1500, progress=False)
    assert res.path == out and out.exists()
    assert res.timesteps >= 3000 and res.steps_per_second > 0
    return out


def test_short_training_produces_a_model_that_acts(model_path: Path) -> None:
    meta = read_meta(model_path)
    assert meta["algo"] == "ppo"
    assert set(meta["obs_fields"]) == {
        "job_type",
        "evals",
        "consecutive_declines",
        "progress",
        "loss",
    }
    assert meta["learning_curve"], "EvalCallback should have evaluated at least once"
    # EvalStop on the same evaluation episodes, the learning curve's reference line
    assert np.isfinite(meta["evalstop_reference"])
    best = max(meta["learning_curve"], key=lambda c: c[1])
    assert meta["selected"] == "best periodic evaluation" and meta["selected_at"] == best[0]
    policy = Learned(model_path)
    env = EvalStopEnv(**ENV)
    obs, _ = env.reset(seed=0)
    assert policy.act(obs) in (0, 1)


def test_save_load_act_gives_the_same_actions(model_path: Path) -> None:
    a, b = Learned(model_path), Learned(model_path)
    env = EvalStopEnv(**ENV)
    obs, _ = env.reset(seed=1)
    done = False
    while not done:
        x, y = a.act(obs), b.act(obs)
        assert x == y
        obs, _, done, _, _ = env.step(x)


def test_learned_runs_through_evaluate_with_the_scripted_keys(model_path: Path) -> None:
    learned = evaluate(Learned(model_path), [0, 1], **ENV)
    scripted = evaluate(EvalStop(), [0, 1], **ENV)
    assert [set(r) for r in learned] == [set(r) for r in scripted]
    assert all(np.isfinite(r["mean_jct_h"]) for r in learned)


def test_a_model_refuses_other_observation_fields(model_path: Path) -> None:
    with pytest.raises(ValueError, match=r"trained on obs_fields=.*progress"):
        evaluate(Learned(model_path), [0], obs_fields="job_type,evals,consecutive_declines", **ENV)
    with pytest.raises(ValueError, match="trained on obs_fields"):
        Learned(model_path).act({"evals": np.zeros(20, np.float32)})


def test_not_a_model_file(tmp_path: Path) -> None:
    p = tmp_path / "x.zip"
    p.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not an evalstop-gym model file"):
        Learned(p)


def test_cli_train_restricted_fields_and_mlp(tmp_path: Path, capsys) -> None:
    out = tmp_path / "a2c.zip"
    code = main(
        [
            "train",
            "--algo",
            "a2c",
            "--timesteps",
            "600",
            "--n-envs",
            "1",
            "--policy",
            "mlp",
            "--out",
            str(out),
            "--no-progress",
            "--eval-freq",
            "300",
            "--obs-fields",
            "job_type,evals,consecutive_declines",
            "--eval-noise",
            "0.12",
            "--n-jobs",
            "10",
        ]
    )
    assert code == 0 and "saved" in capsys.readouterr().out
    meta = read_meta(out)
    assert meta["flatten"] and set(meta["obs_fields"]) == {
        "job_type",
        "evals",
        "consecutive_declines",
    }
    assert meta["env_kwargs"]["eval_noise"] == 0.12
    rows = evaluate(Learned(out), [0], obs_fields="job_type,evals,consecutive_declines", n_jobs=10)
    assert rows[0]["policy"].startswith("Learned")
