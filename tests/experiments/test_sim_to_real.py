"""The sim-to-real check: its agreement figures on hand-computed cases, and one small play."""

from __future__ import annotations

import math

import pytest

from evalstop_experiments.sim_to_real import (
    MAD_TARGET,
    CheckRow,
    SideScore,
    agreement,
    check_markdown,
)
from evalstop_experiments.sim_to_real_recipe import break_even, break_even_markdown
from evalstop_gym import ConfigError


def _row(f: float, name: str, twin: float, real: float, half: float = 0.1) -> CheckRow:
    return CheckRow(
        f,
        name,
        "floor",
        SideScore(twin, twin - half, twin + half),
        SideScore(real, real - 2 * half, real + 2 * half),
    )


def test_agreement_on_a_hand_computed_panel() -> None:
    rows = [_row(1.0, "a", 0.0, 0.1), _row(1.0, "b", 0.5, 0.3), _row(1.0, "c", -1.0, -1.3)]
    (a,) = agreement(rows)
    assert a.mad == pytest.approx((0.1 + 0.2 + 0.3) / 3)
    assert a.rho == pytest.approx(1.0)  # same order on both sides
    assert a.met is (a.mad <= MAD_TARGET)
    swapped = [_row(1.0, "a", 0.0, 0.4), _row(1.0, "b", 0.5, 0.3), _row(1.0, "c", -1.0, -1.3)]
    assert agreement(swapped)[0].rho == pytest.approx(0.5)  # ranks (2,3,1) vs (3,2,1)
    assert not agreement(swapped)[0].met


def test_a_difference_carries_both_sides_intervals() -> None:
    r = _row(2.0, "a", 0.2, 0.5, half=0.3)
    assert r.diff == pytest.approx(0.3)
    lo, hi = r.diff_ci
    assert hi - r.diff == pytest.approx(math.hypot(0.3, 0.6))
    assert "| 2x | a |" in check_markdown([r])


def test_break_even_ships_the_stopper_best_on_the_twin_and_reads_the_real_interval() -> None:
    rows = [
        CheckRow(
            1.0, "good on twin", "floor", SideScore(0.3, 0.2, 0.4), SideScore(0.1, -0.05, 0.2)
        ),
        CheckRow(1.0, "good on real", "floor", SideScore(0.1, 0.0, 0.2), SideScore(0.4, 0.3, 0.5)),
        CheckRow(4.0, "good on twin", "floor", SideScore(0.5, 0.4, 0.6), SideScore(0.3, 0.1, 0.5)),
    ]
    cells = break_even({32: rows})
    assert [(c.price_factor, c.chosen, c.pays) for c in cells] == [
        (1.0, "good on twin", False),  # chosen on the twin, never on the real runs
        (4.0, "good on twin", True),
    ]
    assert "pays" in break_even_markdown(cells)


@pytest.mark.slow
def test_the_check_plays_a_small_panel_built_on_the_twin_alone() -> None:
    from evalstop_experiments.scoring import env_kwargs
    from evalstop_experiments.sim_to_real import build_panel, run_check

    kw = env_kwargs("english-twin", 1.0, 20)
    panel = build_panel(kw, val_seeds=(2000,), train_seeds=(), pretrained=())
    assert {m.name for m in panel} >= {"EvalStop(k=2)", "Bayes (twin prior)", "LossPlateau"}
    assert len(panel) >= 12
    rows, panels = run_check(
        (1.0,),
        (100, 101),
        n_jobs=20,
        panel_kwargs={"val_seeds": (2000,), "train_seeds": (), "pretrained": ()},
    )
    assert {r.stopper for r in rows} == {m.name for m in panels[1.0]}
    for r in rows:
        assert r.twin.lo <= r.twin.score <= r.twin.hi and r.real.lo <= r.real.score <= r.real.hi


def test_e14_runs_only_when_named() -> None:
    from evalstop_experiments.experiments import EXPERIMENTS
    from evalstop_experiments.plan import ReproduceOptions

    exp = next(e for e in EXPERIMENTS if e.id == "E14")
    assert not exp.runs(ReproduceOptions())
    assert exp.runs(ReproduceOptions(experiments=("E14",)))


@pytest.mark.slow
def test_e14_quick_writes_its_table_and_section(tmp_path) -> None:
    from evalstop_experiments.experiments import sim_to_real as e14
    from evalstop_experiments.plan import Plan, ReproduceOptions

    plan = Plan()
    e14.build(tmp_path, ReproduceOptions(quick=True, experiments=("E14",)), plan)
    table = (tmp_path / "E14.md").read_text(encoding="utf-8")
    assert "| 1x | EvalStop(k=2) |" in table and "Spearman rho" in table
    lines = e14.section(plan.report_rows)
    assert lines[0].startswith("## E14") and sum(x.startswith("| 1x |") for x in lines) == 1


def test_a_pool_check_fits_without_its_target_and_sets_the_twin_to_its_recipe(tmp_path) -> None:
    from evalstop_experiments.sim_to_real_pool import POOL_CHECKS, pool_twin_for, run_pool_check
    from evalstop_experiments.twin_pool import trainer_mix
    from evalstop_gym.corpus.format import read_traces

    for check in POOL_CHECKS.values():  # no check's fit reads the runs it scores
        assert check.target not in {c for c, _ in check.sources}
        assert ("english_rlhf", "test") not in check.sources
    path, fit = pool_twin_for(tmp_path, POOL_CHECKS["loo-b64"])
    assert fit.model.source == "english_rlhf:train+english_rlhf_s2"
    twin = read_traces(path)
    assert {t.meta["eval_batch"] for t in twin} == {64}
    got, want = trainer_mix(twin), trainer_mix(POOL_CHECKS["loo-b64"].target_runs())
    assert want == pytest.approx({k: 1 / 3 for k in ("grpo", "online_dpo", "rloo")})
    assert got == pytest.approx(want, abs=0.05)
    rows = run_pool_check(
        tmp_path,
        "loo-b64",
        [1.0],
        seeds=[100],
        panel_kwargs={"train_seeds": (), "pretrained": (), "val_seeds": (0,)},
    )
    assert len(rows) == 14 and all(math.isfinite(r.twin.score) for r in rows)
    with pytest.raises(ConfigError, match="check"):
        run_pool_check(tmp_path, "nope", [1.0])
