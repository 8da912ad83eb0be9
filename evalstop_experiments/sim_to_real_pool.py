"""The sim-to-real check of the pooled twin: one fit, three real targets no fit saw.

Each check (:data:`POOL_CHECKS`, fixed before any was scored) fits a pooled twin
(:mod:`evalstop_experiments.twin_pool`) on some English corpora, sets it to the target's recipe
(its eval batch and trainer mix), builds the panel on it (:func:`~.sim_to_real.build_panel`,
the same 17 stoppers) and scores the panel on the twin and on the target's real runs, both
against the CurveOracle:

* ``heldout``: the pool fitted on everything but ``english_rlhf``'s test half, scored on that
  test half as ``english-heldout`` plays it (intervals over runs on both sides);
* ``loo-b64`` / ``loo-s2``: leave one corpus out: the pool without ``english_rlhf_b64``
  (without ``english_rlhf_s2``) predicts it, played whole (intervals over seeds);
* ``s3``: the whole pool predicts ``english_rlhf_s3``, 72 runs of the fitted recipe on corpus
  seed 3, generated after the pool and these checks were fixed (intervals over seeds).

The real runs' scores are never used to fit or choose anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstop_gym import ConfigError
from evalstop_gym.corpus.format import CurveTrace
from evalstop_gym.corpus.packaged import ENGLISH_CORPUS

from .sim_to_real import TEST_SEEDS, CheckRow, build_panel, plain_scores
from .sim_to_real_recipe import check_twin_file, recipe_kwargs
from .twin_pool import (
    POOL_CORPUS,
    POOL_FORM,
    POOL_SOURCES,
    corpus_side,
    fit_pool_twin,
    trainer_mix,
    write_pool,
)


@dataclass(frozen=True)
class PoolCheck:
    """One check: the corpora the pool is fitted on, the real target and its recipe.

    Attributes:
        name: The check's name (``--pool-checks``).
        sources: (corpus, side) pairs of the fit.
        target: The packaged corpus whose runs are scored (played whole), or None for
            ``english_rlhf``'s test half as ``english-heldout`` plays it.
        eval_batch: The target's eval batch (the twin is set to it).
    """

    name: str
    sources: tuple[tuple[str, str], ...]
    target: str | None
    eval_batch: int

    def target_runs(self) -> list[CurveTrace]:
        """The target's real runs (for their trainer mix)."""
        if self.target is None:
            return corpus_side(ENGLISH_CORPUS, "test")
        return corpus_side(self.target, "all")


_TRAIN = ((ENGLISH_CORPUS, "train"),)
#: The pooled twin's checks, in the order they are run.
POOL_CHECKS: dict[str, PoolCheck] = {
    c.name: c
    for c in (
        PoolCheck("heldout", POOL_SOURCES, None, 32),
        PoolCheck("loo-b64", (*_TRAIN, ("english_rlhf_s2", "all")), "english_rlhf_b64", 64),
        PoolCheck("loo-s2", (*_TRAIN, ("english_rlhf_b64", "all")), "english_rlhf_s2", 32),
        PoolCheck("s3", POOL_SOURCES, "english_rlhf_s3", 32),
    )
}


def pool_twin_for(out: str | Path, check: PoolCheck, form: str = POOL_FORM) -> tuple[Path, Any]:
    """The check's pooled twin (of ``form``) set to its target's recipe, written into ``out``."""
    fit = fit_pool_twin(check.sources, form=form)
    mix = trainer_mix(check.target_runs())
    name = f"{POOL_CORPUS}_{check.name}_{form}.jsonl"
    path = write_pool(Path(out) / name, fit, eval_batch=check.eval_batch, mix=mix)
    return path, fit


def run_pool_check(
    out: str | Path,
    name: str,
    prices: Sequence[float],
    seeds: Sequence[int] = TEST_SEEDS,
    *,
    form: str = POOL_FORM,
    panel_kwargs: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[CheckRow]:
    """One pooled-twin check at each price: the panel built on the twin, both sides scored.

    ``form`` is the pooled twin's (``"shape"``: the first pooled twin's checks)."""
    if name not in POOL_CHECKS:
        raise ConfigError("check", name, f"one of {list(POOL_CHECKS)}")
    check = POOL_CHECKS[name]
    path, fit = pool_twin_for(out, check, form)
    if progress:
        progress(f"{name}: pool fitted on {fit.model.source}, bandwidth {fit.bandwidth}")
    return check_twin_file(
        path, check.target, prices, seeds, panel_kwargs=panel_kwargs, progress=progress, label=name
    )


def corpus_spread(
    out: str | Path,
    name: str,
    other: str,
    prices: Sequence[float],
    seeds: Sequence[int] = TEST_SEEDS,
    *,
    form: str = POOL_FORM,
    progress: Callable[[str], None] | None = None,
) -> list[CheckRow]:
    """How far two real corpora of one recipe are apart: check ``name``'s panel (built on its
    pooled twin, which read neither corpus) scored on its target's runs and on ``other``'s,
    both played whole (CIs over seeds).  In each row ``twin`` holds the score on the target,
    ``real`` the score on ``other``: the agreement figures are then real against real, the
    floor no twin can go under on a corpus of that size."""
    check = POOL_CHECKS[name]
    if check.target is None or other in {check.target, *(c for c, _ in check.sources)}:
        raise ConfigError("other", other, f"a corpus {name}'s pool did not read, not its target")
    path, _ = pool_twin_for(out, check, form)
    rows = []
    for f in prices:
        twin_kw, first = recipe_kwargs(path, check.target, f)
        _, second = recipe_kwargs(path, other, f)
        panel = build_panel(twin_kw)
        a, b = plain_scores(first, panel, seeds), plain_scores(second, panel, seeds)
        rows += [CheckRow(f, m.name, m.kind, a[m.name], b[m.name]) for m in panel]
        if progress:
            progress(f"spread {check.target} vs {other} {f:g}x: scored")
    return rows


__all__ = ["POOL_CHECKS", "PoolCheck", "corpus_spread", "pool_twin_for", "run_pool_check"]
