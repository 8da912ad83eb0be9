"""``reproduce``'s progress lines and per-experiment timings.

Every experiment gets one completion line when it finishes, e.g.
``[E3] done: 20/20 cells × 10 seeds in 8.2 s (5.1 s CPU)``, written and flushed
at once also when the output is piped; on a terminal (as rich sees it) the
episodes also get one rich progress bar per experiment.  Work a stage does
before the episodes (E6's training, E7's corpus) gets a part line and counts
in its experiment's time.

Timings are honest about where they come from:

- wall: a stage's own wall time; for the episodes, which run through one pool
  in experiment order, the time from the previous experiment's last episode
  (or the start of the episodes) to this experiment's last one, so the parts
  add up to the run's wall time;
- CPU: a stage's CPU is this process's plus that of the worker processes it
  started and ended (``RUSAGE_CHILDREN``; Ray workers are not children, so
  with ``backend="ray"`` only this process's CPU counts); an episode's CPU is
  measured in the worker that ran it (``time.process_time``), and an episode
  that several cells share counts an equal share to each.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from evalstop_gym.parallel import kept_workers_cpu


def cpu_seconds() -> float:
    """CPU seconds of this process, its ended (waited-for) child processes and the live
    workers of a kept pool (:func:`evalstop_gym.parallel.kept_workers_cpu`)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + kept_workers_cpu()


def load_average() -> float | None:
    """The one-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass
class ExperimentTiming:
    """Where one experiment's time went in a run.

    ``ran``: episodes (cell, seed) whose result was computed now; ``reused``: taken
    from ``OUT/raw`` (``--resume``); ``parts``: wall seconds of the stage work before
    the episodes (e.g. ``{"models": 21.0}``); ``reused_parts``: stage work that was
    reused instead of redone (e.g. ``["models"]``); ``background``: its stage ran beside
    the others (its wall time overlaps theirs).
    """

    experiment: str
    wall_s: float = 0.0
    cpu_s: float = 0.0
    cells: int = 0
    seeds: int = 0
    ran: int = 0
    reused: int = 0
    parts: dict[str, float] = field(default_factory=dict)
    reused_parts: list[str] = field(default_factory=list)
    #: Its stage ran in a separate process beside the other work (its wall overlaps theirs).
    background: bool = False

    @property
    def episodes(self) -> int:
        """The experiment's (cell, seed) results."""
        return self.cells * self.seeds

    @property
    def all_reused(self) -> bool:
        """Nothing was computed now: every episode and every stage part came from ``OUT``."""
        return self.ran == 0 and (self.reused > 0 or bool(self.reused_parts)) and not self.parts

    def summary(self) -> str:
        """The completion line's text after ``[E3] done: ``."""
        if self.cells:
            what = f"{self.cells}/{self.cells} cells × {self.seeds} seeds"
            parts = "".join(f", {k} {v:.1f} s" for k, v in self.parts.items())
        else:  # a stage-only experiment: its stage is all its time
            what, parts = " + ".join([*self.parts, *self.reused_parts]) or "stage", ""
        if self.all_reused:
            return f"{what}, reused from an earlier run (not timed)"
        reused = f", {self.reused} episodes reused" if self.reused else ""
        kept = "".join(f", {k} reused" for k in self.reused_parts)
        beside = ", beside the other work" if self.background else ""
        return (
            f"{what} in {self.wall_s:.1f} s ({self.cpu_s:.1f} s CPU{beside}){parts}{kept}{reused}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (``OUT/timings.json``)."""
        return {**asdict(self), "episodes": self.episodes, "all_reused": self.all_reused}


class Reporter:
    """Progress output: plain flushed lines when piped, rich bars and lines on a terminal.

    Args:
        enabled: False: print nothing.
        stream: Where to write (default ``sys.stdout`` at the time of each call).
    """

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        """Decide once, with rich's own terminal detection, whether bars can be drawn."""
        self.enabled = enabled
        self._stream = stream
        self._lock = threading.Lock()  # background stages announce from another thread
        self._progress: Any = None
        self.terminal = False
        if enabled:
            from rich.console import Console

            self.terminal = Console(file=self.stream).is_terminal

    @property
    def stream(self) -> TextIO:
        """The output stream."""
        return self._stream if self._stream is not None else sys.stdout

    def line(self, text: str) -> None:
        """Write one line now (above the bars when they are drawn)."""
        if not self.enabled:
            return
        with self._lock:
            if self._progress is not None:
                self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
            else:
                print(text, file=self.stream, flush=True)

    @contextlib.contextmanager
    def bars(self, totals: dict[str, int]) -> Iterator[Callable[[str, int], None]]:
        """One bar per experiment on a terminal (nothing otherwise); yields ``advance(exp, n)``."""
        if not (self.enabled and self.terminal and totals):
            yield lambda exp, n: None
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(file=self.stream),
        ) as bar:
            ids = {exp: bar.add_task(exp, total=n) for exp, n in totals.items()}
            self._progress = bar
            try:
                yield lambda exp, n: bar.advance(ids[exp], n)
            finally:
                self._progress = None


class RunClock:
    """Per-experiment timings of one ``reproduce`` run, and their progress lines."""

    #: Stage work shorter than this (building cells) gets no part line of its own.
    NOTABLE_S = 0.5

    def __init__(self, reporter: Reporter) -> None:
        """Start with no experiment timed."""
        self.reporter = reporter
        self.timings: dict[str, ExperimentTiming] = {}
        #: Experiments with cells among the stages booked so far.
        self.with_cells: set[str] = set()
        #: Wall seconds this process spent blocked on stages running beside it.
        self.waited_s = 0.0
        self._left: dict[str, int] = {}
        self._mark = 0.0
        self._advance: Callable[[str, int], None] = lambda exp, n: None

    def of(self, exp: str) -> ExperimentTiming:
        """The timing record of ``exp`` (created empty on first use)."""
        return self.timings.setdefault(exp, ExperimentTiming(exp))

    def stage_done(
        self,
        experiments: list[str],
        name: str,
        wall: float,
        cpu: float,
        *,
        with_cells: set[str],
        reused: set[str] = frozenset(),  # type: ignore[assignment]
        background: bool = False,
        quiet: bool = False,
    ) -> None:
        """Book a stage's time, split evenly over the experiments it served, and say so.

        An experiment with no cells is finished by its stage (its completion line);
        the others get a part line and finish with their episodes.  ``reused``: those
        of ``experiments`` whose stage work was found in ``OUT`` instead of redone;
        ``quiet``: book only (the lines were written when the stage ended).
        """
        for exp in experiments:
            t = self.of(exp)
            t.background |= background
            t.wall_s += wall / len(experiments)
            t.cpu_s += cpu / len(experiments)
            if exp in reused:
                t.reused_parts.append(name)
            elif wall >= self.NOTABLE_S or exp not in with_cells:
                t.parts[name] = t.parts.get(name, 0.0) + wall / len(experiments)
            if quiet:
                continue
            if exp not in with_cells:
                self.reporter.line(f"[{exp}] done: {t.summary()}")
            elif name in t.parts:
                self.reporter.line(f"[{exp}] {name} in {wall:.1f} s ({cpu:.1f} s CPU)")

    @contextlib.contextmanager
    def episodes(self, cells: dict[str, int], seeds: int) -> Iterator[None]:
        """Time the episode phase: ``cells`` per experiment, ``seeds`` each."""
        for exp, n in cells.items():
            t = self.of(exp)
            t.cells, t.seeds = n, seeds
        self._left = {exp: n * seeds for exp, n in cells.items()}
        self._mark = time.perf_counter()
        with self.reporter.bars(dict(self._left)) as advance:
            self._advance = advance
            try:
                yield
            finally:
                self._advance = lambda exp, n: None

    def result(self, experiment: str, cpu: float, reused: bool) -> None:
        """One (cell, seed) of ``experiment`` is on disk: book it; the last one ends it."""
        t = self.of(experiment)
        t.cpu_s += cpu
        if reused:
            t.reused += 1
        else:
            t.ran += 1
        self._advance(experiment, 1)
        self._left[experiment] -= 1
        if self._left[experiment] == 0:
            now = time.perf_counter()
            if t.ran:  # an all-reused experiment took no time of its own
                t.wall_s += now - self._mark
                self._mark = now
            self.reporter.line(f"[{experiment}] done: {t.summary()}")


__all__ = ["ExperimentTiming", "Reporter", "RunClock", "cpu_seconds", "load_average"]
