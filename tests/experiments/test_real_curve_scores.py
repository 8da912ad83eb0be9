"""E7's scores on real corpora: the shipped TRL task, the Oracle as reference, the report."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from evalstop_gym.errors import ConfigError

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from evalstop_experiments import scoring
from evalstop_experiments.experiments import REPORT_ORDER
from evalstop_experiments.experiments import real_curves as e7
from evalstop_experiments.experiments import suite as e8
from evalstop_experiments.report import write_report
from evalstop_gym.corpus.packaged import TRL_CORPUS, TRL_CORPUS_QUICK, corpus_path
from evalstop_gym.suite import suite_task


def test_trl_task_uses_the_shipped_corpus_without_a_path(monkeypatch) -> None:
    """``trl-gao`` needs no path: the shipped corpus, or the one given."""
    monkeypatch.delenv("EVALSTOP_TRL_CORPUS", raising=False)
    kw = suite_task("trl-gao")
    assert kw["curves"] == str(corpus_path(TRL_CORPUS))
    assert kw["deliver"] == "best" and kw["eval_noise"] == 0.0
    quick = str(corpus_path(TRL_CORPUS_QUICK))
    assert suite_task("trl-gao", curves=quick)["curves"] == quick
    env = gym.make("EvalStop-v0", disable_env_checker=True, **{**kw, "n_jobs": 10})
    env.reset(seed=0)
    assert env.unwrapped.sim.curves.obs_eval.shape[0] == 10
    env.close()


def test_suite_keeps_the_trl_corpus_when_given_micro_rlhf_curves(monkeypatch, tmp_path) -> None:
    """``run_e8(curves=...)`` gives the micro-RLHF corpus to ``micro-rlhf`` only."""
    seen: dict[str, str | None] = {}

    def fake_run_task(task: str, *args, **kwargs) -> list:
        seen[task] = args[-1]
        return []

    monkeypatch.setattr(e8, "run_task", fake_run_task)
    micro, runs = str(tmp_path / "micro.jsonl"), str(tmp_path / "runs.jsonl")
    for path in (micro, runs):
        open(path, "w").close()
    e8.run_e8(["trl-gao"], range(2), factors=(1.0,), curves=micro)
    assert seen == {"trl-gao": None, "micro-rlhf": micro}
    # a held-out task named with curves replays them; micro-rlhf joins only when named
    seen.clear()
    e8.run_e8(["trl-heldout"], range(2), factors=(1.0,), curves=runs)
    assert seen == {"trl-heldout": runs}
    seen.clear()
    e8.run_e8(["trl-heldout", "micro-rlhf"], range(2), factors=(1.0,), curves=runs)
    assert seen == {"trl-heldout": runs, "micro-rlhf": runs}


@pytest.mark.parametrize(
    ("tasks", "curves", "match"),
    [
        (["hard-0.12", "nope"], None, "task='nope'"),
        (["hard-0.12", "hard-0.12"], None, "each task once"),
        (["hard-0.12", "trl-heldout"], "/nonexistent.jsonl", "curves="),
    ],
)
def test_the_suite_refuses_a_bad_task_before_playing_any(monkeypatch, tasks, curves, match) -> None:
    def played(*args, **kwargs):
        raise AssertionError("a task was played")

    monkeypatch.setattr(e8, "run_task", played)
    with pytest.raises(ConfigError, match=match):
        e8.run_e8(tasks, range(2), curves=curves)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """E7's quick scores on the quick TRL corpus only (tiny episodes)."""
    corpora = e7.score_corpora(None, quick=True)
    return e7.e7_scores(corpora, quick=True, seeds=2, n_jobs=20)


def test_scores_run_on_the_quick_trl_corpus_against_the_oracle(rows: list[dict]) -> None:
    """NoStop scores 0, the Oracle 1, and no stopper beats the Oracle (the held-out task: the CurveOracle 1)."""
    assert {r["task"] for r in rows} == {"trl-gao", "trl-heldout"}
    held = {r["stopper_kind"]: r for r in rows if r["task"] == "trl-heldout"}
    assert {r["reference"] for r in held.values()} == {"CurveOracle"}
    assert held[scoring.CURVE_ORACLE]["score"] == pytest.approx(1.0)
    rows = [r for r in rows if r["task"] == "trl-gao"]
    assert {r["reference"] for r in rows} == {"Oracle"}
    by = {r["stopper_kind"]: r for r in rows}
    assert by[scoring.NOSTOP]["score"] == 0.0
    assert by[scoring.ORACLE]["score"] == pytest.approx(1.0)
    tuned = {scoring.STOP_AT_TUNED, scoring.GATE_TUNED, scoring.CUSUM_TUNED, scoring.EVALSTOP}
    assert tuned <= set(by)
    for r in rows:  # nothing beats the privileged Oracle, whose reference gain is positive
        assert r["score"] <= 1.0 + 1e-9, r["stopper"]
        assert r["score_lo"] <= r["score"] <= r["score_hi"] + 1e-12


def test_scores_get_their_report_section_and_files(rows: list[dict], tmp_path: Path) -> None:
    """The scores land in E7_scores.csv/.md and in their own REPORT.md section."""
    files = e7.write_e7_scores(tmp_path, rows)
    assert [f.name for f in files] == ["E7_scores.csv", "E7_scores.md"]
    report = write_report(tmp_path, rows, header={}, plots=[], experiments=REPORT_ORDER).read_text()
    assert "## E7 — stoppers on real corpora" in report
    assert "| trl-gao | Oracle | Oracle | 1.00 [1.00, 1.00]" in report


def _stub(task: str, kw: dict) -> object:
    """A stand-in learned stopper: a module-level factory, so it crosses into workers."""
    from baselines.policies import StopAtProgress

    return StopAtProgress(0.5)


def test_extra_stoppers_plug_in_and_cross_into_workers() -> None:
    """An extra stopper is scored beside the scripted ones, also on a pool of two workers."""
    from evalstop_gym.parallel import Executor

    corpora = e7.score_corpora(None, quick=True)
    extra = (scoring.StopperSpec("Learned (stub)", _stub),)
    rows = e7.e7_scores(
        corpora, quick=True, seeds=2, n_jobs=10, executor=Executor(workers=2), extra_stoppers=extra
    )
    stub = [r for r in rows if r["stopper_kind"] == scoring.EXTRA]
    assert [r["stopper"] for r in stub] == ["Learned (stub)"] * len(corpora)
