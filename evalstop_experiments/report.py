"""REPORT.md: the header, each experiment's section, the timing section, the plots.

The report imports no experiment: it is handed the experiments
(:class:`~evalstop_experiments.plan.Experiment`) in the order it shows them and
calls each one's ``section`` on the run's summary rows; an experiment without
a section, or rows of an experiment it is not handed, get the generic table.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.fileio import atomic_write

from .plan import Experiment
from .summary import generic_section


def write_report(
    out: Path,
    summary: list[dict[str, Any]],
    *,
    header: dict[str, Any],
    plots: list[Path],
    timings: tuple[Sequence[Any], dict[str, Any]] | None = None,
    experiments: Sequence[Experiment] = (),
) -> Path:
    """Write ``OUT/REPORT.md``: the header, one section per experiment, the timings, the plots.

    ``experiments``: in the order their sections appear (each shown if ``summary``
    has its rows); the rows of any other experiment follow, in the generic table.
    ``timings``: each experiment's :class:`~evalstop_experiments.progress.ExperimentTiming`
    and the whole run's figures (``wall_s``, ``cpu_s``, ``load_average``, ``cores``).
    """
    lines = ["# evalstop-gym: the paper's experiments, reproduced", ""]
    lines += [f"- {k}: {v}" for k, v in header.items()]
    lines += [
        "",
        "Each cell: mean ± 95 % Student-t interval over seeds. ΔJCT and Δwaste are paired "
        "changes against NoStop on the same seeds (negative = better). Precision, recall, FPR "
        "in %; FPR is over all non-hacking jobs of every type. `JCT done` is the mean JCT of "
        "the jobs that were not stopped.",
        "",
    ]
    present = {s["experiment"] for s in summary}
    for e in experiments:
        if e.id in present:
            lines += e.section(summary) if e.section else generic_section(summary, e.id, e.title)
    for exp in sorted(present - {e.id for e in experiments}):
        lines += generic_section(summary, exp)
    if timings is not None:
        lines += timing_section(*timings, order=[e.id for e in experiments])
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots]
        lines.append("")
    p = out / "REPORT.md"
    atomic_write(p, "\n".join(lines) + "\n")
    return p


def timing_section(
    experiments: Sequence[Any], run: dict[str, Any], order: Sequence[str] = ()
) -> list[str]:
    """REPORT.md's ``## Timing``: wall and CPU seconds per experiment, then the whole run.

    Experiments come in ``order`` (ids), any others after them by id.  An experiment whose episodes and stage work all came from an earlier run (``--resume``)
    says so instead of showing a time.
    """
    lines = [
        "## Timing",
        "",
        "Wall: a stage's own time; for the episodes, which run through one process pool in "
        "experiment order, the time since the previous experiment's last episode. CPU: this "
        "process and the local workers it ended (an episode's CPU is measured in its worker; "
        "one shared by several cells counts a share to each; Ray workers are not counted). "
        "A stage run beside the others, in a process of its own, overlaps their wall time.",
        "",
        "| experiment | cells × seeds | episodes run | reused | wall s | CPU s | stage work |",
        "|---|---|---|---|---|---|---|",
    ]
    rank = {exp: i for i, exp in enumerate(order)}
    for t in sorted(experiments, key=lambda t: (rank.get(t.experiment, len(rank)), t.experiment)):
        size = f"{t.cells} × {t.seeds}" if t.cells else "–"
        work = ", ".join(
            [f"{k} {v:.1f} s" for k, v in t.parts.items()] + [f"{k} reused" for k in t.reused_parts]
        )
        wall, cpu = ("reused", "–") if t.all_reused else (f"{t.wall_s:.1f}", f"{t.cpu_s:.1f}")
        if t.background and not t.all_reused:
            wall += " (beside the others)"
        lines.append(
            f"| {t.experiment} | {size} | {t.ran} | {t.reused} | {wall} | {cpu} | {work or '–'} |"
        )
    wall = sum(t.wall_s for t in experiments if not (t.all_reused or t.background))
    cpu = sum(t.cpu_s for t in experiments if not t.all_reused)
    load = ", ".join("?" if v is None else f"{v:.1f}" for v in run.get("load_average", ()))
    waited = run.get("waited_for_background_s", 0.0)
    if waited >= 0.05:
        lines.append(f"| waiting for the stages beside the others | | | | {waited:.1f} | | |")
    lines += [
        f"| other (pool start-up, tables, plots) | | | | {run['wall_s'] - wall - waited:.1f} | "
        f"{run['cpu_s'] - cpu:.1f} | |",
        f"| **whole run** | | | | {run['wall_s']:.1f} | {run['cpu_s']:.1f} | |",
        "",
        f"{run.get('cores', '?')} cores; one-minute load average at the start and the end: "
        f"{load} (a loaded machine stretches wall time, not CPU time).",
        "",
    ]
    return lines
