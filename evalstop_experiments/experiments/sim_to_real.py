"""E14: the sim-to-real check, a panel built on the English twin and scored on real runs.

Runs only when named (``reproduce --experiments E14``): it tunes every floor, refits Bayes
and trains a backward-induction model on the twin at each price before it scores (about
four CPU-minutes a price).  Its table is :func:`evalstop_experiments.sim_to_real.check_markdown`'s,
written to ``E14.md``; the rows reach REPORT.md through :func:`section`.  ``--quick``
scores 1x only, on two seeds, with a smaller panel (the pipeline, not a result).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..plan import Experiment, Plan, ReproduceOptions
from ..sim_to_real import MAD_TARGET, RHO_TARGET, TEST_SEEDS, agreement, check_markdown, run_check

#: What ``--quick`` plays: one price, two test seeds, 20 jobs, no trained or shipped models.
QUICK = {"prices": (1.0,), "seeds": TEST_SEEDS[:2], "n_jobs": 20}
QUICK_PANEL = {"val_seeds": (2000,), "train_seeds": (), "pretrained": ()}


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """Build the panel on the twin, score it on both sides, write E14.md and the rows."""
    from evalstop_gym.fileio import atomic_write
    from evalstop_gym.suite import PRICE_FACTORS

    if opts.quick:
        rows, _ = run_check(
            QUICK["prices"], QUICK["seeds"], n_jobs=QUICK["n_jobs"], panel_kwargs=QUICK_PANEL
        )
    else:
        rows, _ = run_check(PRICE_FACTORS, TEST_SEEDS)
    atomic_write(Path(out) / "E14.md", check_markdown(rows) + "\n")
    plan.report_rows += [
        {
            "experiment": "E14",
            "price_factor": a.price_factor,
            "stoppers": a.n,
            "mad": a.mad,
            "rho": a.rho,
            "met": a.met,
            "seeds": len(QUICK["seeds"] if opts.quick else TEST_SEEDS),
        }
        for a in agreement(rows)
    ]
    plan.header["E14"] = "twin against real runs, stopper by stopper: E14.md"


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E14 section: the agreement at each price (the full table is E14.md)."""
    rows = [s for s in summary if s.get("experiment") == "E14"]
    if not rows:
        return []
    lines = [
        f"## E14 — {EXPERIMENT.title}",
        "",
        "Every stopper is built on the twin (`english-twin`) and scored on its test runs and on "
        "the real held-out runs (`english-heldout`), against the CurveOracle "
        f"({rows[0]['seeds']} test seeds; each stopper's figures in E14.md).",
        "",
        "| price | stoppers | mean abs diff | Spearman rho | target met |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['price_factor']:g}x | {r['stoppers']} | {r['mad']:.3f} (<= {MAD_TARGET}) "
            f"| {r['rho']:.3f} (>= {RHO_TARGET}) | {'yes' if r['met'] else 'no'} |"
        )
    return [*lines, ""]


def wanted(opts: ReproduceOptions, exp: Experiment) -> bool:
    """Only when named in ``--experiments``: it builds a panel at each price first."""
    return opts.experiments is not None and exp.id in opts.experiments


EXPERIMENT = Experiment(
    "E14",
    "Sim to real: stoppers designed on the English twin, scored on real runs",
    14,
    build,
    wanted=wanted,
    section=section,
    long=True,
    starting="building the panel on the twin",
    work="panel",
)
