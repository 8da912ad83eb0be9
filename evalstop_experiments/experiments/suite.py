"""E8, the benchmark suite: normalised scores of stoppers on the named tasks.

For each task (``evalstop_gym.suite_task``) and each price (the suite's price
times 1/2, 1, 2), every stopper of :func:`~evalstop_experiments.scoring.suite_stoppers`
(NoStop, every floor family tuned on validation seeds and the best of them,
CUSUM, LossPlateau, EvalStop, any extra stopper, Bayes, the CurveOracle and
the Oracle) is scored through :mod:`evalstop_experiments.scoring`: 0 = NoStop,
1 = the Bayes stopper on synthetic tasks, the privileged Oracle on corpus
tasks.  Extra stoppers (learned ones, your own) come in as
:class:`~evalstop_experiments.scoring.StopperSpec` arguments
(``ReproduceOptions.extra_stoppers``, ``benchmark --suite --policy SPEC``).
Under the table: the test seeds when drawn fresh (``--fresh-seeds``), and the
CI-coverage check (:func:`~evalstop_experiments.scoring.coverage_check`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import refuse_overwrite
from evalstop_gym.suite import HELDOUT_TASKS, PACKAGED_TASKS, PRICE_FACTORS, SUITE_TASKS

from ..plan import Experiment, Plan, ReproduceOptions
from ..scoring import (
    VALIDATION_SEEDS,
    ScoreRow,
    StopperSpec,
    coverage_check,
    coverage_table,
    env_kwargs,
    fresh_seeds,
    isolated_spec,
    markdown_table,
    score_task,
    stopper_spec,
    suite_stoppers,
    write_scores,
)

#: Test seeds of a suite score: the fewest the benchmark reports a score on.
SUITE_SEEDS = 30
#: Blocks of test seeds the CI-coverage check scores apart (3 blocks of 10 of 30).
COVERAGE_BLOCKS = 3


def run_task(
    task: str,
    factor: float,
    seeds: Sequence[int],
    val_seeds: Sequence[int] = VALIDATION_SEEDS,
    n_jobs: int | None = None,
    curves: str | None = None,
    positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] | None = None,
    extra: Sequence[StopperSpec] = (),
) -> list[ScoreRow]:
    """Rows (one per stopper of the suite, ``extra`` ones too) of one task at one price.

    ``positions``: see :func:`~evalstop_experiments.scoring.score_task`.
    """
    kw = env_kwargs(task, factor, n_jobs, curves)
    stoppers = suite_stoppers(task, kw, val_seeds, extra)
    return score_task(task, factor, kw, stoppers, seeds, positions)


def run_e8(
    tasks: Sequence[str] = SUITE_TASKS,
    seeds: Sequence[int] = range(SUITE_SEEDS),
    factors: Sequence[float] = PRICE_FACTORS,
    n_jobs: int | None = None,
    curves: str | None = None,
    val_seeds: Sequence[int] = VALIDATION_SEEDS,
    progress: Callable[[str], None] | None = None,
    positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] | None = None,
    extra_stoppers: Sequence[StopperSpec] = (),
) -> list[ScoreRow]:
    """Every (task, price) of the suite; ``curves`` is the corpus of the tasks that take one.

    A held-out task among ``tasks`` replays ``curves`` in place of its packaged corpus;
    without one, the corpus task ``micro-rlhf`` joins to replay them (name it in
    ``tasks`` to have both).  A shipped corpus task keeps its own corpus.
    ``positions``: see :func:`run_task`; ``extra_stoppers``: stoppers scored beside the suite's.
    """
    heldout = any(t in HELDOUT_TASKS for t in tasks)
    tasks = list(tasks) + (
        ["micro-rlhf"] if curves and not heldout and "micro-rlhf" not in tasks else []
    )
    if len(set(tasks)) != len(tasks):
        raise ConfigError("tasks", ",".join(tasks), "each task once")
    # a shipped corpus task keeps its own corpus; ``curves`` is the others'
    own = {task: None if task in PACKAGED_TASKS else curves for task in tasks}
    for task in tasks:  # every task's name, corpus and sizes checked before any is played
        for f in factors:
            env_kwargs(task, f, n_jobs, own[task])
    rows: list[ScoreRow] = []
    for task in tasks:
        for f in factors:
            if progress is not None:
                progress(f"E8 {task} at {f:g}x price")
            more = {} if positions is None else {"positions": positions}
            rows += run_task(
                task, f, seeds, val_seeds, n_jobs, own[task], extra=extra_stoppers, **more
            )
    return rows


def notes(rows: Sequence[ScoreRow], fresh: bool = False) -> str:
    """What E8.md says under the table: the seeds (listed when fresh) and the CI-coverage check."""
    if not rows:
        return ""
    seeds = rows[0].test_seeds
    if fresh:
        head = (
            f"Test seeds: {len(seeds)} drawn at scoring time from OS entropy over the 64-bit "
            f"seed space: {', '.join(map(str, seeds))}."
        )
    else:
        head = f"Test seeds: {len(seeds)} ({_span(seeds)}); floors tuned on validation seeds {_span(VALIDATION_SEEDS)}."
    return f"{head}\n\n{coverage_table(coverage_check(rows, COVERAGE_BLOCKS))}"


def _span(seeds: Sequence[int]) -> str:
    """``a..b`` for a run of consecutive seeds, else the list."""
    s = list(seeds)
    if s and s == list(range(s[0], s[0] + len(s))):
        return f"{s[0]}..{s[-1]}"
    return ", ".join(map(str, s))


def refuse_finished_table(out: str | Path) -> None:
    """Refuse an ``out`` holding what :func:`write_e8` writes: a finished table is never
    overwritten (a :class:`~evalstop_gym.errors.ConfigError`, before any episode)."""
    written = [Path(out) / f"E8.{ext}" for ext in ("csv", "md")]
    refuse_overwrite("out", str(out), written, "a folder without E8.csv and E8.md")


def write_e8(
    out: str | Path, rows: Sequence[ScoreRow], figures: Sequence[Path] = (), fresh: bool = False
) -> list[Path]:
    """Write ``E8.csv`` (every column) and ``E8.md`` (the table, :func:`notes`, ``figures``)."""
    return write_scores(
        out,
        [r.as_dict() for r in rows],
        "E8",
        "E8: the benchmark suite",
        figures,
        notes=notes(rows, fresh),
    )


class _SuiteDefault(int):
    """``--seeds``'s default as ``benchmark`` sets it: ``--suite`` then plays :data:`SUITE_SEEDS`."""


def add_suite_arguments(parser: argparse.ArgumentParser) -> None:
    """``--suite``, ``--tasks``, ``--fresh-seeds``, ``--isolated`` and ``--out`` of ``benchmark``."""
    g = parser.add_argument_group("benchmark suite (E8)")
    g.add_argument(
        "--suite",
        action="store_true",
        help=f"run the suite: normalised scores (on {SUITE_SEEDS} test seeds unless --seeds)",
    )
    g.add_argument(
        "--tasks", default=None, help=f"comma-separated tasks (default {','.join(SUITE_TASKS)})"
    )
    g.add_argument(
        "--fresh-seeds",
        action="store_true",
        help="draw the test seeds now from OS entropy over the 64-bit seed space (printed)",
    )
    g.add_argument(
        "--isolated",
        action="store_true",
        help="play each --policy from its own process (an untrusted stopper; use with "
        "--fresh-seeds): it gets observations and returns actions, nothing else",
    )
    g.add_argument("--out", default="results-suite", help="folder of E8.csv and E8.md")
    default = parser.get_default("seeds")
    if isinstance(default, int):
        parser.set_defaults(seeds=_SuiteDefault(default))


def cmd_suite(args: argparse.Namespace) -> int:
    """``evalstop-gym benchmark --suite``: run E8, print the table, write CSV + Markdown.

    ``--curves PATH`` replays a corpus: in a held-out task named in ``--tasks`` (its test
    runs scored, its train runs tuned on), else in the micro-RLHF corpus task, which
    joins; ``--n-jobs`` shrinks episodes;
    each ``--policy SPEC`` (``module:Class``, ``path/to/file.py:Class``,
    ``pretrained:NAME``, ``model:PATH``) is scored beside the suite's stoppers.
    """
    refuse_finished_table(args.out)
    if args.tasks is not None and not args.tasks.strip():
        # An empty list played the whole suite.
        raise ConfigError("tasks", args.tasks, "a comma-separated list of task names, or left out")
    tasks = args.tasks.split(",") if args.tasks else SUITE_TASKS
    # a bad spec fails before any episode; --isolated plays each from its own process
    make = isolated_spec if getattr(args, "isolated", False) else stopper_spec
    extra = [make(spec) for spec in args.policy]
    n = SUITE_SEEDS if isinstance(args.seeds, _SuiteDefault) else args.seeds
    fresh = bool(getattr(args, "fresh_seeds", False))
    seeds = fresh_seeds(n) if fresh else range(n)
    if fresh:
        print(f"test seeds (fresh, OS entropy): {', '.join(map(str, seeds))}", flush=True)
    rows = run_e8(
        tasks,
        seeds,
        n_jobs=getattr(args, "env_n_jobs", None),
        curves=getattr(args, "env_curves", None),
        progress=lambda s: print(s, flush=True),
        extra_stoppers=extra,
    )
    print(markdown_table([r.as_dict() for r in rows]))
    print(notes(rows, fresh))
    for path in write_e8(args.out, rows, fresh=fresh):
        print(f"wrote {path}")
    return 0


#: Seeds of E8 in ``reproduce`` (quick / default).  Quick's few seeds give "n/a" where the
#: reference's own gain is not significant (:func:`~evalstop_experiments.scoring.unreliable_prices`).
E8_SEEDS = {"quick": 3, "default": SUITE_SEEDS}


def reproduce_e8(
    out: str | Path,
    *,
    quick: bool = False,
    seeds: int | None = None,
    n_jobs: int | None = None,
    curves: str | Path | None = None,
    extra_stoppers: Sequence[StopperSpec] = (),
) -> list[Path]:
    """E8 inside ``evalstop-gym reproduce``: the suite table as ``OUT/E8.csv`` and ``OUT/E8.md``.

    Quick runs one task (``hard-0.12``) on 100-job episodes (or ``n_jobs``).
    """
    n = seeds if seeds is not None else E8_SEEDS["quick" if quick else "default"]
    tasks = ("hard-0.12",) if quick else SUITE_TASKS
    jobs = n_jobs if n_jobs is not None else (100 if quick else None)
    positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] = {}
    rows = run_e8(
        tasks,
        range(n),
        n_jobs=jobs,
        curves=curves,  # type: ignore[arg-type]
        positions=positions,
        extra_stoppers=extra_stoppers,
    )
    figures = stop_position_figures(out, positions)
    return write_e8(out, rows, figures) + figures


def stop_position_figures(
    out: str | Path, positions: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]]
) -> list[Path]:
    """``OUT/E8_stops_<task>.png``: where every stopper ends runs, per task at 1x price."""
    from ..plots import plot_stop_positions

    paths = []
    for task in dict.fromkeys(t for t, _, _ in positions):
        per = {name: pos for (t, f, name), pos in positions.items() if t == task and f == 1.0}
        if per:
            path = Path(out) / f"E8_stops_{task}.png"
            title = f"E8 {task} (1x price): where each stopper ends runs, pooled over seeds"
            paths.append(plot_stop_positions(per, path, title))
    return paths


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """The suite, written at once to ``OUT/E8.csv`` and ``OUT/E8.md``."""
    files = reproduce_e8(
        out,
        quick=opts.quick,
        seeds=opts.seeds,
        n_jobs=opts.n_jobs,
        curves=opts.corpus_in(out),
        extra_stoppers=opts.extra_stoppers,
    )
    plan.header["E8"] = f"the benchmark suite's normalised scores: {files[1].name}" + (
        f"; where each stopper stops: {', '.join(p.name for p in files[2:])}" if files[2:] else ""
    )


EXPERIMENT = Experiment(
    "E8",
    "Benchmark suite: normalised scores against Bayes / Oracle",
    8,
    build,
    background=True,
    work="suite",
)
