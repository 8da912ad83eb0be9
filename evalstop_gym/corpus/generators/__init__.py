"""Programs that make curve corpora by running real (small) RLHF training.

They need torch, so nothing in :mod:`evalstop_gym` imports them; they depend on
:mod:`evalstop_gym.corpus.format`, never the reverse.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path


def summary_line(
    traces: Sequence, elapsed: float, timings: Sequence[float], path: Path, what: str = "runs"
) -> str:
    """One line on a generated corpus: runs, wall time, CPU s per trained run, hacking share.

    ``timings`` holds the CPU seconds of the runs trained now (none when every run was
    reused from an earlier, resumed generation).
    """
    n_hack = sum(bool(t.label) for t in traces)
    per_run = (
        f"{statistics.fmean(timings):.2f} CPU s per trained run "
        f"(median {statistics.median(timings):.2f})"
        if timings
        else "all runs reused"
    )
    share = 100 * n_hack / len(traces) if traces else 0.0
    return (
        f"{len(traces)} {what} in {elapsed:.1f} s wall; {per_run}; {n_hack} hacking "
        f"({share:.1f}%); wrote {path}"
    )
