"""E9's backward-induction tables: every cell names its score, the floor difference and
where the stopper stops; a reference without a significant gain shows n/a."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_experiments.experiments import generalisation as e9


def _row(stopper: str, test: str, factor: float, score: float, ref_lo: float = 1.0) -> dict:
    return {
        "experiment": "E9",
        "learner": e9.LSM_LEARNER,
        "test": test,
        "price_factor": factor,
        "stopper": stopper,
        "reference": "Bayes",
        "seeds": 30,
        "score": score,
        "score_lo": score - 0.1,
        "score_hi": score + 0.1,
        "minus_floor": 0.5,
        "minus_floor_lo": 0.2,
        "minus_floor_hi": 0.8,
        "ref_gain_lo": ref_lo,
        "hack_after_peak_median": 0.12,
        "healthy_stopped_share": 0.25,
    }


def test_tables_show_each_cell_and_the_general_models_prices() -> None:
    rows = [
        _row("Best floor (Running-max drop)", "hard-0.12", 1.0, 0.55),
        _row("lsm[general]", "hard-0.12", 1.0, 0.93),
        _row("Best floor (Running-max drop)", "hard-0.12", 0.5, 0.2, ref_lo=-0.1),
        _row("lsm[general]", "hard-0.12", 0.5, 0.7, ref_lo=-0.1),
    ]
    text = e9.lsm_markdown(rows)
    assert "0.93 [0.83, 1.03] Δfloor 0.50 [0.20, 0.80]; +0.12 / 25 %" in text
    assert "hard-0.12: Running-max drop" in text
    assert "| hard-0.12 | lsm[general] | n/a | 0.93" in text
    section = e9.section(rows)
    assert section[0].startswith("## E9") and e9.LSM_LEGEND in section


def test_positions_count_hacking_runs_after_their_peak_and_healthy_stops() -> None:
    entry = {"hacking": [1, 0, 0, 1], "peak": [0.5, 1.0, 1.0, 0.4], "job_type": [2, 2, 2, 0]}
    after, stopped, healthy = e9._positions(np.array([6, 10, 8, 10]), 10, entry)
    assert after == [0.09999999999999998] and (stopped, healthy) == (1, 2)


@pytest.mark.slow
def test_a_heldout_cell_is_scored_over_runs_as_the_suite_scores_it() -> None:
    """E9's held-out column: the suite's score and its bootstrap over test runs, not seeds."""
    from baselines.backward import BackwardStopper
    from evalstop_experiments.scoring import score

    seeds = [0, 1]
    model = BackwardStopper.pretrained("general")
    rows = e9.lsm_cell_rows({"lsm[general]": model}, "trl-heldout", 1.0, seeds)
    mine = next(r for r in rows if r["stopper"] == "lsm[general]")
    suite = score(BackwardStopper.pretrained("general"), "trl-heldout", seeds=seeds)[0]
    assert mine["reference"] == suite.reference.value
    assert (mine["score"], mine["score_lo"], mine["score_hi"]) == pytest.approx(
        (suite.score, suite.score_lo, suite.score_hi)
    )
    floor = next(r for r in rows if r["stopper"].startswith("Best floor"))
    assert floor["minus_floor"] == 0.0 and floor["minus_floor_lo"] == floor["minus_floor_hi"] == 0.0
