"""``EvalStopCluster-v0``: the whole-cluster env (issue #16)."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_jobs
from gymnasium.utils.env_checker import check_env

import evalstop_gym  # noqa: F401  (registers the envs)
from baselines import Deprioritize, EvalStop, LossPlateau, NoStop, StopAtProgress, run_episode
from evalstop_gym.envs import EvalStopClusterEnv, per_job_actions
from evalstop_gym.envs import core as core_module
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.engine import Simulator


def _random_action(env: EvalStopClusterEnv, rng: np.random.Generator) -> np.ndarray:
    mask = env.action_masks().reshape(env.max_jobs, 3)
    return np.array([rng.choice(np.flatnonzero(m), p=None) for m in mask], dtype=np.int64)


def _rollout(env: EvalStopClusterEnv, seed: int, act) -> list:
    obs, info = env.reset(seed=seed)
    out = [(obs, info)]
    while True:
        obs, reward, term, trunc, info = env.step(act(obs))
        out.append((obs, reward, term, trunc, info))
        if term or trunc:
            return out


def test_check_env_gymnasium() -> None:
    check_env(EvalStopClusterEnv(n_jobs=15, max_jobs=8), skip_render_check=True)


def test_check_env_sb3() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    sb3_check_env(EvalStopClusterEnv(n_jobs=15, max_jobs=8), warn=False)


def test_check_env_tries_every_render_mode_without_warnings() -> None:
    # Through make, so that the checker builds the env in each declared render mode.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make("EvalStopCluster-v0", n_jobs=15, max_jobs=8).unwrapped)


def test_render_modes_return_text_a_picture_or_print(capsys: pytest.CaptureFixture) -> None:
    # A crowded cluster, so that jobs wait.
    ansi = gym.make(
        "EvalStopCluster-v0", n_jobs=15, max_jobs=8, num_gpus=16, load=5.0, render_mode="ansi"
    )
    assert ansi.unwrapped.render() == "EvalStopCluster-v0 (not reset)\n"
    obs, _ = ansi.reset(seed=0)
    text = ansi.render()
    assert isinstance(text, str)
    assert f"{int(obs['free_gpus'][0])} free" in text
    assert f"queue: {int(obs['queue_length'][0])} waiting" in text
    # A line per occupied slot, the deciding ones first.
    lines = text.splitlines()[3:]
    assert len(lines) == int(obs["present"].sum()) and "DECIDE" in lines[0]
    rng = np.random.default_rng(0)
    env = ansi.unwrapped
    seen = {"waiting": False, "running": False}
    while True:
        _, _, term, _, _ = ansi.step(_random_action(env, rng))
        text = ansi.render()
        for state in seen:
            seen[state] |= f"  {state}" in text
        if term:
            break
    assert all(seen.values()), seen
    assert text.endswith("episode over\n")

    rgb = gym.make("EvalStopCluster-v0", n_jobs=15, max_jobs=8, render_mode="rgb_array")
    rgb.reset(seed=0)
    img = rgb.render()
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8
    assert img.shape == (32 + 6 * 8, 320, 3) and (img < 255).any()
    rgb.step(np.zeros(8, dtype=np.int64))
    assert rgb.render().shape == img.shape  # a fixed size, as video recorders need

    human = gym.make("EvalStopCluster-v0", n_jobs=15, max_jobs=8, render_mode="human")
    human.reset(seed=0)
    assert human.render() is None
    human.step(np.zeros(8, dtype=np.int64))
    assert human.render() is None
    assert capsys.readouterr().out.count("GPUs [") == 2  # the reset and the step


def test_render_mode_changes_no_observation_reward_or_info() -> None:
    plain = EvalStopClusterEnv(n_jobs=20, max_jobs=6)
    drawn = EvalStopClusterEnv(n_jobs=20, max_jobs=6, render_mode="rgb_array")
    zero = lambda _o: np.zeros(6, dtype=np.int64)  # noqa: E731
    for a, b in zip(_rollout(plain, 3, zero), _rollout(drawn, 3, zero), strict=True):
        for x, y in zip(a, b, strict=True):
            if isinstance(x, dict) and x and isinstance(next(iter(x.values())), np.ndarray):
                assert x.keys() == y.keys()
                for k in x:
                    np.testing.assert_array_equal(x[k], y[k])
            else:
                assert x == y


def test_deterministic_per_seed_and_pickles() -> None:
    a, b = EvalStopClusterEnv(n_jobs=30, max_jobs=6), EvalStopClusterEnv(n_jobs=30, max_jobs=6)
    ra, rb = np.random.default_rng(1), np.random.default_rng(1)
    oa, _ = a.reset(seed=7)
    ob, _ = b.reset(seed=7)
    for _ in range(15):
        oa, r1, t1, _, ia = a.step(_random_action(a, ra))
        ob, r2, t2, _, ib = b.step(_random_action(b, rb))
        assert r1 == r2 and t1 == t2 and ia.keys() == ib.keys()
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
    c = pickle.loads(pickle.dumps(a))
    rc = pickle.loads(pickle.dumps(ra))
    while True:
        oa, r1, t1, _, ia = a.step(_random_action(a, ra))
        oc, r2, t2, _, ic = c.step(_random_action(c, rc))
        assert r1 == r2 and t1 == t2
        for k in oa:
            np.testing.assert_array_equal(oa[k], oc[k])
        if t1:
            np.testing.assert_equal(ia["episode_metrics"], ic["episode_metrics"])
            break


POLICIES = [NoStop(), EvalStop(2), StopAtProgress(0.65), LossPlateau(), Deprioritize(2)]


@pytest.mark.parametrize("scheduler", ["fifo", "srtf-est", "tiresias"])
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
def test_per_job_adapter_gives_exactly_evalstop_v0_metrics(policy, scheduler: str) -> None:
    kw = {"n_jobs": 40, "scheduler": scheduler, "costs": "realistic"}
    env = EvalStopClusterEnv(max_jobs=16, **kw)
    last = _rollout(env, 3, lambda obs: per_job_actions(obs, policy.act))[-1]
    cluster = last[-1]["episode_metrics"]
    single = run_episode(policy, 3, deprioritize=True, **kw)
    for k, v in cluster.items():
        if k.startswith("return"):
            assert v == pytest.approx(single[k], rel=1e-9, abs=1e-9)
        else:
            np.testing.assert_equal(v, single[k], err_msg=k)


def _simultaneous_episode() -> tuple:
    """Four identical 8-GPU jobs on 16 GPUs: two pairs whose checkpoints coincide."""
    k = 10
    evals = [[0.1, 0.2, 0.3, 0.25, 0.2, 0.15, 0.1, 0.1, 0.1, 0.1]] * 2 + [[0.5] * k] * 2
    return hand_jobs([0.0, 0.0, 0.0, 0.0], [8, 8, 8, 8], [5.0] * 4, evals=evals, k=k)


def test_per_job_actions_never_runs_a_keys_repr() -> None:
    """A caller's observation may hold any key: it is passed on, its repr never evaluated."""

    class Key:
        def __repr__(self) -> str:
            return "1 / 0"  # code, if anything evaluated it

    key = Key()
    env = EvalStopClusterEnv(n_jobs=20)
    obs, _ = env.reset(seed=0)
    seen = []
    obs = {**obs, key: np.arange(env.max_jobs)}

    def act(job_obs):
        seen.append(job_obs[key])
        return 1

    out = per_job_actions(obs, act)
    deciding = np.flatnonzero(obs["decide"] > 0.5)
    assert out.tolist() == [int(s in deciding) for s in range(env.max_jobs)]
    assert seen == deciding.tolist()


def test_simultaneous_checkpoints_form_one_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _simultaneous_episode()

    def hand_simulator(config, seed, **kw):  # type: ignore[no-untyped-def]
        return Simulator(config, seed, jobs=jobs, **kw)

    monkeypatch.setattr(core_module, "Simulator", hand_simulator)
    env = EvalStopClusterEnv(num_gpus=16, max_jobs=4, scheduler="fifo")
    obs, info = env.reset(seed=0)
    assert info["epoch_jobs"] == 2 and obs["decide"].tolist() == [1, 1, 0, 0]
    assert obs["queue_length"][0] == 2 and obs["free_gpus"][0] == 0
    mask = env.action_masks().reshape(4, 3)
    assert mask[:2].all() and mask[2:, 0].all() and not mask[2:, 1:].any()
    # Both deciding slots show checkpoint 1 (progress 0.1), though the engine popped one.
    assert obs["progress"][:2, 0].tolist() == pytest.approx([0.1, 0.1])
    ep = EvalStop(2)
    steps = _rollout(env, 0, lambda o: per_job_actions(o, ep.act))
    assert any(s[-1]["decided"] == 2 for s in steps[1:])
    single = gym.make("EvalStop-v0", num_gpus=16, scheduler="fifo", deprioritize=True)
    ref = []
    o, _ = single.reset(seed=0)
    while True:
        o, r, t, _, i = single.step(ep.act(o))
        if t:
            ref = i["episode_metrics"]
            break
    np.testing.assert_equal(
        {k: v for k, v in steps[-1][-1]["episode_metrics"].items() if not k.startswith("ret")},
        {k: v for k, v in ref.items() if not k.startswith("ret")},
    )


def test_observation_holds_no_hidden_number_and_no_clock() -> None:
    """No observed value equals a hidden one: true durations, true evals, peaks, the clock."""
    env = EvalStopClusterEnv(n_jobs=40, max_jobs=12, eval_noise=0.05)
    obs, _ = env.reset(seed=2)
    sim = env.inner.sim
    assert sim is not None
    hidden = set(np.float32(sim.batch.duration_h).tolist())
    hidden |= set(np.float32(sim.curves.true_eval).ravel().tolist())
    hidden |= set(np.float32(sim.curves.peak_progress[np.isfinite(sim.curves.peak_progress)]))
    rng = np.random.default_rng(0)
    expected_keys = {"free_gpus", "queue_length", "present", "decide", "running"}
    expected_keys |= {"deprioritized", "gpus", *env.inner.obs_fields}
    while True:
        assert set(obs) == expected_keys
        values = set(np.concatenate([v.ravel() for v in obs.values()]).tolist())
        clock = {float(np.float32(sim.now))} - {0.0}
        assert not values & (hidden | clock) - {0.0, 1.0}, values & (hidden | clock)
        obs, _, term, _, info = env.step(_random_action(env, rng))
        assert "time_h" not in info
        if term:
            break


def test_bad_arguments_and_actions() -> None:
    for bad in (0, -1, 5000, 2.5, True):
        with pytest.raises(ConfigError, match="max_jobs"):
            EvalStopClusterEnv(max_jobs=bad)
    with pytest.raises(ConfigError, match="deprioritize"):
        EvalStopClusterEnv(deprioritize=True)
    for bad in ("bogus", 1):
        with pytest.raises(ConfigError, match=r"^render_mode="):
            EvalStopClusterEnv(render_mode=bad)
    env = EvalStopClusterEnv(n_jobs=5, max_jobs=4)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(4, dtype=np.int64))
    env.reset(seed=0)
    for bad in (np.zeros(3, dtype=np.int64), np.full(4, 3), np.zeros(4), 1):
        with pytest.raises(ValueError, match="not allowed"):
            env.step(bad)
