"""EvalStop-v0 against Gymnasium's and SB3's expectations (after Gymnasium's test_envs.py)."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym
from evalstop_gym import BOUNDARY_FIELDS, HIDDEN_FIELDS, METRIC_KEYS, ConfigError
from evalstop_gym.envs import EvalStopEnv

SMALL = {"n_jobs": 30}
ALLOWED_WARNINGS: tuple[str, ...] = ()


def _no_unexpected(record: list[warnings.WarningMessage]) -> None:
    bad = [str(w.message) for w in record if not any(a in str(w.message) for a in ALLOWED_WARNINGS)]
    assert not bad, bad


def test_registration_is_idempotent_and_string_entry_point_works() -> None:
    spec = gym.spec("EvalStop-v0")
    assert spec.entry_point == "evalstop_gym.envs:EvalStopEnv"
    evalstop_gym._register()
    env = gym.make("evalstop_gym:EvalStop-v0", **SMALL)
    assert isinstance(env.unwrapped, EvalStopEnv)


def test_make_without_prior_import_in_a_fresh_interpreter() -> None:
    import subprocess
    import sys

    code = (
        "import gymnasium as gym\n"
        "env = gym.make('evalstop_gym:EvalStop-v0', n_jobs=5)\n"
        "obs, info = env.reset(seed=0)\n"
        "import sys; assert 'torch' not in sys.modules and 'stable_baselines3' not in sys.modules\n"
        "print(sorted(obs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "job_type" in out.stdout


def test_gymnasium_check_env_passes_without_warnings() -> None:
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        check_env(gym.make("EvalStop-v0", render_mode="ansi", **SMALL).unwrapped)
    _no_unexpected(rec)


def test_sb3_check_env_passes_without_warnings() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        check_env(EvalStopEnv(**SMALL), warn=True)
    _no_unexpected(rec)


def _assert_same(a, b) -> None:
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


@pytest.mark.parametrize("scheduler", ["fifo", "srtf-est", "tiresias"])
def test_same_seed_envs_step_identically(scheduler: str) -> None:
    e1, e2 = (gym.make("EvalStop-v0", scheduler=scheduler, **SMALL) for _ in range(2))
    o1, i1 = e1.reset(seed=123)
    o2, i2 = e2.reset(seed=123)
    _assert_same(o1, o2)
    _assert_same(i1, i2)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        a = int(rng.integers(2))
        r1, r2 = e1.step(a), e2.step(a)
        for x, y in zip(r1, r2):
            _assert_same(x, y)
        done = r1[2] or r1[3]


def test_different_seeds_differ() -> None:
    env = gym.make("EvalStop-v0", **SMALL)
    o1, _ = env.reset(seed=1)
    o2, _ = env.reset(seed=2)
    assert any(not np.array_equal(o1[k], o2[k]) for k in o1)


def test_pickle_round_trip_mid_episode() -> None:
    env = EvalStopEnv(**SMALL)
    env.reset(seed=7)
    for _ in range(5):
        env.step(0)
    clone = pickle.loads(pickle.dumps(env))
    for a in [0, 1, 0, 0, 1, 0]:
        _assert_same(env.step(a), clone.step(a))


@pytest.mark.parametrize(
    "fields",
    [
        None,
        ["job_type", "evals", "consecutive_declines"],
        "progress,loss",
        ("evals",),
    ],
)
def test_observation_keys_are_the_requested_boundary_fields(fields) -> None:
    env = gym.make("EvalStop-v0", obs_fields=fields, **SMALL)
    obs, info = env.reset(seed=0)
    if fields is None:
        want = set(BOUNDARY_FIELDS)
    elif isinstance(fields, str):
        want = set(fields.split(","))
    else:
        want = set(fields)
    assert set(obs) == want == set(env.observation_space.spaces)
    done = False
    while not done:
        assert env.observation_space.contains(obs)
        for key in list(info):
            assert not any(h in key for h in HIDDEN_FIELDS), key
        assert set(info) <= {"time_h", "free_gpus", "jobs_in_system", "jobs_done", "decisions"}
        obs, r, done, trunc, info = env.step(0)
        assert isinstance(r, float) and isinstance(done, bool) and isinstance(trunc, bool)
    m = info["episode_metrics"]
    assert set(METRIC_KEYS) <= set(env.unwrapped.episode_metrics())
    assert all(isinstance(v, float) and np.isfinite(v) for v in m.values())


def test_observation_matches_the_boundary_view() -> None:
    env = EvalStopEnv(eval_window=4, **SMALL)
    obs, _ = env.reset(seed=3)
    for _ in range(40):
        view = env.sim.pending_view
        ev = obs["evals"]
        n = len(view.evals)
        np.testing.assert_allclose(ev[4 - n : 4], np.float32(view.evals))
        assert ev[4:].sum() == n and ev[: 4 - n].sum() == 0 and ev[4 : 8 - n].sum() == 0
        assert obs["consecutive_declines"][0] == view.consecutive_declines
        assert obs["progress"][0] == np.float32(view.progress)
        assert obs["job_type"][view.job_type] == 1 and obs["job_type"].sum() == 1
        obs, *_ = env.step(0)


def test_invalid_action_step_before_reset_and_after_end_raise() -> None:
    env = EvalStopEnv(n_jobs=3)
    with pytest.raises(RuntimeError, match=r"before reset"):
        env.step(0)
    env.reset(seed=0)
    for bad in (2, -1, 0.5, "stop", [0, 1]):
        with pytest.raises(ValueError, match=r"action=.*0 \(continue\) or 1"):
            env.step(bad)
    done = False
    while not done:
        _, _, done, _, _ = env.step(np.int64(0))
    with pytest.raises(RuntimeError, match=r"after the episode ended"):
        env.step(0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"reward": "profit"}, "reward"),
        ({"obs_fields": ["evals", "hacking"]}, "obs_fields"),
        ({"obs_fields": []}, "obs_fields"),
        ({"scheduler": "lottery"}, "scheduler"),
        ({"gpu_hour_price": -1}, "gpu_hour_price"),
        ({"render_mode": "bogus"}, "render_mode"),
        ({"load": -1.0}, "load"),
    ],
)
def test_bad_env_kwargs_name_the_field(kwargs, field) -> None:
    with pytest.raises(ConfigError, match=rf"^{field}="):
        gym.make("EvalStop-v0", **kwargs)


def test_render_ansi_shows_cluster_and_job() -> None:
    env = gym.make("EvalStop-v0", render_mode="ansi", **SMALL)
    env.reset(seed=0)
    text = env.render()
    assert "GPUs" in text and "deciding:" in text and "progress" in text


def test_render_rgb_array_is_an_image() -> None:
    env = gym.make("EvalStop-v0", render_mode="rgb_array", **SMALL)
    env.reset(seed=0)
    img = env.render()
    assert img.shape == (96, 320, 3) and img.dtype == np.uint8
    assert (img < 255).any()


def test_trace_replay_through_make() -> None:
    env = gym.make("EvalStop-v0", trace=evalstop_gym.SAMPLE_TRACE, num_gpus=16, n_jobs=None)
    env.reset(seed=0)
    done = False
    while not done:
        *_, done, _, info = env.step(0)
    assert info["episode_metrics"]["n_jobs"] == 40


def test_async_vector_env_runs() -> None:
    envs = gym.make_vec("EvalStop-v0", num_envs=2, vectorization_mode="async", **SMALL)
    try:
        obs, _ = envs.reset(seed=0)
        assert obs["evals"].shape[0] == 2
        for _ in range(50):
            obs, r, term, trunc, info = envs.step(np.array([0, 1]))
        assert r.shape == (2,)
    finally:
        envs.close()


def test_sb3_subproc_vec_env_runs() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    # "module:id" so that the worker processes import the package and register the env.
    venv = make_vec_env(
        "evalstop_gym:EvalStop-v0", n_envs=2, vec_env_cls=SubprocVecEnv, env_kwargs=SMALL
    )
    try:
        venv.seed(0)
        venv.reset()
        for _ in range(50):
            _, r, _, _ = venv.step(np.array([0, 0]))
        assert r.shape == (2,)
    finally:
        venv.close()


def test_docstring_examples_run() -> None:
    import doctest

    import evalstop_gym.envs.evalstop

    res = doctest.testmod(evalstop_gym.envs.evalstop)
    assert res.attempted > 0 and res.failed == 0
