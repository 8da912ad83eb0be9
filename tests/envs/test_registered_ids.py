"""One Gymnasium id per named suite task: gym.make("EvalStop-hard-0.12-v0") needs no kwargs."""

from __future__ import annotations

import gymnasium as gym
import pytest

import evalstop_gym  # registers the ids (and its _register is called below)
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.suite import FORMER_TASKS, SUITE_TASKS, registered_tasks, suite_task, task_env_id


def test_every_suite_task_and_the_shipped_corpus_have_an_id() -> None:
    assert registered_tasks() == (
        *SUITE_TASKS,
        "trl-gao",
        "trl-heldout",
        "english-heldout",
        "english-twin",
        "english-twin-pool",
        *FORMER_TASKS,
    )
    for task in registered_tasks():
        spec = gym.spec(task_env_id(task))
        assert spec.kwargs == suite_task(task)
        assert spec.entry_point == gym.spec("EvalStop-v0").entry_point
    assert gym.spec("EvalStop-trl-gao-v0").kwargs["curves"] == str(corpus_path(TRL_CORPUS))


@pytest.mark.parametrize("task", ["hard-0.12", "grounded-0.05", "grounded-0.08", "trl-gao"])
def test_an_id_makes_its_task_and_user_kwargs_override(task: str) -> None:
    env = gym.make(task_env_id(task), n_jobs=12)
    config = env.unwrapped.env_config  # type: ignore[attr-defined]
    want = suite_task(task)
    assert config.sim_config.calibration == want["calibration"]
    assert config.gpu_hour_price == want["gpu_hour_price"]
    assert config.sim_config.n_jobs == 12
    env.reset(seed=0)
    env.close()
    other = gym.make(task_env_id(task), gpu_hour_price=0.0)
    assert other.unwrapped.env_config.gpu_hour_price == 0.0  # type: ignore[attr-defined]


def test_registration_is_idempotent() -> None:
    before = dict(gym.registry)
    evalstop_gym._register()
    assert dict(gym.registry) == before
