"""The floor families: each rule by hand, and its array scores against the per-call ones."""

from __future__ import annotations

import functools

import numpy as np
import pytest

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from baselines.changepoint import Cusum, GatedCusum, cusum_statistic, cusum_table
from baselines.floors import (
    FLOOR_FAMILIES,
    DeclinesAfter,
    GainRule,
    LevelRule,
    LossStall,
    Patience,
    RunningMaxDrop,
)
from baselines.policies import StopAtProgress
from evalstop_experiments import scoring
from evalstop_gym import ConfigError
from evalstop_gym.envs.tables import observed
from evalstop_gym.sim.workloads import LORA, RLHF

TASKS = ("hard-0.12", "paper-0.12", "trl-gao")
SEEDS = (2000, 2001)


def _obs(evals, progress, job_type=RLHF, k=20, loss=None, declines=0.0) -> dict:
    def window(values):
        w = np.zeros(2 * k, np.float32)
        n = len(values)
        w[k - n : k] = values
        w[2 * k - n :] = 1.0
        return w

    return {
        "evals": window(evals),
        "loss": window(loss if loss is not None else [1.0] * len(evals)),
        "progress": np.array([progress], np.float32),
        "job_type": np.eye(3, dtype=np.float32)[job_type],
        "consecutive_declines": np.array([declines], np.float32),
    }


# ------------------------------------------------------------------ the rules by hand


def test_running_max_drop() -> None:
    rule = RunningMaxDrop(0.2, after=0.5)
    evals = [0.0, 0.5, 0.4, 0.25]
    assert rule.act(_obs(evals, 0.6)) == 1  # 0.5 - 0.25 >= 0.2
    assert rule.act(_obs(evals, 0.4)) == 0  # before the gate
    assert rule.act(_obs(evals[:3], 0.6)) == 0  # only 0.1 below
    assert rule.act(_obs(evals, 0.6, job_type=LORA)) == 0  # RLHF only
    assert "delta=0.2" in repr(rule) and "after=0.5" in repr(rule)


def test_declines_after_progress() -> None:
    rule = DeclinesAfter(2, after=0.5)
    assert rule.act(_obs([0.1], 0.6, declines=2)) == 1
    assert rule.act(_obs([0.1], 0.45, declines=3)) == 0
    assert rule.act(_obs([0.1], 0.6, declines=1)) == 0


def test_level_and_gain_rules() -> None:
    evals = [0.25, 0.5, 0.75, 0.875]
    assert LevelRule(0.8, m=2).act(_obs(evals, 0.2)) == 1  # (0.75 + 0.875) / 2
    assert LevelRule(0.85, m=2).act(_obs(evals, 0.2)) == 0
    assert LevelRule(0.1, m=5).act(_obs(evals, 0.2)) == 0  # fewer than m evals
    assert GainRule(0.6, m=1).act(_obs(evals, 0.2)) == 1  # 0.875 - 0.25
    assert GainRule(0.75, m=1).act(_obs(evals, 0.2)) == 0


def test_patience_counts_from_the_first_maximum() -> None:
    assert Patience(2).act(_obs([0.1, 0.5, 0.5, 0.3], 0.2)) == 1  # best at 2nd, two since
    assert Patience(2).act(_obs([0.1, 0.5, 0.6, 0.3], 0.2)) == 0
    assert Patience(1, after=0.5).act(_obs([0.5, 0.1], 0.2)) == 0


def test_loss_stall() -> None:
    rule = LossStall(0.05, m=2)
    assert rule.act(_obs([0.0] * 3, 0.2, loss=[1.0, 0.99, 0.98])) == 1
    assert rule.act(_obs([0.0] * 3, 0.2, loss=[1.0, 0.9, 0.8])) == 0
    assert rule.act(_obs([0.0] * 2, 0.2, loss=[1.0, 1.0])) == 0  # needs m + 1 losses


def test_gated_cusum_is_cusum_on_late_rlhf_runs() -> None:
    evals = [0.0, 0.1, 0.05, -0.05]
    assert Cusum(0.09).act(_obs(evals, 0.2, job_type=LORA)) == 1
    assert GatedCusum(0.09).act(_obs(evals, 0.2, job_type=LORA)) == 0
    assert GatedCusum(0.09, after=0.5).act(_obs(evals, 0.2)) == 0
    assert GatedCusum(0.09, after=0.5).act(_obs(evals, 0.5)) == 1


def test_cusum_table_is_the_statistic_of_every_prefix() -> None:
    ev = np.random.default_rng(0).normal(size=(4, 9))
    table = cusum_table(ev, 0.05)
    for j in range(4):
        for i in range(1, 10):
            assert table[j, i - 1] == cusum_statistic(ev[j, :i], 0.05)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RunningMaxDrop(0.0),
        lambda: RunningMaxDrop(0.1, after=1.5),
        lambda: DeclinesAfter(0),
        lambda: LevelRule(float("nan")),
        lambda: GainRule(0.1, m=0),
        lambda: Patience(1.5),
        lambda: LossStall(-0.1),
        lambda: GatedCusum(0.1, after=-0.1),
    ],
)
def test_bad_parameters_are_refused(make) -> None:
    with pytest.raises(ConfigError):
        make()


# ------------------------------------------------------------------ arrays = observations


@functools.cache
def _episodes(task: str) -> tuple[list, list]:
    kw = scoring.env_kwargs(task, 1.0, n_jobs=25)
    arrays = [scoring.episode_arrays(kw, s) for s in SEEDS]
    jobs = [scoring.job_observations(kw, s) for s in SEEDS]
    return arrays, jobs


@pytest.mark.parametrize("task", TASKS)
def test_the_arrays_are_what_every_observation_shows(task: str) -> None:
    arrays, jobs = _episodes(task)
    for ep, episode_jobs in zip(arrays, jobs):
        a = ep.arrays
        for j, job in enumerate(episode_jobs):
            assert np.array_equal(ep.values[j], job.values)
            for i, obs in enumerate(job.obs, start=1):
                assert np.array_equal(observed(obs["evals"]), a.evals32[j, :i])
                assert np.array_equal(observed(obs["loss"]).astype(float), a.loss[j, :i])
                assert float(obs["progress"][0]) == a.progress[i - 1]
                assert float(obs["consecutive_declines"][0]) == a.declines[j, i - 1]
                assert int(np.argmax(obs["job_type"])) == a.job_type[j]


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("family", FLOOR_FAMILIES, ids=lambda f: f.key)
def test_array_utilities_equal_the_per_call_ones(task: str, family) -> None:
    arrays, jobs = _episodes(task)
    candidates = family.grid([ep.arrays for ep in arrays])
    u = scoring.family_utilities(family, candidates, arrays)
    pick = np.random.default_rng(len(candidates)).choice(len(candidates), 8, replace=False)
    for p in pick:
        per_call = sum(scoring.offline_utility(candidates[p], ep) for ep in jobs)
        assert u[p] == per_call, repr(candidates[p])


@pytest.mark.parametrize("task", TASKS)
def test_tuning_picks_the_same_member_either_way(task: str) -> None:
    arrays, jobs = _episodes(task)
    for family in FLOOR_FAMILIES:
        candidates = family.grid([ep.arrays for ep in arrays])[::7]
        per_call = scoring.tune(candidates, jobs)
        u = scoring.family_utilities(family, candidates, arrays)
        assert candidates[int(np.argmax(u))] is per_call, family.key


def test_stop_by_type_covers_every_type_and_stop_at_only_rlhf() -> None:
    by_type = next(f for f in FLOOR_FAMILIES if f.key == scoring.BY_TYPE_TUNED).grid([])
    assert {c.job_types for c in by_type} == {("lora",), ("dpo",), ("rlhf",)}
    stop_at = next(f for f in FLOOR_FAMILIES if f.key == scoring.STOP_AT_TUNED).grid([])
    assert all(isinstance(c, StopAtProgress) and c.job_types == ("rlhf",) for c in stop_at)


def test_the_suite_plays_every_family_and_names_the_best() -> None:
    kw = scoring.env_kwargs("hard-0.12", 1.0, n_jobs=20)
    stoppers = scoring.suite_stoppers("hard-0.12", kw, val_seeds=SEEDS)
    kinds = [st.kind for st in stoppers]
    for kind in scoring.FLOOR_KINDS:
        assert kind in kinds
    tuned = scoring.tune_floors(kw, SEEDS)
    best = scoring.best_floor(tuned)
    row = next(st for st in stoppers if st.kind == scoring.BEST_FLOOR)
    assert row.name == f"Best floor ({best.family.label})" and repr(row.policy) == repr(best.policy)
    assert best.utility == max(t.utility for t in tuned.values() if t.family.floor)
    assert kinds[-3:] == [scoring.BAYES, scoring.CURVE_ORACLE, scoring.ORACLE]
    assert stoppers[-1].privileged and stoppers[-2].privileged
    assert not any(st.privileged for st in stoppers if st.kind == scoring.BAYES)
