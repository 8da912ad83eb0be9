"""The native batched EvalStop-v0: the same episodes as N single envs, Gymnasium's autoreset."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from vector_infos import assert_same_info

import evalstop_gym  # noqa: F401
from evalstop_gym import ConfigError
from evalstop_gym.envs import EvalStopVectorEnv

KW = {"n_jobs": 8}


def _singles(n: int, seed: int, **kw: object) -> tuple[list[gym.Env], list[dict]]:
    envs = [gym.make("EvalStop-v0", **KW, **kw) for _ in range(n)]
    return envs, [e.reset(seed=seed + i)[0] for i, e in enumerate(envs)]


@pytest.mark.parametrize("kw", [{}, {"reward": "system", "scheduler": "tiresias"}])
def test_next_step_autoreset_matches_single_envs(kw: dict) -> None:
    n = 3
    venv = gym.make_vec(
        "EvalStop-v0", num_envs=n, vectorization_mode="vector_entry_point", **KW, **kw
    )
    assert isinstance(venv, EvalStopVectorEnv)
    obs, _ = venv.reset(seed=5)
    singles, sobs = _singles(n, 5, **kw)
    for i in range(n):
        for k in sobs[i]:
            np.testing.assert_array_equal(obs[k][i], sobs[i][k])
    rng = np.random.default_rng(0)
    restart = [False] * n
    ends = 0
    for _ in range(250):
        actions = rng.integers(0, 2, n)
        obs, rew, term, trunc, info = venv.step(actions)
        assert obs["evals"].shape == (n, venv.single_observation_space["evals"].shape[0])
        assert not trunc.any()
        for i, env in enumerate(singles):
            if restart[i]:  # next-step autoreset: the action is ignored, reward 0
                o, r, t = env.reset()[0], 0.0, False
                restart[i] = False
            else:
                o, r, t, _, sinfo = env.step(int(actions[i]))
                if t:
                    restart[i] = True
                    ends += 1
                    assert info["_episode_metrics"][i]
                    assert (
                        info["episode_metrics"]["mean_jct_h"][i]
                        == sinfo["episode_metrics"]["mean_jct_h"]
                    )
            assert rew[i] == r and term[i] == t
            for k in o:
                np.testing.assert_array_equal(obs[k][i], o[k])
    assert ends >= 2


def test_same_step_autoreset_and_flat_observations() -> None:
    n = 2
    venv = EvalStopVectorEnv(n, flatten=True, autoreset_mode="SameStep", **KW)
    obs, _ = venv.reset(seed=1)
    assert obs.shape == (n, venv.single_observation_space.shape[0]) and obs.dtype == np.float32
    assert venv.observation_space.contains(obs)
    singles, sobs = _singles(n, 1)
    flat = [np.concatenate([s[f] for f in singles[0].unwrapped.obs_fields]) for s in sobs]
    np.testing.assert_array_equal(obs, np.stack(flat))
    ended = False
    for _ in range(400):
        obs, rew, term, trunc, info = venv.step(np.ones(n, dtype=np.int64))
        if term.any():
            i = int(np.flatnonzero(term)[0])
            assert not info["final_obs"][i].any()  # the terminal observation
            assert info["final_info"]["_episode_metrics"][i]
            assert obs[i].any()  # already the next episode's first observation
            ended = True
            break
    assert ended


def test_bad_actions_and_arguments_are_refused() -> None:
    venv = EvalStopVectorEnv(2, **KW)
    with pytest.raises(RuntimeError, match="before reset"):
        venv.step(np.zeros(2, dtype=np.int64))
    venv.reset(seed=0)
    for bad in (np.zeros(3, dtype=np.int64), np.array([0, 2]), np.array([0.5, 1.0])):
        with pytest.raises(ValueError, match="actions"):
            venv.step(bad)
    with pytest.raises(ConfigError, match="num_envs"):
        EvalStopVectorEnv(0)
    with pytest.raises(ConfigError, match="autoreset_mode"):
        EvalStopVectorEnv(1, autoreset_mode="sometimes")


def test_sb3_adapter_same_step_autoreset_and_ppo_learns_a_step() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    from baselines.training.native_vec import NativeVecEnv

    venv = NativeVecEnv(2, seed=3, **KW)
    obs = venv.reset()
    singles, sobs = _singles(2, 3)
    fields = singles[0].unwrapped.obs_fields
    np.testing.assert_array_equal(obs[1], np.concatenate([sobs[1][f] for f in fields]))
    done_seen = False
    for _ in range(300):
        obs, rew, dones, infos = venv.step(np.ones(2, dtype=np.int64))
        assert rew.dtype == np.float32
        for i in np.flatnonzero(dones):
            assert not infos[i]["terminal_observation"].any()
            assert "mean_jct_h" in infos[i] and infos[i]["TimeLimit.truncated"] is False
            done_seen = True
    assert done_seen
    model = PPO("MlpPolicy", VecMonitor(venv), n_steps=16, batch_size=16, n_epochs=1, seed=0)
    model.learn(32)
    assert model.num_timesteps >= 32


@pytest.mark.parametrize("flatten", [False, True])
def test_batch_observations_are_fresh_writable_arrays_unless_copy_is_off(flatten: bool) -> None:
    venv = EvalStopVectorEnv(3, flatten=flatten, **KW)
    first, _ = venv.reset(seed=0)
    second = venv.step(np.zeros(3, dtype=np.int64))[0]
    a, b = (first, second) if flatten else (first["evals"], second["evals"])
    assert a.flags.writeable and not np.shares_memory(a, b)
    a[...] = 7.0  # the caller may write into what it was given
    assert not (b == 7.0).all()
    shared = EvalStopVectorEnv(3, flatten=True, copy=False, **KW)
    x, _ = shared.reset(seed=0)
    y = shared.step(np.zeros(3, dtype=np.int64))[0]
    assert np.shares_memory(x, y)  # copy=False: the one buffer, overwritten


def test_deprioritise_action_its_space_offers_is_taken_like_a_single_env() -> None:
    n = 3
    venv = EvalStopVectorEnv(n, deprioritize=True, **KW)
    assert venv.single_action_space.n == 3
    obs, _ = venv.reset(seed=2)
    singles, _ = _singles(n, 2, deprioritize=True)
    rng = np.random.default_rng(1)
    restart = [False] * n
    for _ in range(120):
        actions = venv.action_space.sample() if rng.random() < 0.5 else rng.integers(0, 3, n)
        obs, rew, term, _, _ = venv.step(actions)
        for i, env in enumerate(singles):
            if restart[i]:
                o, r, t = env.reset()[0], 0.0, False
                restart[i] = False
            else:
                o, r, t, _, _ = env.step(int(actions[i]))
                restart[i] = t
            assert rew[i] == r and term[i] == t
            for k in o:
                np.testing.assert_array_equal(obs[k][i], o[k])
    with pytest.raises(ValueError, match="actions"):
        venv.step(np.full(n, 3))
    plain = EvalStopVectorEnv(2, **KW)
    plain.reset(seed=0)
    with pytest.raises(ValueError, match="actions"):
        plain.step(np.array([0, 2]))  # without deprioritize=True, 2 is not offered


@pytest.mark.parametrize("seed", [np.int64(3), np.uint32(3), 3, [np.int64(3), 4]])
def test_numpy_integer_seeds_seed_like_python_ints(seed: object) -> None:
    venv = EvalStopVectorEnv(2, flatten=True, **KW)
    ref = EvalStopVectorEnv(2, flatten=True, **KW)
    np.testing.assert_array_equal(venv.reset(seed=seed)[0], ref.reset(seed=3)[0])
    np.testing.assert_array_equal(
        venv.step(np.zeros(2, np.int64))[0], ref.step(np.zeros(2, np.int64))[0]
    )


@pytest.mark.parametrize(
    "seed", [-1, True, 1.5, float("nan"), "3", [1], [1, -2], [1, 2.0], np.float64(3), {"a": 1}]
)
def test_bad_seeds_are_a_config_error(seed: object) -> None:
    with pytest.raises(ConfigError, match="seed"):
        EvalStopVectorEnv(2, **KW).reset(seed=seed)


def test_num_envs_is_bounded_with_a_clear_error() -> None:
    from evalstop_gym.envs.vector import MAX_NUM_ENVS

    assert 256 <= MAX_NUM_ENVS <= 4096
    for bad in (MAX_NUM_ENVS + 1, 5000, 10**100, np.float64(2), "2"):
        with pytest.raises(ConfigError, match="num_envs"):
            EvalStopVectorEnv(bad, **KW)  # type: ignore[arg-type]
    assert EvalStopVectorEnv(np.int64(2), **KW).num_envs == 2  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("flatten", [False, True])
def test_episode_end_infos_are_what_gymnasiums_add_info_builds(mode: str, flatten: bool) -> None:
    # Several sub-environments end in the same step (n_jobs=2, always stop), in both
    # autoreset modes; the info is built once per step from their metrics.
    n = 5
    venv = EvalStopVectorEnv(n, flatten=flatten, autoreset_mode=mode, n_jobs=2)
    venv.reset(seed=4)
    rng = np.random.default_rng(2)
    multi = 0
    for _ in range(60):
        obs, _, term, _, info = venv.step(rng.integers(0, 2, n))
        assert [i for i, _ in venv.ended] == np.flatnonzero(term).tolist()
        want: dict = {}
        for i, metrics in venv.ended:
            extra = {"episode_metrics": metrics}
            if mode == "SameStep":
                final = np.zeros(venv.layout.width, np.float32)
                extra = {
                    "final_obs": final if flatten else venv.layout.split(final),
                    "final_info": extra,
                }
            want = venv._add_info(want, extra, i)
        assert_same_info(info, want)
        multi += len(venv.ended) > 1
    assert multi >= 3


def test_same_step_autoreset_matches_single_envs_reset_at_once() -> None:
    n = 4
    venv = EvalStopVectorEnv(n, flatten=True, autoreset_mode="SameStep", **KW)
    obs, _ = venv.reset(seed=9)
    singles, _ = _singles(n, 9)
    fields = singles[0].unwrapped.obs_fields
    rng = np.random.default_rng(3)
    ends = 0
    for _ in range(200):
        actions = rng.integers(0, 2, n)
        obs, rew, term, _, info = venv.step(actions)
        for i, env in enumerate(singles):
            o, r, t, _, sinfo = env.step(int(actions[i]))
            assert rew[i] == r and term[i] == t
            if t:
                ends += 1
                got = {k: v[i] for k, v in info["final_info"]["episode_metrics"].items()}
                assert {k: got[k] for k in sinfo["episode_metrics"]} == sinfo["episode_metrics"]
                o = env.reset()[0]
            np.testing.assert_array_equal(obs[i], np.concatenate([o[f] for f in fields]))
    assert ends >= 4


def test_sb3_adapter_infos_carry_each_ended_episodes_own_metrics() -> None:
    pytest.importorskip("stable_baselines3")
    from baselines.training.native_vec import NativeVecEnv

    n = 3
    venv = NativeVecEnv(n, seed=6, n_jobs=3)
    venv.reset()
    singles = [gym.make("EvalStop-v0", n_jobs=3) for _ in range(n)]
    for i, env in enumerate(singles):
        env.reset(seed=6 + i)
    rng = np.random.default_rng(4)
    ends = 0
    for _ in range(80):
        actions = rng.integers(0, 2, n)
        _, _, dones, infos = venv.step(actions)
        for i, env in enumerate(singles):
            _, _, t, _, sinfo = env.step(int(actions[i]))
            assert dones[i] == t
            if t:
                ends += 1
                assert infos[i]["episode_metrics"] == sinfo["episode_metrics"]
                assert all(infos[i][k] == v for k, v in sinfo["episode_metrics"].items())
                env.reset()
    assert ends >= 5
