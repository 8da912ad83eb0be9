"""Trust at the edges: hostile values for every entry point give the package's errors, never raw ones.

The row tests pin what an audit found (``pools`` strings, simulator seeds);
the hypothesis test throws hostile values (wrong types, NaN, inf, huge,
negative, unicode, NumPy scalars) at Flat, Cluster, the vector env, pools,
costs, deprioritise and ``SimConfig``/``Simulator`` directly: each call either
raises a :class:`~evalstop_gym.errors.EvalStopError` or succeeds and keeps the
episode's invariants (GPU conservation, each job ends once).
``benchmarks/research/fuzz_extended.py`` runs the same generator over thousands of configs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evalstop_gym  # noqa: F401  (registers the envs)
from evalstop_gym.envs.vector import MAX_NUM_ENVS, EvalStopVectorEnv
from evalstop_gym.errors import ConfigError, EvalStopError, is_integer
from evalstop_gym.sim import KDeclineRule, SimConfig, Simulator
from evalstop_gym.sim.pools import parse_pools, resolve_pools

BAD_POOLS = ["a100=²", "a100=٣", "a100=" + "9" * 5000, "a100=1e3", "a100=-1", "=", "", "a100=32,"]


@pytest.mark.parametrize("text", BAD_POOLS, ids=[t[:12] for t in BAD_POOLS])
def test_malformed_pools_strings_are_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="pools"):
        resolve_pools(text, 64)
    with pytest.raises(ConfigError, match="pools"):
        SimConfig(pools=text)


def test_pools_strings_keep_parsing_as_before() -> None:
    assert parse_pools("a100=32,h100=32") == {"a100": 32, "h100": 32}
    assert parse_pools(" a100 = 8 ") == {"a100": 8}


@pytest.mark.parametrize(
    "seed",
    [-1, float("nan"), 1.5, 3.0, True, np.bool_(True), "3", np.float64(2), 2**128, [1, -1], []],
)
def test_bad_simulator_seeds_are_a_config_error(seed: object) -> None:
    with pytest.raises(ConfigError, match="seed"):
        Simulator(SimConfig(n_jobs=5), seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [None, 0, 7, np.int64(7), np.uint64(7), 2**64 - 1, [1, 2]])
def test_good_simulator_seeds_draw_as_numpy_does(seed: object) -> None:
    sim = Simulator(SimConfig(n_jobs=5), seed)  # type: ignore[arg-type]
    if isinstance(seed, int | np.integer):
        ref = Simulator(SimConfig(n_jobs=5), int(seed))
        np.testing.assert_array_equal(sim.batch.arrival_h, ref.batch.arrival_h)


def test_a_simulator_needs_a_sim_config() -> None:
    with pytest.raises(ConfigError, match="config"):
        Simulator({"n_jobs": 5})  # type: ignore[arg-type]


def test_a_config_error_names_an_integer_too_long_to_print() -> None:
    with pytest.raises(ConfigError, match="n_jobs=<an integer of"):
        SimConfig(n_jobs=10**5000)


# ----------------------------------------------------------------- the extended fuzz

#: Hostile values: wrong types, NaN, inf, huge, negative, unicode, NumPy scalars.
HOSTILE: list[object] = [
    None, -1, 0, 1, 2, 3, 7, 65, 10**6 + 1, 2**63, 2**200, 10**5000, -0.0, 0.5, 1.5,
    float("nan"), float("inf"), float("-inf"), 1e308, True, False, "", "abc", "ü", "٣", "²",
    "a100=²", "a100=" + "9" * 5000, "gpu=64", "h100=32,a100=32", np.int64(3), np.int8(-1),
    np.uint64(2**64 - 1), np.float32("nan"), np.float64(2.0), np.bool_(True), [], [1], [1, -2],
    (), {}, {"a100": 8}, {"h100": float("nan")}, {"gpu": np.int64(8)}, {"²": 1}, b"x",
    complex(1, 1), object(),
]  # fmt: skip

#: Mostly valid env arguments (small episodes) each trial perturbs with hostile values.
VALID: dict[str, list[object]] = {
    "n_jobs": [3, 6, 12],
    "calibration": ["paper", "realistic", "hard"],
    "scheduler": ["fifo", "srtf-est", "tiresias", "loss-aware"],
    "reward": ["utility", "system"],
    "pools": [None, {"a100": 32, "h100": 32}, "v100=16,h100=48"],
    "costs": ["free", "realistic"],
    "restore_h": [None, 0.0, 0.5],
    "eval_cost_h": [None, 0.0, 0.1],
    "eval_window": [None, 1, 4],
}
SIM_FIELDS = {f.name for f in fields(SimConfig)}
TARGETS = ("flat", "cluster", "vector", "pools", "costs", "deprioritize", "simconfig", "simulator")


def _pick(rng: np.random.Generator, values: list[object]) -> object:
    return values[int(rng.integers(len(values)))]


def _kwargs(rng: np.random.Generator, keys: tuple[str, ...], n_bad: int) -> dict[str, object]:
    kw = {k: _pick(rng, v) for k, v in VALID.items() if rng.random() < 0.5}
    kw.setdefault("n_jobs", 6)
    for key in rng.choice(list(keys), size=min(n_bad, len(keys)), replace=False):
        kw[str(key)] = _pick(rng, HOSTILE)
    if is_integer(kw["n_jobs"]) and kw["n_jobs"] > 50:  # legal but slow: not hostile
        kw["n_jobs"] = 6
    return kw


def _check_sim(sim: Simulator) -> None:
    """GPU conservation at every event, and each job ends exactly once."""
    busy: dict[int, int] = {}
    ends: Counter[int] = Counter()
    for ev in sim.events or ():
        gpus = sim.jobs[ev.jid].gpus
        if ev.kind == "start":
            assert ev.jid not in busy
            busy[ev.jid] = gpus
        elif ev.kind in ("preempt", "complete", "stop"):
            assert busy.pop(ev.jid) == gpus
        if ev.kind in ("complete", "stop"):
            ends[ev.jid] += 1
        assert 0 <= ev.free_gpus <= sim.num_gpus
    assert not busy and sim.free == sim.num_gpus
    assert ends == Counter(range(len(sim.jobs)))


def _action(rng: np.random.Generator, space: object, hostile: bool) -> object:
    if hostile and rng.random() < 0.05:
        return _pick(rng, HOSTILE)
    return space.sample()  # type: ignore[attr-defined]


def _play(env: object, rng: np.random.Generator, seed: object, hostile_actions: bool) -> None:
    env.reset(seed=seed)  # type: ignore[attr-defined]
    space = env.action_space  # type: ignore[attr-defined]
    space.seed(int(rng.integers(2**31)))  # a trial replays from its seed alone
    for _ in range(400):
        try:
            out = env.step(_action(rng, space, hostile_actions))  # type: ignore[attr-defined]
        except ValueError as e:
            if "action" not in str(e):  # a bad action is refused with a ValueError naming it
                raise
            continue
        reward = np.asarray(out[1], dtype=float)
        assert np.isfinite(reward).all()
        if np.asarray(out[2]).all() and not hasattr(env, "num_envs"):
            break
    sim = getattr(getattr(env, "unwrapped", env), "sim", None)
    if sim is not None and sim.done:
        assert sim.free == sim.num_gpus


def _seed(rng: np.random.Generator) -> object:
    return _pick(rng, HOSTILE) if rng.random() < 0.3 else int(rng.integers(0, 2**31))


def trial(seed: int) -> None:
    """One hostile configuration: raises only the package's errors (or an invariant's failure).

    Returns normally when an episode ran to its end (or to the step bound).
    """
    rng = np.random.default_rng(seed)
    target = TARGETS[int(rng.integers(len(TARGETS)))]
    n_bad = int(rng.choice([0, 1, 1, 2]))  # many valid configs, so that episodes run
    if target in ("flat", "cluster"):
        kw = _kwargs(rng, tuple(VALID), n_bad)
        if target == "cluster" and rng.random() < 0.5:
            kw["max_jobs"] = _pick(rng, [*HOSTILE, 4, 8])
        env = gym.make(f"EvalStop{target.title()}-v0", disable_env_checker=True, **kw)
        try:
            _play(env, rng, _seed(rng), hostile_actions=True)
        finally:
            env.close()
    elif target == "vector":
        kw = _kwargs(rng, tuple(VALID), n_bad)
        if rng.random() < 0.3:
            kw["deprioritize"] = True
            kw.pop("pools", None)
        num = _pick(rng, HOSTILE) if rng.random() < 0.3 else int(rng.integers(1, 4))
        if is_integer(num) and 4 < num <= MAX_NUM_ENVS:  # legal but slow: not hostile
            num = 2
        venv = EvalStopVectorEnv(num, **kw)  # type: ignore[arg-type]
        seed_ = _seed(rng) if rng.random() < 0.8 else [_seed(rng) for _ in range(venv.num_envs)]
        _play(venv, rng, seed_, hostile_actions=True)
    elif target == "deprioritize":
        kw = _kwargs(rng, ("deprioritize", "n_jobs", "scheduler"), n_bad)
        kw["deprioritize"] = True if rng.random() < 0.8 else _pick(rng, HOSTILE)
        kw.pop("pools", None)
        if kw.get("scheduler") in VALID["scheduler"]:  # deprioritising needs a preemptive one
            kw["scheduler"] = _pick(rng, ["srtf-est", "tiresias"])
        env = gym.make("EvalStop-v0", disable_env_checker=True, **kw)
        _play(env, rng, _seed(rng), hostile_actions=True)
    else:  # the simulator directly
        fields = {
            "pools": ("pools", "placement", "num_gpus"),
            "costs": ("costs", "restore_h", "eval_cost_h"),
        }.get(target, ("n_jobs", "num_gpus", "load", "hack_fraction", "eval_noise", "pools"))
        kw = {k: v for k, v in _kwargs(rng, (), 0).items() if k in SIM_FIELDS}
        for key in rng.choice(list(fields), size=n_bad, replace=True):
            kw[str(key)] = _pick(rng, HOSTILE)
        if is_integer(kw.get("n_jobs")) and kw["n_jobs"] > 50:  # type: ignore[operator]
            kw["n_jobs"] = 6
        if is_integer(kw.get("num_gpus")) and kw["num_gpus"] > 4096:  # type: ignore[operator]
            kw["num_gpus"] = 64
        cfg = SimConfig(**kw)  # type: ignore[arg-type]
        sim_seed = _seed(rng) if target == "simulator" else int(rng.integers(0, 2**31))
        sim = Simulator(cfg, sim_seed, record_events=True)  # type: ignore[arg-type]
        sim.run(KDeclineRule(2) if rng.random() < 0.5 else None)
        _check_sim(sim)


#: What a hostile value may raise: the package's errors, and Gymnasium's for a single env's
#: seed (``Env.reset`` checks it before the env sees it).
ACCEPTED: tuple[type[BaseException], ...] = (EvalStopError, gym.error.Error)


RAN, REFUSED = "ran", "refused"


def outcome(seed: int) -> str:
    """:data:`RAN`, :data:`REFUSED` (an accepted error), or the raw error's kind."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trial(seed)
    except ACCEPTED as e:
        if "\n" in str(e):
            return f"multi-line {type(e).__name__}"
        return REFUSED
    except AssertionError as e:
        return f"invariant: {str(e)[:80]}"
    except Exception as e:
        frame = e.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        where = (
            f"{frame.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.tb_lineno}"
            if frame
            else ""
        )
        return f"{type(e).__name__} at {where}: {str(e)[:60]}"
    return RAN


#: Raw errors found in code this suite does not fix (benchmarks/research/fuzz_extended.py still
#: counts them): EvalStopCluster-v0's action message cannot print an int beyond str()'s limit.
KNOWN_RAW: tuple[str, ...] = ()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_hostile_configs_raise_only_the_packages_errors(seed: int) -> None:
    kind = outcome(seed)
    assert kind in (RAN, REFUSED) or kind.startswith(KNOWN_RAW), (seed, kind)


def test_the_documented_closed_form_of_the_system_return_holds() -> None:
    """The env docstring's form, -time_cost (sum JCT - A_0) + w sum Q, on random episodes."""
    from evalstop_gym.envs.evalstop import EvalStopEnv

    doc = " ".join((EvalStopEnv.__doc__ or "").split())
    assert "-time_cost * (sum_j JCT_j - A_0)" in doc
    rng = np.random.default_rng(0)
    for seed in range(12):
        tc, w = float(rng.choice([0.01, 0.5])), float(rng.choice([1.0, 2.0]))
        env = EvalStopEnv(
            reward="system", time_cost=tc, quality_weight=w, n_jobs=int(rng.integers(4, 30))
        )
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, r, done, _, _ = env.step(int(rng.random() < 0.2))
            total += float(r)
        rec = env.sim.record()
        quality = rec.true_eval[np.arange(len(rec.delivered)), rec.delivered].sum()
        first = Simulator(env.config, env.sim.seed)
        first.advance()  # to the first decision: its jobs-in-system area is A_0
        closed = -tc * ((rec.finish - rec.arrival).sum() - first.jobs_area) + w * quality
        assert total == pytest.approx(closed, rel=1e-9, abs=1e-9)


def test_cluster_env_names_a_huge_integer_action_without_printing_it() -> None:
    """An int beyond str()'s digit limit in an action is refused in one line, not by repr."""
    import gymnasium as gym
    import pytest

    env = gym.make("EvalStopCluster-v0", n_jobs=10, disable_env_checker=True)
    env.reset(seed=0)
    huge = [10**5000] + [0] * (env.unwrapped.max_jobs - 1)
    with pytest.raises(ValueError, match="is not allowed"):
        env.step(huge)
    env.close()
