"""E12's detection figures on the test runs: precision, recall, FPR, warned-before-peak, lead.

:func:`detection_row` measures one tuned detector on the held-out runs, each figure with
a 95 % percentile bootstrap CI over runs (:func:`_boot`; the resamples drawn once,
:func:`_resamples`, and the shares computed over all of them at once, :func:`_share`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from baselines.signals import first_stop

from .runs import Runs
from .tuning import Detector

#: The experiment's id (the ``experiment`` of its rows).
ID = "E12"
#: Bootstrap resamples of the detection CIs.
N_BOOT = 2000


@functools.lru_cache(maxsize=8)
def _resamples(n: int, n_boot: int, seed: int) -> np.ndarray:
    """The ``n_boot`` resamples of ``n`` runs :func:`_boot` draws, one per row (read-only).

    Drawn one resample at a time, as the bootstrap always drew them (a single draw of
    shape ``(n_boot, n)`` takes other values from the generator); every statistic of
    every detector resamples the same rows, so they are drawn once.
    """
    rng = np.random.default_rng(seed)
    rows = np.array([rng.integers(0, n, n) for _ in range(n_boot)]).reshape(n_boot, n)
    rows.flags.writeable = False
    return rows


def _boot(
    values: Callable[[np.ndarray], float],
    n: int,
    n_boot: int = N_BOOT,
    seed: int = 0,
    batch: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[float, float]:
    """95 % percentile CI of ``values(index)`` over ``n_boot`` resamples of n runs.

    ``batch(rows)``, when given, computes ``values`` of every resample at once (a row of
    ``rows`` per resample) and must give the very same numbers.
    """
    rows = _resamples(n, n_boot, seed)
    draws = batch(rows) if batch is not None else np.array([values(i) for i in rows], float)
    draws = draws[np.isfinite(draws)]
    if not draws.size:
        return float("nan"), float("nan")
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def _share(hits: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Per row, the share of ``of``'s True entries where ``hits`` is True (NaN: none).

    Integer counts divided once: the numbers ``hits[of].mean()`` gives row by row (a
    mean of booleans is their exact count over their number).
    """
    num, den = (hits & of).sum(axis=1), of.sum(axis=1)
    return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def detection_row(det: Detector, test: Runs, n_boot: int = N_BOOT) -> dict[str, Any]:
    """Precision, recall, FPR, warned-before-peak share and lead times on ``test``, with CIs."""
    stops = np.array([_first_stop(det.policy, run) for run in test.observations])
    k = len(test.observations[0])
    fired = stops >= 0
    h = test.hacking
    lead_p = test.peak_progress - (stops + 1) / k
    lead_c = (test.peak_ckpt - stops).astype(float)

    def prec(i: np.ndarray) -> float:
        f, hh = fired[i], h[i]
        return float((f & hh).sum() / f.sum()) if f.sum() else float("nan")

    def rec(i: np.ndarray) -> float:
        return float(fired[i][h[i]].mean()) if h[i].any() else float("nan")

    def fpr(i: np.ndarray) -> float:
        return float(fired[i][~h[i]].mean()) if (~h[i]).any() else float("nan")

    def early(i: np.ndarray) -> float:
        hh = h[i]
        return float((fired[i] & (lead_c[i] >= 0))[hh].mean()) if hh.any() else float("nan")

    # The same statistics over a matrix of resamples (a row each), for the bootstrap.
    batches: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "precision": lambda r: _share(h[r], fired[r]),
        "recall": lambda r: _share(fired[r], h[r]),
        "fpr": lambda r: _share(fired[r], ~h[r]),
        "warned_before_peak": lambda r: _share(fired[r] & (lead_c[r] >= 0), h[r]),
    }

    def lead(arr: np.ndarray) -> Callable[[np.ndarray], float]:
        def f(i: np.ndarray) -> float:
            tp = (fired & h)[i]
            return float(arr[i][tp].mean()) if tp.any() else float("nan")

        return f

    n = len(stops)
    row: dict[str, Any] = {
        "experiment": ID,
        "detector": det.name,
        "boundary": det.boundary,
        "params": repr(det.policy),
        "n_test": n,
        "n_hacking": int(h.sum()),
        "train_j": det.train_j,
        "tuning": det.tuning,
    }
    all_i = np.arange(n)
    for key, fn in (
        ("precision", prec),
        ("recall", rec),
        ("fpr", fpr),
        ("warned_before_peak", early),
        ("lead_progress", lead(lead_p)),
        ("lead_ckpt", lead(lead_c)),
    ):
        row[key] = fn(all_i)
        row[f"{key}_lo"], row[f"{key}_hi"] = _boot(fn, n, n_boot, batch=batches.get(key))
    return row


def _first_stop(policy: Any, observations: Sequence[dict[str, np.ndarray]]) -> int:
    stop = first_stop(policy, observations)
    return -1 if stop is None else stop
