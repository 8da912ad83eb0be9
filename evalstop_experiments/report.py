"""Aggregate (cell, seed) rows into CSVs, REPORT.md and PNG plots.

Every policy is compared with NoStop on the same seeds of the same group:
``d_jct_pct`` = 100 (JCT - JCT_NoStop) / JCT_NoStop per seed, then averaged
with a 95 % Student-t interval (likewise ``d_waste_pct``).
"""

from __future__ import annotations

import csv
import functools
import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.fileio import atomic_open, atomic_write
from evalstop_gym.sim.metrics import CLUSTER_METRIC_KEYS

from .experiments import EVALSTOP, EXPERIMENTS, LOSSPLATEAU, NOSTOP, STOPAT, PolicySpec
from .stats import fmt_ci, mean_ci, pct_change

SUMMARY_METRICS: tuple[str, ...] = (
    "mean_jct_h",
    "p95_jct_h",
    "mean_jct_h_completed",
    "makespan_h",
    "utilisation",
    "gpu_hours",
    "wasted_gpu_hours",
    "precision",
    "recall",
    "fpr",
    "f1",
    "detection_delay_evals",
    "stops_before_peak",
    "mean_delivered_quality",
    "mean_regret",
    "return",
    "d_jct_pct",
    "d_jct_completed_pct",
    "d_waste_pct",
    "d_gpu_hours_pct",
)

#: Summarised too for the cells whose rows hold them (E10: the cluster metrics).
EXTRA_SUMMARY_METRICS: tuple[str, ...] = CLUSTER_METRIC_KEYS

#: The paper's figures (SPEC section 7), in percent.
PAPER_E1: tuple[tuple[PolicySpec, dict[str, float]], ...] = (
    (
        EVALSTOP,
        {"d_jct_pct": -9.4, "d_waste_pct": -21.8, "precision": 98.3, "recall": 99.0, "fpr": 1.5},
    ),
    (STOPAT, {"fpr": 64.5}),
    (LOSSPLATEAU, {"recall": 38.3}),
)
#: The paper's ΔJCT range over FIFO, SJF-Est, SRTF-Est and LossAware (E2).
PAPER_E2_RANGE = (-25.2, -8.9)
#: The paper's schedulers in E2 (Tiresias is ours).
PAPER_E2_SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware")
#: EvalStop's precision at eval noise sigma (E3).
PAPER_E3_PRECISION = {0.01: 100.0, 0.12: 81.0}
#: EvalStop's lowest precision over the hack-fraction sweep (E4).
PAPER_E4_MIN_PRECISION = 89.0

#: The typed fields that identify a summary row (with the experiment).
ROW_KEY = ("experiment", "variant", "sweep", "value", "policy_kind", "policy_params")


def _baseline_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """The setting a row is paired on: a sweep over a policy parameter shares one NoStop."""
    value = r["value"] if r["sweep_of"] == "env" else None
    return (r["experiment"], r["variant"], r["sweep"], json.dumps(value), r["seed"])


def add_deltas(rows: list[dict[str, Any]]) -> None:
    """Add paired changes against NoStop (same experiment, setting and seed)."""
    base = {_baseline_key(r): r for r in rows if r["policy_kind"] == NOSTOP.kind}
    for r in rows:
        b = base.get(_baseline_key(r))
        for key, metric in (
            ("d_jct_pct", "mean_jct_h"),
            ("d_jct_completed_pct", "mean_jct_h_completed"),
            ("d_waste_pct", "wasted_gpu_hours"),
            ("d_gpu_hours_pct", "gpu_hours"),
        ):
            r[key] = pct_change(r[metric], b[metric]) if b else float("nan")


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean, 95 % CI half-width and n of each summary metric per cell (experiment, setting, policy)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[json.dumps([r[k] for k in ROW_KEY], sort_keys=True)].append(r)
    out = []
    for rs in groups.values():
        first = rs[0]
        s: dict[str, Any] = {k: first[k] for k in (*ROW_KEY, "group", "policy")}
        s["seeds"] = len(rs)
        extra = tuple(m for m in EXTRA_SUMMARY_METRICS if m in first)
        for m in SUMMARY_METRICS + extra:
            mean, half, _ = mean_ci([float(r[m]) for r in rs])
            s[m] = mean
            s[f"{m}_ci95"] = half
        out.append(s)
    return out


def write_csvs(out: Path, rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> list[Path]:
    """Write ``E*.csv`` (one row per cell and seed) and ``E*_summary.csv``; return their paths."""
    paths = []
    for exp in sorted({r["experiment"] for r in rows}):
        rs = [r for r in rows if r["experiment"] == exp]
        lead = ["experiment", "group", "policy", "seed", "cell", *ROW_KEY[1:], "sweep_of"]
        lead = list(dict.fromkeys(lead))
        cols = lead + sorted(k for k in rs[0] if k not in lead)
        p = out / f"{exp}.csv"
        _write_csv(p, cols, rs)
        ss = [s for s in summary if s["experiment"] == exp]
        p2 = out / f"{exp}_summary.csv"
        _write_csv(p2, list(ss[0]), ss)
        paths += [p, p2]
    return paths


def _cell_text(v: Any) -> Any:
    if isinstance(v, float):
        return repr(v)  # exact: reruns and backends give identical bytes
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return "" if v is None else v


def _write_csv(path: Path, cols: list[str], rows: Sequence[dict[str, Any]]) -> None:
    with atomic_open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _cell_text(v) for k, v in r.items()})


# ---------------------------------------------------------------------- report


def find(
    summary: list[dict[str, Any]],
    exp: str,
    policy: PolicySpec,
    value: Any = None,
    variant: str = "",
) -> dict[str, Any] | None:
    """The summary row of ``policy`` in experiment ``exp`` at a sweep value, or None."""
    for s in summary:
        if (
            s["experiment"] == exp
            and policy.same_policy(s)
            and s["value"] == value
            and s["variant"] == variant
        ):
            return s
    return None


def _rows(summary: list[dict[str, Any]], exp: str) -> list[dict[str, Any]]:
    return [s for s in summary if s["experiment"] == exp]


def policies_of(rows: list[dict[str, Any]]) -> list[PolicySpec]:
    """The distinct policies of some summary rows other than NoStop, in first-seen order."""
    seen: dict[str, PolicySpec] = {}
    for s in rows:
        if s["policy_kind"] != NOSTOP.kind:
            spec = PolicySpec(s["policy_kind"], s["policy_params"], s["policy"])
            seen.setdefault(json.dumps([spec.kind, spec.params], sort_keys=True), spec)
    return list(seen.values())


def sweep_values(rows: list[dict[str, Any]]) -> list[Any]:
    """The distinct sweep values, sorted (numbers by value, strings in first-seen order)."""
    vals = list(dict.fromkeys(s["value"] for s in rows if s["value"] is not None))
    if all(isinstance(v, int | float) for v in vals):
        vals.sort()
    return vals


def _pct(s: dict[str, Any] | None, m: str, digits: int = 1) -> str:
    if s is None:
        return "–"
    scale = 1.0 if m.startswith("d_") else 100.0
    return fmt_ci(s[m], s[f"{m}_ci95"], scale, digits)


def _num(s: dict[str, Any] | None, m: str, digits: int = 2) -> str:
    return "–" if s is None else fmt_ci(s[m], s[f"{m}_ci95"], 1.0, digits)


def _compare(name: str, s: dict[str, Any] | None, m: str, paper: float) -> str:
    """A plain sentence: does the paper's figure lie in our 95 % interval?"""
    if s is None or math.isnan(s[m]):
        return f"- {name}: not measured."
    scale = 1.0 if m.startswith("d_") else 100.0
    mean, half = s[m] * scale, s[f"{m}_ci95"] * scale
    label = {"d_jct_pct": "ΔJCT", "d_waste_pct": "Δwaste", "fpr": "FPR"}.get(m, m)
    ours = f"{mean:.1f} % (± {half:.1f})" if not math.isnan(half) else f"{mean:.1f} %"
    if not math.isnan(half) and abs(mean - paper) <= max(half, 0.05):
        return (
            f"- {name} {label}: ours {ours}, paper {paper:g} % — consistent (inside our 95 % CI)."
        )
    if abs(mean - paper) <= 3.0:
        return f"- {name} {label}: ours {ours}, paper {paper:g} % — close (within 3 points)."
    direction = "larger" if abs(mean) > abs(paper) else "smaller"
    return (
        f"- {name} {label}: ours {ours}, paper {paper:g} % — differs "
        f"(ours is {direction} by {abs(mean - paper):.1f} points)."
    )


Section = Callable[[list[dict[str, Any]]], list[str]]


def write_report(
    out: Path,
    summary: list[dict[str, Any]],
    *,
    header: dict[str, Any],
    plots: list[Path],
    timings: tuple[Sequence[Any], dict[str, Any]] | None = None,
) -> Path:
    """Write ``OUT/REPORT.md``: the header, one section per experiment, the timings, the plots.

    ``timings``: each experiment's :class:`~evalstop_experiments.progress.ExperimentTiming`
    and the whole run's figures (``wall_s``, ``cpu_s``, ``load_average``, ``cores``).
    """
    lines = ["# evalstop-gym: the paper's experiments, reproduced", ""]
    lines += [f"- {k}: {v}" for k, v in header.items()]
    lines += [
        "",
        "Each cell: mean ± 95 % Student-t interval over seeds. ΔJCT and Δwaste are paired "
        "changes against NoStop on the same seeds (negative = better). Precision, recall, FPR "
        "in %; FPR is over all non-hacking jobs of every type. `JCT done` is the mean JCT of "
        "the jobs that were not stopped.",
        "",
    ]
    for exp in sorted({s["experiment"] for s in summary}, key=_experiment_order):
        lines += SECTIONS.get(exp, functools.partial(_generic, exp=exp))(summary)
    if timings is not None:
        lines += timing_section(*timings)
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots]
        lines.append("")
    p = out / "REPORT.md"
    atomic_write(p, "\n".join(lines) + "\n")
    return p


def timing_section(experiments: Sequence[Any], run: dict[str, Any]) -> list[str]:
    """REPORT.md's ``## Timing``: wall and CPU seconds per experiment, then the whole run.

    An experiment whose episodes and stage work all came from an earlier run (``--resume``)
    says so instead of showing a time.
    """
    lines = [
        "## Timing",
        "",
        "Wall: a stage's own time; for the episodes, which run through one process pool in "
        "experiment order, the time since the previous experiment's last episode. CPU: this "
        "process and the local workers it ended (an episode's CPU is measured in its worker; "
        "one shared by several cells counts a share to each; Ray workers are not counted). "
        "A stage run beside the others, in a process of its own, overlaps their wall time.",
        "",
        "| experiment | cells × seeds | episodes run | reused | wall s | CPU s | stage work |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in sorted(experiments, key=lambda t: _experiment_order(t.experiment)):
        size = f"{t.cells} × {t.seeds}" if t.cells else "–"
        work = ", ".join(
            [f"{k} {v:.1f} s" for k, v in t.parts.items()] + [f"{k} reused" for k in t.reused_parts]
        )
        wall, cpu = ("reused", "–") if t.all_reused else (f"{t.wall_s:.1f}", f"{t.cpu_s:.1f}")
        if t.background and not t.all_reused:
            wall += " (beside the others)"
        lines.append(
            f"| {t.experiment} | {size} | {t.ran} | {t.reused} | {wall} | {cpu} | {work or '–'} |"
        )
    wall = sum(t.wall_s for t in experiments if not (t.all_reused or t.background))
    cpu = sum(t.cpu_s for t in experiments if not t.all_reused)
    load = ", ".join("?" if v is None else f"{v:.1f}" for v in run.get("load_average", ()))
    waited = run.get("waited_for_background_s", 0.0)
    if waited >= 0.05:
        lines.append(f"| waiting for the stages beside the others | | | | {waited:.1f} | | |")
    lines += [
        f"| other (pool start-up, tables, plots) | | | | {run['wall_s'] - wall - waited:.1f} | "
        f"{run['cpu_s'] - cpu:.1f} | |",
        f"| **whole run** | | | | {run['wall_s']:.1f} | {run['cpu_s']:.1f} | |",
        "",
        f"{run.get('cores', '?')} cores; one-minute load average at the start and the end: "
        f"{load} (a loaded machine stretches wall time, not CPU time).",
        "",
    ]
    return lines


def _experiment_order(exp: str) -> tuple[int, str]:
    digits = "".join(c for c in exp if c.isdigit())
    return (int(digits) if digits else 10**6, exp)


def _e1(summary: list[dict[str, Any]]) -> list[str]:
    rows = _rows(summary, "E1")
    lines = [
        f"## E1 — {EXPERIMENTS['E1']}",
        "",
        "| policy | JCT h | ΔJCT % | JCT done h | waste GPU-h | Δwaste % | precision | recall | FPR | F1 | delivered quality | paper |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    paper_txt = {
        EVALSTOP.kind: "ΔJCT −9.4, Δwaste −21.8, P 98.3, R ≈99, FPR 1.5",
        STOPAT.kind: "ΔJCT ≈ EvalStop's, FPR 64.5",
        LOSSPLATEAU.kind: "R 38.3",
    }
    for s in rows:
        lines.append(
            f"| {s['policy']} | {_num(s, 'mean_jct_h')} | {_pct(s, 'd_jct_pct')} | {_num(s, 'mean_jct_h_completed')} | "
            f"{_num(s, 'wasted_gpu_hours', 0)} | {_pct(s, 'd_waste_pct')} | {_pct(s, 'precision')} | "
            f"{_pct(s, 'recall')} | {_pct(s, 'fpr')} | {_num(s, 'f1')} | "
            f"{_num(s, 'mean_delivered_quality', 3)} | {paper_txt.get(s['policy_kind'], '')} |"
        )
    lines += ["", "Against the paper:", ""]
    for spec, figs in PAPER_E1:
        s = find(summary, "E1", spec)
        name = s["policy"] if s else spec.label
        lines += [_compare(name, s, m, v) for m, v in figs.items()]
    ev, sa = find(summary, "E1", EVALSTOP), find(summary, "E1", STOPAT)
    if ev and sa:
        lines.append(
            f"- {sa['policy']} ΔJCT {sa['d_jct_pct']:.1f} % vs {ev['policy']} {ev['d_jct_pct']:.1f} % "
            "(the paper calls them similar)."
        )
    lines.append("")
    return lines


def _e2(summary: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"## E2 — {EXPERIMENTS['E2']}",
        "",
        "| base scheduler | NoStop JCT h | EvalStop JCT h | ΔJCT % | ΔJCT done % | Δwaste % | precision | recall |",
        "|---|---|---|---|---|---|---|---|",
    ]
    deltas = []
    for sched in sweep_values(_rows(summary, "E2")):
        b, e = find(summary, "E2", NOSTOP, sched), find(summary, "E2", EVALSTOP, sched)
        lines.append(
            f"| {sched} | {_num(b, 'mean_jct_h')} | {_num(e, 'mean_jct_h')} | {_pct(e, 'd_jct_pct')} | "
            f"{_pct(e, 'd_jct_completed_pct')} | {_pct(e, 'd_waste_pct')} | {_pct(e, 'precision')} | {_pct(e, 'recall')} |"
        )
        if e and sched in PAPER_E2_SCHEDULERS:
            deltas.append(e["d_jct_pct"])
    lo, hi = PAPER_E2_RANGE
    if deltas:
        inside = all(lo <= d <= hi for d in deltas)
        lines += [
            "",
            f"Paper: EvalStop improves JCT by 8.9–25.2 % over FIFO, SJF-Est, SRTF-Est and LossAware. "
            f"Ours: {min(deltas):.1f} … {max(deltas):.1f} % over the same four"
            + (
                " — inside the paper's range."
                if inside
                else " — outside the paper's range (see E1's note on JCT)."
            ),
            "",
        ]
    return lines


def _sweep_table(summary: list[dict[str, Any]], exp: str, label: str) -> list[str]:
    """P / R / FPR of every policy at every value of ``exp``'s sweep."""
    rows = _rows(summary, exp)
    pols = policies_of(rows)
    paper = PAPER_E3_PRECISION if exp == "E3" else {}
    lines = [f"## {exp} — {EXPERIMENTS[exp]}", ""]
    head = (
        f"| {label} | "
        + " | ".join(f"{p.label} P / R / FPR" for p in pols)
        + " | paper (EvalStop P) |"
    )
    lines += [head, "|---" * (len(pols) + 2) + "|"]
    for x in sweep_values(rows):
        cells = [_prf(find(summary, exp, p, x)) for p in pols]
        pp = f"{paper[x]:g}" if x in paper else ""
        lines.append(f"| {x:g} | " + " | ".join(cells) + f" | {pp} |")
    lines.append("")
    return lines


def _prf(s: dict[str, Any] | None) -> str:
    return f"{_pct(s, 'precision', 0)} / {_pct(s, 'recall', 0)} / {_pct(s, 'fpr', 0)}"


def _e3(summary: list[dict[str, Any]]) -> list[str]:
    lines = _sweep_table(summary, "E3", "σ")
    values = sweep_values(_rows(summary, "E3"))
    for x, v in PAPER_E3_PRECISION.items():
        lines.append(
            _compare(f"EvalStop at σ = {x:g}", find(summary, "E3", EVALSTOP, x), "precision", v)
        )
    others = [p for p in policies_of(_rows(summary, "E3")) if p.kind != EVALSTOP.kind]

    def precision(spec: PolicySpec, x: float) -> float:
        return (find(summary, "E3", spec, x) or {}).get("precision") or 0.0

    above = all(
        precision(EVALSTOP, x) >= max((precision(p, x) for p in others), default=0.0)
        for x in values
    )
    lines += [
        "- EvalStop's precision is "
        + ("above" if above else "not always above")
        + " every other policy's at every σ (the paper: above the others).",
        "",
    ]
    return lines


def _e4(summary: list[dict[str, Any]]) -> list[str]:
    lines = _sweep_table(summary, "E4", "hack fraction")
    values = sweep_values(_rows(summary, "E4"))
    ev = [s for x in values if (s := find(summary, "E4", EVALSTOP, x))]
    if ev:
        lowest = min(s["precision"] for s in ev) * 100
        verdict = "consistent" if lowest >= PAPER_E4_MIN_PRECISION else "differs"
        lines.append(
            f"- EvalStop's lowest precision over the sweep: {lowest:.1f} % (paper: ≥ 89 %) — {verdict}."
        )
    for x in values:
        s = find(summary, "E4", STOPAT, x)
        if s:
            lines.append(
                f"- {s['policy']} precision at hack fraction {x:g}: {100 * s['precision']:.1f} % "
                f"(its base rate among RLHF jobs is {100 * x:.0f} %)."
            )
    lines.append("")
    return lines


def _e5(summary: list[dict[str, Any]]) -> list[str]:
    rows = [s for s in _rows(summary, "E5") if s["policy_kind"] == EVALSTOP.kind]
    rows.sort(key=lambda s: s["policy_params"]["k"])
    lines = [
        f"## E5 — {EXPERIMENTS['E5']}",
        "",
        "| k | precision | recall | FPR | delay (evals after peak) | ΔJCT % | Δwaste % | delivered quality |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s['policy_params']['k']} | {_pct(s, 'precision')} | {_pct(s, 'recall')} | {_pct(s, 'fpr')} | "
            f"{_num(s, 'detection_delay_evals')} | {_pct(s, 'd_jct_pct')} | {_pct(s, 'd_waste_pct')} | "
            f"{_num(s, 'mean_delivered_quality', 3)} |"
        )
    if rows:
        best = max(rows, key=lambda s: s["f1"])
        lines += [
            "",
            f"Best F1 at k = {best['policy_params']['k']} "
            "(paper: k = 2 balances early detection and false positives).",
            "",
        ]
    return lines


def _e6(summary: list[dict[str, Any]]) -> list[str]:
    """The generic table, then learned vs EvalStop on the utility return per noise level."""
    lines = _generic(summary, "E6")
    for s in _rows(summary, "E6"):
        ev = find(summary, "E6", EVALSTOP, s["value"], s["variant"])
        if s["policy_kind"] != "Learned" or ev is None:
            continue
        diff, half = s["return"] - ev["return"], s["return_ci95"] + ev["return_ci95"]
        verdict = "better than" if diff > half else "worse than" if diff < -half else "on par with"
        lines.append(
            f"- {s['group']}: {s['policy']} utility {s['return']:.2f} vs EvalStop {ev['return']:.2f} "
            f"— {verdict} EvalStop."
        )
    return [*lines, ""]


def _e7(summary: list[dict[str, Any]]) -> list[str]:
    rows = _rows(summary, "E7")
    pols = policies_of(rows)
    settings = list(dict.fromkeys((s["variant"], s["value"]) for s in rows))
    lines = [
        f"## E7 — {EXPERIMENTS['E7']}",
        "",
        "Real: RLHF jobs run on micro-RLHF curves (observed eval = the run's measured eval + "
        "extra σ). Synthetic: the `paper` calibration at the same σ.",
        "",
        "| curves | extra σ | "
        + " | ".join(f"{p.label} P / R / FPR" for p in pols)
        + " | EvalStop ΔJCT % | EvalStop regret |",
        "|---" * (len(pols) + 4) + "|",
    ]
    for variant, sigma in settings:
        cells = [_prf(find(summary, "E7", p, sigma, variant)) for p in pols]
        ev = find(summary, "E7", EVALSTOP, sigma, variant)
        lines.append(
            f"| {variant} | {sigma:g} | "
            + " | ".join(cells)
            + f" | {_pct(ev, 'd_jct_pct')} | {_num(ev, 'mean_regret', 3)} |"
        )
    lines.append("")
    for sigma in sweep_values([s for s in rows if s["variant"] == "synthetic"]):
        for p in pols:
            a = find(summary, "E7", p, sigma, "synthetic")
            b = find(summary, "E7", p, sigma, "real")
            if not a or not b:
                continue
            diffs = []
            for m in ("precision", "recall", "fpr"):
                d = 100 * (b[m] - a[m])
                if not math.isnan(d) and abs(d) >= 10:
                    diffs.append(f"{m} {100 * a[m]:.0f} → {100 * b[m]:.0f} %")
            if diffs:
                lines.append(
                    f"- σ = {sigma:g}, {p.label}: real curves differ from synthetic ones: "
                    + "; ".join(diffs)
                    + "."
                )
    lines.append("")
    return lines


def _generic(summary: list[dict[str, Any]], exp: str) -> list[str]:
    """Every cell of ``exp`` as a row: the section of an experiment without its own."""
    lines = [
        f"## {exp}" + (f" — {EXPERIMENTS[exp]}" if exp in EXPERIMENTS else ""),
        "",
        "| setting | policy | ΔJCT % | Δwaste % | precision | recall | FPR | quality | utility return |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in _rows(summary, exp):
        lines.append(
            f"| {s['group']} | {s['policy']} | {_pct(s, 'd_jct_pct')} | {_pct(s, 'd_waste_pct')} | "
            f"{_pct(s, 'precision')} | {_pct(s, 'recall')} | {_pct(s, 'fpr')} | "
            f"{_num(s, 'mean_delivered_quality', 3)} | {_num(s, 'return', 2)} |"
        )
    lines.append("")
    return lines


def _e11(summary: list[dict[str, Any]]) -> list[str]:
    """E11 (heterogeneous pools): the section lives with the experiment."""
    from .e11 import section

    return section(summary)


def _e7_scores(summary: list[dict[str, Any]]) -> list[str]:
    """E7's scores on real corpora: the section lives with the experiment."""
    from .e7 import scores_section  # imports gymnasium and the stoppers: only when needed

    return scores_section(summary)


def _e10(summary: list[dict[str, Any]]) -> list[str]:
    """E10's section, from its own module (imported here, not at start: it imports this one)."""
    from .e10 import e10_section

    return e10_section(summary)


def _e9(summary: list[dict[str, Any]]) -> list[str]:
    """E9 (generalisation): the section lives with the experiment."""
    from .e9 import section

    return section(summary)


#: Each experiment's section of REPORT.md; an experiment not listed gets the generic table.
#: A new experiment module adds its own: ``SECTIONS["E8"] = my_section``.
SECTIONS: dict[str, Section] = {
    "E1": _e1,
    "E2": _e2,
    "E3": _e3,
    "E4": _e4,
    "E5": _e5,
    "E6": _e6,
    "E7": _e7,
    "E7 scores": _e7_scores,
    "E11": _e11,
    "E10": _e10,
    "E9": _e9,
}
