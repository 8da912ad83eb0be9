"""The score tables: the suite's Markdown table, the CI-coverage check, and the written files.

:func:`markdown_table` (one line per task and stopper, "n/a" where the reference does
not beat NoStop, :func:`unreliable_prices`), :func:`coverage_check` and
:func:`coverage_table` (each stopper scored on blocks of its seeds), and
:func:`write_scores` (the CSV and the Markdown with its legends).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.fileio import atomic_open, atomic_write

from ..stats import seed_blocks
from .bootstrap import normalised_score
from .reference import REFERENCE_KIND, Reference
from .stoppers import BEST_FLOOR, CURVE_ORACLE, CUSUM_TUNED, EVALSTOP, EXTRA, ORACLE
from .task import ScoreRow


def fmt(x: float, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals ("–" for None or NaN)."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The suite table: one line per task and stopper, one score column per price.

    ``rows``: :meth:`ScoreRow.as_dict` rows; a stopper is found by its kind, not its name.
    """
    factors = sorted({r["price_factor"] for r in rows})
    head = ["task", "ref", "stopper"] + [f"score @ {f:g}× [95 % CI]" for f in factors]
    head += [f"ΔJCT % @ {f:g}×" for f in factors]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keyed = {(r["task"], _key(r), r["price_factor"]): r for r in rows}
    weak = unreliable_prices(rows)
    seen: list[tuple[str, tuple[str, str]]] = []
    for r in rows:
        if (r["task"], _key(r)) not in seen:
            seen.append((r["task"], _key(r)))
    for task, key in seen:
        first = next(keyed[(task, key, f)] for f in factors if (task, key, f) in keyed)
        best = key[0] == BEST_FLOOR
        cells = [task, first["reference"], "Best floor" if best else first["stopper"]]
        for f in factors:
            r = keyed.get((task, key, f))
            if r is None:
                cells.append("–")
                continue
            named = f" ({best_family(r)})" if best else ""
            if (task, f) in weak:
                cells.append("n/a" + named)
            else:
                cell = f"{fmt(r['score'])} [{fmt(r['score_lo'])}, {fmt(r['score_hi'])}]"
                cells.append(cell + named)
        for f in factors:
            r = keyed.get((task, key, f))
            cells.append("–" if r is None else fmt(r["delta_jct_pct"], 1))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def best_family(row: dict[str, Any]) -> str:
    """The family a "Best floor" row plays (its display name is "Best floor (<family>)")."""
    return str(row["stopper"]).removeprefix("Best floor (").removesuffix(")")


#: The stoppers whose scores the CI-coverage check splits into blocks of seeds.
COVERAGE_KINDS: tuple[str, ...] = (BEST_FLOOR, CUSUM_TUNED, EVALSTOP, EXTRA, CURVE_ORACLE, ORACLE)


def coverage_check(rows: Sequence[ScoreRow], blocks: int = 3) -> list[dict[str, Any]]:
    """Each stopper's score on blocks of its test seeds, beside the full run's 95 % CI.

    The seeds are split in order into ``blocks`` near-equal blocks
    (:func:`~evalstop_experiments.stats.seed_blocks`, e.g. 3 blocks of 10 of 30);
    each block is scored as the full run is (:func:`normalised_score` on its
    seeds).  ``inside`` says whether each block's score falls in the full run's
    interval: a CI that covers its run's blocks poorly is too narrow for the
    seed-to-seed spread.  Rows of :data:`COVERAGE_KINDS` with per-seed data only,
    and only with at least 2 seeds a block.
    """
    out = []
    for r in rows:
        if r.stopper_kind not in COVERAGE_KINDS or len(r.per_seed) < 2 * blocks:
            continue
        u, u0, uref = (np.array(x) for x in zip(*r.per_seed))
        parts = [normalised_score(u[b], u0[b], uref[b]) for b in seed_blocks(len(u), blocks)]
        out.append(
            {
                "task": r.task,
                "price_factor": r.price_factor,
                "stopper": r.stopper,
                "seeds": r.seeds,
                "score": r.score,
                "score_lo": r.score_lo,
                "score_hi": r.score_hi,
                "blocks": parts,
                "inside": [r.score_lo <= b[0] <= r.score_hi for b in parts],
            }
        )
    return out


def coverage_table(checks: Sequence[dict[str, Any]]) -> str:
    """The CI-coverage check as Markdown: full score and CI, each block's score and CI."""
    if not checks:
        return "CI coverage: too few seeds to split into blocks.\n"
    n = len(checks[0]["blocks"])
    head = ["task", "price", "stopper", "score [95 % CI]"]
    head += [f"block {i + 1}" for i in range(n)] + ["blocks inside CI"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in checks:
        cells = [c["task"], f"{c['price_factor']:g}×", c["stopper"]]
        cells.append(f"{fmt(c['score'])} [{fmt(c['score_lo'])}, {fmt(c['score_hi'])}]")
        cells += [f"{fmt(b[0])} [{fmt(b[1])}, {fmt(b[2])}]" for b in c["blocks"]]
        cells.append(f"{sum(c['inside'])}/{len(c['inside'])}")
        lines.append("| " + " | ".join(cells) + " |")
    inside = sum(sum(c["inside"]) for c in checks)
    total = sum(len(c["inside"]) for c in checks)
    seeds = checks[0]["seeds"]
    return (
        f"CI coverage: the test seeds in {n} blocks of ~{seeds // n}, each scored alone; "
        f"{inside} of {total} block scores fall inside their full run's 95 % CI.\n\n"
        + "\n".join(lines)
        + "\n"
    )


def unreliable_prices(rows: Sequence[dict[str, Any]]) -> set[tuple[str, float]]:
    """The (task, price factor) pairs whose reference does not beat NoStop significantly.

    There the score's denominator, mean(Uref − U0), has a 95 % interval that reaches 0, so
    every ratio can blow up (a quick run on few seeds shows -350 [-805, 859]): the tables
    show "n/a" instead of a number, and the CSV keeps the numbers.
    """
    return {
        (r["task"], r["price_factor"])
        for r in rows
        if r["stopper_kind"] == REFERENCE_KIND[Reference(r["reference"])]
        and not r["u_minus_u0_lo"] > 0
    }


#: What a table of normalised scores means (E8.md, E7_scores.md, REPORT.md).
SCORE_LEGEND = (
    "Normalised score (U − U0) / (Uref − U0): 0 = NoStop keeping each run's best "
    "checkpoint, 1 = the reference (`ref`: Bayes on synthetic tasks, the privileged "
    "Oracle on real corpora); 95 % paired bootstrap CI over seeds. n/a: the "
    "reference's own gain over NoStop is not significant at that price (its 95 % CI "
    "reaches 0), so no ratio is shown (the CSV keeps it). ΔJCT: mean JCT against NoStop's."
)
#: What a held-out real-run table's intervals mean (added to :data:`SCORE_LEGEND`).
HELDOUT_LEGEND = (
    "Held-out real-run tasks (`ref` CurveOracle): floors and CUSUM tuned on the corpus's "
    "train runs, scores on its test runs, each episode with fresh measurement noise; the "
    "95 % interval is a bootstrap over test runs (every job replaying a run resampled with "
    "it; the synthetic LoRA/DPO jobs by seed), not over seeds."
)


def write_scores(
    out: str | Path,
    rows: Sequence[dict[str, Any]],
    stem: str,
    title: str,
    figures: Sequence[Path] = (),
    notes: str = "",
) -> list[Path]:
    """Write ``<stem>.csv`` (every column but ``stopper_kind``) and ``<stem>.md``.

    The Markdown holds the table, then ``notes`` (Markdown), then ``figures``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{stem}.csv", out / f"{stem}.md"
    columns = [c for c in rows[0] if c != "stopper_kind"]
    with atomic_open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    atomic_write(
        md_path,
        f"# {title}\n\n{SCORE_LEGEND}\n\n"
        + (f"{HELDOUT_LEGEND}\n\n" if _any_heldout(rows) else "")
        + markdown_table(rows)
        + (f"\n{notes}" if notes else "")
        + "".join(f"\n![{p.stem}]({p.name})\n" for p in figures),
    )
    return [csv_path, md_path]


def _any_heldout(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether any row is normalised to the CurveOracle (a held-out real-run task's)."""
    return any(r.get("reference") == Reference.CURVE_ORACLE.value for r in rows)


def _key(r: dict[str, Any]) -> tuple[str, str]:
    """A score row's stopper identity (:attr:`ScoreRow.key`) from its dict."""
    kind = r["stopper_kind"]
    return (kind, r["stopper"] if kind == EXTRA else "")
