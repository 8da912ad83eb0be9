"""SB3's ``predict`` without its per-call set-up gives the same actions and trains the same models."""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import gymnasium as gym
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from stable_baselines3.common.env_util import make_vec_env

from baselines.learned import Learned
from baselines.training import lean_predict as LP
from baselines.training import train
from evalstop_gym import suite_task

T = importlib.import_module("baselines.training.train")
ENV = {**suite_task("hard-0.05"), "n_jobs": 12}


@functools.cache
def _model(algo: str, flatten: bool):
    """An untrained model whose logits (Q-values) are near-ties: the last bits decide."""
    wrap = gym.wrappers.FlattenObservation if flatten else None
    env = make_vec_env(
        functools.partial(T._make_env, ENV, None, None), n_envs=1, wrapper_class=wrap
    )
    cls = importlib.import_module("stable_baselines3").__dict__[algo.upper()]
    policy = ("Mlp" if flatten else "MultiInput") + "Policy"
    model = cls(policy, env, seed=3, device="cpu", policy_kwargs={"net_arch": [64, 64]})
    last = model.policy.q_net.q_net[-1] if algo == "dqn" else model.policy.action_net
    with torch.no_grad():
        last.weight.mul_(1e-4)
        last.bias.zero_()
    return model


def _observations(space, rng, batch: int | None):
    shape = () if batch is None else (batch,)
    if isinstance(space, gym.spaces.Dict):
        return {
            k: rng.uniform(s.low, s.high, size=(*shape, *s.shape)).astype(s.dtype)
            for k, s in space.spaces.items()
        }
    return rng.uniform(space.low, space.high, size=(*shape, *space.shape)).astype(space.dtype)


@settings(max_examples=15, deadline=None)
@given(
    model=st.sampled_from([("dqn", False), ("dqn", True), ("ppo", False), ("a2c", True)]),
    seed=st.integers(0, 2**32 - 1),
    batch=st.sampled_from([None, 1, 4, 9]),
)
def test_lean_predict_gives_predicts_actions(model, seed, batch) -> None:
    """The same actions and shape as ``policy.predict``, one observation or a batch."""
    policy = _model(*model).policy
    obs = _observations(policy.observation_space, np.random.default_rng(seed), batch)
    want, _ = policy.predict(obs, deterministic=True)
    got = LP.lean_predict(policy, obs, policy.device)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_supports_only_discrete_non_recurrent_box_policies() -> None:
    from stable_baselines3 import PPO

    assert LP.supports(_model("dqn", False).policy)
    env = make_vec_env("Pendulum-v1", n_envs=1)
    assert not LP.supports(PPO("MlpPolicy", env, device="cpu").policy)  # Box actions: clipped


def test_lean_rollouts_fall_back_in_training_mode_and_restore_predict(monkeypatch) -> None:
    model = _model("dqn", False)
    policy = model.policy
    obs = _observations(policy.observation_space, np.random.default_rng(0), 4)
    sb3 = policy.predict
    calls = []
    with LP.lean_rollouts(model):
        assert policy.predict is not sb3
        policy.set_training_mode(False)
        real = LP.lean_predict
        monkeypatch.setattr(LP, "lean_predict", lambda *a, **k: calls.append(1) or real(*a, **k))
        a = policy.predict(obs, deterministic=True)[0]
        policy.set_training_mode(True)  # SB3's predict runs and switches the mode back
        b = policy.predict(obs, deterministic=True)[0]
        assert not policy.training
    assert "predict" not in vars(policy)
    np.testing.assert_array_equal(a, b)
    assert calls == [1]


def test_learned_act_is_sb3s_predict_on_an_episode() -> None:
    """The shipped model (PPO) plays an episode: every decision as SB3's ``predict`` takes it."""
    learned = Learned.pretrained("hard")
    assert learned._lean
    env = gym.make(
        "EvalStop-v0", disable_env_checker=True, **{**suite_task("hard-0.05"), "n_jobs": 40}
    )
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(1)
    decisions = 0
    done = False
    while not done:
        want, _ = learned.model.predict(obs, deterministic=True)
        assert learned.act(obs) == int(want)
        decisions += 1
        # A random action now and then: the episode visits states the model would skip.
        obs, _, term, trunc, _ = env.step(int(rng.random() < 0.05))
        done = term or trunc
    assert decisions > 100


@pytest.mark.slow
def test_dqn_trained_with_lean_predict_has_the_same_weights(tmp_path) -> None:
    """A short DQN run, with and without the lean rollouts: the same curve, the same weights."""
    runs, lean_calls = [], []
    real = LP.lean_predict

    def counted(*a, **k):
        lean_calls.append(1)
        return real(*a, **k)

    for lean in (True, False):
        LP.lean_predict = counted
        try:
            res = train(
                tmp_path / f"{lean}.zip",
                algo="dqn",
                timesteps=2400,
                env_kwargs=ENV,
                eval_freq=800,
                eval_episodes=2,
                progress=False,
                keep_best=False,
                lean_predict=lean,
                hyperparams={"learning_starts": 400, "target_update_interval": 500},
            )
        finally:
            LP.lean_predict = real
        runs.append((res.learning_curve, res.model.policy.state_dict()))
        if lean:
            # every rollout step after the warm-up asked the lean path (DQN's epsilon-greedy
            # draw decides before it whether the policy is asked at all)
            assert len(lean_calls) > 100
            lean_calls.clear()
    assert not lean_calls, "the SB3 run must not take the lean path"
    assert runs[0][0] == runs[1][0] and len(runs[0][0]) >= 3
    for key, value in runs[0][1].items():
        assert torch.equal(value, runs[1][1][key]), key


def _flags(policy) -> list[tuple[str, bool]]:
    return [(name, m.training) for name, m in policy.named_modules(remove_duplicate=False)]


@settings(max_examples=20, deadline=None)
@given(
    which=st.sampled_from([("dqn", False), ("dqn", True), ("ppo", False), ("a2c", True)]),
    modes=st.lists(st.booleans(), min_size=1, max_size=6),
    start=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_lean_mode_switch_sets_the_flags_sb3s_walk_sets(which, modes, start) -> None:
    """From any mix of flags, each switch leaves every module's flag as SB3's method does."""
    policy = _model(*which).policy
    switch = LP.lean_mode_switch(policy)
    assert switch is not None
    modules = [m for _, m in policy.named_modules(remove_duplicate=False)]
    try:
        for mode in modes:
            for m, flag in zip(modules, start):
                m.training = flag
            type(policy).set_training_mode(policy, mode)
            want = _flags(policy)
            for m, flag in zip(modules, start):
                m.training = flag
            switch(mode)
            assert _flags(policy) == want
    finally:
        policy.set_training_mode(False)
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        switch(1)


def test_lean_mode_switch_keeps_sb3s_for_a_module_with_its_own_train() -> None:
    class OwnTrain(torch.nn.Module):
        def train(self, mode: bool = True):  # e.g. one that freezes a part
            return super().train(mode)

    policy = _model("ppo", False).policy
    assert LP.lean_mode_switch(policy) is not None
    policy.mlp_extractor.add_module("own", OwnTrain())
    try:
        assert LP.lean_mode_switch(policy) is None
    finally:
        del policy.mlp_extractor.own
    assert LP.lean_mode_switch(policy) is not None


def test_lean_rollouts_switch_the_mode_leanly_and_restore_it() -> None:
    model = _model("dqn", False)
    policy = model.policy
    with LP.lean_rollouts(model):
        assert "set_training_mode" in vars(policy)
        policy.set_training_mode(True)
        assert (
            policy.training
            and policy.q_net.training
            and all(m.training for m in policy.q_net.modules())
        )
        policy.set_training_mode(False)
    assert "set_training_mode" not in vars(policy)
    assert not policy.training and not any(m.training for m in policy.q_net.modules())
