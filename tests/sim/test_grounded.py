"""The grounded regime: its criterion, its calibration, its task, its fit command and Bayes' prior."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from evalstop_gym.corpus.analysis import (
    CRITERION_STATS,
    bootstrap_statistics,
    corpus_curves,
    criterion_check,
    curve_statistics,
    mann_whitney_auc,
)
from evalstop_gym.corpus.format import CurveTraceError, read_traces
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.calibration import CALIBRATIONS, GROUNDED, HARD, Calibration
from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.sim.synthetic_curves import rise_decline_draws, rlhf_true_curves
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import (
    SUITE_PRICE,
    SUITE_TASKS,
    price_rule,
    suite_task,
    task_hack_fraction,
)

X = np.linspace(0.0, 1.0, 11)


# ------------------------------------------------------------------ the criterion's statistics


def test_statistics_of_hand_made_curves() -> None:
    rise = X.copy()  # healthy, rising to the end: not flat, no decline
    plateau = np.minimum(X / 0.5, 1.0)  # healthy, flat over its last quarter
    hack = np.where(X <= 0.4, X / 0.4, 1.0 - 2.0 * (X - 0.4) / 0.6)  # peak 0.4, drop 2x gain
    s = curve_statistics(np.array([rise, plateau, hack, hack]), X)
    assert s["hack_share"] == 0.5
    assert s["peak_q25"] == s["peak_q50"] == s["peak_q75"] == pytest.approx(0.4)
    assert s["drop_q50"] == pytest.approx(2.0)
    assert s["healthy_flat_share"] == 0.5 and s["healthy_decline_share"] == 0.0
    # the hacking runs rise faster early than the healthy ones: AUC 1
    assert s["early_auc_10"] == s["early_auc_20"] == 1.0
    assert set(s) == set(CRITERION_STATS)


def test_mann_whitney_auc_counts_ties_half() -> None:
    assert mann_whitney_auc(np.array([1.0, 1.0]), np.array([True, False])) == 0.5
    assert mann_whitney_auc(np.array([2.0, 1.0]), np.array([True, False])) == 1.0
    assert np.isnan(mann_whitney_auc(np.array([1.0]), np.array([True])))


def test_statistics_refuse_a_grid_without_the_start() -> None:
    with pytest.raises(CurveTraceError, match="progress must rise from 0"):
        curve_statistics(np.zeros((2, 3)), np.array([0.3, 0.6, 1.0]))
    with pytest.raises(CurveTraceError, match="expected"):
        curve_statistics(np.zeros((2, 3)), X)


def test_corpus_intervals_hold_their_point_values_and_repeat() -> None:
    gold, x = corpus_curves(read_traces(corpus_path(TRL_CORPUS)))
    assert gold.shape == (48, 16) and x[0] == 0.0 and x[-1] == 1.0
    a = bootstrap_statistics(gold, x, reps=200, seed=3)
    assert a == bootstrap_statistics(gold, x, reps=200, seed=3)
    for value, lo, hi in a.values():
        assert lo <= value <= hi
    assert a["hack_share"][0] == pytest.approx(19 / 48)
    point = {k: v[0] for k, v in a.items()}
    assert all(criterion_check(a, point).values())


# ------------------------------------------------------------------ the calibration


def test_grounded_is_registered_and_the_frozen_ones_keep_their_fields() -> None:
    assert CALIBRATIONS["grounded"] is GROUNDED
    for name in ("paper", "realistic", "hard"):
        cal = CALIBRATIONS[name]
        assert (cal.hack_tau, cal.healthy_drop, cal.log_uniform) == (None, (0.0, 0.0), ())


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hack_tau": (0.0, 1.0)}, "hack_tau"),
        ({"healthy_drop": (0.3, 0.1)}, "healthy_drop"),
        ({"log_uniform": ("rlhf_base",)}, "log_uniform"),
        ({"log_uniform": ["rlhf_tau"]}, "log_uniform"),
        ({"log_uniform": ("hack_drop",), "hack_drop": (0.0, 1.0)}, "hack_drop"),
        ({"rlhf_shape": "gao"}, "rlhf_shape"),
    ],
)
def test_new_fields_are_validated(changes: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        replace(GROUNDED, **changes)
    with pytest.raises(ConfigError):
        Calibration("x", rlhf_shape="gao", healthy_drop=(0.0, 0.1))


def test_a_frozen_calibration_draws_three_uniform_rows() -> None:
    hacking = np.array([True, False, True, False])
    tau, onset, drop = rise_decline_draws(HARD, hacking, np.random.default_rng(5), 4)
    rng = np.random.default_rng(5)
    want = [rng.uniform(*r, size=4) for r in (HARD.rlhf_tau, HARD.hack_onset, HARD.hack_drop)]
    assert tau.tobytes() == want[0].tobytes() and onset.tobytes() == want[1].tobytes()
    assert drop.tobytes() == np.where(hacking, want[2], 0.0).tobytes()


def test_grounded_draws_follow_their_ranges() -> None:
    n = 4000
    hacking = np.arange(n) % 2 == 0
    tau, onset, drop = rise_decline_draws(GROUNDED, hacking, np.random.default_rng(0), n)
    assert tau[hacking].min() >= 0.1 and tau[hacking].max() <= 1.0
    assert tau[~hacking].max() <= 1.5
    # log-uniform: the median is the geometric mean of the range
    assert np.median(drop[hacking]) == pytest.approx(np.sqrt(0.85 * 4.0), rel=0.05)
    assert drop[~hacking].min() >= 0.0 and drop[~hacking].max() <= 0.2
    assert onset.min() >= 0.05 and onset.max() <= 0.85


def test_grounded_episode_runs_and_its_healthy_runs_may_decline() -> None:
    sim = Simulator(SimConfig(calibration="grounded", hack_fraction=0.4), 0)
    c, b = sim.curves, sim.batch
    healthy = (b.job_type == RLHF) & ~b.hacking
    ends_below = c.true_eval[healthy, -1] < c.true_eval[healthy].max(axis=1) - 1e-9
    assert 0.2 < ends_below.mean() < 1.0
    assert np.all(np.isinf(c.peak_progress[healthy]))
    hack = b.hacking
    assert np.all(c.peak_progress[hack] < 1.0)


def test_rlhf_true_curves_start_at_base_and_need_the_rise_decline_family() -> None:
    curves = rlhf_true_curves(GROUNDED, X, np.array([True, False]), np.random.default_rng(1))
    assert curves.shape == (2, 11)
    assert np.all((curves[:, 0] >= 0.2) & (curves[:, 0] <= 0.4))


# ------------------------------------------------------------------ the task and its price


def test_the_grounded_task() -> None:
    assert "grounded-0.08" in SUITE_TASKS
    assert SUITE_TASKS[:4] == ("hard-0.05", "hard-0.12", "realistic-0.12", "paper-0.12")
    kw = suite_task("grounded-0.08")
    assert kw["calibration"] == "grounded" and kw["eval_noise"] == 0.08
    assert kw["hack_fraction"] == 0.4 == task_hack_fraction("grounded")
    assert float(f"{price_rule('grounded'):.2g}") == kw["gpu_hour_price"] == 1.1e-3
    assert float(f"{price_rule():.2g}") == SUITE_PRICE == suite_task("hard-0.12")["gpu_hour_price"]
    assert "hack_fraction" not in suite_task("hard-0.12")
    assert task_hack_fraction("hard") == 0.6


# ------------------------------------------------------------------ the fit command


@pytest.mark.slow
def test_fit_regime_passes_for_grounded_and_fails_for_hard() -> None:
    pytest.importorskip("scipy")
    from evalstop_experiments.regime_fit import fit_regime, format_fit

    fit = fit_regime(calibration="grounded", runs=4000, reps=300, auc_seeds=2)
    assert fit.ok, format_fit(fit)
    assert fit.label_agreement > 0.95
    hard = fit_regime(calibration="hard", runs=2000, reps=200, auc_seeds=1)
    assert not hard.ok and not hard.passed["peak_q25"] and not hard.passed["healthy_flat_share"]


def test_fit_regime_command_prints_the_table(capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("scipy")
    from evalstop_cli.main import main

    args = ["curves", "fit-regime", "--calibration", "hard", "--runs", "500", "--reps", "50"]
    assert main([*args, "--auc-seeds", "1"]) == 1
    out = capsys.readouterr().out
    assert all(k in out for k in CRITERION_STATS)
    assert "FAIL" in out and out.rstrip().endswith("criterion: FAIL")


def test_fit_regime_refuses_bad_input() -> None:
    pytest.importorskip("scipy")
    from evalstop_cli.main import main
    from evalstop_experiments.regime_fit import regime_statistics

    assert main(["curves", "fit-regime", "--runs", "0"]) == 2
    with pytest.raises(ConfigError, match="rise-decline"):
        regime_statistics("paper", X, hack_fraction=0.4)


# ------------------------------------------------------------------ Bayes knows the family


def test_bayes_prior_of_the_grounded_family() -> None:
    from baselines.bayes import BayesStopper

    bayes = BayesStopper.for_task("grounded-0.08")
    assert bayes.config["hack_fraction"] == 0.4 and bayes.config["gpu_hour_price"] == 1.1e-3
    fam = bayes._families[RLHF]
    assert fam.phi.shape == (200, 20, 3) and fam.hacking.sum() == 100
    p = np.arange(1, 21) / 20
    collapse = 0.3 + 0.6 * np.minimum(p / 0.4, 1.0) - 1.5 * np.maximum(p - 0.4, 0.0) ** 2 / 0.36
    plateau = 0.3 + 0.6 * np.minimum(p / 0.4, 1.0)
    assert bayes.prob_hacking(RLHF, collapse[:14]) > 0.9
    assert bayes.prob_hacking(RLHF, plateau[:14]) < 0.3
    assert bayes.decide(RLHF, collapse[:14]) and not bayes.decide(RLHF, plateau[:6])
