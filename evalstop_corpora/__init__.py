"""Programs that make curve corpora by running real (small) RLHF training.

* :mod:`evalstop_corpora.micro_rlhf` — micro-RLHF runs in plain torch (the ``curves`` CLI);
* :mod:`evalstop_corpora.trl` — the same set-up trained by TRL's ``GRPOTrainer`` (the ``trl``
  extra).

They need torch, so they live outside :mod:`evalstop_gym`, which never imports them; they
write corpora in :mod:`evalstop_gym.corpus`'s format and read them with its loaders.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
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


def generate_and_report(
    generate: Callable[..., Sequence], args: argparse.Namespace, path: Path, what: str = "runs"
) -> int:
    """Run a corpus generator with the command's executor flags and print its summary line.

    ``generate`` takes the shared flags of ``curves generate`` (``workers``, ``backend``,
    ``address``, ``progress``) and fills ``timings``; returns the exit status (0).
    """
    if not (path.parent / "runs").is_dir():
        from evalstop_gym.fileio import refuse_overwrite

        # Only a corpus rebuilt from run folders it resumes from is the generator's to
        # rewrite (TRL, English); one without them (micro-RLHF runs keep none, or a user's
        # own file) is never overwritten.
        refuse_overwrite(
            "out",
            str(path.parent),
            (path,),
            f"a folder without {path.name}, or with the runs/ folder it was built from",
        )
    timings: list[float] = []
    started = time.perf_counter()
    traces = generate(
        workers=args.workers,
        backend=args.backend,
        address=args.address,
        progress=not args.no_progress,
        timings=timings,
    )
    print(summary_line(traces, time.perf_counter() - started, timings, path, what))
    return 0
