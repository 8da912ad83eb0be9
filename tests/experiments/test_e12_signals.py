"""E12 (which signal warns first): its protocol on the shipped TRL corpus.

Tuned on the train runs of the fixed split only (the test runs can change without
moving a threshold), measured on the test runs, one row per detector and boundary, the
section and the CSV; the end-to-end ``reproduce --quick --experiments E12`` is slow.
"""

from __future__ import annotations

import csv
import dataclasses
import math

import numpy as np
import pytest

from evalstop_experiments.experiments import TITLES
from evalstop_experiments.experiments import signals as e12mod
from evalstop_gym.corpus.packaged import TRL_CORPUS, load_corpus
from evalstop_gym.corpus.split import split_runs
from evalstop_gym.errors import ConfigError


@pytest.fixture(scope="module")
def traces():
    return load_corpus(TRL_CORPUS)


@pytest.fixture(scope="module")
def rows(traces):
    return e12mod.e12(traces, corpus=TRL_CORPUS, n_boot=50)


def test_every_boundary_has_its_detectors(rows) -> None:
    by = {r["detector"]: r for r in rows}
    assert {r["boundary"] for r in rows} == {"evals", "signals", "both"}
    assert {"CUSUM on evals", "CUSUM: KL acceleration", "CUSUM: proxy-reward rise"} <= set(by)
    assert {"Learned (signals)", "Learned (signals + evals)"} <= set(by)
    r = by["CUSUM on evals"]
    assert r["n_train"] == r["n_test"] == 24 and r["k"] == 20
    assert r["signals"] == "reward,kl" and "entropy" in r["signals_missing"]
    for r in rows:
        for key in ("recall", "fpr", "warned_before_peak"):
            assert 0.0 <= r[key] <= 1.0
            assert r[f"{key}_lo"] <= r[key] <= r[f"{key}_hi"]
        assert math.isnan(r["score"]) and r["score_seeds"] == 0  # no seeds: no score


def test_thresholds_depend_on_the_train_runs_only(traces, rows) -> None:
    test = set(split_runs(traces).test)
    # Reverse every test run's curves: a different corpus on the test side only.
    changed = [
        dataclasses.replace(t, eval=t.eval[::-1].copy(), kl=t.kl[::-1].copy())
        if t.run_id in test
        else t
        for t in traces
    ]
    again = e12mod.e12(changed, corpus=TRL_CORPUS, n_boot=10)
    assert [r["params"] for r in again] == [r["params"] for r in rows]
    assert [r["recall"] for r in again] != [r["recall"] for r in rows]


def test_the_section_and_the_csv(rows, tmp_path) -> None:
    lines = e12mod.section(rows)
    assert lines[0].startswith("## E12")
    assert sum(line.startswith("| signals |") for line in lines) >= 3
    path = e12mod.write_e12(tmp_path, rows)
    back = list(csv.DictReader(path.open()))
    assert len(back) == len(rows) and list(back[0]) == list(e12mod.COLUMNS)
    assert e12mod.section([]) == []


def test_e12_is_a_choice_of_reproduce() -> None:
    assert "E12" in TITLES


def test_a_corpus_without_gold_is_refused(traces) -> None:
    bad = [dataclasses.replace(traces[0], gold=None, label=None), *traces[1:]]
    with pytest.raises(ConfigError, match="gold and label"):
        e12mod.e12(bad, corpus="x")


@pytest.mark.slow
def test_reproduce_quick_e12_writes_its_table_and_scores(tmp_path) -> None:
    from evalstop_cli.main import main

    main(["reproduce", "--quick", "--experiments", "E12", "--out", str(tmp_path)])
    report = (tmp_path / "REPORT.md").read_text()
    assert "## E12" in report and "| both |" in report
    back = list(csv.DictReader((tmp_path / "E12.csv").open()))
    assert all(r["score_seeds"] == str(e12mod.QUICK_SCORE_SEEDS) for r in back)
    assert all(r["score"] not in ("", "nan") for r in back)


def test_a_signal_some_runs_lack_gets_its_cusum_but_feeds_no_learned_model(traces) -> None:
    # As in a corpus with beta=0 runs, whose TRL logs carry no KL.
    cut = [dataclasses.replace(t, kl=None) if i % 3 == 0 else t for i, t in enumerate(traces)]
    rows = e12mod.e12(cut, corpus="mixed", n_boot=10)
    by = {r["detector"]: r for r in rows}
    assert "CUSUM: KL acceleration" in by
    assert "'kl'" not in by["Learned (signals)"]["params"]
    assert by["Learned (signals)"]["signals_logged"] == "reward 48/48, kl 32/48"


def test_stop_utility_by_hand() -> None:

    gold = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    evals = np.array([[0.1, 0.5, 0.3, 0.4], [0.2, 0.2, 0.1, 0.0]])
    runs = e12mod.Runs(
        [], [], np.array([True, False]), np.zeros(2, int), np.zeros(2), [], gold, evals
    )
    price = e12mod.Price(per_checkpoint=0.1, scale=2.0)
    # Run 0 stops after checkpoint 2: its best eval so far is checkpoint 1 (gold 2), 3 paid.
    # Run 1 never stops: it runs 4 checkpoints and keeps the first of its tied best evals.
    got = e12mod.stop_utility(np.array([2, -1]), runs, price)
    assert got == pytest.approx(((2 * 2 - 0.3) + (2 * 5 - 0.4)) / 2)


def test_utility_tuning_reaches_at_least_the_j_tuned_threshold_s_utility(traces, rows) -> None:
    split = split_runs(traces)
    from evalstop_gym.corpus.split import select

    train = e12mod.Runs.of(select(traces, split, "train"), 20, ["reward", "kl"])
    price = e12mod.task_price(e12mod.train_task(TRL_CORPUS))
    j_tuned = e12mod.tune_cusums(train, ["reward", "kl"])
    u_tuned = e12mod.tune_cusums(train, ["reward", "kl"], price)
    assert [d.tuning for d in u_tuned] == ["utility"] * len(u_tuned)
    for j, u in zip(j_tuned, u_tuned, strict=True):
        stops = np.array([e12mod._first_stop(j.policy, run) for run in train.observations])
        # The utility search tries every (drift, threshold) the J search does.
        assert u.train_j >= e12mod.stop_utility(stops, train, price) - 1e-12
    tuned = [r for r in rows if r["tuning"] == "utility"]
    assert tuned and all(r["detector"].endswith(e12mod.UTILITY_SUFFIX) for r in tuned)
    assert "EvalStop(k=2)" not in {r["detector"].removesuffix(e12mod.UTILITY_SUFFIX) for r in tuned}


@pytest.mark.parametrize("task", ["trl-heldout", "trl-gao"])
def test_scores_from_first_stops_are_the_played_episodes_scores(traces, task) -> None:
    # score_rows plays only the references; every detector's utility comes from its first
    # stop on each job's observations.  The numbers are score_task's, which plays them all.
    from evalstop_experiments.scoring import score_task
    from evalstop_gym.corpus.split import select
    from evalstop_gym.sim.real_curves import corpus_map
    from evalstop_gym.sim.signals import logged_signals
    from evalstop_gym.suite import suite_task

    signals = logged_signals(traces)
    tuning = e12mod.train_task(TRL_CORPUS)
    train = e12mod.Runs.of(
        select(traces, split_runs(traces), "train"), 20, signals, corpus_map(tuning["curves"])
    )
    dets = e12mod.detectors_for(train, signals, signals, (None, e12mod.task_price(tuning)))
    kw = suite_task(task, split="test") if task == "trl-heldout" else suite_task(task)
    kw["n_jobs"] = 40
    seeds = [0, 1]
    got = e12mod.score_rows(dets, kw, seeds)
    played = score_task("heldout", 1.0, kw, e12mod.score_stoppers(dets), seeds)
    assert len(got) == len(played) == len(dets) + 3
    for r in played:
        assert repr(got[r.stopper]) == repr((r.score, r.score_lo, r.score_hi)), r.stopper
