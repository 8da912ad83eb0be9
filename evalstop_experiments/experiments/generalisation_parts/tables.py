"""E9's tables and files: the PPO grid, its CI-coverage check and legend, the
backward-induction tables; ``E9.csv`` / ``E9.md`` and ``E9_backward.csv`` / ``E9_backward.md``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baselines.training.domain_random import COMMON_WINDOW
from evalstop_gym.fileio import atomic_open, atomic_write

from ...scoring import SCORE_LEGEND, fmt
from .lsm_models import (
    GENERAL,
    GENERAL_EPISODES,
    GENERAL_JOBS,
    GENERAL_NOISE,
    GENERAL_PRICE_FACTOR,
    GENERAL_REGIME_WEIGHTS,
    GENERAL_REGIMES,
    GENERAL_TRAIN_SEED,
    LSM_EPISODES,
    LSM_TRAIN_SEED,
    ROUTED,
)
from .lsm_scores import SUITE_SYNTHETIC
from .ppo_grid import COVERAGE_BLOCKS, FLOOR_ROW, SIZES, SMOKE_NOTE, TRAIN_SEED, TRAIN_SETS


def _cell(r: dict[str, Any] | None) -> str:
    """score [CI]; Δfloor [CI] (models); hacking runs' median end − peak / healthy stopped."""
    if r is None:
        return "–"
    cell = f"{fmt(r['score'])} [{fmt(r['score_lo'])}, {fmt(r['score_hi'])}]"
    if r["train"] == FLOOR_ROW:
        cell += f" ({r['floor_family']})"
    else:
        cell += f" Δfloor {fmt(r['minus_floor'])} [{fmt(r['minus_floor_lo'])}, {fmt(r['minus_floor_hi'])}]"
    if math.isfinite(r["hack_after_peak_median"]):
        share = fmt(100 * r["healthy_stopped_share"], 0)
        cell += f"; {r['hack_after_peak_median']:+.2f} / {share} %"
    return cell


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The train x test grid: each cell's score and CI, the difference to the task's best
    floor family (the first row) and where the model stops."""
    trains = list(dict.fromkeys(r["train"] for r in rows))
    tests = list(dict.fromkeys(r["test"] for r in rows))
    refs = {r["test"]: r["reference"] for r in rows}
    keyed = {(r["train"], r["test"]): r for r in rows}
    head = ["trained on \\ tested on"] + [f"{t} ({refs[t]})" for t in tests]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tr in trains:
        lines.append("| " + " | ".join([tr] + [_cell(keyed.get((tr, t))) for t in tests]) + " |")
    weak = sorted({r["test"] for r in rows if not r.get("ref_gain_lo", 1.0) > 0})
    if weak:
        lines.append(
            f"\nThe reference's gain over NoStop has a 95 % CI reaching 0 on {', '.join(weak)}: "
            "those scores are ratios of a denominator that may be 0."
        )
    return "\n".join(lines) + "\n"


def coverage_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The CI-coverage check: each model's score on blocks of the test seeds beside its CI."""
    from ...scoring import coverage_table

    checks = []
    for r in rows:
        blocks = [
            (r[f"block_{i}"], r[f"block_{i}_lo"], r[f"block_{i}_hi"])
            for i in range(1, COVERAGE_BLOCKS + 1)
        ]
        if r["train"] == FLOOR_ROW or not all(math.isfinite(b[0]) for b in blocks):
            continue
        checks.append(
            {
                "task": r["test"],
                "price_factor": 1.0,
                "stopper": r["train"],
                "seeds": r["seeds"],
                "score": r["score"],
                "score_lo": r["score_lo"],
                "score_hi": r["score_hi"],
                "blocks": blocks,
                "inside": [r["score_lo"] <= b[0] <= r["score_hi"] for b in blocks],
            }
        )
    return coverage_table(checks)


def legend(rows: Sequence[dict[str, Any]]) -> str:
    """What the table shows: the training sets, the budget, the window, the score."""
    mix = ", ".join(TRAIN_SETS["mix"])
    seeds = rows[0]["seeds"] if rows else 0
    steps = sorted({int(r["train_timesteps"]) for r in rows if r["train"] != FLOOR_ROW})
    return (
        f"PPO (shipped defaults, {'/'.join(map(str, steps))} steps, training seed {TRAIN_SEED}) "
        "trained on each row's tasks; "
        f"`mix` draws each training cluster episode from {mix}. Models see the last "
        f"{COMMON_WINDOW} evals (`paper`'s 10, padded to {COMMON_WINDOW} slots). "
        f"{seeds} test seeds per cell, 100-job episodes, 1× price. {SCORE_LEGEND} "
        f"`{FLOOR_ROW}`: the task's best floor family, tuned on the validation seeds "
        "(`trl-heldout`: on its train runs; it is scored against the CurveOracle with CIs "
        "over its test runs). Each model's "
        "cell: score [95 % CI]; Δfloor: mean utility minus the best floor's on the same "
        "seeds [95 % CI]; then the hacking RLHF runs' median stop minus true peak (progress) "
        "/ the share of healthy RLHF runs stopped before their end."
        + (SMOKE_NOTE if max(steps, default=0) <= SIZES["quick"]["timesteps"] else "")
    )


def write_e9(out: str | Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """Write ``OUT/E9.csv`` (every column) and ``OUT/E9.md`` (the grid, the CI coverage)."""
    out = Path(out)
    csv_path, md_path = out / "E9.csv", out / "E9.md"
    with atomic_open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write(
        md_path,
        f"# E9: generalisation\n\n{legend(rows)}\n\n{markdown_table(rows)}\n"
        f"{coverage_markdown(rows)}",
    )
    return [csv_path, md_path]


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an ``E9.csv``, numbers read back as numbers."""

    def value(text: str) -> Any:
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    with open(path, newline="") as fh:
        return [{k: value(v) for k, v in r.items()} for r in csv.DictReader(fh)]


def lsm_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The backward-induction tables: the matrix at 1x, then the general and routed models' prices."""
    one = [r for r in rows if r["price_factor"] == 1.0]
    tests = list(dict.fromkeys(r["test"] for r in one))
    names = list(dict.fromkeys(r["stopper"].split(" (")[0] for r in one))
    keyed = {(r["stopper"].split(" (")[0], r["test"]): r for r in one}
    head = ["stopper \\ tested on (1x)"] + [
        f"{t} ({keyed[(names[0], t)]['reference']})" for t in tests
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in names:
        cells = [n]
        for t in tests:
            r = keyed.get((n, t))
            cells.append(_lsm_cell(r))
        lines.append("| " + " | ".join(cells) + " |")
    floors = ", ".join(
        f"{t}: {keyed[('Best floor', t)]['stopper'][12:-1]}"
        for t in tests
        if ("Best floor", t) in keyed
    )
    text = "\n".join(lines) + f"\n\nBest floor family per task: {floors}.\n"
    prices = sorted({r["price_factor"] for r in rows})
    overall = ("Best floor", f"lsm[{GENERAL}]", f"lsm[{ROUTED}]")
    gen = [r for r in rows if r["stopper"].split(" (")[0] in overall]
    if len(prices) > 1:
        head = ["task", "stopper"] + [f"{f:g}x" for f in prices]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        by = {(r["test"], r["stopper"].split(" (")[0], r["price_factor"]): r for r in gen}
        for t in dict.fromkeys(r["test"] for r in gen if r["test"] in SUITE_SYNTHETIC):
            for n in overall:
                if not any((t, n, f) in by for f in prices):
                    continue
                lines.append(
                    "| "
                    + " | ".join([t, n] + [_lsm_cell(by.get((t, n, f))) for f in prices])
                    + " |"
                )
        text += (
            "\nThe general and routed models at each price (n/a: Bayes's gain over NoStop has a CI reaching 0):\n\n"
            + "\n".join(lines)
            + "\n"
        )
    return text


def _lsm_cell(r: dict[str, Any] | None) -> str:
    """score [CI]; minus the best floor [CI]; hacking runs' median end - peak; healthy stopped."""
    if r is None:
        return "–"
    if not r["ref_gain_lo"] > 0:
        return "n/a"
    cell = f"{fmt(r['score'])} [{fmt(r['score_lo'])}, {fmt(r['score_hi'])}]"
    if not r["stopper"].startswith("Best floor") and r["stopper"] != "Bayes":
        cell += f" Δfloor {fmt(r['minus_floor'])} [{fmt(r['minus_floor_lo'])}, {fmt(r['minus_floor_hi'])}]"
    if math.isfinite(r["hack_after_peak_median"]):
        cell += (
            f"; {r['hack_after_peak_median']:+.2f} / {fmt(100 * r['healthy_stopped_share'], 0)} %"
        )
    return cell


LSM_LEGEND = (
    "Backward-induction stoppers (`baselines.backward`, Longstaff-Schwartz with scikit-learn's "
    "HistGradientBoostingRegressor): `lsm[T]` trained on task T alone "
    f"({LSM_EPISODES} episodes from seed {LSM_TRAIN_SEED}), `lsm[general]` one model over "
    f"the regimes {', '.join(GENERAL_REGIMES)} (drawn {':'.join(map(str, GENERAL_REGIME_WEIGHTS))}), eval noise {GENERAL_NOISE[0]}-{GENERAL_NOISE[1]} "
    f"and price factors {GENERAL_PRICE_FACTOR[0]}-{GENERAL_PRICE_FACTOR[1]} "
    f"({GENERAL_EPISODES} episodes of {GENERAL_JOBS} jobs from seed {GENERAL_TRAIN_SEED}), "
    "told each task's noise and price; `lsm[routed]` one model per regime on the same "
    "episodes, routed by regime evidence pooled over the jobs of an episode (played in time "
    "order). Each cell: score [95 % CI] against the reference; Δfloor: mean utility minus "
    "the best floor family's (tuned on the validation seeds) on the same seeds [95 % CI]; then "
    "the hacking runs' median stop minus true peak (progress) / the share of healthy RLHF "
    "runs stopped before their end."
)


def write_lsm(out: str | Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """Write ``OUT/E9_backward.csv`` (every column) and ``OUT/E9_backward.md`` (the tables)."""
    out = Path(out)
    csv_path, md_path = out / "E9_backward.csv", out / "E9_backward.md"
    with atomic_open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    seeds = rows[0]["seeds"] if rows else 0
    atomic_write(
        md_path,
        f"# E9: backward-induction stoppers across tasks\n\n{LSM_LEGEND} {seeds} test seeds.\n\n"
        + lsm_markdown(rows),
    )
    return [csv_path, md_path]
