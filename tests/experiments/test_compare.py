"""Two stoppers on the same episodes: ``evalstop_experiments.compare`` and its paired statistics."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy")

from baselines.policies import EvalStop, NoStop, StopAtProgress
from evalstop_experiments import Comparison, compare, compare_each, score, scoring
from evalstop_gym import ConfigError

SMALL = {"seeds": range(3), "n_jobs": 20}


def test_the_paired_score_difference_on_a_hand_computed_case() -> None:
    u0, uref = [0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]
    ua, ub = [1.0, 2.0, 1.0, 2.0], [0.0, 1.0, 0.0, 1.0]
    sa, sb, d, lo, hi = scoring.paired_score_diff(ua, ub, u0, uref)
    assert (sa, sb, d) == (0.75, 0.25, 0.5)
    assert lo == hi == 0.5  # a constant lead: every resample gives it
    ub = [0.0, 2.0, 1.0, 3.0]  # no lead on average, spread by seed
    sa, sb, d, lo, hi = scoring.paired_score_diff(ua, ub, u0, uref)
    assert d == pytest.approx(sa - sb) == pytest.approx(-0.0) and lo < 0 < hi


def test_the_run_bootstrap_of_the_difference_on_a_hand_computed_case() -> None:
    zeros = np.zeros(2)
    u0 = scoring.UnitSums({"a": 0.0, "b": 0.0, "c": 0.0}, zeros)
    ref = scoring.UnitSums({"a": 2.0, "b": 2.0, "c": 2.0}, zeros)
    ua = scoring.UnitSums({"a": 1.0, "b": 1.5, "c": 2.0}, zeros)
    ub = scoring.UnitSums({"a": 0.5, "b": 1.0, "c": 1.5}, zeros)  # ua's less 0.5 each run
    sa, sb, d, lo, hi = scoring.run_bootstrap_score_diff(ua, ub, u0, ref)
    assert (sa, sb, d) == pytest.approx((0.75, 0.5, 0.25))
    assert lo == pytest.approx(0.25) and hi == pytest.approx(0.25)
    # the scores are run_bootstrap_score's, resampled with the same weights
    assert sa == pytest.approx(scoring.run_bootstrap_score(ua, u0, ref)[0])
    ub = scoring.UnitSums({"a": 2.0, "b": 1.5, "c": 1.0}, zeros)  # ahead on one run, behind on one
    _, _, d, lo, hi = scoring.run_bootstrap_score_diff(ua, ub, u0, ref)
    assert d == pytest.approx(0.0) and lo < 0 < hi


def test_compare_scores_both_as_score_does_and_pairs_their_difference() -> None:
    rows = compare(EvalStop(2), StopAtProgress(0.5), "hard-0.12", prices=(1.0, 2.0), **SMALL)
    assert [type(r) for r in rows] == [Comparison, Comparison]
    for r, factor in zip(rows, (1.0, 2.0)):
        alone = score(EvalStop(2), "hard-0.12", prices=(factor,), **SMALL)[0]
        other = score(StopAtProgress(0.5), "hard-0.12", prices=(factor,), **SMALL)[0]
        assert r.score_a == pytest.approx(alone.score) and r.score_b == pytest.approx(other.score)
        assert r.diff == pytest.approx(r.score_a - r.score_b)
        assert r.diff_lo <= r.diff <= r.diff_hi and r.u_diff_lo <= r.u_diff <= r.u_diff_hi
        assert r.u_diff == pytest.approx(alone.u_minus_u0 - other.u_minus_u0)
        assert r.reference is scoring.Reference.BAYES and r.seeds == 3
        assert r.as_dict()["reference"] == "Bayes"
        assert (r.a, r.b) == (alone.stopper, other.stopper)


def test_a_stopper_against_itself_differs_by_nothing() -> None:
    for task in ("hard-0.05", "trl-heldout"):
        (r,) = compare(EvalStop(2), EvalStop(2), task, names=("first", "second"), **SMALL)
        assert (r.a, r.b) == ("first", "second")
        assert r.score_a == r.score_b
        assert r.diff == r.diff_lo == r.diff_hi == 0.0
        assert r.u_diff == r.u_diff_lo == r.u_diff_hi == 0.0


def test_on_the_heldout_task_the_difference_is_resampled_by_run() -> None:
    (r,) = compare(EvalStop(2), NoStop(), "trl-heldout", **SMALL)
    alone = score(EvalStop(2), "trl-heldout", **SMALL)[0]
    assert r.reference is scoring.Reference.CURVE_ORACLE
    # against NoStop the difference is the score itself, with the score's run interval
    assert r.score_b == 0.0
    assert (r.diff, r.diff_lo, r.diff_hi) == pytest.approx(
        (alone.score, alone.score_lo, alone.score_hi)
    )
    assert (r.u_diff_lo, r.u_diff_hi) == pytest.approx((alone.u_minus_u0_lo, alone.u_minus_u0_hi))


class CountingEvalStop(EvalStop):
    """EvalStop(k) that counts the episodes it starts (``reset`` calls)."""

    def __init__(self, k: int) -> None:
        super().__init__(k)
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1
        super().reset()


@pytest.mark.parametrize("task", ["hard-0.12", "trl-heldout"])
def test_compare_each_gives_every_pairs_comparison_from_one_play(task) -> None:
    mine = [CountingEvalStop(2), StopAtProgress(0.5)]
    others = [NoStop(), EvalStop(3), StopAtProgress(0.7)]
    rows = compare_each(mine, others, task, prices=(1.0, 2.0), **SMALL)
    assert len(rows) == 2 * len(mine) * len(others)
    # each stopper plays each seed once per price, not once per pair
    assert mine[0].resets == 2 * len(SMALL["seeds"])
    pairs = [(f, a, b) for f in (1.0, 2.0) for a in mine for b in others]
    for r, (factor, a, b) in zip(rows, pairs):
        (alone,) = compare(a, b, task, prices=(factor,), **SMALL)
        assert r.as_dict() == alone.as_dict()


@pytest.mark.parametrize(
    ("stoppers", "against"),
    [([], [NoStop()]), ([NoStop()], []), ("pretrained:general", [NoStop()]), ([NoStop()], None)],
)
def test_compare_each_refuses_what_is_not_a_list_of_stoppers(stoppers, against) -> None:
    with pytest.raises(ConfigError, match=r"stoppers|against"):
        compare_each(stoppers, against, "hard-0.12", n_jobs=20)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"names": ("x",)}, "names"),
        ({"isolated": "yes"}, "isolated"),
        ({"seeds": []}, "seeds"),
        ({"prices": ()}, "prices"),
        ({"prices": 1.0}, "prices"),
        ({"prices": (0,)}, "prices"),  # nothing to gain by stopping: no score
        ({"prices": (1.0, float("nan"))}, "prices"),
        ({"prices": (True,)}, "prices"),
        ({"prices": "1"}, "prices"),
        ({"curves": "/runs.jsonl"}, "synthetic task 'hard-0.12'"),  # not silently ignored
    ],
)
def test_bad_arguments_are_refused_before_any_episode(kwargs, match, monkeypatch) -> None:
    def played(*args, **kw):
        raise AssertionError("an episode was played")

    monkeypatch.setattr(scoring.task, "play", played)  # where play_stoppers looks it up
    with pytest.raises(ConfigError, match=match):
        compare(EvalStop(2), NoStop(), "hard-0.12", **{"n_jobs": 20, **kwargs})
    if "names" not in kwargs:
        with pytest.raises(ConfigError, match=match):
            score(EvalStop(2), "hard-0.12", **{"n_jobs": 20, **kwargs})


def test_an_unknown_task_with_curves_is_refused_as_an_unknown_task() -> None:
    with pytest.raises(ConfigError, match="task='nope'"):
        score(EvalStop(2), "nope", curves="/runs.jsonl", n_jobs=20)


def test_a_spec_that_does_not_load_is_refused_by_its_value() -> None:
    with pytest.raises(ConfigError, match=r"no_such_file\.py:Nope"):
        compare("no_such_file.py:Nope", NoStop(), "hard-0.12", n_jobs=20)
    with pytest.raises(ConfigError, match="no_such_module_here:Nope"):
        compare(NoStop(), "no_such_module_here:Nope", "hard-0.12", n_jobs=20)
