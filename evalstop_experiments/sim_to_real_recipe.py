"""The twin set to another recipe, checked out of sample, and where stopping starts to pay.

Out of sample: ``english_rlhf_b64`` is a second English corpus made after the twin was fixed,
on new seeds (corpus seed 1) and with a changed recipe, an eval of 64 completions instead
of 32.  The twin is set to that recipe (:func:`~evalstop_gym.corpus.twin.draw_twin` with
``eval_batch=64``: the same runs' shapes, each eval's noise the sd of a 64-sample mean), the
panel is built on it, and its scores there are the prediction for the 72 new runs, all of
which are scored (none was seen).  Both sides are scored with CIs over seeds.

Break-even: at each price factor and eval batch, the panel member that scores best *on the
twin* is the stopper a designer would ship; its score on the real runs says whether stopping
pays there (its interval above 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstop_gym.corpus.format import write_traces
from evalstop_gym.corpus.packaged import corpus_path, sidecar

from .scoring import env_kwargs
from .sim_to_real import (
    N_JOBS,
    REAL_TASK,
    TEST_SEEDS,
    TWIN_TASK,
    CheckRow,
    build_panel,
    plain_scores,
    side_scores,
)
from .twin_fit import TWIN_CORPUS, TWIN_RUNS, TWIN_SEED, fit_english_twin

#: The out-of-sample corpus and its recipe's eval batch.
OOS_CORPUS, OOS_EVAL_BATCH = "english_rlhf_b64", 64


def twin_for_recipe(out: str | Path, eval_batch: int) -> Path:
    """The twin's corpus set to ``eval_batch`` (same model, bandwidth and seed), in ``out``."""
    from evalstop_gym.corpus.twin import draw_twin

    fit = fit_english_twin()
    h = float(sidecar(TWIN_CORPUS)["bandwidth"])
    path = Path(out) / f"{TWIN_CORPUS}_b{eval_batch}.jsonl"
    write_traces(
        draw_twin(fit.model, TWIN_RUNS, TWIN_SEED, bandwidth=h, eval_batch=eval_batch), path
    )
    return path


def recipe_kwargs(twin_path: Path, real_corpus: str | None, factor: float, n_jobs: int = N_JOBS):
    """(twin kwargs, real kwargs) at ``factor``: the twin's test half, every real run."""
    twin = env_kwargs(TWIN_TASK, factor, n_jobs, curves=str(twin_path))
    if real_corpus is None:
        return twin, env_kwargs(REAL_TASK, factor, n_jobs)
    real = env_kwargs(REAL_TASK, factor, n_jobs, curves=str(corpus_path(real_corpus)))
    real["curve_split"] = "all"
    return twin, real


def out_of_sample(
    out: str | Path,
    prices: Sequence[float],
    *,
    eval_batch: int = OOS_EVAL_BATCH,
    corpus: str = OOS_CORPUS,
    seeds: Sequence[int] = TEST_SEEDS,
    panel_kwargs: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[CheckRow]:
    """The check on ``corpus``: the panel built on the twin set to its recipe, both sides scored."""
    twin_path = twin_for_recipe(out, eval_batch)
    return check_twin_file(
        twin_path, corpus, prices, seeds, panel_kwargs=panel_kwargs, progress=progress
    )


def check_twin_file(
    twin_path: Path,
    corpus: str | None,
    prices: Sequence[float],
    seeds: Sequence[int] = TEST_SEEDS,
    *,
    panel_kwargs: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    label: str = "out of sample",
) -> list[CheckRow]:
    """The panel built on the twin runs in ``twin_path`` at each price, scored on them and on
    ``corpus``'s runs played whole (CIs over seeds), or, for ``corpus`` None, on the real
    held-out test runs as ``english-heldout`` plays them (CIs over runs on both sides)."""
    rows = []
    for f in prices:
        twin_kw, real_kw = recipe_kwargs(twin_path, corpus, f)
        panel = build_panel(twin_kw, **(panel_kwargs or {}))
        if corpus is None:
            twin = side_scores(TWIN_TASK, f, twin_kw, panel, seeds)
            real = side_scores(REAL_TASK, f, real_kw, panel, seeds)
        else:
            twin = plain_scores(twin_kw, panel, seeds)
            real = plain_scores(real_kw, panel, seeds)
        rows += [CheckRow(f, m.name, m.kind, twin[m.name], real[m.name]) for m in panel]
        if progress:
            progress(f"{label} {f:g}x: scored on both sides")
    return rows


@dataclass(frozen=True)
class BreakEven:
    """One cell of the map: the stopper chosen on the twin and what it does on real runs."""

    eval_batch: int
    price_factor: float
    chosen: str
    twin: float
    real: float
    real_lo: float
    real_hi: float

    @property
    def pays(self) -> bool:
        """Whether stopping pays on the real runs: the chosen stopper's interval above 0."""
        return self.real_lo > 0.0


def break_even(rows_by_batch: dict[int, Sequence[CheckRow]]) -> list[BreakEven]:
    """Each (eval batch, price) cell: the member best on the twin, and its real score."""
    out = []
    for batch, rows in sorted(rows_by_batch.items()):
        for f in sorted({r.price_factor for r in rows}):
            best = max((r for r in rows if r.price_factor == f), key=lambda r: r.twin.score)
            out.append(
                BreakEven(
                    batch,
                    f,
                    best.stopper,
                    best.twin.score,
                    best.real.score,
                    best.real.lo,
                    best.real.hi,
                )
            )
    return out


def break_even_markdown(cells: Sequence[BreakEven]) -> str:
    """The map as a table: one row per eval batch, one column per price factor."""
    prices = sorted({c.price_factor for c in cells})
    lines = [
        "| eval batch | " + " | ".join(f"{p:g}x" for p in prices) + " |",
        "|---|" + "---|" * len(prices),
    ]
    for b in sorted({c.eval_batch for c in cells}):
        row = []
        for p in prices:
            c = next((c for c in cells if c.eval_batch == b and c.price_factor == p), None)
            row.append(
                "-"
                if c is None
                else f"{c.real:.2f} [{c.real_lo:.2f}, {c.real_hi:.2f}] {'pays' if c.pays else 'no'} ({c.chosen}; twin {c.twin:.2f})"
            )
        lines.append(f"| {b} | " + " | ".join(row) + " |")
    return "\n".join(lines)


__all__ = [
    "OOS_CORPUS",
    "OOS_EVAL_BATCH",
    "BreakEven",
    "break_even",
    "break_even_markdown",
    "check_twin_file",
    "out_of_sample",
    "recipe_kwargs",
    "twin_for_recipe",
]
