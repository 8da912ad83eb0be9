"""Replay a user's own training logs through any stopper: where it stops, what it keeps, saves.

``replay(trace, policy)`` feeds a run's evaluations, one at a time, to
:class:`baselines.online.OnlineStopper` (the very core a live callback uses, so
live and replay decide alike) and returns a :class:`ReplayResult`: the step it
stopped at, the checkpoint it would deliver (the best observed so far), the
steps and GPU-hours saved.  No gold curve and no hacking label are needed:
those are what a user's log does not have.

``evalstop-gym curves replay FILE... --policy SPEC ...`` does it for several
files (a HF/TRL ``trainer_state.json``, an OpenRLHF JSONL/CSV log, a corpus
JSONL) and stoppers at once, prints a table and can plot each curve with the
stops marked.  A policy spec is a short name of a package stopper
(:data:`baselines.online.SHORT_SPECS`) or any :class:`~evalstop_experiments.scoring.PolicySource`
spec (``module:Class``, ``file.py:Class``, ``pretrained:NAME``, ``model:PATH``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines.online import SHORT_FORMS, OnlineStopper, ScaleRule, short_spec_factory
from baselines.policies import Policy
from evalstop_gym.corpus import CurveTrace, load_openrlhf_log, load_trl_trainer_state, read_traces
from evalstop_gym.corpus.format import MAX_RUN_EVALS, CurveTraceError, json_lines
from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import atomic_savefig, atomic_write, refuse_overwrite
from evalstop_gym.sim.workloads import JOB_TYPES

from .scoring import PolicySource

#: Every spec form, for a refusal.
SPEC_FORMS = f"{SHORT_FORMS}; or module:Class, file.py:Class, pretrained:NAME, model:PATH"


def stopper_factory(spec: str) -> Callable[[int], Policy]:
    """A factory ``n_checkpoints -> fresh policy`` for a ``--policy`` spec (checked now).

    A short name of a package stopper (:data:`baselines.online.SHORT_SPECS`, e.g.
    ``evalstop:2``, ``bayes:hard``), else a :class:`~evalstop_experiments.scoring.PolicySource`
    spec (``module:Class``, ``file.py:Class``, ``pretrained:NAME``, ``model:PATH``).

    Raises:
        ConfigError: a malformed spec, naming the forms allowed.
    """
    factory = short_spec_factory(spec)
    if factory is not None:
        return factory
    try:
        source = PolicySource(spec)
    except ConfigError as e:
        raise ConfigError("policy", spec, SPEC_FORMS) from e
    make = source.load()
    return lambda n: make()


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    """One stopper on one run.

    Attributes:
        run_id: The run.
        stopper: The stopper's name (or its spec).
        n_checkpoints: The run's evaluations.
        stop_step: The step it stopped at (None: it let the run finish).
        delivered_step: The checkpoint it delivers (the best observed by its stop).
        delivered_value: The metric there, in the log's own units and direction.
        best_step: The run's best checkpoint over all its evaluations (what NoStop keeps).
        best_value: The metric there.
        last_step: The run's last evaluation step.
        steps_saved: ``last_step - stop_step`` (0 if it did not stop).
        gpu_hours_saved: ``steps_saved * gpu_hours_per_step * gpus`` (None if not priced).
        delivered_gold: The gold score at the delivered checkpoint, when the log has gold.
        decisions: The stopper's decisions (:attr:`OnlineStopper.decisions`).
    """

    run_id: str
    stopper: str
    n_checkpoints: int
    stop_step: int | None
    delivered_step: int
    delivered_value: float
    best_step: int
    best_value: float
    last_step: int
    steps_saved: int
    gpu_hours_saved: float | None
    delivered_gold: float | None
    decisions: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        d = dataclasses.asdict(self)
        d["decisions"] = list(self.decisions)
        return d


def replay(
    trace: CurveTrace,
    policy: Policy | str | Callable[[int], Policy],
    *,
    greater_is_better: bool = True,
    scale: ScaleRule | None = None,
    job_type: str = "rlhf",
    gpus: float = 1.0,
    gpu_hours_per_step: float | None = None,
    label: str | None = None,
    n_checkpoints: int | None = None,
) -> ReplayResult:
    """Replay ``trace``'s evaluations through ``policy``: where it stops and what it keeps.

    Args:
        trace: The run (from a loader or a corpus); its ``eval`` is the watched metric
            (a loader's ``greater_is_better=False`` has already negated a loss: then
            leave ``greater_is_better`` True here).
        policy: A policy (reset first), a ``--policy`` spec, or a factory
            ``n_checkpoints -> policy``.
        greater_is_better: False if ``trace.eval`` is to be minimised.
        scale: The :class:`~baselines.online.ScaleRule` the policy sees the metric through
            (default identity).
        job_type: The run's job type, as the observation shows it.
        gpus: GPUs the run uses.
        gpu_hours_per_step: Hours one optimiser step takes (GPU-hours per GPU); None:
            GPU-hours saved are not priced.
        label: The stopper's name in the result (default: the spec or the policy's name).
        n_checkpoints: The evaluations the run planned (default: what an
            ``EvalStopCallback`` recorded in the log, ``trace.meta["n_checkpoints"]``, else
            the log's own length).  A run stopped early logs fewer evaluations than it
            planned; replayed with its own length its last eval would get no decision.

    Returns:
        The :class:`ReplayResult`.
    """
    for name, value in (("gpus", gpus), ("gpu_hours_per_step", gpu_hours_per_step)):
        if value is not None and (
            not isinstance(value, int | float) or not math.isfinite(value) or value < 0
        ):
            raise ConfigError(name, value, "a finite number >= 0")
    n = n_checkpoints if n_checkpoints is not None else trace.meta.get("n_checkpoints", len(trace))
    if (
        isinstance(n, bool)
        or not isinstance(n, int)
        or not max(2, len(trace)) <= n <= MAX_RUN_EVALS
    ):
        raise ConfigError(
            "n_checkpoints",
            n,
            f"an integer >= 2 and >= the run's {len(trace)} evaluations, at most {MAX_RUN_EVALS}",
        )
    if isinstance(policy, str):
        label = label or policy
        policy = stopper_factory(policy)(n)
    elif not hasattr(policy, "act") and callable(policy):
        policy = policy(n)
    stopper = OnlineStopper(
        policy, n, job_type=job_type, greater_is_better=greater_is_better, scale=scale
    )
    for step, value, loss in zip(trace.step, trace.eval, trace.loss, strict=True):
        if stopper.observe(float(value), loss=float(loss), step=int(step)):
            break
    sign = -1.0 if trace.meta.get("eval_negated") else 1.0
    adjusted = trace.eval if greater_is_better else -trace.eval
    best = int(np.argmax(adjusted))  # the first maximum, as the env's best-so-far
    delivered = int(stopper.best_index)  # type: ignore[arg-type]
    last = int(trace.step[-1])
    saved = 0 if stopper.stop_step is None else last - stopper.stop_step
    return ReplayResult(
        run_id=trace.run_id,
        stopper=label or stopper.name,
        n_checkpoints=n,
        stop_step=stopper.stop_step,
        delivered_step=int(trace.step[delivered]),
        delivered_value=sign * float(trace.eval[delivered]),
        best_step=int(trace.step[best]),
        best_value=sign * float(trace.eval[best]),
        last_step=last,
        steps_saved=saved,
        gpu_hours_saved=None
        if gpu_hours_per_step is None
        else saved * float(gpu_hours_per_step) * float(gpus),
        delivered_gold=None if trace.gold is None else float(trace.gold[delivered]),
        decisions=tuple(stopper.decisions),
    )


# ------------------------------------------------------------------------------------ files


def _is_corpus_jsonl(path: Path) -> bool:
    """True when the JSONL's first object is a corpus line (it has ``run_id``)."""
    for _, obj in json_lines(path):
        return "run_id" in obj
    raise CurveTraceError(f"{path}: no lines (the file is empty)")


def read_runs(
    path: str | os.PathLike[str],
    *,
    metric: str | None = None,
    loss_key: str | None = None,
    greater_is_better: bool = True,
) -> list[CurveTrace]:
    """The runs of a log file, their ``eval`` the watched metric with higher better.

    ``trainer_state.json`` (or a folder holding one, e.g. ``checkpoint-N/``): a
    HF/TRL run, ``metric`` default ``eval_reward``; ``.jsonl`` with ``run_id``: a
    corpus (``metric`` ``eval``, the default, or ``gold``); other ``.jsonl``/``.csv``: an
    OpenRLHF log (``metric`` default ``eval/reward``).  ``greater_is_better=False``
    negates the metric (recorded as ``meta["eval_negated"]``).
    """
    if not isinstance(greater_is_better, bool):  # "no" is truthy: a loss read as a score
        raise ConfigError("greater_is_better", greater_is_better, "True or False")
    p = Path(path)
    if p.is_dir() and (p / "trainer_state.json").is_file():
        p = p / "trainer_state.json"
    keys: dict[str, Any] = {"greater_is_better": greater_is_better}
    if loss_key is not None:
        keys["loss_key"] = loss_key
    suffix = p.suffix.lower()
    if suffix == ".json":
        return [load_trl_trainer_state(p, eval_key=metric or "eval_reward", **keys)]
    if suffix in (".jsonl", ".log") and p.is_file() and _is_corpus_jsonl(p):
        if loss_key is not None:
            raise ConfigError("--loss-key", loss_key, "none for a corpus JSONL (it has 'loss')")
        field = metric or "eval"
        if field not in ("eval", "gold"):
            raise ConfigError("--metric", field, f"'eval' or 'gold' for the corpus {p}")
        runs = []
        for t in read_traces(p):
            values = t.eval if field == "eval" else t.gold
            if values is None:
                raise ConfigError(
                    "--metric", field, f"a series every run has (run {t.run_id!r} of {p} has none)"
                )
            meta = dict(t.meta)
            if not greater_is_better:
                values, meta["eval_negated"] = -values, True
            runs.append(dataclasses.replace(t, eval=values, meta=meta))
        return runs
    if suffix in (".jsonl", ".log", ".csv"):
        return [load_openrlhf_log(p, eval_key=metric or "eval/reward", **keys)]
    raise ConfigError(
        "FILE",
        str(path),
        "a trainer_state.json (or its folder), an OpenRLHF .jsonl/.csv log or a corpus .jsonl",
    )


def parse_scale(text: str) -> ScaleRule:
    """``"OFFSET,FACTOR"`` as a :class:`ScaleRule`."""
    try:
        offset, factor = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError("--scale", text, "OFFSET,FACTOR (two numbers)") from None
    return ScaleRule(offset, factor)


def format_table(results: Sequence[ReplayResult]) -> str:
    """The results as a fixed-width table, one line per run and stopper."""
    head = ("run", "stopper", "stop step", "delivered (value)", "run best (value)", "steps saved")
    priced = any(r.gpu_hours_saved is not None for r in results)
    rows = []
    for r in results:
        row = [
            r.run_id,
            r.stopper,
            "-" if r.stop_step is None else str(r.stop_step),
            f"{r.delivered_step} ({r.delivered_value:.4g})",
            f"{r.best_step} ({r.best_value:.4g})",
            f"{r.steps_saved} of {r.last_step}",
        ]
        if priced:
            row.append("-" if r.gpu_hours_saved is None else f"{r.gpu_hours_saved:.4g}")
        rows.append(row)
    header = list(head) + (["GPU-h saved"] if priced else [])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def plot_replays(
    traces: Sequence[CurveTrace],
    results: Sequence[ReplayResult],
    out: str | os.PathLike[str],
    metric: str = "eval",
) -> Path:
    """A PNG: each run's curve (in its own units) with every stopper's stop and kept checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(traces)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows), squeeze=False)
    stoppers = list(dict.fromkeys(r.stopper for r in results))
    colours = {s: f"C{i + 1}" for i, s in enumerate(stoppers)}
    # Stoppers often keep the same checkpoint: nested stars, largest first, stay visible.
    sizes = {s: max(5, 16 - 4 * i) for i, s in enumerate(stoppers)}
    for ax, t in zip(axes.flat, traces, strict=False):
        sign = -1.0 if t.meta.get("eval_negated") else 1.0
        ax.plot(t.step, sign * t.eval, "o-", color="C0", ms=3, lw=1.2, label=metric)
        for r in results:
            if r.run_id != t.run_id:
                continue
            c = colours[r.stopper]
            if r.stop_step is not None:
                ax.axvline(r.stop_step, color=c, ls="--", lw=1)
            ax.plot(
                [r.delivered_step],
                [r.delivered_value],
                "*",
                color=c,
                ms=sizes[r.stopper],
                label=r.stopper,
            )
        ax.set_title(t.run_id, fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle("stop (dashed) and the checkpoint kept (star)", fontsize=10)
    fig.tight_layout()
    try:
        return atomic_savefig(fig, out, dpi=110)
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------ the command


def add_replay_parser(sub: Any) -> None:
    """Add ``replay`` to the ``curves`` subcommands (``sub``: their subparsers action)."""

    def positive(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: a number >= 0")
        return value

    r = sub.add_parser(
        "replay",
        help="replay your own training logs through stoppers: where each stops, what it keeps",
    )
    r.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="trainer_state.json (or its folder), OpenRLHF .jsonl/.csv log, or corpus .jsonl",
    )
    r.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="SPEC",
        help=f"a stopper (repeatable; default evalstop:2): {SPEC_FORMS}",
    )
    r.add_argument(
        "--metric",
        default=None,
        help="the watched eval key (default eval_reward for TRL, eval/reward for OpenRLHF, "
        "eval for a corpus; e.g. eval_loss with --lower-is-better)",
    )
    r.add_argument("--loss-key", default=None, help="the training-loss key (default: loss)")
    r.add_argument(
        "--lower-is-better", action="store_true", help="the metric is minimised (eval_loss)"
    )
    r.add_argument("--gpus", type=positive, default=1.0, help="GPUs a run uses (default 1)")
    r.add_argument(
        "--n-checkpoints",
        type=int,
        default=None,
        metavar="K",
        help="evaluations each run planned (default: what EvalStopCallback recorded in the "
        "log, else the log's length)",
    )
    r.add_argument(
        "--gpu-hours-per-step",
        type=positive,
        default=None,
        metavar="H",
        help="hours one step takes per GPU: prices the steps saved as GPU-hours",
    )
    r.add_argument(
        "--job-type", choices=JOB_TYPES, default="rlhf", help="the runs' job type (default rlhf)"
    )
    r.add_argument(
        "--scale",
        default=None,
        metavar="OFFSET,FACTOR",
        help="affine map of the metric before the stopper sees it (default identity)",
    )
    r.add_argument(
        "--scale-from",
        nargs="+",
        default=None,
        metavar="FILE",
        help="fit --scale on these (other) runs: median start -> 0.3, median gain -> 0.6",
    )
    r.add_argument("--plot", default=None, metavar="OUT.png", help="plot the curves and stops")
    r.add_argument("--json", default=None, metavar="OUT.json", help="write the results as JSON")
    r.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    """``evalstop-gym curves replay``: every file's runs through every stopper, as a table.

    A loader's warnings (a constant series, a key that never occurs) are printed as one
    ``evalstop-gym: warning:`` line each on stderr, after the table.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status = _replay_command(args)
    for w in caught:
        print(f"evalstop-gym: warning: {w.message}", file=sys.stderr)
    return status


def _replay_command(args: argparse.Namespace) -> int:
    import importlib.util

    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise ModuleNotFoundError("--plot needs matplotlib", name="matplotlib")
    if args.scale and args.scale_from:
        raise ConfigError("--scale", args.scale, "either --scale or --scale-from, not both")
    outputs = [
        (flag, path) for flag, path in (("--plot", args.plot), ("--json", args.json)) if path
    ]
    for flag, path in outputs:  # a file there, the user's or an earlier replay's, stays
        refuse_overwrite(flag, path, (path,))
    if len(outputs) == 2 and Path(args.plot).resolve() == Path(args.json).resolve():
        raise ConfigError("--json", args.json, "a file other than --plot's")
    specs = args.policy or ["evalstop:2"]
    factories = [(spec, stopper_factory(spec)) for spec in specs]  # every spec checked first
    gib = not args.lower_is_better
    read = dict(metric=args.metric, loss_key=args.loss_key, greater_is_better=gib)
    scale = parse_scale(args.scale) if args.scale else None
    if args.scale_from:
        ref = [t.eval for f in args.scale_from for t in read_runs(f, **read)]
        scale = ScaleRule.fit(ref)  # the traces' eval is already higher-is-better
        print(f"scale: {scale.offset:.6g} + {scale.factor:.6g} x (fitted on {len(ref)} run(s))")
    traces = [t for f in args.files for t in read_runs(f, **read)]
    results = [
        replay(
            t,
            make,
            scale=scale,
            job_type=args.job_type,
            gpus=args.gpus,
            gpu_hours_per_step=args.gpu_hours_per_step,
            label=spec,
            n_checkpoints=args.n_checkpoints,
        )
        for t in traces
        for spec, make in factories
    ]
    print(format_table(results))
    if args.json:
        atomic_write(args.json, json.dumps([r.to_dict() for r in results], indent=1) + "\n")
    if args.plot:
        metric = args.metric or "eval"
        print(f"plot: {plot_replays(traces, results, args.plot, metric)}")
    return 0
