"""Shared timing for the benchmark scripts: process CPU time, interleaved repetitions.

The machine is shared, so wall-clock figures move with other people's load.
Each benchmark runs its contenders in turn, ``reps`` times, in alternating
order (A B, B A, A B, ...), measures each run with ``time.process_time``
(this process's CPU time), and reports the ratio of the best runs (min) and
the median of the per-round ratios.
"""

from __future__ import annotations

import functools
import resource
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def cpu_rate(run: Callable[[], float]) -> float:
    """Units of work per CPU second of one call of ``run`` (which returns its units)."""
    t0 = time.process_time()
    units = run()
    return units / (time.process_time() - t0)


def alternating(contenders: dict[str, Callable[[], T]], reps: int) -> dict[str, list[T]]:
    """What each contender's call returns, over ``reps`` rounds in alternating order."""
    results: dict[str, list[T]] = {name: [] for name in contenders}
    order = list(contenders.items())
    for _ in range(reps):
        for name, run in order:
            results[name].append(run())
        # A B, then B A: whatever running first or last in a round does to a
        # contender (caches, the allocator, the load's drift) falls on each in turn.
        order.reverse()
    return results


def interleaved(contenders: dict[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    """Rates (units per CPU second) of each contender over ``reps`` interleaved rounds."""
    return alternating(
        {name: functools.partial(cpu_rate, run) for name, run in contenders.items()}, reps
    )


def ratio(rates: dict[str, list[float]], num: str, den: str) -> tuple[float, float]:
    """(ratio of the best rates, median of the per-round ratios) of ``num`` over ``den``."""
    best = max(rates[num]) / max(rates[den])
    med = statistics.median(a / b for a, b in zip(rates[num], rates[den]))
    return best, med


def report(title: str, rates: dict[str, list[float]], num: str, den: str, target: float) -> str:
    """One line: best rates of both, the ratios, the target and whether it is met."""
    best, med = ratio(rates, num, den)
    ok = "met" if min(best, med) >= target else "NOT met"
    return (
        f"{title:34s} {max(rates[num]):11.0f}/s {max(rates[den]):11.0f}/s "
        f"ratio best {best:5.2f} median {med:5.2f}  (target >= {target:.2f}: {ok})"
    )


def children_cpu() -> float:
    """CPU seconds of this process's ended (and waited-for) children, and theirs."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def seconds_ratio_line(title: str, new: list[float], ref: list[float], target: float | None) -> str:
    """One line for CPU seconds (lower is faster): best and median ratios new/ref, and
    whether both are within ``target`` (None: no target)."""
    best = min(new) / min(ref)
    med = statistics.median(a / b for a, b in zip(new, ref))
    verdict = ""
    if target is not None:
        verdict = f"  (target <= {target:.2f}: {'met' if max(best, med) <= target else 'NOT met'})"
    return (
        f"{title:40s} {min(new):8.2f} s vs {min(ref):8.2f} s CPU (best), "
        f"ratio best {best:5.3f} median {med:5.3f}{verdict}"
    )
