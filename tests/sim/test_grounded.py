"""The grounded regime: its criterion, its calibration, its task, its fit command and Bayes' prior.

The regime is fitted to the packaged English RLHF corpus (its defaults and its draws below are
that fit's); the TRL corpus is checked as the criterion's second real corpus.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from evalstop_gym.corpus.analysis import (
    CRITERION_STATS,
    GOLD_NOISE,
    LATE_RISE_STATS,
    bootstrap_statistics,
    corpus_curves,
    corpus_noise,
    criterion_check,
    curve_statistics,
    late_rise_statistics,
    mann_whitney_auc,
)
from evalstop_gym.corpus.format import CurveTraceError, read_traces
from evalstop_gym.corpus.packaged import ENGLISH_CORPUS, TRL_CORPUS, corpus_path
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.calibration import CALIBRATIONS, GROUNDED, HARD, Calibration
from evalstop_gym.sim.config import SimConfig
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.sim.synthetic_curves import (
    TURN_BY,
    rate_to_tau,
    rise_decline_draws,
    rise_decline_peak,
    rise_decline_shape,
    rlhf_true_curves,
    saturating_shape,
    turning_rate,
)
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import (
    FORMER_TASKS,
    SUITE_PRICE,
    SUITE_TASKS,
    price_rule,
    registered_tasks,
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


def test_late_rise_statistics_of_hand_made_curves() -> None:
    # "late" is from the first checkpoint at or after progress 0.75: 0.8 on this grid
    rise = X.copy()  # straight: half its gain at mid-run, 0.2 from 0.8 on
    plateau = np.minimum(X / 0.5, 1.0)  # all its gain by mid-run, none late
    late = np.maximum(X - 0.5, 0.0) / 0.5  # nothing by mid-run, 0.4 from 0.8 on
    s = late_rise_statistics(np.array([rise, plateau, late]), X)
    assert set(s) == set(LATE_RISE_STATS)
    assert s["healthy_mid_gain"] == pytest.approx(0.5)
    assert s["healthy_late_rise"] == pytest.approx(0.2)
    hack = np.where(X <= 0.4, X / 0.4, 1.0 - 2.0 * (X - 0.4) / 0.6)
    assert all(np.isnan(v) for v in late_rise_statistics(np.array([hack]), X).values())


def test_corpus_noise_is_what_the_corpus_records_over_its_gain() -> None:
    traces = read_traces(corpus_path(ENGLISH_CORPUS))
    gold, _ = corpus_curves(traces)
    gain = np.mean(gold.max(axis=1) - gold[:, 0])
    noise = corpus_noise(traces)
    assert noise.gold_recorded
    want = np.mean([t.meta["gold_noise_sd"] for t in traces]) / gain
    assert noise.gold == pytest.approx(want)
    assert noise.eval == pytest.approx(np.mean([t.meta["eval_noise_sd"] for t in traces]) / gain)
    # the TRL corpus records no gold noise: the criterion's default, its eval noise as recorded
    trl = corpus_noise(read_traces(corpus_path(TRL_CORPUS)))
    assert not trl.gold_recorded and trl.gold == GOLD_NOISE and 0.1 < trl.eval < 0.2


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
        assert cal.rlhf_rate is None and cal.hack_rate is None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hack_tau": (0.0, 1.0)}, "hack_tau"),
        ({"healthy_drop": (0.3, 0.1)}, "healthy_drop"),
        ({"log_uniform": ("rlhf_base",)}, "log_uniform"),
        ({"log_uniform": ["rlhf_tau"]}, "log_uniform"),
        ({"log_uniform": ("hack_drop",), "hack_drop": (0.0, 1.0)}, "hack_drop"),
        ({"rlhf_shape": "gao"}, "rlhf_shape"),
        ({"rlhf_rate": (3.0, 1.0)}, "rlhf_rate"),
        ({"rlhf_rate": (-80.0, 1.0)}, "rlhf_rate"),
        ({"hack_rate": (2.0, 1.0)}, "hack_rate"),
        ({"rlhf_rate": None}, "hack_rate"),
    ],
)
def test_new_fields_are_validated(changes: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        replace(GROUNDED, **changes)
    with pytest.raises(ConfigError):
        Calibration("x", rlhf_shape="gao", healthy_drop=(0.0, 0.1))
    with pytest.raises(ConfigError, match="rlhf_shape"):
        Calibration("x", rlhf_shape="gao", rlhf_rate=(0.0, 1.0))


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
    rate = 1.0 / tau
    lo, hi = GROUNDED.rlhf_rate
    assert rate[~hacking].min() >= lo and rate[~hacking].max() <= hi
    assert convex_share(rate[~hacking]) == pytest.approx(-lo / (hi - lo), abs=0.04)
    # hacking runs draw their own rates (raised where needed to turn over: never lowered)
    hlo, hhi = GROUNDED.hack_rate
    assert rate[hacking].min() >= hlo and rate[hacking].max() <= hhi
    assert 0.3 < convex_share(rate[hacking]) < -hlo / (hhi - hlo) + 0.03  # sampling error
    # log-uniform: the median is the geometric mean of the range
    assert np.median(drop[hacking]) == pytest.approx(np.sqrt(np.prod(GROUNDED.hack_drop)), rel=0.05)
    assert drop[~hacking].min() >= 0.0 and drop[~hacking].max() <= GROUNDED.healthy_drop[1]
    assert onset.min() >= GROUNDED.hack_onset[0] and onset.max() <= GROUNDED.hack_onset[1]


def convex_share(rate: np.ndarray) -> float:
    """Share of rises that are convex (a negative rate)."""
    return float(np.mean(rate < 0))


def test_the_turning_rate_is_the_least_rate_at_which_a_hacking_run_turns_over() -> None:
    rng = np.random.default_rng(4)
    onset, drop = rng.uniform(0.05, 0.85, 500), rng.uniform(0.5, 1.5, 500)
    rate = turning_rate(onset, drop, -6.0, 10.0)
    assert rate.min() >= -6.0 and rate.max() <= 10.0
    assert np.all(rise_decline_peak(rate_to_tau(rate), onset, drop) <= TURN_BY)
    # at a rate a little below it (where it is above the range's floor) the run climbs
    # again somewhere in its last tenth
    raised = rate > -6.0
    assert raised.sum() > 100
    grid = np.linspace(TURN_BY, 1.0, 101)[None, :]
    o, d = onset[raised, None], drop[raised, None]
    for r, climbs in ((rate[raised], False), (rate[raised] - 0.05, True)):
        shape = rise_decline_shape(grid, rate_to_tau(r)[:, None], o, d)
        assert np.all((np.diff(shape, axis=1) > 1e-12).any(axis=1) == climbs)


def test_a_negative_rate_is_a_convex_rise() -> None:
    tau = rate_to_tau(np.array([-4.0, 0.0, 4.0]))
    shape = saturating_shape(X[None, :], tau[:, None])
    assert np.allclose(shape[:, 0], 0.0) and np.allclose(shape[:, -1], 1.0)
    mid = shape[:, 5]  # progress 0.5
    assert mid[0] < 0.2 and mid[1] == pytest.approx(0.5, abs=1e-5) and mid[2] > 0.8
    assert np.all(np.isfinite(shape))


def test_grounded_episode_runs_and_its_healthy_runs_may_decline() -> None:
    sim = Simulator(SimConfig(calibration="grounded", hack_fraction=0.4), 0)
    c, b = sim.curves, sim.batch
    healthy = (b.job_type == RLHF) & ~b.hacking
    ends_below = c.true_eval[healthy, -1] < c.true_eval[healthy].max(axis=1) - 1e-9
    assert 0.2 < ends_below.mean() < 1.0
    assert np.all(np.isinf(c.peak_progress[healthy]))
    hack = b.hacking & (b.job_type == RLHF)
    # convex rises included: a hacking run's rate is raised until it turns over in the run
    assert np.all(c.peak_progress[hack] <= TURN_BY)


def test_rlhf_true_curves_start_at_base_and_need_the_rise_decline_family() -> None:
    curves = rlhf_true_curves(GROUNDED, X, np.array([True, False]), np.random.default_rng(1))
    assert curves.shape == (2, 11)
    assert np.all((curves[:, 0] >= 0.2) & (curves[:, 0] <= 0.4))


# ------------------------------------------------------------------ the task and its price


def test_the_grounded_task() -> None:
    assert "grounded-0.05" in SUITE_TASKS
    assert SUITE_TASKS[:4] == ("hard-0.05", "hard-0.12", "realistic-0.12", "paper-0.12")
    kw = suite_task("grounded-0.05")
    assert kw["calibration"] == "grounded" and kw["eval_noise"] == 0.05
    # the former featured task keeps its name and its env id, at its own noise
    assert "grounded-0.08" in FORMER_TASKS and "grounded-0.08" in registered_tasks()
    assert suite_task("grounded-0.08") == {**kw, "eval_noise": 0.08}
    assert kw["hack_fraction"] == 0.6 == task_hack_fraction("grounded")
    assert float(f"{price_rule('grounded'):.2g}") == kw["gpu_hour_price"] == 1.1e-3
    assert float(f"{price_rule():.2g}") == SUITE_PRICE == suite_task("hard-0.12")["gpu_hour_price"]
    assert "hack_fraction" not in suite_task("hard-0.12")
    assert task_hack_fraction("hard") == 0.6


# ------------------------------------------------------------------ the fit command


@pytest.mark.slow
def test_fit_regime_passes_for_grounded_and_fails_for_hard() -> None:
    pytest.importorskip("scipy")
    from evalstop_experiments.regime_fit import fit_regime, format_fit

    fit = fit_regime(calibration="grounded", reps=1000, auc_seeds=2, beside=TRL_CORPUS)
    assert fit.ok, format_fit(fit)
    assert fit.side is not None and fit.side.name == ENGLISH_CORPUS
    # runs whose gain is small next to the gold's noise: the rule may label them either way
    assert fit.label_agreement > 0.78
    # the two real corpora disagree: one regime cannot pass the TRL corpus's drop interval
    assert fit.beside_regime is not None and fit.beside is not None
    lo, hi = fit.beside.stats["drop_q50"][1:]
    assert not lo <= fit.beside_regime["drop_q50"] <= hi
    # the eval noise the English corpus implies for the regime is the task's
    assert round(fit.implied_eval_noise, 2) == suite_task("grounded-0.05")["eval_noise"]
    hard = fit_regime(calibration="hard", runs=2000, reps=200, auc_seeds=1)
    assert not hard.ok and not hard.passed["peak_q25"] and not hard.passed["healthy_flat_share"]


def test_fit_regime_command_prints_the_table(capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("scipy")
    from evalstop_cli.main import main

    args = ["curves", "fit-regime", "--calibration", "hard", "--runs", "500", "--reps", "50"]
    assert main([*args, "--auc-seeds", "1"]) == 1
    out = capsys.readouterr().out
    assert all(k in out for k in (*CRITERION_STATS, *LATE_RISE_STATS))
    assert "FAIL" in out and out.rstrip().endswith("criterion: FAIL")
    assert "english_rlhf" in out and "trl_gao (48 runs)" in out  # the default pair
    # a packaged corpus by name, no column beside
    assert main([*args, "--auc-seeds", "1", "--corpus", "trl_gao", "--beside", "none"]) == 1
    out = capsys.readouterr().out
    assert "against trl_gao" in out and "48 runs" in out and "|" not in out


def test_fit_regime_refuses_bad_input() -> None:
    pytest.importorskip("scipy")
    from evalstop_cli.main import main
    from evalstop_experiments.regime_fit import regime_statistics

    assert main(["curves", "fit-regime", "--runs", "0"]) == 2
    assert main(["curves", "fit-regime", "--corpus", "no_such_corpus"]) == 2
    assert main(["curves", "fit-regime", "--beside", "no_such_corpus"]) == 2
    with pytest.raises(ConfigError, match="rise-decline"):
        regime_statistics("paper", X, hack_fraction=0.4)


# ------------------------------------------------------------------ Bayes knows the family


def test_bayes_prior_of_the_grounded_family() -> None:
    from baselines.bayes import BayesStopper

    bayes = BayesStopper.for_task("grounded-0.05")
    assert bayes.config["hack_fraction"] == 0.6 and bayes.config["gpu_hour_price"] == 1.1e-3
    fam = bayes._families[RLHF]
    assert fam.phi.shape == (200, 20, 3) and fam.hacking.sum() == 100
    p = np.arange(1, 21) / 20
    collapse = 0.3 + 0.6 * np.minimum(p / 0.4, 1.0) - 1.5 * np.maximum(p - 0.4, 0.0) ** 2 / 0.36
    plateau = 0.3 + 0.6 * np.minimum(p / 0.4, 1.0)
    rising = 0.3 + 0.6 * p  # a straight rise: the healthy runs that still gain late
    assert bayes.prob_hacking(RLHF, collapse[:14]) > 0.9
    # healthy runs that saturate early are common, and so are hacking runs not yet turned:
    # a plateau leaves about the prior (0.6)
    assert bayes.prob_hacking(RLHF, plateau[:14]) < 0.75
    assert bayes.prob_hacking(RLHF, rising[:14]) < 0.3
    assert bayes.decide(RLHF, collapse[:14]) and not bayes.decide(RLHF, plateau[:6])
    assert not bayes.decide(RLHF, rising[:14])
    # its rises are on the rate grid's midpoints, convex ones included (below p at p = 0.5)
    mid = fam.phi[:, 9, 1]  # the rise basis at progress 0.5
    assert np.isclose(p[9], 0.5) and (mid < 0.45).any() and (mid > 0.8).any()


def test_a_prior_refitted_on_the_english_runs_keeps_the_grounded_family() -> None:
    pytest.importorskip("scipy")
    from evalstop_experiments.regime_fit import prior_base, prior_from_curves

    assert prior_base(suite_task("english-heldout")) == "grounded"
    assert prior_base(suite_task("trl-heldout")) == "hard"
    assert prior_base(suite_task("hard-0.12")) == "hard"
    curves = rlhf_true_curves(GROUNDED, X, np.arange(40) % 2 == 0, np.random.default_rng(2))
    prior = prior_from_curves(curves, np.arange(40) % 2 == 0, X, "grounded")
    assert prior.rlhf_rate == GROUNDED.rlhf_rate and prior.healthy_drop == GROUNDED.healthy_drop


def test_bayes_simulates_every_grounded_hypothesis_and_the_heaviest_32_elsewhere() -> None:
    from baselines.bayes import TOP_HYPOTHESES, BayesStopper

    grounded, hard = BayesStopper.for_task("grounded-0.05"), BayesStopper.for_task("hard-0.12")
    assert grounded._families[RLHF].top == 200 and hard._families[RLHF].top == TOP_HYPOTHESES
    evals = 0.3 + 0.02 * np.arange(6)
    w, mean = grounded.lookahead_posterior(RLHF, evals)
    w_all, mean_all = grounded.posterior(RLHF, evals)
    assert np.array_equal(w, w_all) and np.array_equal(mean, mean_all)
    w, mean = hard.lookahead_posterior(RLHF, evals)
    w_all, _ = hard.posterior(RLHF, evals)
    assert len(w) == TOP_HYPOTHESES and np.isclose(w.sum(), 1.0)
    assert np.isclose(w.max(), w_all.max() / np.sort(w_all)[-TOP_HYPOTHESES:].sum())


def test_bayes_keeps_a_slowly_gaining_run_going_at_the_tasks_price() -> None:
    """A convex rise still gaining is worth its price once the late risers are in the look-ahead."""
    from dataclasses import replace

    from baselines.bayes import TOP_HYPOTHESES, BayesStopper

    bayes = BayesStopper.for_task("grounded-0.05")
    p = np.arange(1, 21) / 20
    rising = 0.3 + 0.4 * np.expm1(p) / np.expm1(1.0)  # slightly convex, gaining to the end
    assert not any(bayes.decide(RLHF, rising[:n]) for n in range(1, 16))
    # with the heaviest 32 only, it is stopped mid-run: the hypotheses that gain late are cut
    bayes._families[RLHF] = replace(bayes._families[RLHF], top=TOP_HYPOTHESES)
    assert any(bayes.decide(RLHF, rising[:n]) for n in range(1, 16))


def test_probing_policy_value_on_a_hand_computed_case() -> None:
    """Two hypotheses, one gaining and one losing, told apart by their next evals."""
    from baselines.bayes import FUTURES, BayesStopper

    bayes = BayesStopper.for_task("grounded-0.05")
    f = 4
    q = np.empty((f, 2, FUTURES))
    q[:, 0, :] = np.array([0.1, 0.2, 0.3, 0.4])[:, None]  # the gaining run's delivered score
    q[:, 1, :] = np.array([0.0, -0.1, -0.2, -0.3])[:, None]  # the losing run's
    y = np.empty((f, FUTURES, 2))
    y[..., 0], y[..., 1] = 1.0, 0.0  # their future evals
    # best: two checkpoints, then only the gaining run goes on to the end:
    # 0.5 x 0.4 + 0.5 x (-0.1); three checkpoints gives 0.5 x 0.4 + 0.5 x (-0.2)
    got = bayes._probe_value(np.array([0.5, 0.5]), q, y, np.zeros(f + 1))
    assert np.isclose(got, 0.15)
    # at 0.1 a checkpoint the gaining run is worth its price and no more:
    # 0.5 x (0.4 - 0.4) + 0.5 x (-0.1 - 0.2)
    price = 0.1 * np.arange(f + 1)
    assert np.isclose(bayes._probe_value(np.array([0.5, 0.5]), q, y, price), -0.15)


def test_bayes_probes_a_run_the_open_loop_look_ahead_would_stop_at_its_second_eval() -> None:
    """At twice the price an average run is break-even: a few evals tell whether it is worth it."""
    from dataclasses import replace

    from baselines.bayes import BayesStopper

    bayes = BayesStopper.for_task("grounded-0.05", price_factor=2.0)
    first = np.array([0.3, 0.32])
    assert not bayes.decide(RLHF, first)
    bayes._families[RLHF] = replace(bayes._families[RLHF], probe=False)
    assert bayes.decide(RLHF, first)


def test_a_twin_written_under_another_name_keeps_the_family_of_the_runs_it_models(tmp_path) -> None:
    """The twin set to eval batch 64 was written as english_twin_b64.jsonl, and its refitted
    Bayes took ``hard``'s family by that name, not the English runs' ``grounded``."""
    pytest.importorskip("scipy")
    from evalstop_experiments.regime_fit import prior_base
    from evalstop_gym.corpus.packaged import corpus_path

    twin = corpus_path("english_twin").read_text(encoding="utf-8").splitlines(keepends=True)
    renamed = tmp_path / "english_twin_b64.jsonl"
    renamed.write_text("".join(twin[:40]), encoding="utf-8")
    assert prior_base({"curves": str(renamed)}) == "grounded"
    other = tmp_path / "mine.jsonl"
    other.write_text(corpus_path("trl_gao").read_text(encoding="utf-8"), encoding="utf-8")
    assert prior_base({"curves": str(other)}) == "hard"
    (tmp_path / "bad.jsonl").write_text("not json\n", encoding="utf-8")
    assert prior_base({"curves": str(tmp_path / "bad.jsonl")}) == "hard"
