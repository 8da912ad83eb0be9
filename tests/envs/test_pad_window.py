"""PadWindow / pad_observation: a narrow eval window seen exactly as a wider one shows it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalstop_gym  # noqa: F401
from baselines.training.domain_random import DomainRandomised, PaddedPolicy, domain_kwargs
from evalstop_gym.envs.wrappers import (
    JobEpisodes,
    PadWindow,
    pad_observation,
    pad_observation_space,
)
from evalstop_gym.suite import suite_task


def _env(task: str, n_jobs: int = 6, **kw) -> gym.Env:
    return gym.make(
        "EvalStop-v0", disable_env_checker=True, **{**suite_task(task), "n_jobs": n_jobs, **kw}
    )


def _by_hand(obs: dict, w: int, w2: int) -> dict:
    """The W2-slot layout built field by field from the W-slot observation."""
    out = dict(obs)
    for f in ("evals", "loss"):
        values, mask = obs[f][:w], obs[f][w:]
        z = np.zeros(w2 - w, np.float32)
        out[f] = np.concatenate([z, values, z, mask]).astype(np.float32)
    return out


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), k  # bit for bit


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000), p_stop=st.sampled_from([0.0, 0.2]))
def test_a_padded_paper_episode_is_the_20_slot_layout_bit_for_bit(seed: int, p_stop: float) -> None:
    inner = _env("paper-0.12")
    padded = PadWindow(_env("paper-0.12"), 20)
    assert inner.unwrapped.window == 10
    rng = np.random.default_rng(seed)
    obs, _ = inner.reset(seed=seed)
    pobs, _ = padded.reset(seed=seed)
    done, n = False, 0
    while not done:
        _same(pobs, _by_hand(obs, 10, 20))
        assert padded.observation_space.contains(pobs)
        a = int(rng.random() < p_stop)
        obs, _, done, _, _ = inner.step(a)
        pobs, _, _, _, _ = padded.step(a)
        n += 1
    assert n > 6


def test_the_padded_space_is_a_20_checkpoint_envs_space() -> None:
    assert pad_observation_space(_env("paper-0.12").observation_space, 20) == (
        _env("hard-0.12").observation_space
    )


@pytest.mark.parametrize("seed", [0, 3])
def test_padding_a_10_slot_window_gives_what_a_20_slot_window_shows(seed: int) -> None:
    """Same env (K=20), windows 10 and 20: while a job has <= 10 evals, they agree exactly."""
    narrow, wide = _env("hard-0.05", eval_window=10), _env("hard-0.05", eval_window=20)
    narrow.reset(seed=seed)
    wide.reset(seed=seed)
    assert pad_observation_space(narrow.observation_space, 20) == wide.observation_space
    for jid in range(6):
        for ckpt in range(1, 11):
            got = pad_observation(narrow.unwrapped.observation_at(jid, ckpt), 20)
            _same(got, wide.unwrapped.observation_at(jid, ckpt))


def test_pad_observation_leaves_its_input_alone_and_refuses_a_narrower_window() -> None:
    obs, _ = _env("paper-0.12").reset(seed=1)
    before = {k: v.copy() for k, v in obs.items()}
    pad_observation(obs, 20)
    _same(obs, before)
    _same(pad_observation(obs, 10), obs)
    with pytest.raises(ValueError, match="window=8"):
        pad_observation(obs, 8)
    with pytest.raises(ValueError, match="window=8"):
        PadWindow(_env("paper-0.12"), 8)
    with pytest.raises(ValueError, match="observation_space"):
        PadWindow(_env("paper-0.12"), 20, _env("paper-0.12").observation_space)


def test_job_episodes_replay_padded_jobs() -> None:
    plain, padded = JobEpisodes(_env("paper-0.12")), JobEpisodes(PadWindow(_env("paper-0.12"), 20))
    assert padded.observation_space == pad_observation_space(plain.observation_space, 20)
    for i in range(8):
        (obs, _), (pobs, _) = (
            (plain.reset(seed=5), padded.reset(seed=5))
            if not i
            else (
                plain.reset(),
                padded.reset(),
            )
        )
        done = False
        while not done:
            _same(pobs, pad_observation(obs, 20))
            obs, r, done, _, _ = plain.step(0)
            pobs, pr, _, _, _ = padded.step(0)
            assert r == pr


def test_a_mixture_pads_every_episode_to_its_window() -> None:
    env = JobEpisodes(DomainRandomised(domain_kwargs(["paper-0.12", "hard-0.12"], n_jobs=3)))
    assert env.observation_space["evals"].shape == (40,)
    obs, _ = env.reset(seed=2)
    seen = set()
    for _ in range(30):
        done = False
        while not done:
            assert env.observation_space.contains(obs)
            obs, _, done, _, _ = env.step(0)
        seen.add(env.unwrapped.sim.n_ckpt)
        obs, _ = env.reset()
    assert seen == {10, 20}
    # One narrow domain alone, padded to a window given.
    alone = DomainRandomised(domain_kwargs(["paper-0.12"], n_jobs=3), window=20)
    assert alone.observation_space == pad_observation_space(
        _env("paper-0.12").observation_space, 20
    )


def test_a_padded_policy_acts_on_the_padded_observation() -> None:
    class Record:
        name = "record"

        def __init__(self) -> None:
            self.seen: list[dict] = []

        def reset(self) -> None:
            self.seen.clear()

        def act(self, obs: dict) -> int:
            self.seen.append(obs)
            return 0

    inner = Record()
    policy = PaddedPolicy(inner, 20)
    obs, _ = _env("paper-0.12").reset(seed=0)
    policy.reset()
    assert policy.act(obs) == 0 and policy.name == "record"
    _same(inner.seen[0], _by_hand(obs, 10, 20))
