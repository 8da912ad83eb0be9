"""Task conditioning: the settings and statistics it adds, on the env side and the policy side."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from baselines.training import TrainConfig
from baselines.training.conditioning import (
    SUMMARY_FIELD,
    SUMMARY_NAMES,
    TASK_FIELD,
    Conditioned,
    ConditionedSource,
    TaskConditioned,
    condition_of,
    make_conditioned_env,
    summary_features,
    task_settings_of,
)
from baselines.training.domain_random import DomainRandomised
from evalstop_experiments import scoring
from evalstop_gym.envs.wrappers import JobEpisodes
from evalstop_gym.errors import ConfigError


def _kw(task: str = "hard-0.05", factor: float = 1.0) -> dict:
    return {**scoring.env_kwargs(task, factor), "n_jobs": 12}


def test_task_settings_scale_noise_price_and_k():
    """hard-0.05 at 1x is (0.5, 0, 1); half and double the price are -1 and +1; paper has K 10."""
    np.testing.assert_allclose(task_settings_of(_kw()), [0.5, 0.0, 1.0], atol=1e-6)
    assert task_settings_of(_kw("hard-0.12", 0.5))[1] == pytest.approx(-1.0)
    assert task_settings_of(_kw("hard-0.12", 2.0))[1] == pytest.approx(1.0)
    assert task_settings_of(_kw("paper-0.12"))[2] == pytest.approx(0.5)


def test_wrapper_adds_fields_and_leaves_the_boundary_fields_alone():
    """Same seed: the base fields equal the plain env's; the added ones are in the space."""
    plain = gym.make("EvalStop-v0", **_kw("hard-0.12"))
    env = TaskConditioned(gym.make("EvalStop-v0", **_kw("hard-0.12")), summary=True)
    a, _ = plain.reset(seed=3)
    b, _ = env.reset(seed=3)
    for _ in range(40):
        assert env.observation_space.contains(b)
        assert set(b) == set(a) | {TASK_FIELD, SUMMARY_FIELD}
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
        np.testing.assert_allclose(b[TASK_FIELD], [1.2, 0.0, 1.0], atol=1e-6)
        a, _, done, _, _ = plain.step(0)
        b, _, done_b, _, _ = env.step(0)
        assert done == done_b
        if done:
            break


def test_job_episodes_replay_the_conditioned_observation():
    """JobEpisodes over the wrapper replays observations with the task field."""
    env = JobEpisodes(TaskConditioned(gym.make("EvalStop-v0", **_kw())))
    obs, _ = env.reset(seed=0)
    assert TASK_FIELD in obs and env.observation_space.contains(obs)
    obs, *_ = env.step(0)
    assert TASK_FIELD in obs


def test_mixture_shows_the_settings_of_the_domain_in_play():
    """Under DomainRandomised each episode's task field is its own domain's price."""
    domains = [_kw("hard-0.05", 0.5), _kw("hard-0.05", 2.0)]
    env = TaskConditioned(DomainRandomised(domains))
    seen = set()
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        seen.add((info["domain"], float(obs[TASK_FIELD][1])))
    assert seen == {(0, -1.0), (1, 1.0)}


def test_summary_features_of_a_known_history():
    """Gap to the max, in noise units; evals since the best; the counts over K."""
    w = 20
    y = np.array([0.1, 0.5, 0.3, 0.2])
    evals = np.zeros(2 * w, np.float32)
    evals[w - 4 : w], evals[2 * w - 4 :] = y, 1.0
    f = dict(zip(SUMMARY_NAMES, summary_features({"evals": evals}, noise=0.1, k=20)))
    assert f["last_minus_max"] == pytest.approx(-0.3)
    assert f["last_minus_max_z"] == pytest.approx(-3.0, rel=1e-5)
    assert f["evals_since_best"] == pytest.approx(2 / 20)
    assert f["best_at"] == pytest.approx(2 / 20) and f["n_evals"] == pytest.approx(4 / 20)
    assert f["eval_minus_max_z_1"] == pytest.approx(-3.0, rel=1e-5)
    assert f["eval_minus_max_z_5"] == 0.0  # before the first eval
    assert not summary_features({"evals": np.zeros(2 * w, np.float32)}, 0.1, 20).any()


def test_policy_side_adds_what_the_env_side_adds():
    """Conditioned(policy) hands the policy exactly the observation TaskConditioned shows."""

    class Recorder:
        name = "rec"

        def __init__(self):
            self.seen = []

        def reset(self):
            pass

        def act(self, obs):
            self.seen.append(obs)
            return 0

    kw = _kw("hard-0.12")
    rec = Recorder()
    pol = Conditioned(rec, task_settings_of(kw), summary=True)
    plain = gym.make("EvalStop-v0", **kw)
    env = TaskConditioned(gym.make("EvalStop-v0", **kw), summary=True)
    obs, _ = plain.reset(seed=1)
    want, _ = env.reset(seed=1)
    for _ in range(25):
        pol.act(obs)
        got = rec.seen[-1]
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        obs, *_ = plain.step(0)
        want, *_ = env.step(0)


def test_bad_condition_is_refused_before_training():
    """One line naming the field, the value and the allowed ones."""
    with pytest.raises(ConfigError, match="condition"):
        TrainConfig(out="m.zip", condition="noise")


@pytest.mark.slow
def test_trained_conditioned_model_plays_as_in_memory(tmp_path):
    """A conditioned PPO saved and loaded through ConditionedSource acts as the in-memory one."""
    from baselines.training import train

    kw = _kw()
    res = train(
        tmp_path / "c.zip",
        timesteps=256,
        n_envs=1,
        seed=10_000,
        env_kwargs=kw,
        condition="task+summary",
        progress=False,
        eval_freq=10**9,
        eval_episodes=1,
        hyperparams={"n_steps": 128, "batch_size": 64, "n_epochs": 1},
    )
    stopper = ConditionedSource(str(res.path))("hard-0.05", kw)
    assert isinstance(stopper, Conditioned)
    assert condition_of(stopper.policy.meta) == "task+summary"
    env = gym.make("EvalStop-v0", **kw)
    stopper.check_observation_space(env.observation_space)
    wrapped = make_conditioned_env(kw, summary=True)
    obs, _ = env.reset(seed=4)
    cobs, _ = wrapped.reset(seed=4)
    for _ in range(30):
        want = int(res.model.predict(cobs, deterministic=True)[0])
        assert stopper.act(obs) == want
        obs, *_ = env.step(0)
        cobs, *_ = wrapped.step(0)
    base = functools.partial(make_conditioned_env, kw, True)  # picklable, as SB3 needs
    assert base().observation_space == wrapped.observation_space
