"""Hostile keyword arguments of EvalStop-v0: only the package's own errors escape.

A fuzzer (hypothesis) draws every keyword argument from a mix of valid values and junk (None,
bools, huge and tiny numbers, NaN, strings, lists, dicts, NumPy scalars).  The environment
either refuses the configuration with an :class:`EvalStopError` or runs a whole episode in
which every observation lies in its space, every reward is finite and every metric is finite
(or NaN where it is undefined, e.g. precision with no stop).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym import BOUNDARY_FIELDS, CALIBRATIONS, SAMPLE_TRACE, SCHEDULERS, WORKLOADS
from evalstop_gym.corpus import CurveTrace, write_traces
from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.errors import ConfigError, EvalStopError, is_integer

#: Metrics that are NaN when undefined (a ratio over an empty set, a type absent).
UNDEFINED_OK = {
    "precision",
    "recall",
    "fpr",
    "f1",
    "detection_delay_evals",
    "mean_jct_h_completed",
    "utilisation",
    *(f"mean_jct_h_{t}" for t in ("lora", "dpo", "rlhf")),
}

FUZZ = settings(
    max_examples=int(os.environ.get("EVALSTOP_FUZZ_EXAMPLES", "300")),
    deadline=None,
    derandomize=True,  # the same examples in CI every run; raise the count locally to explore
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([5e-324, 1e300, -1e-300, 1e308, 2**63, 10**400]),
    st.text(max_size=6),
    st.lists(st.integers(-3, 3), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
    st.builds(np.float32, st.floats(width=32, allow_nan=True)),
    st.builds(np.bool_, st.booleans()),
)


def _corpus(path: str) -> str:
    """A valid two-run corpus (one hacking, one healthy), steps 0..9."""
    step = np.arange(10) * 10
    x = np.linspace(0, 1, 10)
    runs = [
        CurveTrace("hack", step, x * (1 - x), 1 - x / 2, gold=x * (1 - x), label=True),
        CurveTrace("ok", step, x, 1 - x / 2, gold=x, label=False),
    ]
    write_traces(runs, path)
    return path


def _kwargs_strategy(corpus: str) -> st.SearchStrategy[dict]:
    small_jobs = st.integers(1, 25)
    valid = {
        "workload": st.sampled_from(sorted(WORKLOADS)),
        "scheduler": st.sampled_from(sorted(SCHEDULERS)),
        "num_gpus": st.one_of(st.integers(16, 512), st.builds(np.int64, st.integers(16, 128))),
        "n_jobs": small_jobs,
        "load": st.floats(1e-3, 1e3),
        "eval_noise": st.floats(0.0, 10.0),
        "hack_fraction": st.floats(0.0, 1.0),
        "eval_window": st.integers(1, 10),
        "obs_fields": st.one_of(
            st.lists(st.sampled_from(BOUNDARY_FIELDS), min_size=1, unique=True),
            st.lists(st.sampled_from(BOUNDARY_FIELDS), min_size=1, unique=True).map(",".join),
        ),
        "reward": st.sampled_from(["utility", "system"]),
        "reward_timing": st.sampled_from(["dense", "delayed"]),
        "trace": st.just(SAMPLE_TRACE),
        "trace_cluster": st.sampled_from(["6214e9", "11cb48", "nope"]),
        "calibration": st.sampled_from(sorted(CALIBRATIONS)),
        "curves": st.just(corpus),
        "gpu_hour_price": st.floats(0.0, 1e3),
        "time_cost": st.floats(0.0, 1e3),
        "quality_weight": st.floats(0.0, 1e3),
        "render_mode": st.sampled_from([None, "ansi", "rgb_array"]),
    }
    # Junk for n_jobs must not be a valid *large* count: that is legal but slow, not hostile.
    junk_jobs = JUNK.filter(lambda v: not (is_integer(v) and 25 < v <= 10**6))

    @st.composite
    def kwargs(draw: st.DrawFn) -> dict:
        # Mostly valid configurations with up to two junk values, so that most examples
        # get past construction and run an episode.
        chosen = draw(st.fixed_dictionaries({}, optional=valid))
        for key in draw(st.lists(st.sampled_from(sorted(valid)), max_size=2, unique=True)):
            chosen[key] = draw(junk_jobs if key == "n_jobs" else JUNK)
        return chosen

    return kwargs()


def _check_episode(env: EvalStopEnv, seed: int) -> None:
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    assert env.observation_space.contains(obs)
    env.render()
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(int(rng.random() < 0.3))
        assert isinstance(reward, float) and math.isfinite(reward)
        assert env.observation_space.contains(obs)
        assert all(math.isfinite(v) for v in info.values() if not isinstance(v, dict))
        done = terminated or truncated
    env.render()
    # info carries only defined metrics; the full key set has None where one is undefined.
    assert all(math.isfinite(v) for v in info["episode_metrics"].values()), info
    for key, value in env.unwrapped.episode_metrics().items():
        assert (value is None and key in UNDEFINED_OK) or math.isfinite(value), (key, value)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _corpus(str(tmp_path_factory.mktemp("corpus") / "runs.jsonl"))


def test_fuzzed_env_kwargs_raise_own_errors_or_run_finite(corpus: str) -> None:
    @FUZZ
    @given(kwargs=_kwargs_strategy(corpus), seed=st.integers(0, 2**32 - 1))
    def run(kwargs: dict, seed: int) -> None:
        if "n_jobs" not in kwargs or (kwargs.get("trace") is None and kwargs["n_jobs"] is None):
            kwargs = {**kwargs, "n_jobs": 12}
        try:
            env = EvalStopEnv(**kwargs)
        except EvalStopError:
            return
        try:
            _check_episode(env, seed)
        except EvalStopError:
            pass  # e.g. a trace job larger than the cluster, found when the trace is read
        finally:
            env.close()

    run()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"workload": ["heavy-rlhf"]}, "workload"),
        ({"scheduler": {"fifo": 1}}, "scheduler"),
        ({"calibration": ["paper"]}, "calibration"),
        ({"obs_fields": 5}, "obs_fields"),
        ({"obs_fields": 0.5}, "obs_fields"),
        ({"obs_fields": True}, "obs_fields"),
        ({"obs_fields": [["evals"]]}, "obs_fields"),
        ({"eval_window": 10**8}, "eval_window"),
        ({"eval_window": 11}, "eval_window"),
        ({"load": 5e-324}, "load"),
        ({"load": 1e300}, "load"),
        ({"eval_noise": 1e300}, "eval_noise"),
        ({"gpu_hour_price": 1e308}, "gpu_hour_price"),
        ({"time_cost": float("nan")}, "time_cost"),
        ({"num_gpus": True}, "num_gpus"),
        ({"num_gpus": 10**9}, "num_gpus"),
        ({"n_jobs": 10**9}, "n_jobs"),
        ({"eval_noise": True}, "eval_noise"),
        ({"hack_fraction": False}, "hack_fraction"),
        ({"trace_cluster": 5}, "trace_cluster"),
        ({"reward": np.array([1])}, "reward"),
        ({"render_mode": np.array([1, 2])}, "render_mode"),
        ({"reward_timing": "later"}, "reward_timing"),
        ({"reward": "system", "reward_timing": "delayed"}, "reward_timing"),
    ],
)
def test_reported_bad_kwargs_name_field_value_and_bound(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        EvalStopEnv(**kwargs)
    assert exc.value.field == field
    assert str(exc.value).startswith(f"{field}=")
    assert "not allowed: " in str(exc.value)


def test_numpy_integers_are_accepted_and_stored_as_python_ints() -> None:
    env = EvalStopEnv(num_gpus=np.int64(64), n_jobs=np.int32(5), eval_window=np.int16(4))
    assert env.config.num_gpus == 64 and type(env.config.num_gpus) is int
    assert type(env.config.n_jobs) is int and env.window == 4
    env.reset(seed=0)
    assert env.step(0)[3] is False


def test_bound_extremes_run_finite() -> None:
    """The largest accepted values still give finite rewards, observations and render."""
    env = EvalStopEnv(
        n_jobs=8,
        load=1e-3,
        eval_noise=10.0,
        gpu_hour_price=1e3,
        render_mode="rgb_array",
    )
    _check_episode(env, 0)
    env = EvalStopEnv(n_jobs=8, load=1e3, reward="system", time_cost=1e3, quality_weight=1e3)
    _check_episode(env, 1)
