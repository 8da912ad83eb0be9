"""E10: stopping vs deprioritising post-peak jobs, and what a real cluster's costs do to EvalStop.

The paper contrasts stopping reward-hacking runs with the prior approach of
*deprioritising* them, which it says "leads to starvation and continued
occupation of resources".  E10 measures that claim: EvalStop (stop on two
consecutive eval declines) against Deprioritize (the same detector, demote
instead of stop) and NoStop, across the base schedulers and offered loads, on
``EvalStop-v0`` with ``deprioritize=True`` so every row carries the cluster
metrics (preemptions, deprioritised jobs' GPU-hours after their peak, their
waiting time and delivered quality).

A second part moves one cost of a real cluster at a time on E1's setting
(SRTF-Est, which preempts): the restore time a preempted job pays, the GPU
time of each eval, and the ``realistic`` preset, and reports how each moves
EvalStop's ΔJCT and Δtotal-GPU-hours against NoStop on the same seeds.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..cells import EVALSTOP, NOSTOP, SCHEDULERS, Cell, PolicySpec, base_env
from ..plan import Experiment, Plan, ReproduceOptions
from ..stats import fmt_ci
from ..summary import find

DEPRIORITIZE = PolicySpec("Deprioritize", {"k": 2}, label="Deprioritize")
LOADS = {"quick": (0.7, 1.3), "default": (0.7, 1.0, 1.3)}
#: One cost at a time (the others 0), then the preset.
COST_SWEEPS: dict[str, dict[str, tuple[Any, ...]]] = {
    "quick": {"restore_h": (0.0, 0.5), "eval_cost_h": (0.0, 0.2), "costs": ("free", "realistic")},
    "default": {
        "restore_h": (0.0, 0.1, 0.5, 1.0),
        "eval_cost_h": (0.0, 0.05, 0.2, 0.5),
        "costs": ("free", "realistic"),
    },
}


#: The swept variables of the cost part (each cost sweep's ``sweep``).
COST_NAMES = frozenset(name for sizes in COST_SWEEPS.values() for name in sizes)


def e10_cells(overrides: dict[str, Any], *, quick: bool) -> list[Cell]:
    """NoStop, EvalStop and Deprioritize per scheduler and load; then the cost sweeps."""
    size = "quick" if quick else "default"
    env0 = {**base_env(overrides), "deprioritize": True}
    cells = [
        Cell("E10", p, {**env0, "scheduler": s, "load": load}, "load", load, variant=s)
        for s in SCHEDULERS
        for load in LOADS[size]
        for p in (NOSTOP, EVALSTOP, DEPRIORITIZE)
    ]
    for name, values in COST_SWEEPS[size].items():
        cells += [
            Cell("E10", p, {**env0, name: v}, name, v, variant=f"cost {name}")
            for v in values
            for p in (NOSTOP, EVALSTOP)
        ]
    return cells


def _f(s: dict[str, Any] | None, m: str, digits: int = 1) -> str:
    """Mean ± 95 % half-width of metric ``m`` of summary row ``s`` ("–" if missing)."""
    if s is None or m not in s:
        return "–"
    return fmt_ci(s[m], s[f"{m}_ci95"], 1.0, digits)


def _deprioritisation_table(summary: list[dict[str, Any]]) -> list[str]:
    """EvalStop vs Deprioritize per scheduler and load."""
    lines = [
        "| scheduler | load | policy | ΔJCT % | ΔGPU-h % | Δwaste % | quality | "
        "demoted jobs | their GPU-h after peak | their wait h (starvation) | their quality | "
        "preemptions |",
        "|---" * 12 + "|",
    ]
    rows = [s for s in summary if s["experiment"] == "E10" and s["sweep"] == "load"]
    for variant, load in dict.fromkeys((s["variant"], s["value"]) for s in rows):
        for p in (EVALSTOP, DEPRIORITIZE):
            s = find(summary, "E10", p, load, variant)
            if s is None:
                continue
            lines.append(
                f"| {variant} | {load:g} | {p.label} | {_f(s, 'd_jct_pct')} | "
                f"{_f(s, 'd_gpu_hours_pct')} | {_f(s, 'd_waste_pct')} | "
                f"{_f(s, 'mean_delivered_quality', 3)} | {_f(s, 'n_deprioritized')} | "
                f"{_f(s, 'deprioritized_gpu_hours_after_peak', 0)} | "
                f"{_f(s, 'deprioritized_mean_wait_h')} | "
                f"{_f(s, 'deprioritized_mean_delivered_quality', 3)} | {_f(s, 'preemptions', 0)} |"
            )
    return lines


def _costs_table(summary: list[dict[str, Any]]) -> list[str]:
    """How each cost moves NoStop's JCT and GPU-hours, and EvalStop's deltas against it."""
    lines = [
        "| cost | value | NoStop JCT h | NoStop GPU-h | EvalStop ΔJCT % | EvalStop ΔGPU-h % | "
        "preemptions (NoStop) | restore GPU-h (NoStop) | eval GPU-h (NoStop) |",
        "|---" * 9 + "|",
    ]
    rows = [s for s in summary if s["experiment"] == "E10" and s["sweep"] in COST_NAMES]
    for variant, value, name in dict.fromkeys((s["variant"], s["value"], s["sweep"]) for s in rows):
        ns = find(summary, "E10", NOSTOP, value, variant)
        ev = find(summary, "E10", EVALSTOP, value, variant)
        shown = value if isinstance(value, str) else f"{value:g} h"
        lines.append(
            f"| {name} | {shown} | {_f(ns, 'mean_jct_h')} | {_f(ns, 'gpu_hours', 0)} | "
            f"{_f(ev, 'd_jct_pct')} | {_f(ev, 'd_gpu_hours_pct')} | {_f(ns, 'preemptions', 0)} | "
            f"{_f(ns, 'restore_gpu_hours', 0)} | {_f(ns, 'eval_gpu_hours', 0)} |"
        )
    return lines


def _verdict(summary: list[dict[str, Any]]) -> list[str]:
    """One sentence per scheduler: does deprioritising keep post-peak GPUs busy and starve?"""
    out = []
    for s in summary:
        if s["experiment"] != "E10" or s["policy_kind"] != "Deprioritize":
            continue
        ev = find(summary, "E10", EVALSTOP, s["value"], s["variant"])
        if ev is None or math.isnan(s["d_jct_pct"]) or math.isnan(ev["d_jct_pct"]):
            continue
        out.append(
            f"- {s['variant']}, load {s['value']:g}: Deprioritize ΔJCT {s['d_jct_pct']:+.1f} % "
            f"vs EvalStop {ev['d_jct_pct']:+.1f} %; demoted jobs still use "
            f"{s['deprioritized_gpu_hours_after_peak']:.0f} GPU-h after their peak and wait "
            f"{s['deprioritized_mean_wait_h']:.1f} h on average."
        )
    return out


def e10_section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E10 section."""
    return [
        f"## E10 — {EXPERIMENT.title}",
        "",
        "Deprioritize: EvalStop's detector (k = 2), but the flagged job is demoted to the back "
        "of the base scheduler's order (it runs only while no waiting job could use its GPUs) "
        "instead of stopped. Δ are paired against NoStop on the same seeds; 'their' columns are "
        "over the demoted jobs (GPU-h after peak: GPUs x duration x progress past the true peak).",
        "",
        *_deprioritisation_table(summary),
        "",
        *_verdict(summary),
        "",
        "Costs of a real cluster, one at a time on E1's setting (SRTF-Est): `restore_h` is paid "
        "by a preempted job when it restarts, `eval_cost_h` by every eval checkpoint; "
        "`costs=realistic` is restore 0.1 h and eval 0.05 h (sources in evalstop_gym/sim/config.py).",
        "",
        *_costs_table(summary),
        "",
    ]


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """EvalStop vs Deprioritize across schedulers and loads, and the cluster's costs."""
    plan.cells += e10_cells(opts.overrides, quick=opts.quick)


def _wanted(opts: ReproduceOptions, exp: Experiment) -> bool:
    return opts.wants(exp.id, opts.deprioritisation)


EXPERIMENT = Experiment(
    "E10",
    "Stop vs deprioritise, and the costs of a real cluster",
    10,
    build,
    wanted=_wanted,
    section=e10_section,
    work="deprioritisation",
)
