"""The run plan of a generated corpus: which grid cell and which seed each run gets.

Both generators (:mod:`evalstop_corpora.micro_rlhf` and :mod:`evalstop_corpora.trl`) draw
their runs from a grid of swept hyperparameters by this one rule, so a corpus of either kind
covers its grid the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Run ``i`` of a corpus with seed ``S`` gets run seed ``S * RUN_SEED_STRIDE + i``: distinct
#: across the runs of a corpus and across corpora of fewer runs than this.
RUN_SEED_STRIDE = 100_000


def grid_runs(
    grid: Mapping[str, Sequence[Any]], n_runs: int, seed: int, overrides: Mapping[str, Any]
) -> list[tuple[int, dict[str, Any]]]:
    """The run seed and hyperparameters of each of ``n_runs`` runs over ``grid``.

    Run ``i`` takes cell ``perm[i % n_cells]`` of the grid's cells (``itertools.product`` of
    its values, in key order), ``perm`` a permutation drawn from ``seed``, so ``n_cells`` runs
    cover the grid exactly once and a longer corpus repeats it in the same order. Its run seed
    is ``seed * RUN_SEED_STRIDE + i``.

    Args:
        grid: Swept field -> its values.
        n_runs: Number of runs (>= 0).
        seed: Corpus seed (cell order and run seeds).
        overrides: Fields that are the same for every run. An override of a swept field wins
            over the grid's value (the quick TRL corpus fixes ``lr`` that way); the run seed
            cannot be overridden (pass it as a keyword beside these fields).

    Returns:
        ``(run seed, fields)`` per run, in run order.
    """
    if n_runs < 0:
        raise ValueError(f"n_runs must be >= 0, got {n_runs}")
    cells = list(itertools.product(*grid.values()))
    perm = np.random.default_rng(seed).permutation(len(cells))
    return [
        (
            seed * RUN_SEED_STRIDE + i,
            {**dict(zip(grid, cells[perm[i % len(cells)]], strict=True)), **overrides},
        )
        for i in range(n_runs)
    ]


__all__ = ["RUN_SEED_STRIDE", "grid_runs"]
