"""Scoring a held-out real-run task: train-run tuning, the CurveOracle, CIs over test runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")

from baselines.policies import EvalStop, NoStop
from evalstop_experiments import scoring
from evalstop_experiments.regime_fit import REFIT_NAME, fit_prior
from evalstop_gym.corpus import read_traces, write_traces
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.corpus.split import split_runs
from evalstop_gym.errors import ConfigError
from evalstop_gym.suite import is_heldout, suite_task, tuning_kwargs

CORPUS = str(corpus_path(TRL_CORPUS))


def test_the_reference_and_the_tuning_runs_of_a_heldout_task() -> None:
    kw = suite_task("trl-heldout")
    assert is_heldout(kw) and not is_heldout(suite_task("trl-gao"))
    assert scoring.reference_for(kw) is scoring.Reference.CURVE_ORACLE
    assert scoring.reference_for(suite_task("trl-gao")) is scoring.Reference.ORACLE
    assert tuning_kwargs(kw) == {**kw, "curve_split": "train"}
    assert tuning_kwargs(suite_task("hard-0.12")) == suite_task("hard-0.12")
    assert scoring.reference_stopper(kw).kind == scoring.CURVE_ORACLE


def test_the_floors_tune_on_the_train_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict] = []
    real = scoring.tune_floors

    def spy(kw: dict, seeds: object) -> dict:
        seen.append(kw)
        return real(kw, seeds)

    monkeypatch.setattr(scoring.task, "tune_floors", spy)  # where suite_stoppers looks it up
    kw = scoring.env_kwargs("trl-heldout", 1.0, 20)
    names = [s.kind for s in scoring.suite_stoppers("trl-heldout", kw, (2000,))]
    assert seen[0]["curve_split"] == "train"
    assert {scoring.BAYES, scoring.BAYES_REFIT, scoring.CURVE_ORACLE, scoring.ORACLE} <= set(names)


def test_job_terms_add_up_to_the_utility() -> None:
    kw = scoring.env_kwargs("trl-heldout", 1.0, 30)
    for policy in (NoStop(), EvalStop(2)):
        row = scoring.play(kw, 5, policy, job_terms=kw)
        assert float(np.sum(row["job_terms"])) == pytest.approx(row["utility"], abs=1e-9)
    runs = scoring.episode_job_runs(kw, 5)
    test = set(split_runs(read_traces(CORPUS)).test)
    assert {r for r in runs if r is not None} <= test


def test_the_run_bootstrap_resamples_runs_not_seeds() -> None:
    u0 = scoring.UnitSums({"a": 0.0, "b": 0.0, "c": 0.0}, np.zeros(3))
    ref = scoring.UnitSums({"a": 1.0, "b": 1.0, "c": 1.0}, np.zeros(3))
    same = scoring.UnitSums({"a": 0.5, "b": 0.5, "c": 0.5}, np.zeros(3))
    score, lo, hi = scoring.run_bootstrap_score(same, u0, ref)
    assert score == lo == hi == pytest.approx(0.5)  # every run alike: nothing to resample
    spread = scoring.UnitSums({"a": 0.0, "b": 0.5, "c": 1.0}, np.zeros(3))
    score, lo, hi = scoring.run_bootstrap_score(spread, u0, ref)
    assert score == pytest.approx(0.5) and lo < 0.3 and hi > 0.7
    groups = [["a", None, "b"], ["a", "c", None]]
    terms = [np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])]
    sums = scoring.unit_sums(groups, terms)
    assert sums.runs == {"a": 5.0, "b": 3.0, "c": 5.0}
    np.testing.assert_array_equal(sums.seeds, [2.0, 6.0])


def test_score_on_the_heldout_task_is_against_the_curve_oracle(tmp_path: Path) -> None:
    rows = scoring.score(EvalStop(2), "trl-heldout", seeds=range(2), n_jobs=20)
    row = rows[0]
    assert row.reference is scoring.Reference.CURVE_ORACLE
    assert row.score_lo <= row.score <= row.score_hi
    files = scoring.write_scores(tmp_path, [r.as_dict() for r in rows], "h", "held-out")
    assert "bootstrap over test runs" in files[1].read_text()


def test_the_refitted_prior_reads_the_train_runs_only(tmp_path: Path) -> None:
    traces = read_traces(CORPUS)
    test = set(split_runs(traces).test)
    changed = [dataclasses.replace(t, gold=t.gold * 3.0) if t.run_id in test else t for t in traces]
    path = tmp_path / "changed.jsonl"
    write_traces(changed, path)
    a, b = fit_prior(CORPUS), fit_prior(str(path))
    assert a.name == REFIT_NAME
    # the common map moves with the corpus's medians; the shape ranges do not
    for field in ("hack_drop", "healthy_drop", "hack_onset"):
        assert getattr(a, field) == pytest.approx(getattr(b, field))
    with pytest.raises(ConfigError, match="split"):
        fit_prior(CORPUS, "validation")


def test_the_refitted_bayes_is_fitted_on_the_train_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalstop_experiments import regime_fit

    seen: list[dict] = []
    real = regime_fit.fit_prior_on_task

    def spy(kw: dict, seeds: object, base: str = "hard") -> object:
        seen.append(kw)
        return real(kw, list(seeds)[:2], base)  # type: ignore[call-overload]

    monkeypatch.setattr(regime_fit, "fit_prior_on_task", spy)
    bayes = scoring.refit_bayes(scoring.env_kwargs("trl-heldout", 1.0, 20))
    assert seen[0]["curve_split"] == "train"
    assert bayes.config["calibration"] == REFIT_NAME
