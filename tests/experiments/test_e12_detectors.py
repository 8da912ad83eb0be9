"""The signal detectors (baselines/signals.py): their statistics, refusals and the env's view.

CUSUMs on training-side signals computed by hand; a job without the signal is never
stopped; the learned detector fits, pickles and ignores jobs without signals; and a
corpus run's observations (what E12 tunes and measures on) are exactly the env's rows.
"""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401  (registers the envs)
from baselines import Cusum
from baselines.signals import (
    AnyOf,
    LearnedDetector,
    SignalCusum,
    first_stop,
    run_observations,
    signal_cusum,
)
from evalstop_gym.corpus.packaged import TRL_CORPUS, load_corpus
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import suite_task


def _window(values, w=5):
    """A signal window ``[values..., mask...]`` holding ``values`` (the latest last)."""
    values = list(values)
    pad = w - len(values)
    return np.array([0.0] * pad + values + [0.0] * pad + [1.0] * len(values), np.float32)


def test_signal_cusum_by_hand() -> None:
    x = [0.0, 1.0, 3.0, 6.0]
    # differences 1, 2, 3 less a drift of 0.5: S = 0.5, 2.0, 4.5
    assert signal_cusum(x, 1, 0.5) == 4.5
    # second differences 1, 1: S = 0.5, 1.0
    assert signal_cusum(x, 1, 0.5, order=2) == 1.0
    # falling: the rises are forgiven, S stays 0
    assert signal_cusum(x, -1, 0.0) == 0.0
    assert signal_cusum([2.0, 1.0, 0.5], -1, 0.0) == 1.5
    assert signal_cusum([1.0], 1, 0.0) == 0.0


def test_a_signal_cusum_stops_on_its_signal_only() -> None:
    det = SignalCusum("entropy", threshold=1.0)  # entropy: the hacking direction is a fall
    assert det.obs_fields == ("entropy",) and det.direction == -1
    assert det.act({"entropy": _window([3.0, 2.5, 2.2])}) == 0  # S = 0.8
    assert det.act({"entropy": _window([3.0, 2.5, 1.9])}) == 1  # S = 1.1
    assert det.act({"entropy": _window([])}) == 0  # a job without the signal
    with pytest.raises(KeyError, match=r"'entropy'.*obs_fields"):
        det.act({"evals": _window([0.1])})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"signal": "gold", "threshold": 1.0}, "signal"),
        ({"signal": "proxy", "threshold": 1.0}, "signal"),  # hidden: the observable is "reward"
        ({"signal": "kl", "threshold": 0.0}, "threshold"),
        ({"signal": "kl", "threshold": 1.0, "drift": -1.0}, "drift"),
        ({"signal": "kl", "threshold": 1.0, "order": 3}, "order"),
        ({"signal": "kl", "threshold": 1.0, "direction": 0}, "direction"),
    ],
)
def test_bad_detector_arguments_name_the_field(kwargs, field) -> None:
    with pytest.raises(ConfigError, match=f"^{field}="):
        SignalCusum(**kwargs)


def test_any_of_fires_when_one_member_does_and_unites_their_fields() -> None:
    kl, ent = SignalCusum("kl", 0.5), SignalCusum("entropy", 0.5)
    both = AnyOf([Cusum(threshold=0.1), kl, ent])
    assert both.obs_fields == ("kl", "entropy")
    quiet = {"evals": _window([0.5, 0.6]), "kl": _window([0.0, 0.1]), "entropy": _window([2, 2])}
    assert both.act(quiet) == 0
    assert both.act({**quiet, "kl": _window([0.0, 0.9])}) == 1
    with pytest.raises(ConfigError, match="detectors"):
        AnyOf([])


def test_the_learned_detector_fits_pickles_and_skips_jobs_without_signals() -> None:
    rng = np.random.default_rng(0)
    runs, past = [], []
    for hacking in [True, False] * 6:
        slope = 0.3 if hacking else 0.02
        kl = np.cumsum(np.abs(rng.normal(slope, 0.01, 8)))
        runs.append(
            [
                {"kl": _window(kl[: c + 1], 8), "progress": np.array([(c + 1) / 8], np.float32)}
                for c in range(8)
            ]
        )
        past.append(np.arange(8) >= 4 if hacking else np.zeros(8, bool))
    det = LearnedDetector.fit(runs, past, ["kl"], threshold=0.5, name="L")
    stops = [first_stop(det, r) for r in runs]
    assert all(s is not None for s in stops[0::2]) and all(s is None for s in stops[1::2])
    again = pickle.loads(pickle.dumps(det))
    assert [again.probability(o) for o in runs[0]] == [det.probability(o) for o in runs[0]]
    empty = {"kl": _window([], 8), "progress": np.array([0.5], np.float32)}
    assert det.probability(empty) == 0.0 and det.act(empty) == 0


def _compare_with_env(kw: dict, seed: int, signals: list[str], scale=None) -> int:
    """Play ``kw`` with action 0; check each RLHF job's rows against ``run_observations``."""
    env = gym.make("EvalStop-v0", **kw)
    obs, _ = env.reset(seed=seed)
    core = env.unwrapped.core
    compared = 0
    for _ in range(200):
        sim, jid, ckpt = core.sim, core.jid, core.ckpt
        if sim.batch.job_type[jid] == RLHF:
            k = sim.curves.obs_eval.shape[1]
            mine = run_observations([sim.curves.signal_runs[jid]], k, signals, scale)[0]
            assert set(mine[ckpt - 1]) == set(obs)
            for f in obs:
                assert np.array_equal(obs[f], mine[ckpt - 1][f]), f
            compared += 1
        obs, _, term, trunc, _ = env.step(0)
        if term or trunc:
            break
    return compared


def test_run_observations_are_the_envs_rows_for_a_job_on_that_run() -> None:
    kw = {**suite_task("trl-gao"), "n_jobs": 30, "obs_fields": ["kl", "reward"]}
    assert _compare_with_env(kw, 2, ["kl", "reward"]) > 20


def test_a_signal_detector_leaves_synthetic_jobs_alone_in_the_env() -> None:
    kw = {**suite_task("trl-gao"), "n_jobs": 30, "obs_fields": ["kl"]}
    env = gym.make("EvalStop-v0", **kw)
    det = SignalCusum("kl", threshold=1e-9)  # fires on any KL rise
    obs, _ = env.reset(seed=4)
    core = env.unwrapped.core
    fired = {True: 0, False: 0}
    for _ in range(300):
        rlhf = bool(core.sim.batch.job_type[core.jid] == RLHF)
        action = det.act(obs)
        fired[rlhf] += action
        obs, _, term, trunc, _ = env.step(action)
        if term or trunc:
            break
    assert fired[False] == 0 and fired[True] > 0


def test_first_stop_never_stops_at_the_last_checkpoint() -> None:
    traces = load_corpus(TRL_CORPUS)[:3]
    obs = run_observations(traces, 20, ["kl"])
    always = SignalCusum("kl", threshold=1e-300)
    never = SignalCusum("kl", threshold=1e300)
    assert all(first_stop(never, o) is None for o in obs)
    assert all(first_stop(always, o) in range(19) for o in obs)


def test_run_observations_on_the_common_map_are_the_heldout_envs_rows() -> None:
    # The held-out task without its fresh noise, jitter and warp shows a job exactly the
    # recorded run on the corpus's common map: what E12 tunes and measures detectors on.
    from evalstop_gym.sim.real_curves import corpus_map

    kw = {
        **suite_task("trl-heldout"),
        "n_jobs": 30,
        "obs_fields": ["kl"],
        "curve_noise": "recorded",
        "curve_jitter": 0.0,
        "curve_warp": 0.0,
    }
    assert _compare_with_env(kw, 5, ["kl"], corpus_map(kw["curves"])) > 10


def _one_at_a_time_flags(det, observations) -> list[bool]:
    det.reset()
    return [int(det.act(o)) == 1 for o in observations]


def _detectors_on(signals: list[str]) -> list:
    from baselines import EvalStop, NoStop

    rng = np.random.default_rng(3)
    dets: list = [NoStop(), EvalStop(2)]
    for drift in (0.0, 0.002, 0.05):
        for thr in (1e-9, 0.01, 0.05, 0.3):
            dets.append(Cusum(threshold=thr, drift=drift))
            for s in signals:
                for order in (1, 2):
                    dets.append(SignalCusum(s, thr, drift, order))
    dets.append(AnyOf([Cusum(0.05, 0.0), SignalCusum(signals[0], 0.01, 0.0, 2)]))
    # Learned detectors with random coefficients: every feature column counts.
    for evals in (False, True):
        f = 4 * (len(signals) + evals) + 1
        mean, scale = rng.normal(0, 0.1, f), rng.uniform(0.1, 2.0, f)
        dets.append(
            LearnedDetector(tuple(signals), evals, mean, scale, rng.normal(0, 1, f), 0.1, 0.5, "L")
        )
    return dets


def _check_at_once(observations: list[list[dict]], signals: list[str]) -> int:
    """Every stateless detector's at-once decisions, statistics and features are the
    per-observation code's, bit for bit, on each job's observations."""
    from baselines.signals import (
        features,
        features_table,
        job_statistics,
        stop_flags,
    )
    from evalstop_experiments.experiments.signals import _eval_cusum

    fired = 0
    dets = _detectors_on(signals)
    for obs in observations:
        for det in dets:
            flags = stop_flags(det, obs)
            assert flags.tolist() == _one_at_a_time_flags(det, obs), det
            fired += int(flags.any())
            stats = job_statistics(det, obs)
            if isinstance(det, SignalCusum):
                assert stats.tobytes() == np.array([det.statistic(o) for o in obs]).tobytes()
            elif type(det) is Cusum:
                one = np.array([_eval_cusum(det, o) for o in obs], dtype=float)
                assert stats.tobytes() == one.tobytes()
            if isinstance(det, LearnedDetector):
                p = np.array([det.probability(o) for o in obs])
                assert det.probabilities(obs).tobytes() == p.tobytes()
        for evals in (False, True):
            table = features_table(obs, signals, evals)
            one = np.array([features(o, signals, evals) for o in obs])
            assert table.tobytes() == one.tobytes()
    return fired


def test_at_once_decisions_are_the_per_observation_ones_on_corpus_runs() -> None:
    traces = load_corpus(TRL_CORPUS)
    obs = run_observations(traces, 20, ["kl", "reward"])
    assert _check_at_once([o[:-1] for o in obs] + obs[:3], ["kl", "reward"]) > 0


@pytest.mark.parametrize("window", [None, 6])
def test_at_once_decisions_are_the_per_observation_ones_on_env_jobs(window) -> None:
    # Every job of an episode (RLHF jobs on corpus runs, synthetic jobs without signals),
    # and a window shorter than the history (the per-observation code decides).
    from evalstop_experiments.scoring import job_observations

    kw = {
        **suite_task("trl-heldout", split="test"),
        "n_jobs": 30,
        "obs_fields": ["kl", "reward"],
        "eval_window": window,
    }
    jobs = job_observations(kw, 3)
    assert _check_at_once([j.obs for j in jobs], ["kl", "reward"]) > 0
