"""The benchmark suite (issue 10): deliver modes, tasks, Bayes, Oracle, scores, early-eval AUC."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from golden_episodes import float_kernels

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from baselines import EvalStop, NoStop, evaluate
from baselines.bayes import BayesStopper
from baselines.changepoint import Cusum, cusum_statistic
from baselines.floors import FirstEvalGate
from evalstop_experiments import scoring
from evalstop_experiments.early_auc import corpus_early_auc, cv_auc, roc_auc, sim_early_auc
from evalstop_gym import ConfigError, KDeclineRule, SimConfig, Simulator
from evalstop_gym.corpus import CurveTrace, write_traces
from evalstop_gym.sim.checkpoints import best_so_far
from evalstop_gym.sim.metrics import honest_metrics
from evalstop_gym.sim.synthetic_curves import rise_decline_shape, saturating_shape
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import SUITE_PRICE, SUITE_TASKS, price_rule, suite_task

# ------------------------------------------------------------------ deliver="final" / "best"

#: Metrics measured on the commit before `deliver` existed (1524925), same seeds, on a CPU
#: with AVX-512; without it numpy's float64 exp/log differ in the last bit, and so do the
#: values below marked so (measured from 81203af, see golden_episodes.fixture_path).
NO_AVX512 = float_kernels() == "no-avx512"
GOLDEN = {
    "paper": (0.7754223996931574, 0.03483924862011072, 9.222278064440362, 5055.1005321830235, 36),
    "realistic": (
        0.7850742832194715,
        0.07931110222879628,
        6.8073231803399326,
        3933.0683555683636 if NO_AVX512 else 3933.0683555683627,
        50,
    ),
}


@pytest.mark.parametrize("cal", sorted(GOLDEN))
def test_deliver_final_reproduces_todays_metrics_exactly(cal: str) -> None:
    m = Simulator(SimConfig(calibration=cal, n_jobs=60, eval_noise=0.05), 3).run(KDeclineRule(2))
    got = (m["mean_delivered_quality"], m["mean_regret"], m["mean_jct_h"], m["gpu_hours"])
    assert got == GOLDEN[cal][:4]
    assert m["n_stopped"] == GOLDEN[cal][4]


def test_env_return_with_deliver_final_is_unchanged() -> None:
    r = evaluate(EvalStop(2), [5], n_jobs=60, calibration="realistic", eval_noise=0.05)[0]
    assert r["return"] == (19.395965487810315 if NO_AVX512 else 19.39596548781031)
    assert r["mean_delivered_quality"] == 0.7967021118419806


def test_deliver_best_delivers_the_best_observed_checkpoint_of_completed_jobs() -> None:
    cfg = SimConfig(calibration="realistic", n_jobs=40, eval_noise=0.05, deliver="best")
    sim = Simulator(cfg, 1)
    sim.run(None)
    r = sim.record()
    best = best_so_far(sim.curves.obs_eval)[:, -1]
    assert np.array_equal(r.delivered, best)
    final = Simulator(SimConfig(calibration="realistic", n_jobs=40, eval_noise=0.05), 1)
    m_final = final.run(None)
    assert sim.metrics()["mean_delivered_quality"] != m_final["mean_delivered_quality"]
    with pytest.raises(ConfigError, match="deliver"):
        SimConfig(deliver="last")


@pytest.mark.parametrize("deliver", ["final", "best"])
def test_utility_in_closed_form_equals_the_env_return(deliver: str) -> None:
    kw = {"n_jobs": 40, "calibration": "hard", "eval_noise": 0.05, "deliver": deliver}
    kw["gpu_hour_price"] = 3e-3
    m = scoring.play(kw, 2, EvalStop(2))
    row = evaluate(EvalStop(2), [2], **kw)[0]
    assert m["utility"] == pytest.approx(row["return"], abs=1e-9)


# ------------------------------------------------------------------ calibration `hard`


def test_hard_curves_share_their_rise_before_the_onset() -> None:
    p = np.linspace(0.0, 1.0, 101)
    tau, onset = np.array([0.8]), np.array([0.4])
    hack = rise_decline_shape(p, tau, onset, np.array([0.7]))
    healthy = rise_decline_shape(p, tau, onset, np.array([0.0]))
    assert np.array_equal(hack[p <= 0.4], healthy[p <= 0.4])
    assert np.allclose(healthy, saturating_shape(p, tau))
    assert hack[-1] == pytest.approx(healthy[-1] - 0.7)


def test_hard_hacking_runs_peak_after_their_onset_and_before_the_end() -> None:
    sim = Simulator(SimConfig(calibration="hard"), 0)
    b, c = sim.batch, sim.curves
    hack = b.hacking & (b.job_type == RLHF)
    assert np.all((c.peak_progress[hack] > 0.2) & (c.peak_progress[hack] < 1.0))
    assert np.all(np.isinf(c.peak_progress[~hack]))


# ------------------------------------------------------------------ early-eval AUC


def test_roc_auc_on_a_hand_computed_case() -> None:
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75
    assert roc_auc(np.array([1.0, 1.0]), np.array([0, 1])) == 0.5  # a tie counts one half


def test_cv_auc_knows_separable_and_uninformative_features() -> None:
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.5
    assert cv_auc(np.where(y, 1.0, 0.0)[:, None] + 0.01 * rng.standard_normal((400, 1)), y) > 0.99
    assert abs(cv_auc(rng.standard_normal((400, 2)), y) - 0.5) < 0.1


def test_early_auc_separates_the_regimes() -> None:
    paper = sim_early_auc("paper", 0.0, range(3), 0.1)
    hard = sim_early_auc("hard", 0.0, range(3), 0.2)
    assert paper["noise_free"] > 0.95
    assert hard["noise_free"] <= 0.65


def test_corpus_early_auc_excludes_step_zero(tmp_path: Path) -> None:
    steps = np.arange(0, 110, 10)
    traces = []
    for i in range(20):
        label = i % 2 == 0
        ev = np.linspace(0, 1, 11) + (0.5 if label else 0.0) * (steps > 0)
        ev[0] = 0.0 if label else 1.0  # step 0 would give the label away
        traces.append(CurveTrace(f"r{i}", steps, ev, np.ones(11), label=label, gold=ev))
    p = tmp_path / "c.jsonl"
    write_traces(traces, p)
    auc = corpus_early_auc(traces, 0.1)
    assert auc["observed"] == 1.0  # the first eval after step 0 separates them, step 0 unused


# ------------------------------------------------------------------ tasks and price


def test_suite_task_names() -> None:
    kw = suite_task("hard-0.12")
    assert kw["calibration"] == "hard" and kw["eval_noise"] == 0.12
    assert kw["deliver"] == "best" and kw["gpu_hour_price"] == SUITE_PRICE
    assert kw["eval_window"] is None  # the whole history
    for bad in ("hard", "nosuch-0.1", "hard-x", "hard--1"):
        with pytest.raises(ConfigError, match="task"):
            suite_task(bad)
    with pytest.raises(ConfigError, match="curves"):
        suite_task("micro-rlhf", curves="/nonexistent.jsonl")


def test_the_price_is_its_rule_rounded() -> None:
    assert float(f"{price_rule():.2g}") == SUITE_PRICE


# ------------------------------------------------------------------ Bayes, Oracle, score


def _prob_hacking_records(task: str, seeds: range) -> tuple[np.ndarray, np.ndarray]:
    kw = suite_task(task)
    bayes = BayesStopper.for_task(task)
    probs, labels = [], []
    for s in seeds:
        sim = Simulator(SimConfig(calibration=kw["calibration"], eval_noise=kw["eval_noise"]), s)
        for j in np.flatnonzero(sim.batch.job_type == RLHF):
            ev = sim.curves.obs_eval[j]
            for n in (5, 10, 15, 19):
                probs.append(bayes.prob_hacking(RLHF, ev[: n * bayes.k // 20]))
                labels.append(bool(sim.batch.hacking[j]))
    return np.array(probs), np.array(labels)


@pytest.mark.parametrize("task", ["hard-0.12", "hard-0.05", "paper-0.05"])
def test_bayes_posterior_is_calibrated(task: str) -> None:
    probs, labels = _prob_hacking_records(task, range(2))
    sure_hack, sure_healthy = probs > 0.9, probs < 0.1
    assert sure_hack.sum() >= 20  # (in `hard` a run is rarely sure to be healthy before its end)
    assert labels[sure_hack].mean() >= 0.9
    if sure_healthy.sum() >= 20:
        assert (~labels[sure_healthy]).mean() >= 0.9


@pytest.mark.parametrize("task", [*SUITE_TASKS, "micro-rlhf"])
def test_bayes_never_beats_the_oracle(task: str, tmp_path: Path) -> None:
    curves = None
    if task == "micro-rlhf":
        steps = np.arange(11) * 10
        hack = np.array([0, 1, 2, 3, 4, 3, 2, 1, 0, -1, -2], float)
        healthy = np.arange(11, dtype=float)
        traces = [
            CurveTrace(f"r{i}", steps, g + 0.1 * i, np.linspace(2, 1, 11), gold=g, label=lab)
            for i, (g, lab) in enumerate([(hack, True), (healthy, False)] * 3)
        ]
        curves = str(tmp_path / "corpus.jsonl")
        write_traces(traces, curves)
    kw = scoring.env_kwargs(task, 1.0, n_jobs=40, curves=curves)
    bayes = BayesStopper.from_env_kwargs(kw)
    for seed in (0, 1):
        u_bayes = scoring.play(kw, seed, bayes)["utility"]
        oracle = scoring.play(kw, seed, None)
        assert u_bayes <= oracle["utility"] + 1e-9
        assert oracle["regret_vs_oracle"] == pytest.approx(0.0, abs=1e-9)
        assert scoring.play(kw, seed, NoStop())["utility"] <= oracle["utility"] + 1e-9


def test_normalised_score_on_a_hand_computed_case() -> None:
    score, lo, hi = scoring.normalised_score([1.0, 1.0], [0.0, 0.0], [2.0, 4.0], n_boot=4000)
    assert score == pytest.approx(1 / 3)
    # Resampling two seeds gives 1/2 (seed 0 twice), 1/4 (seed 1 twice) or 1/3.
    assert lo == pytest.approx(0.25) and hi == pytest.approx(0.5)
    assert scoring.normalised_score([3.0, 5.0], [1.0, 1.0], [3.0, 5.0]) == (1.0, 1.0, 1.0)
    assert scoring.normalised_score([1.0, 1.0], [1.0, 1.0], [3.0, 5.0])[0] == 0.0


def test_honest_metrics_count_pre_peak_stops_apart() -> None:
    kw = {"n_jobs": 60, "calibration": "paper", "eval_noise": 0.05, "deliver": "best"}
    kw["gpu_hour_price"] = SUITE_PRICE
    m = scoring.play(kw, 0, EvalStop(2))
    assert m["recall_after_peak"] + m["stops_before_peak_frac"] == pytest.approx(m["recall"])
    assert 0 <= m["fpr_rlhf"] <= 1 and m["killed_healthy_gpu_hours"] >= 0
    none = scoring.play(kw, 0, NoStop())
    assert none["fpr_rlhf"] == 0 and none["killed_healthy_gpu_hours"] == 0
    assert none["total_gpu_hours"] > m["total_gpu_hours"]
    assert m["regret_vs_oracle"] >= 0


def test_every_evaluate_row_carries_the_honest_metrics_the_suite_measures() -> None:
    """``baselines.evaluate`` rows and the suite's episodes share one metrics surface."""
    from evalstop_gym.sim.metrics import HONEST_METRIC_KEYS

    kw = {"n_jobs": 40, "calibration": "hard", "eval_noise": 0.05, "deliver": "best"}
    kw["gpu_hour_price"] = SUITE_PRICE
    row = evaluate(EvalStop(2), [1], **kw)[0]
    played = scoring.play(kw, 1, EvalStop(2))
    for key in HONEST_METRIC_KEYS:
        assert row[key] == played[key], key
    assert row["utility"] == pytest.approx(row["return"], abs=1e-9)


def test_honest_metrics_on_a_hand_built_record() -> None:
    from evalstop_gym.sim.metrics import EpisodeRecord

    true = np.array([[0.1, 0.5, 0.2], [0.1, 0.2, 0.3]])
    obs = true.copy()
    r = EpisodeRecord(
        num_gpus=8,
        n_ckpt=3,
        arrival=np.zeros(2),
        finish=np.ones(2),
        first_start=np.zeros(2),
        job_type=np.array([RLHF, RLHF]),
        gpus=np.array([1, 1]),
        duration=np.array([3.0, 3.0]),
        hacking=np.array([True, False]),
        peak_progress=np.array([2 / 3, np.inf]),
        stopped=np.array([True, True]),
        ckpt_done=np.array([2, 1]),
        delivered=np.array([1, 0]),
        true_eval=true,
        gpu_hours=np.array([2.0, 1.0]),
    )
    m = honest_metrics(r, obs, price=0.01, deliver_best=True)
    assert m["fpr_rlhf"] == 1.0 and m["killed_healthy_gpu_hours"] == 1.0
    assert m["recall_after_peak"] == 1.0 and m["stops_before_peak_frac"] == 0.0
    # job 0: V2 - V1 = (0.5 - 0.02) - (0.1 - 0.01); job 1 stopped at 1: 0.
    assert m["utility"] == pytest.approx(0.39)
    # the oracle runs job 1 to the end: (0.3 - 0.03) - (0.1 - 0.01) = 0.18 more
    assert m["regret_vs_oracle"] == pytest.approx(0.18)


# ------------------------------------------------------------------ floors and CUSUM


def _obs(evals: list[float], progress: float, job_type: int = RLHF, k: int = 20) -> dict:
    w = np.zeros(2 * k, np.float32)
    n = len(evals)
    w[k - n : k] = evals
    w[2 * k - n :] = 1.0
    return {
        "evals": w,
        "progress": np.array([progress], np.float32),
        "job_type": np.eye(3, dtype=np.float32)[job_type],
    }


def test_cusum_statistic_by_hand() -> None:
    assert cusum_statistic(np.array([0.0, 0.1, 0.05, -0.05, 0.0]), 0.0) == pytest.approx(0.1)
    assert cusum_statistic(np.array([0.0, -0.1, -0.2]), 0.05) == pytest.approx(0.1)
    assert Cusum(0.09).act(_obs([0.0, 0.1, 0.05, -0.05], 0.2)) == 1
    assert Cusum(0.2).act(_obs([0.0, 0.1, 0.05, -0.05], 0.2)) == 0


def test_first_eval_gate() -> None:
    gate = FirstEvalGate(0.5, 0.3)
    high = [0.4, 0.5] + [0.6] * 8  # 10 of 20 checkpoints: progress 0.5
    assert gate.act(_obs(high, 0.5)) == 1
    assert gate.act(_obs(high[:9], 0.45)) == 0  # not yet at 0.5
    assert gate.act(_obs([0.1, 0.2] + [0.6] * 8, 0.5)) == 0  # first evals low
    assert gate.act(_obs(high, 0.5, job_type=0)) == 0  # RLHF only
    assert np.allclose(gate.first_evals(_obs(high, 0.5)), [0.4, 0.5])


def test_stop_positions_on_a_hand_built_record(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from evalstop_experiments.plots import plot_stop_positions
    from evalstop_experiments.scoring import stop_positions

    rec = SimpleNamespace(
        n_ckpt=10,
        ckpt_done=np.array([4, 10, 6, 10]),
        hacking=np.array([1, 1, 0, 0]),
        peak_progress=np.array([0.5, 0.3, 0.0, 0.0]),
    )
    hack, healthy = stop_positions(rec)
    np.testing.assert_allclose(hack, [-0.1, 0.7])
    np.testing.assert_allclose(healthy, [0.6, 1.0])
    path = plot_stop_positions({"a": (hack, healthy), "b": (hack[:0], healthy)}, tmp_path / "s.png")
    assert path.stat().st_size > 0


def test_the_table_shows_no_ratio_where_the_reference_gain_is_not_significant() -> None:
    def row(kind: str, factor: float, score: float, lo: float) -> dict:
        return {
            "task": "hard-0.12", "price_factor": factor, "reference": "Bayes",
            "stopper": kind, "stopper_kind": kind, "score": score, "score_lo": score - 1,
            "score_hi": score + 1, "u_minus_u0_lo": lo, "delta_jct_pct": -1.0,
        }  # fmt: skip

    rows = [
        row("EvalStop", 0.5, -350.91, -3.0),
        row("Bayes", 0.5, 1.0, -0.2),  # the reference's gain CI reaches 0 at 0.5x
        row("EvalStop", 1.0, 0.25, 0.1),
        row("Bayes", 1.0, 1.0, 0.3),
    ]
    assert scoring.unreliable_prices(rows) == {("hard-0.12", 0.5)}
    lines = scoring.markdown_table(rows).splitlines()
    evalstop = next(line for line in lines if "| EvalStop |" in line)
    assert "| n/a | 0.25 [-0.75, 1.25] |" in evalstop
    assert "-350.91" not in scoring.markdown_table(rows)


# ------------------------------------------------------------------ best floor, CI coverage


def _row(kind: str, stopper: str, per_seed: list, score: float = 0.5) -> scoring.ScoreRow:
    return scoring.ScoreRow(
        task="hard-0.12", price_factor=1.0, gpu_hour_price=SUITE_PRICE, stopper_kind=kind,
        stopper=stopper, params="", reference=scoring.Reference.BAYES, seeds=len(per_seed),
        score=score, score_lo=score - 0.1, score_hi=score + 0.1, u_minus_u0=1.0,
        u_minus_u0_lo=0.5, u_minus_u0_hi=1.5, delta_jct_pct=0.0, metrics={},
        test_seeds=tuple(range(len(per_seed))), per_seed=tuple(per_seed),
    )  # fmt: skip


def test_the_table_names_the_best_floor_family_at_each_price() -> None:
    best = _row(scoring.BEST_FLOOR, "Best floor (Running-max drop)", []).as_dict()
    other = {**best, "price_factor": 2.0, "stopper": "Best floor (Level)"}
    bayes = {**best, "stopper_kind": scoring.BAYES, "stopper": "Bayes"}
    rows = [best, other, bayes, {**bayes, "price_factor": 2.0}]
    line = next(x for x in scoring.markdown_table(rows).splitlines() if "Best floor" in x)
    assert "| Best floor |" in line
    assert "(Running-max drop) |" in line and "(Level) |" in line


def test_coverage_check_scores_blocks_of_seeds_against_the_full_ci() -> None:
    from evalstop_experiments.stats import seed_blocks

    assert [len(b) for b in seed_blocks(31, 3)] == [11, 10, 10]
    with pytest.raises(ConfigError, match="blocks"):
        seed_blocks(3, 4)
    # U - U0 = 1 on every seed; Uref - U0 = 2 on the first 10 seeds, then 4: blocks 0.5, 0.25.
    per_seed = [(1.0, 0.0, 2.0 if i < 10 else 4.0) for i in range(30)]
    row = _row(scoring.BEST_FLOOR, "Best floor (Level)", per_seed, score=0.3)
    (check,) = scoring.coverage_check([row, _row(scoring.NOSTOP, "NoStop", per_seed)])
    assert [b[0] for b in check["blocks"]] == [0.5, 0.25, 0.25]
    assert check["inside"] == [False, True, True]
    assert "1 of 3" not in scoring.coverage_table([check])
    assert "2 of 3 block scores" in scoring.coverage_table([check])
    assert scoring.coverage_check([_row(scoring.BEST_FLOOR, "b", per_seed[:5])]) == []


@pytest.mark.slow
def test_benchmark_suite_draws_fresh_seeds_and_writes_them_with_the_coverage(tmp_path) -> None:
    from evalstop_cli.main import main

    out = tmp_path / "out"
    argv = ["benchmark", "--suite", "--tasks", "paper-0.12", "--seeds", "6", "--n-jobs", "15"]
    assert main([*argv, "--fresh-seeds", "--out", str(out)]) == 0
    md = (out / "E8.md").read_text()
    assert "drawn at scoring time from OS entropy" in md and "CI coverage" in md
    assert "| Best floor |" in md and "| CurveOracle |" in md
    seeds = md.split("seed space: ")[1].split(".")[0].split(", ")
    assert len(seeds) == 6 and all(0 <= int(s) < 2**64 for s in seeds)
