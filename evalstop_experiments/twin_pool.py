"""The pooled twin: one model of every English run a check does not score, by trainer.

The English twin (:mod:`evalstop_experiments.twin_fit`) is fitted on the 108 train runs of
``english_rlhf``'s fixed split, a split by grid cell and label that holds 60 GRPO, 42 RLOO and
6 online-DPO runs; out of sample it missed (docs/SIM_TO_REAL.md).  The pooled twin is fitted
on those train runs and on every later English corpus, each run's eval sd moved to a
32-completion eval (:func:`~evalstop_gym.corpus.twin.fit_twin` with ``eval_batch``), with one
Gaussian per hack label and trainer; a draw is set to a recipe by its eval batch and its
trainer mix (the job types a cluster runs, which a stopper sees).

Its criterion is the English twin's, on the pooled runs: every statistic of
:data:`~evalstop_gym.corpus.analysis.CRITERION_STATS` of 1,000 draws at the fitted trainer mix
inside the pooled runs' 95 % bootstrap interval, the largest passing bandwidth of
:data:`~evalstop_experiments.twin_fit.BANDWIDTHS`.  A fold leaves one corpus out of the pool
(:func:`fit_pool_twin` with ``sources``) so that corpus can be predicted out of sample.

``python -m evalstop_experiments.twin_pool`` rebuilds the shipped ``english_twin_pool.jsonl``
(deterministic; numpy only) and prints the criterion's table.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from evalstop_gym import ConfigError
from evalstop_gym.corpus.format import CurveTrace, write_traces
from evalstop_gym.corpus.packaged import DATA_DIR, ENGLISH_CORPUS, load_corpus, write_sidecar
from evalstop_gym.corpus.split import check_side, select, split_runs
from evalstop_gym.corpus.twin import draw_twin, fit_twin

from .twin_fit import (
    TWIN_RUNS,
    TWIN_SEED,
    TwinFit,
    choose_bandwidth,
    criterion_markdown,
    roughness,
)

#: The shipped pooled twin corpus.
POOL_CORPUS = "english_twin_pool"
#: What it is fitted on: (packaged corpus, side), side "train"/"test" of the fixed split or
#: "all".  The fitted corpus's test half is left out: the check scores it.
POOL_SOURCES: tuple[tuple[str, str], ...] = (
    (ENGLISH_CORPUS, "train"),
    ("english_rlhf_b64", "all"),
    ("english_rlhf_s2", "all"),
)
#: The eval batch the pool is fitted at (the fitted recipe's) and the field it is grouped by.
POOL_EVAL_BATCH, POOL_BY = 32, "trainer"
#: How the gold enters the run vector (``evalstop_gym.corpus.twin.FORMS``): the measured rise.
#: The first pooled twin used the gain-normalised shape; its draws were rougher than the runs
#: it was fitted on and every check missed (docs/SIM_TO_REAL.md).
POOL_FORM = "rise"


def corpus_side(corpus: str, side: str) -> list[CurveTrace]:
    """One side of a packaged corpus: the ``train`` or ``test`` runs of its split, or ``all``."""
    check_side(side)
    traces = load_corpus(corpus)
    return select(traces, split_runs(traces), side)


def source_name(sources: Sequence[tuple[str, str]]) -> str:
    """The pool's name for ``meta["twin_of"]``: the first corpus first, so the refitted Bayes
    keeps its family (``regime_fit.prior_base`` reads the name before the first ``:``)."""
    return "+".join(c if side == "all" else f"{c}:{side}" for c, side in sources)


def trainer_mix(traces: Sequence[CurveTrace]) -> dict[str, float]:
    """Each trainer's share of ``traces`` (their ``meta["trainer"]``)."""
    counts = Counter(str(t.meta.get(POOL_BY, "")) for t in traces)
    return {k: v / len(traces) for k, v in sorted(counts.items())}


def fit_pool_twin(
    sources: Sequence[tuple[str, str]] = POOL_SOURCES,
    n_runs: int = TWIN_RUNS,
    seed: int = TWIN_SEED,
    *,
    form: str = POOL_FORM,
) -> TwinFit:
    """Fit the pooled twin on ``sources`` by label and trainer, its bandwidth by the criterion.

    The criterion holds the gold's :func:`~.twin_fit.roughness` too for the ``"rise"`` form
    (the ``"shape"`` form is the first pooled twin, kept to reproduce its checks)."""
    if not sources:
        raise ConfigError("sources", list(sources), "at least one (corpus, side) pair")
    runs = [t for corpus, side in sources for t in corpus_side(corpus, side)]
    model = fit_twin(runs, source_name(sources), by=POOL_BY, eval_batch=POOL_EVAL_BATCH, form=form)
    extra = roughness if form == "rise" else None
    return choose_bandwidth(runs, model, n_runs=n_runs, seed=seed, extra=extra)


def draw_pool(
    fit: TwinFit,
    *,
    eval_batch: int = POOL_EVAL_BATCH,
    mix: Mapping[str, float] | None = None,
    n_runs: int = TWIN_RUNS,
    seed: int = TWIN_SEED,
) -> list[CurveTrace]:
    """Draws of a pooled twin at a recipe: its eval batch and trainer mix (None: the fitted)."""
    return draw_twin(
        fit.model,
        n_runs,
        seed,
        bandwidth=fit.drawn_bandwidth,
        eval_batch=eval_batch,
        group_mix=mix,
    )


def write_pool(
    path: str | Path,
    fit: TwinFit,
    *,
    eval_batch: int = POOL_EVAL_BATCH,
    mix: Mapping[str, float] | None = None,
    command: str = "python -m evalstop_experiments.twin_pool",
) -> Path:
    """Write a pooled twin's draws at a recipe and its sidecar (what it was fitted on, the
    bandwidth, whether the criterion passed, the recipe).  Returns the JSONL's path."""
    dest = Path(path)
    traces = draw_pool(fit, eval_batch=eval_batch, mix=mix)
    write_traces(traces, dest)
    write_sidecar(
        dest,
        command=command,
        seed=TWIN_SEED,
        runs=len(traces),
        hacking=sum(bool(t.label) for t in traces),
        bandwidth=fit.drawn_bandwidth,
        criterion_passed=fit.bandwidth is not None,
        fitted_on=fit.model.source,
        form=fit.model.form,
        eval_batch=eval_batch,
        trainer_mix=dict(mix) if mix is not None else "fitted",
    )
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    """Rebuild the shipped pooled twin (or one in ``--out``) and print the criterion's table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DATA_DIR), help=f"folder to write {POOL_CORPUS} in")
    args = ap.parse_args(argv)
    fit = fit_pool_twin()
    dest = write_pool(Path(args.out) / f"{POOL_CORPUS}.jsonl", fit)
    print(criterion_markdown(fit, "pooled runs"))
    print(f"bandwidth {fit.bandwidth} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
