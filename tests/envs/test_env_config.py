"""EvalStopConfig: the one object gym.make's kwargs become."""

from __future__ import annotations

import ast

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from evalstop_gym import ConfigError
from evalstop_gym.envs import EvalStopConfig, EvalStopEnv
from evalstop_gym.envs.config import arguments


def test_an_unknown_argument_is_refused_in_one_line_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as e:
        EvalStopEnv(eval_nosie=0.1)
    text = str(e.value)
    assert "\n" not in text and "did you mean 'eval_noise'?" in text
    assert e.value.field == "eval_nosie"
    # Also Python's TypeError, worded as Python words it: libraries that try an optional
    # argument and fall back on that error (TorchRL's frameskip) keep working.
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'frameskip'"):
        gym.make("EvalStop-v0", frameskip=1)


def _valid_names(text: str) -> list[str]:
    """The list of valid arguments an unknown-argument message ends with."""
    listed = text[text.index("its arguments are [") + len("its arguments are ") :]
    return ast.literal_eval(listed[: listed.index("]") + 1])


@pytest.mark.parametrize(
    ("env_id", "extra", "left_out"),
    [
        ("EvalStop-v0", {"render_mode"}, set()),
        ("EvalStopFlat-v0", {"render_mode"}, set()),
        ("EvalStopCluster-v0", {"render_mode", "max_jobs"}, {"deprioritize"}),
    ],
)
def test_gym_make_with_a_misspelt_argument_lists_the_valid_ones_and_the_closest(
    env_id: str, extra: set[str], left_out: set[str]
) -> None:
    with pytest.raises(ConfigError) as e:
        gym.make(env_id, schedular="fifo")
    text = str(e.value)
    assert f"{env_id} got an unexpected keyword argument 'schedular'" in text
    assert "(did you mean 'scheduler'?)" in text
    assert set(_valid_names(text)) == (set(arguments()) | extra) - left_out
    for typo, meant in (("rendermode", "render_mode"), ("max_job", "max_jobs")):
        if meant in extra:
            with pytest.raises(ConfigError, match=f"did you mean '{meant}'"):
                gym.make(env_id, **{typo: 1})


def test_scheduler_options_reach_the_scheduler_through_gym_make() -> None:
    env = gym.make(
        "EvalStop-v0", n_jobs=10, scheduler="tiresias", scheduler_options={"thresholds": [4.0]}
    )
    assert env.unwrapped.config.make_scheduler().thresholds == (4.0,)
    with pytest.raises(ConfigError, match=r"scheduler_options\.window"):
        gym.make("EvalStop-v0", scheduler="loss-aware", scheduler_options={"window": 0})


def test_a_config_object_builds_the_same_env_as_its_kwargs() -> None:
    kw = {
        "n_jobs": 12,
        "eval_noise": 0.05,
        "obs_fields": "evals,progress",
        "reward_timing": "delayed",
    }
    config = EvalStopConfig.from_kwargs(**kw)
    assert config.obs_fields == ("evals", "progress")
    a, b = EvalStopEnv(**kw), EvalStopEnv(env_config=config)
    assert a.env_config == b.env_config
    (oa, _), (ob, _) = a.reset(seed=4), b.reset(seed=4)
    done = False
    while not done:
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
        oa, ra, done, _, _ = a.step(0)
        ob, rb, _, _, _ = b.step(0)
        assert ra == rb
    with pytest.raises(ConfigError, match="env_config"):
        EvalStopEnv(env_config=config, n_jobs=3)


def test_the_simulators_fields_are_checked_before_the_envs() -> None:
    with pytest.raises(ConfigError) as e:
        EvalStopConfig.from_kwargs(num_gpus=0, reward="bogus")
    assert e.value.field == "num_gpus"


def test_every_argument_has_its_default_in_a_default_config() -> None:
    config = EvalStopConfig()
    for name, a in arguments().items():
        owner = config.sim_config if hasattr(config.sim_config, name) else config
        if name == "obs_fields":
            assert a.default is None and len(config.obs_fields) == 5
            continue
        assert getattr(owner, name) == a.default, name
