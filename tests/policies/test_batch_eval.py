"""The batched periodic evaluation plays SB3's episodes, actions and numbers, bit for bit."""

from __future__ import annotations

import contextlib
import functools
import importlib

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import gymnasium as gym
import torch
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from baselines.learned import read_meta
from baselines.training import domain_random, train
from baselines.training.batch_eval import BatchEvaluator, policy_actions
from evalstop_gym import suite_task

T = importlib.import_module("baselines.training.train")
ENV = {**suite_task("hard-0.05"), "n_jobs": 12}


def _sb3_and_batch(algo: str, flatten: bool, make_env, episodes: int = 3, seed: int = 7):
    """Episode returns and lengths of an untrained model: SB3's evaluation and the batch's."""
    wrap = gym.wrappers.FlattenObservation if flatten else None
    ev = make_vec_env(make_env, n_envs=1, seed=seed, wrapper_class=wrap)
    cls = importlib.import_module("stable_baselines3").__dict__[algo.upper()]
    policy = ("Mlp" if flatten else "MultiInput") + "Policy"
    # The model gets an env of its own: an algorithm reseeds its env.
    own = make_vec_env(make_env, n_envs=1, wrapper_class=wrap)
    model = cls(policy, own, seed=3, device="cpu", policy_kwargs={"net_arch": [64, 64]})
    # Logits within a hair of each other: the action turns on their last bits.
    last = model.policy.q_net.q_net[-1] if algo == "dqn" else model.policy.action_net
    with torch.no_grad():
        last.weight.mul_(1e-4)
        last.bias.zero_()
    sb3 = evaluate_policy(model, ev, episodes, deterministic=True, return_episode_rewards=True)
    batch = BatchEvaluator(functools.partial(T._monitored, make_env, flatten), episodes, seed)
    played = batch.evaluate(policy_actions(model.policy))
    assert played is not None
    # And a second evaluation plays the same episodes again.
    assert batch.evaluate(policy_actions(model.policy)) == played
    batch.close()
    return sb3, played[:2]


@pytest.mark.parametrize(
    ("algo", "flatten"), [("ppo", False), ("ppo", True), ("dqn", False), ("a2c", True)]
)
def test_batch_matches_sb3_evaluate_policy(algo: str, flatten: bool) -> None:
    sb3, batch = _sb3_and_batch(algo, flatten, functools.partial(T._make_env, ENV, None, None))
    assert batch[0] == sb3[0] and batch[1] == sb3[1]
    assert len(set(batch[1])) == len(batch[1]), "the policy should stop some jobs, not all"


def test_batch_matches_sb3_on_a_domain_randomised_env() -> None:
    domains = domain_random.domain_kwargs(["paper-0.05", "hard-0.12"], n_jobs=10)
    make_base = functools.partial(domain_random.DomainRandomised, domains)
    make_env = functools.partial(T._make_env, {}, None, make_base)
    sb3, batch = _sb3_and_batch("ppo", False, make_env, episodes=4)
    assert batch == (sb3[0], sb3[1])


class _DrawsWhileStepping(gym.Wrapper):
    """An env that draws from its generator at every step (episodes would depend on play)."""

    def step(self, action):
        self.env.unwrapped.np_random.random()
        return self.env.step(action)


def test_an_env_drawing_while_stepping_is_refused() -> None:
    def make():
        from stable_baselines3.common.monitor import Monitor

        return Monitor(_DrawsWhileStepping(T._make_env(ENV)))

    batch = BatchEvaluator(make, 2, 0)
    assert batch.evaluate(lambda obs: np.zeros(len(obs["evals"]), np.int64)) is None


@pytest.mark.slow
def test_training_with_batch_eval_keeps_the_learning_curve_and_the_best_model(tmp_path) -> None:
    """The same run with SB3's one-by-one evaluation: same curve, same pick, same reference."""
    metas, curves = [], []
    for batch_eval in (True, False):
        out = tmp_path / f"{batch_eval}.zip"
        train(
            out,
            timesteps=1200,
            n_envs=2,
            env_kwargs=ENV,
            eval_freq=400,
            eval_episodes=3,
            progress=False,
            batch_eval=batch_eval,
        )
        data = np.load(tmp_path / f"{batch_eval}" / "evaluations.npz")
        curves.append((data["timesteps"].tolist(), data["results"], data["ep_lengths"]))
        metas.append(read_meta(out))
    assert curves[0][0] == curves[1][0] and len(curves[0][0]) >= 3
    np.testing.assert_array_equal(curves[0][1], curves[1][1])
    np.testing.assert_array_equal(curves[0][2], curves[1][2])
    for key in ("learning_curve", "selected_at", "evalstop_reference"):
        assert metas[0][key] == metas[1][key], key


def test_row_by_row_forward_is_the_batch_1_forward_bit_for_bit() -> None:
    """The actor's latent and logits of a batch equal those of each row alone."""
    from stable_baselines3 import PPO

    from baselines.training.batch_eval import _RowByRow

    env = make_vec_env(functools.partial(T._make_env, ENV, None, None), n_envs=1)
    policy = PPO("MultiInputPolicy", env, seed=1, device="cpu").policy
    rng = np.random.default_rng(0)
    obs = {
        k: torch.as_tensor(rng.normal(size=(16, *s.shape)).astype(np.float32))
        for k, s in policy.observation_space.spaces.items()
    }

    def logits(o):
        with torch.no_grad():
            features = policy.extract_features(o, policy.pi_features_extractor)
            return policy.action_net(policy.mlp_extractor.forward_actor(features))

    one_by_one = torch.cat([logits({k: v[i : i + 1] for k, v in obs.items()}) for i in range(16)])
    with _RowByRow(policy):
        batched = logits(obs)
    assert torch.equal(batched, one_by_one)
    # and the patch is gone afterwards
    assert "forward" not in vars(policy.action_net)


def test_unchecked_distributions_give_the_same_numbers_and_restore_the_default() -> None:
    """Without argument checks a Categorical samples, scores and ranks the same; the default returns."""
    import torch as th
    from torch.distributions import Categorical, Distribution

    from baselines.training.train import unchecked_distributions

    before = Distribution._validate_args
    logits = th.randn(64, 2, generator=th.Generator().manual_seed(3))
    numbers = []
    for checked in (True, False):
        th.manual_seed(7)
        ctx = contextlib.nullcontext() if checked else unchecked_distributions()
        with ctx:
            assert Distribution._validate_args is (before if checked else False)
            d = Categorical(logits=logits)
            sample = d.sample()
            numbers.append((sample, d.log_prob(sample), d.entropy(), d.probs.argmax(dim=1)))
        assert Distribution._validate_args is before
    for a, b in zip(*numbers):
        assert th.equal(a, b)


@pytest.mark.slow
def test_training_without_distribution_checks_keeps_the_learning_curve(
    tmp_path, monkeypatch
) -> None:
    """PPO trained with torch's argument checks on: the same curve and the same weights."""
    import torch as th

    runs = []
    for checked in (False, True):
        if checked:
            monkeypatch.setattr(T, "unchecked_distributions", contextlib.nullcontext)
        res = train(
            tmp_path / f"{checked}.zip",
            timesteps=1200,
            n_envs=2,
            env_kwargs=ENV,
            eval_freq=400,
            eval_episodes=2,
            progress=False,
            keep_best=False,
        )
        runs.append((res.learning_curve, res.model.policy.state_dict()))
    assert runs[0][0] == runs[1][0] and len(runs[0][0]) >= 3
    for key, value in runs[0][1].items():
        assert th.equal(value, runs[1][1][key]), key
