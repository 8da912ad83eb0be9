"""Aggregate (cell, seed) rows into CSVs, REPORT.md and PNG plots.

Every policy is compared with NoStop on the same seeds of the same group:
``d_jct_pct`` = 100 (JCT - JCT_NoStop) / JCT_NoStop per seed, then averaged
with a 95 % Student-t interval (likewise ``d_waste_pct``).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .experiments import EXPERIMENTS
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
)

#: The paper's figures (SPEC section 7), in percent.
PAPER = {
    "E1": {
        "EvalStop": {
            "d_jct_pct": -9.4,
            "d_waste_pct": -21.8,
            "precision": 98.3,
            "recall": 99.0,
            "fpr": 1.5,
        },
        "StopAt-0.65": {"fpr": 64.5},
        "LossPlateau": {"recall": 38.3},
    },
    "E2": {"range": (-25.2, -8.9)},
    "E3": {"EvalStop": {0.01: 100.0, 0.12: 81.0}},
    "E4": {"EvalStop_min_precision": 89.0},
}


def add_deltas(rows: list[dict[str, Any]]) -> None:
    """Add paired changes against NoStop (same experiment, group and seed)."""
    base = {(r["experiment"], r["group"], r["seed"]): r for r in rows if r["policy"] == "NoStop"}
    for r in rows:
        b = base.get((r["experiment"], r["group"], r["seed"]))
        for key, metric in (
            ("d_jct_pct", "mean_jct_h"),
            ("d_jct_completed_pct", "mean_jct_h_completed"),
            ("d_waste_pct", "wasted_gpu_hours"),
        ):
            r[key] = pct_change(r[metric], b[metric]) if b else float("nan")


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean, 95 % CI half-width and n of each summary metric per (experiment, group, policy)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["experiment"], r["group"], r["policy"])].append(r)
    out = []
    for (exp, group, policy), rs in groups.items():
        s: dict[str, Any] = {"experiment": exp, "group": group, "policy": policy, "seeds": len(rs)}
        for m in SUMMARY_METRICS:
            mean, half, _ = mean_ci([float(r[m]) for r in rs])
            s[m] = mean
            s[f"{m}_ci95"] = half
        out.append(s)
    return out


def write_csvs(out: Path, rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> list[Path]:
    paths = []
    for exp in sorted({r["experiment"] for r in rows}):
        rs = [r for r in rows if r["experiment"] == exp]
        lead = ["experiment", "group", "policy", "seed", "cell"]
        cols = lead + sorted(k for k in rs[0] if k not in lead)
        p = out / f"{exp}.csv"
        _write_csv(p, cols, rs)
        ss = [s for s in summary if s["experiment"] == exp]
        p2 = out / f"{exp}_summary.csv"
        _write_csv(p2, list(ss[0]), ss)
        paths += [p, p2]
    return paths


def _write_csv(path: Path, cols: list[str], rows: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    tmp.replace(path)


# ---------------------------------------------------------------------- report


def _get(summary: list[dict[str, Any]], exp: str, group: str, policy: str) -> dict[str, Any] | None:
    for s in summary:
        if (s["experiment"], s["group"], s["policy"]) == (exp, group, policy):
            return s
    return None


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


def write_report(
    out: Path,
    summary: list[dict[str, Any]],
    *,
    header: dict[str, Any],
    plots: list[Path],
) -> Path:
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
    exps = sorted({s["experiment"] for s in summary})
    if "E1" in exps:
        lines += _e1(summary)
    if "E2" in exps:
        lines += _e2(summary)
    if "E3" in exps:
        lines += _sweep(summary, "E3", "sigma", "σ", PAPER["E3"]["EvalStop"])
    if "E4" in exps:
        lines += _sweep(summary, "E4", "hack", "hack fraction", None)
    if "E5" in exps:
        lines += _e5(summary)
    if "E6" in exps:
        lines += _generic(summary, "E6")
        lines += _e6_sentences(summary)
    if "E7" in exps:
        lines += _e7(summary)
    for e in sorted(set(exps) - set(EXPERIMENTS)):
        lines += _generic(summary, e)
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots]
        lines.append("")
    p = out / "REPORT.md"
    p.write_text("\n".join(lines) + "\n")
    return p


def _e1(summary: list[dict[str, Any]]) -> list[str]:
    group = next(s["group"] for s in summary if s["experiment"] == "E1")
    lines = [
        f"## E1 — {EXPERIMENTS['E1']} ({group})",
        "",
        "| policy | JCT h | ΔJCT % | JCT done h | waste GPU-h | Δwaste % | precision | recall | FPR | F1 | delivered quality | paper |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    paper_txt = {
        "EvalStop": "ΔJCT −9.4, Δwaste −21.8, P 98.3, R ≈99, FPR 1.5",
        "StopAt-0.65": "ΔJCT ≈ EvalStop's, FPR 64.5",
        "LossPlateau": "R 38.3",
        "NoStop": "",
    }
    pols = [s["policy"] for s in summary if s["experiment"] == "E1"]
    for pol in pols:
        s = _get(summary, "E1", group, pol)
        lines.append(
            f"| {pol} | {_num(s, 'mean_jct_h')} | {_pct(s, 'd_jct_pct')} | {_num(s, 'mean_jct_h_completed')} | "
            f"{_num(s, 'wasted_gpu_hours', 0)} | {_pct(s, 'd_waste_pct')} | {_pct(s, 'precision')} | "
            f"{_pct(s, 'recall')} | {_pct(s, 'fpr')} | {_num(s, 'f1')} | "
            f"{_num(s, 'mean_delivered_quality', 3)} | {paper_txt.get(pol, '')} |"
        )
    lines += ["", "Against the paper:", ""]
    for pol, figs in PAPER["E1"].items():
        s = _get(summary, "E1", group, pol)
        lines += [_compare(pol, s, m, v) for m, v in figs.items()]
    ev, sa = _get(summary, "E1", group, "EvalStop"), _get(summary, "E1", group, "StopAt-0.65")
    if ev and sa:
        lines.append(
            f"- StopAt-0.65 ΔJCT {sa['d_jct_pct']:.1f} % vs EvalStop {ev['d_jct_pct']:.1f} % "
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
    groups = [s["group"] for s in summary if s["experiment"] == "E2" and s["policy"] == "NoStop"]
    deltas = []
    for g in groups:
        b, e = _get(summary, "E2", g, "NoStop"), _get(summary, "E2", g, "EvalStop")
        lines.append(
            f"| {g} | {_num(b, 'mean_jct_h')} | {_num(e, 'mean_jct_h')} | {_pct(e, 'd_jct_pct')} | "
            f"{_pct(e, 'd_jct_completed_pct')} | {_pct(e, 'd_waste_pct')} | {_pct(e, 'precision')} | {_pct(e, 'recall')} |"
        )
        if e and g != "tiresias":
            deltas.append(e["d_jct_pct"])
    lo, hi = PAPER["E2"]["range"]
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


def _sweep(
    summary: list[dict[str, Any]],
    exp: str,
    prefix: str,
    label: str,
    paper: dict[float, float] | None,
) -> list[str]:
    rows = [s for s in summary if s["experiment"] == exp]
    groups = sorted({s["group"] for s in rows}, key=lambda g: float(g.split("=")[1]))
    pols = [p for p in dict.fromkeys(s["policy"] for s in rows) if p != "NoStop"]
    lines = [f"## {exp} — {EXPERIMENTS[exp]}", ""]
    head = (
        f"| {label} | " + " | ".join(f"{p} P / R / FPR" for p in pols) + " | paper (EvalStop P) |"
    )
    lines += [head, "|---" * (len(pols) + 2) + "|"]
    for g in groups:
        x = float(g.split("=")[1])
        cells = []
        for p in pols:
            s = _get(summary, exp, g, p)
            cells.append(
                f"{_pct(s, 'precision', 0)} / {_pct(s, 'recall', 0)} / {_pct(s, 'fpr', 0)}"
            )
        pp = f"{paper[x]:g}" if paper and x in paper else ""
        lines.append(f"| {x:g} | " + " | ".join(cells) + f" | {pp} |")
    lines.append("")
    ev = [(_get(summary, exp, g, "EvalStop"), float(g.split("=")[1])) for g in groups]
    ev = [(s, x) for s, x in ev if s]
    if exp == "E3" and ev and paper:
        for x, v in paper.items():
            s = next((s for s, xx in ev if xx == x), None)
            lines.append(_compare(f"EvalStop at σ = {x:g}", s, "precision", v))
        others = [p for p in pols if p != "EvalStop"]
        above = all(
            (_get(summary, exp, g, "EvalStop") or {}).get("precision", 0)
            >= max(((_get(summary, exp, g, p) or {}).get("precision") or 0) for p in others)
            for g in groups
        )
        lines.append(
            "- EvalStop's precision is "
            + ("above" if above else "not always above")
            + " every other policy's at every σ (the paper: above the others)."
        )
    if exp == "E4" and ev:
        lowest = min(s["precision"] for s, _ in ev) * 100
        verdict = "consistent" if lowest >= PAPER["E4"]["EvalStop_min_precision"] else "differs"
        lines.append(
            f"- EvalStop's lowest precision over the sweep: {lowest:.1f} % (paper: ≥ 89 %) — {verdict}."
        )
        for g in groups:
            s = _get(summary, exp, g, "StopAt-0.65")
            if s:
                lines.append(
                    f"- StopAt-0.65 precision at {g}: {100 * s['precision']:.1f} % "
                    f"(its base rate among RLHF jobs is {100 * float(g.split('=')[1]):.0f} %)."
                )
    lines.append("")
    return lines


def _e5(summary: list[dict[str, Any]]) -> list[str]:
    rows = [s for s in summary if s["experiment"] == "E5" and s["policy"] != "NoStop"]
    lines = [
        f"## E5 — {EXPERIMENTS['E5']}",
        "",
        "| k | precision | recall | FPR | delay (evals after peak) | ΔJCT % | Δwaste % | delivered quality |",
        "|---|---|---|---|---|---|---|---|",
    ]
    best_f1 = max(rows, key=lambda s: s["f1"]) if rows else None
    for s in rows:
        lines.append(
            f"| {s['policy'].split('=')[1]} | {_pct(s, 'precision')} | {_pct(s, 'recall')} | {_pct(s, 'fpr')} | "
            f"{_num(s, 'detection_delay_evals')} | {_pct(s, 'd_jct_pct')} | {_pct(s, 'd_waste_pct')} | "
            f"{_num(s, 'mean_delivered_quality', 3)} |"
        )
    if best_f1:
        lines += [
            "",
            f"Best F1 at {best_f1['policy']} (paper: k = 2 balances early detection and false positives).",
            "",
        ]
    return lines


def _e6_sentences(summary: list[dict[str, Any]]) -> list[str]:
    """Learned vs EvalStop on the utility return, per noise level (the issue's goal)."""
    lines = []
    for group in sorted({s["group"] for s in summary if s["experiment"] == "E6"}):
        ev = _get(summary, "E6", group, "EvalStop")
        for s in summary:
            if s["experiment"] != "E6" or s["group"] != group or "[" not in s["policy"]:
                continue
            if ev is None:
                continue
            diff, half = s["return"] - ev["return"], s["return_ci95"] + ev["return_ci95"]
            verdict = (
                "better than" if diff > half else "worse than" if diff < -half else "on par with"
            )
            lines.append(
                f"- {group}: {s['policy']} utility {s['return']:.2f} vs EvalStop {ev['return']:.2f} "
                f"— {verdict} EvalStop."
            )
    return [*lines, ""]


def _e7(summary: list[dict[str, Any]]) -> list[str]:
    rows = [s for s in summary if s["experiment"] == "E7"]
    pols = [p for p in dict.fromkeys(s["policy"] for s in rows) if p != "NoStop"]
    groups = list(dict.fromkeys(s["group"] for s in rows))
    lines = [
        f"## E7 — {EXPERIMENTS['E7']}",
        "",
        "Real: RLHF jobs run on micro-RLHF curves (observed eval = the run's measured eval + "
        "extra σ). Synthetic: the `paper` calibration at the same σ.",
        "",
        "| curves | extra σ | "
        + " | ".join(f"{p} P / R / FPR" for p in pols)
        + " | EvalStop ΔJCT % | EvalStop regret |",
        "|---" * (len(pols) + 4) + "|",
    ]
    for g in groups:
        kind, sig = g.split(" sigma=")
        cells = []
        for p in pols:
            s = _get(summary, "E7", g, p)
            cells.append(
                f"{_pct(s, 'precision', 0)} / {_pct(s, 'recall', 0)} / {_pct(s, 'fpr', 0)}"
            )
        ev = _get(summary, "E7", g, "EvalStop")
        lines.append(
            f"| {kind} | {sig} | "
            + " | ".join(cells)
            + f" | {_pct(ev, 'd_jct_pct')} | {_num(ev, 'mean_regret', 3)} |"
        )
    lines.append("")
    for sig in ("0.02", "0.05", "0.12"):
        for p in pols:
            a = _get(summary, "E7", f"synthetic sigma={sig}", p)
            b = _get(summary, "E7", f"real sigma={sig}", p)
            if not a or not b:
                continue
            diffs = []
            for m in ("precision", "recall", "fpr"):
                d = 100 * (b[m] - a[m])
                if not math.isnan(d) and abs(d) >= 10:
                    diffs.append(f"{m} {100 * a[m]:.0f} → {100 * b[m]:.0f} %")
            if diffs:
                lines.append(
                    f"- σ = {sig}, {p}: real curves differ from synthetic ones: "
                    + "; ".join(diffs)
                    + "."
                )
    lines.append("")
    return lines


def _generic(summary: list[dict[str, Any]], exp: str) -> list[str]:
    rows = [s for s in summary if s["experiment"] == exp]
    lines = [
        f"## {exp}" + (f" — {EXPERIMENTS[exp]}" if exp in EXPERIMENTS else ""),
        "",
        "| setting | policy | ΔJCT % | Δwaste % | precision | recall | FPR | quality | utility return |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s['group']} | {s['policy']} | {_pct(s, 'd_jct_pct')} | {_pct(s, 'd_waste_pct')} | "
            f"{_pct(s, 'precision')} | {_pct(s, 'recall')} | {_pct(s, 'fpr')} | "
            f"{_num(s, 'mean_delivered_quality', 3)} | {_num(s, 'return', 2)} |"
        )
    lines.append("")
    return lines
