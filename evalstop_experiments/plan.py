"""What a run is made of: the options, the experiments as objects, and the plan they fill.

An :class:`Experiment` is data: its id and title, the function that adds its
cells (or its rows, header lines and plots) to a :class:`Plan`, its REPORT.md
section, and how :mod:`~evalstop_experiments.reproduce` schedules it
(``background``, ``long``).  Nothing names an experiment by a string to look
up: the run and the report iterate the objects
(:data:`evalstop_experiments.experiments.EXPERIMENTS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalstop_gym.parallel import Executor

from .cells import Cell

if TYPE_CHECKING:  # the scoring path imports the simulator and the stoppers: not at run time
    from .scoring import StopperSpec

#: ``--quick``: under two minutes on two quiet cores (``benchmarks/speed/bench_reproduce.py``).
QUICK = {"seeds": 10, "n_jobs": 150}
#: 50 seeds: 95 % intervals on E1's precision / recall / FPR of about ±1 point.
DEFAULT = {"seeds": 50, "n_jobs": None}


@dataclass(frozen=True)
class ReproduceOptions:
    """What :func:`~evalstop_experiments.reproduce.reproduce` runs and how.

    Args:
        quick: Fewer seeds, shorter episodes, smaller E6/E7 budgets.
        seeds: Seeds per cell (default 50; quick 10); at least 2.
        n_jobs: Jobs per episode (default: the workload's; quick 150).
        experiments: Subset of experiment ids (default: all).
        backend: ``local`` or ``ray``; see :class:`~evalstop_gym.parallel.Executor`.
        workers: Parallel workers (default: every core).
        address: An existing Ray cluster.
        resume: Reuse finished (cell, seed) results in ``OUT/raw``.
        fresh: Delete first the results in ``OUT/raw`` the package wrote (its manifest).
        extra_cells: More cells to run beside the experiments'.
        progress: Print a line per experiment as it finishes (plus rich bars on a terminal).
        env: Environment keyword arguments on top of E1's setting.
        learned: Run E6 (None: if selected by ``experiments``).
        train_timesteps: E6's training budget per model.
        real_curves: Run E7 (None: if selected by ``experiments``).
        curves: E7's corpus (JSONL); generated into ``OUT/curves`` if None.
        deprioritisation: Run E10 (None: if selected by ``experiments``).
        cluster_learned: Run E13, the learned cluster-level stopper (None: only if named in
            ``experiments``).
        extra_stoppers: More stoppers that E8 and E7's scores score beside their own
            (:class:`~evalstop_experiments.scoring.StopperSpec`: picklable, so they
            reach worker processes like everything else).
    """

    quick: bool = False
    seeds: int | None = None
    n_jobs: int | None = None
    experiments: tuple[str, ...] | None = None
    backend: str = "local"
    workers: int | None = None
    address: str | None = None
    resume: bool = False
    fresh: bool = False
    extra_cells: tuple[Cell, ...] = ()
    progress: bool = True
    env: dict[str, Any] = field(default_factory=dict)
    learned: bool | None = None
    train_timesteps: int | None = None
    real_curves: bool | None = None
    curves: str | None = None
    deprioritisation: bool | None = None
    cluster_learned: bool | None = None
    extra_stoppers: tuple[StopperSpec, ...] = ()

    def __post_init__(self) -> None:
        """Normalise sequences to tuples and refuse fewer than two seeds."""
        if self.experiments is not None:
            object.__setattr__(self, "experiments", tuple(self.experiments))
        object.__setattr__(self, "extra_cells", tuple(self.extra_cells or ()))
        object.__setattr__(self, "extra_stoppers", tuple(self.extra_stoppers or ()))
        object.__setattr__(self, "env", dict(self.env or {}))
        if self.n_seeds < 2:
            raise ValueError(
                f"seeds={self.n_seeds} is not allowed: at least 2 (for confidence intervals)"
            )
        Executor(self.backend, self.workers, self.address)  # validates them

    @property
    def n_seeds(self) -> int:
        """Seeds per cell."""
        return self.seeds if self.seeds is not None else (QUICK if self.quick else DEFAULT)["seeds"]

    @property
    def jobs_per_episode(self) -> int | None:
        """Jobs per episode (None: the workload's default)."""
        return (
            self.n_jobs if self.n_jobs is not None else (QUICK if self.quick else DEFAULT)["n_jobs"]
        )

    @property
    def overrides(self) -> dict[str, Any]:
        """Environment keyword arguments every experiment puts on top of E1's setting."""
        jobs = self.jobs_per_episode
        return {**self.env, **({"n_jobs": jobs} if jobs is not None else {})}

    @property
    def executor(self) -> Executor:
        """Where every fan-out of the run goes."""
        return Executor(self.backend, self.workers, self.address)

    def corpus_in(self, out: Path) -> str | Path | None:
        """``curves``, else the first ``traces_*.jsonl`` in ``OUT/curves`` (None: no corpus)."""
        return self.curves or next(
            iter(sorted((Path(out) / "curves").glob("traces_*.jsonl"))), None
        )

    def wants(self, exp: str, flag: bool | None = None) -> bool:
        """Whether experiment ``exp`` runs (``flag`` overrides the ``experiments`` subset)."""
        if flag is not None:
            return flag
        return self.experiments is None or exp in self.experiments


@dataclass
class Plan:
    """The cells of a run plus what the report says about how they were made."""

    cells: list[Cell] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Called after the run with (out, summary); returns more plots.
    plots: list[Callable[[Path, list[dict[str, Any]]], Path]] = field(default_factory=list)
    #: Rows beside the cells' summary that only REPORT.md shows (their own ``experiment``).
    report_rows: list[dict[str, Any]] = field(default_factory=list)
    #: Experiments whose stage work (models, corpus) was found in ``OUT`` instead of redone.
    reused: set[str] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        """Nothing but notes: the experiment did not run."""
        return not (self.cells or self.header or self.plots or self.report_rows)

    def merge(self, other: Plan) -> None:
        """Append ``other``'s cells, header lines, notes, plots and rows to this plan."""
        self.cells += other.cells
        self.header.update(other.header)
        self.notes += other.notes
        self.plots += other.plots
        self.report_rows += other.report_rows
        self.reused |= other.reused


Build = Callable[[Path, ReproduceOptions, Plan], None]
Section = Callable[[list[dict[str, Any]]], list[str]]


def _selected(opts: ReproduceOptions, exp: Experiment) -> bool:
    return opts.wants(exp.id)


@dataclass(frozen=True)
class Experiment:
    """One experiment of ``reproduce``: what it adds to a run and how REPORT.md shows it.

    Its functions are module-level, so the object pickles by reference and runs as
    it is in another process (a ``background`` experiment does).

    Args:
        id: The ``experiment`` of its rows and cells, and its choice in ``--experiments``.
        title: One line: what it studies.
        number: Its place in REPORT.md and the timing table (sections follow the
            paper's numbering; ``E7 scores`` shares E7's number and follows it).
        build: Adds its cells, rows, header lines and plots to the plan it is given
            (and writes its own files).
        wanted: Whether it runs for these options (default: selected by ``experiments``).
        section: Its REPORT.md section from the run's summary rows (None: the generic table).
        background: It only reads files earlier experiments wrote and adds rows, not cells
            or plots, so it may run in a process of its own beside the others.
        long: It can take minutes before its episodes: the run announces its start.
        starting: What the start line says it does (``long`` only).
        long_when_quick: Whether it is still long with ``--quick``.
        work: What its stage work is called in the progress lines and the timing table.
        listed: A choice of ``--experiments`` (a part of another experiment is not).
    """

    id: str
    title: str
    number: int
    build: Build
    wanted: Callable[[ReproduceOptions, Experiment], bool] = _selected
    section: Section | None = None
    background: bool = False
    long: bool = False
    starting: str = ""
    long_when_quick: bool = True
    work: str = ""
    listed: bool = True

    def runs(self, opts: ReproduceOptions) -> bool:
        """Whether this experiment runs for ``opts``."""
        return self.wanted(opts, self)

    def announces(self, opts: ReproduceOptions) -> bool:
        """Whether its start gets a line of its own (a long stage the episodes come after)."""
        return self.long and (self.long_when_quick or not opts.quick) and self.runs(opts)
