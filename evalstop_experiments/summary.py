"""The query layer: (cell, seed) rows aggregated, written as CSV, and looked up by typed fields.

Every policy is compared with NoStop on the same seeds of the same group:
``d_jct_pct`` = 100 (JCT - JCT_NoStop) / JCT_NoStop per seed, then averaged
with a 95 % Student-t interval (likewise ``d_waste_pct``).  Sections and plots
find summary rows through :func:`find`, :func:`rows_of`, :func:`policies_of`
and :func:`sweep_values` and format them with :func:`pct`, :func:`num` and
:func:`compare`; nothing here knows an experiment.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.fileio import atomic_open
from evalstop_gym.sim.metrics import CLUSTER_METRIC_KEYS, HONEST_METRIC_KEYS

from .cells import NOSTOP, PolicySpec
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

#: Summarised too for the cells whose rows hold them (every row: the honest metrics;
#: E10: the cluster metrics).
EXTRA_SUMMARY_METRICS: tuple[str, ...] = HONEST_METRIC_KEYS + CLUSTER_METRIC_KEYS

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


def rows_of(summary: list[dict[str, Any]], exp: str) -> list[dict[str, Any]]:
    """The summary rows of experiment ``exp``, in order."""
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


def pct(s: dict[str, Any] | None, m: str, digits: int = 1) -> str:
    """Metric ``m`` of summary row ``s`` as mean ± 95 % half-width in % (deltas as they are)."""
    if s is None:
        return "–"
    scale = 1.0 if m.startswith("d_") else 100.0
    return fmt_ci(s[m], s[f"{m}_ci95"], scale, digits)


def num(s: dict[str, Any] | None, m: str, digits: int = 2) -> str:
    """Metric ``m`` of summary row ``s`` as mean ± 95 % half-width ("–" for no row)."""
    return "–" if s is None else fmt_ci(s[m], s[f"{m}_ci95"], 1.0, digits)


def compare(name: str, s: dict[str, Any] | None, m: str, paper: float) -> str:
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


def prf(s: dict[str, Any] | None) -> str:
    """Precision / recall / FPR of summary row ``s`` in %, without decimals."""
    return f"{pct(s, 'precision', 0)} / {pct(s, 'recall', 0)} / {pct(s, 'fpr', 0)}"


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table: the header line, the rule, one line per row."""
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def generic_section(summary: list[dict[str, Any]], exp: str, title: str = "") -> list[str]:
    """Every cell of ``exp`` as a row: the section of an experiment without its own."""
    lines = [
        f"## {exp}" + (f" — {title}" if title else ""),
        "",
        "| setting | policy | ΔJCT % | Δwaste % | precision | recall | FPR | quality | utility return |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows_of(summary, exp):
        lines.append(
            f"| {s['group']} | {s['policy']} | {pct(s, 'd_jct_pct')} | {pct(s, 'd_waste_pct')} | "
            f"{pct(s, 'precision')} | {pct(s, 'recall')} | {pct(s, 'fpr')} | "
            f"{num(s, 'mean_delivered_quality', 3)} | {num(s, 'return', 2)} |"
        )
    lines.append("")
    return lines
