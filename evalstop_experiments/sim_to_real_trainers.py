"""The sim-to-real gap by trainer: the same panel scored on each trainer's real runs alone.

The English corpora mix three trainers (GRPO, RLOO, online DPO), and the fixed split of
``english_rlhf`` is by cell and label, not by trainer: its train runs, on which the twin is
fitted, are 60 GRPO, 42 RLOO and 6 online DPO (one of them healthy).  So the twin knows
little of online DPO, and a corpus with more of it can be predicted worse.  Here each
corpus's real runs are split by ``meta["trainer"]``; the panel built on the twin (set to
the corpus's recipe, as the check and the out-of-sample check build it) is scored on all
of them and on each trainer's alone.  A trainer's runs are played whole as a corpus of their
own (``curve_split="all"``), so the replay's common map is fitted on them: a trainer's score
is that of a cluster running only that trainer's jobs.  Intervals are over seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalstop_gym.corpus.format import write_traces
from evalstop_gym.corpus.packaged import ENGLISH_CORPUS, load_corpus
from evalstop_gym.corpus.split import select, split_runs

from .scoring import env_kwargs
from .sim_to_real import (
    N_JOBS,
    REAL_TASK,
    TEST_SEEDS,
    TWIN_TASK,
    SideScore,
    build_panel,
    plain_scores,
)
from .sim_to_real_recipe import recipe_kwargs, twin_for_recipe

#: The trainers of the English corpora, in the tables' order.
TRAINERS = ("grpo", "rloo", "online_dpo")


@dataclass(frozen=True)
class TrainerRow:
    """One stopper on one corpus: its twin score, its real score on all runs and by trainer."""

    corpus: str
    stopper: str
    twin: SideScore
    real: dict[str, SideScore]  # "all" and each of TRAINERS


def _trainer_kwargs(out: Path, stem: str, runs: Sequence, factor: float) -> dict[str, dict]:
    """Env kwargs of each trainer's runs alone, played whole, written under ``out``."""
    kwargs = {}
    for t in TRAINERS:
        path = out / f"{stem}_{t}.jsonl"
        write_traces([r for r in runs if r.meta.get("trainer") == t], path)
        kw = env_kwargs(REAL_TASK, factor, N_JOBS, curves=str(path))
        kw["curve_split"] = "all"
        kwargs[t] = kw
    return kwargs


def by_trainer(
    out: str | Path,
    corpora: Sequence[tuple[str, int]],
    factor: float = 1.0,
    seeds: Sequence[int] = TEST_SEEDS,
    progress: Callable[[str], None] | None = None,
) -> list[TrainerRow]:
    """The fitted corpus's test runs and each ``(corpus, eval batch)`` out of sample, by trainer.

    The fitted corpus (``english_rlhf``) is scored as the check scores it (its test runs,
    the panel built on ``english-twin``); every other corpus as the out-of-sample check
    does (all its runs, the panel built on the twin set to its eval batch).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[TrainerRow] = []
    sides = [(ENGLISH_CORPUS, None), *corpora]
    for corpus, batch in sides:
        runs = load_corpus(corpus)
        if batch is None:  # the fitted corpus: its test runs, as english-heldout plays them
            twin_kw, real_kw = (
                env_kwargs(TWIN_TASK, factor, N_JOBS),
                env_kwargs(REAL_TASK, factor, N_JOBS),
            )
            runs = select(runs, split_runs(runs), "test")
            name = f"{corpus} (test runs)"
        else:
            twin_kw, real_kw = recipe_kwargs(twin_for_recipe(out, batch), corpus, factor)
            name = corpus
        panel = build_panel(twin_kw)
        twin = plain_scores(twin_kw, panel, seeds)
        real = {"all": plain_scores(real_kw, panel, seeds)}
        for t, kw in _trainer_kwargs(out, corpus, runs, factor).items():
            real[t] = plain_scores(kw, panel, seeds)
        rows += [
            TrainerRow(name, m.name, twin[m.name], {k: v[m.name] for k, v in real.items()})
            for m in panel
        ]
        if progress:
            progress(f"by trainer: {name} scored")
    return rows


def by_trainer_markdown(rows: Sequence[TrainerRow]) -> str:
    """One table per corpus: each stopper's twin and real scores, and the mean |real - twin|."""
    blocks = []
    for corpus in dict.fromkeys(r.corpus for r in rows):
        mine = [r for r in rows if r.corpus == corpus]
        sides = ["all", *TRAINERS]
        lines = [
            f"**{corpus}**",
            "",
            "| stopper | twin | real, all | " + " | ".join(TRAINERS) + " |",
            "|---|---|---|" + "---|" * len(TRAINERS),
        ]
        lines += [
            f"| {r.stopper} | {r.twin.score:.2f} | "
            + " | ".join(f"{r.real[s].score:.2f}" for s in sides)
            + " |"
            for r in mine
        ]
        mad = [sum(abs(r.real[s].score - r.twin.score) for r in mine) / len(mine) for s in sides]
        lines.append("| mean abs diff | | " + " | ".join(f"{m:.2f}" for m in mad) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


__all__ = ["TRAINERS", "TrainerRow", "by_trainer", "by_trainer_markdown"]
