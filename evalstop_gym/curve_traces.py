"""Per-checkpoint training curves ("curve traces"): format, loaders, labels, resampling, Gao fit.

This module needs only numpy (no torch), so the simulator can read trace corpora anywhere.

On-disk format (JSONL)
----------------------
One JSON object per line, one line per checkpoint. Lines of one run share ``run_id``; within a
run, lines appear in strictly increasing ``step`` order (runs may be interleaved, the reader
groups them by ``run_id`` in order of first appearance). Blank lines are ignored.

==========  ========  ==========================================================================
field       required  meaning
==========  ========  ==========================================================================
run_id      yes       non-empty string naming the run
step        yes       non-negative integer optimiser step of the checkpoint
eval        yes       finite number: the measured (noisy) eval score the stopper observes
loss        yes       finite number: the training loss at that checkpoint
proxy       no        finite number: proxy reward (reward-model score) of the policy
kl          no        finite number >= 0: KL(policy || initial policy), nats per sequence
gold        no        finite number: the true ("gold") score, measured with little noise
label       no        ``"hacking"``, ``"healthy"``, ``true`` (= hacking), ``false`` or ``null``
meta        no        JSON object of run-level information (hyperparameters, source)
==========  ========  ==========================================================================

An optional field is present on every line of a run or on none of them; ``label`` must be the same
on every line that carries it; ``meta`` is written on a run's first line and, if repeated, must be
identical. Non-finite numbers (``NaN``, ``Infinity``) are rejected. Example::

    {"run_id": "r1", "step": 0, "eval": 0.01, "loss": 0.5, "gold": 0.0, "label": "hacking"}
    {"run_id": "r1", "step": 10, "eval": 0.42, "loss": 0.3, "gold": 0.4, "label": "hacking"}

Labelling rule (the only one, applied to every source by :func:`label_hacking`)
------------------------------------------------------------------------------
A run is *hacking* when its **gold** curve ``g[0..n-1]`` peaks clearly before the end:

1. the peak ``k = argmax g`` (first maximum) leaves at least ``min_tail`` of the run after it,
   ``k / (n - 1) <= 1 - min_tail`` (default ``min_tail = 0.1``), and
2. the final value has fallen from the peak by at least ``min_drop`` of the curve's range,
   ``g[k] - g[-1] >= min_drop * (max g - min g)`` (default ``min_drop = 0.2``), and by at least
   ``min_abs_drop`` in absolute terms (default 0; set it to a few noise standard deviations when
   the gold curve is itself noisy, so that a flat noisy curve is not called hacking).

Otherwise it is *healthy*. The label is computed from the gold curve, never from the noisy eval a
stopper sees; a user log without a gold curve gets ``label=None`` unless the user supplies gold.
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "CurveTrace",
    "CurveTraceError",
    "GaoFit",
    "fit_gao",
    "fit_gao_trace",
    "label_hacking",
    "load_openrlhf_log",
    "load_trl_trainer_state",
    "peak_progress",
    "read_traces",
    "resample",
    "write_traces",
]

_OPTIONAL_SERIES = ("proxy", "kl", "gold")
_LABEL_VALUES = {"hacking": True, "healthy": False, True: True, False: False}


class CurveTraceError(ValueError):
    """A malformed curve file or trace; the message names file, line, field and what is allowed."""


def _where(path: str | os.PathLike[str] | None, line: int | None, what: str | None = None) -> str:
    parts = [str(path) if path is not None else "<trace>"]
    if line is not None:
        parts.append(f"line {line}")
    if what is not None:
        parts.append(what)
    return ": ".join(parts)


@dataclass(frozen=True, eq=False)
class CurveTrace:
    """The curves of one training run, one entry per checkpoint.

    Arrays are converted to numpy (``step`` int64, the rest float64), validated and made
    read-only on construction. Two traces compare equal when every field is exactly equal.

    Attributes:
        run_id: Name of the run.
        step: Strictly increasing non-negative optimiser steps.
        eval: Measured eval score at each step (what a stopper observes).
        loss: Training loss at each step.
        proxy: Proxy reward at each step, if known.
        kl: KL to the initial policy at each step, if known.
        gold: True score at each step, if known (used for the label).
        label: True = hacking, False = healthy, None = unknown.
        meta: Run-level information (hyperparameters, source); must be JSON-serialisable.
    """

    run_id: str
    step: np.ndarray
    eval: np.ndarray
    loss: np.ndarray
    proxy: np.ndarray | None = None
    kl: np.ndarray | None = None
    gold: np.ndarray | None = None
    label: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Validate and freeze the arrays; raises :class:`CurveTraceError` on bad input."""
        where = f"trace {self.run_id!r}"
        if not isinstance(self.run_id, str) or not self.run_id:
            raise CurveTraceError(f"{where}: field 'run_id' must be a non-empty string")
        step = np.asarray(self.step)
        if step.ndim != 1 or step.size == 0:
            raise CurveTraceError(f"{where}: field 'step' must be a non-empty 1-D array")
        if step.dtype.kind == "f":
            if not np.all(np.isfinite(step)) or not np.all(step == np.round(step)):
                raise CurveTraceError(f"{where}: field 'step' must hold integers")
        elif step.dtype.kind not in "iu":
            raise CurveTraceError(f"{where}: field 'step' must hold integers")
        step = step.astype(np.int64)
        if step[0] < 0 or np.any(np.diff(step) <= 0):
            raise CurveTraceError(
                f"{where}: field 'step' must be non-negative and strictly increasing"
            )
        step.setflags(write=False)
        object.__setattr__(self, "step", step)
        for name in ("eval", "loss", *_OPTIONAL_SERIES):
            value = getattr(self, name)
            if value is None:
                if name in ("eval", "loss"):
                    raise CurveTraceError(f"{where}: field {name!r} is required")
                continue
            arr = np.array(value, dtype=np.float64)
            if arr.shape != step.shape:
                raise CurveTraceError(
                    f"{where}: field {name!r} has shape {arr.shape}, expected {step.shape}"
                )
            if not np.all(np.isfinite(arr)):
                raise CurveTraceError(f"{where}: field {name!r} must be finite")
            if name == "kl" and np.any(arr < 0):
                raise CurveTraceError(f"{where}: field 'kl' must be >= 0")
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        if self.label is not None:
            if not isinstance(self.label, bool | np.bool_):
                raise CurveTraceError(f"{where}: field 'label' must be a bool or None")
            object.__setattr__(self, "label", bool(self.label))
        if not isinstance(self.meta, Mapping):
            raise CurveTraceError(f"{where}: field 'meta' must be a dict")
        object.__setattr__(self, "meta", dict(self.meta))

    def __len__(self) -> int:
        """Number of checkpoints."""
        return int(self.step.size)

    def __eq__(self, other: object) -> bool:
        """Exact equality of every field (arrays compared element-wise, NaN never occurs)."""
        if not isinstance(other, CurveTrace):
            return NotImplemented
        if (self.run_id, self.label, self.meta) != (other.run_id, other.label, other.meta):
            return False
        for name in ("step", "eval", "loss", *_OPTIONAL_SERIES):
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None):
                return False
            if a is not None and not (a.dtype == b.dtype and np.array_equal(a, b)):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable-looking arrays: not hashable


# --------------------------------------------------------------------------------------------
# Our own JSONL format
# --------------------------------------------------------------------------------------------


def _trace_lines(trace: CurveTrace) -> Iterator[str]:
    label = None if trace.label is None else ("hacking" if trace.label else "healthy")
    for i in range(len(trace)):
        row: dict[str, Any] = {
            "run_id": trace.run_id,
            "step": int(trace.step[i]),
            "eval": float(trace.eval[i]),
            "loss": float(trace.loss[i]),
        }
        for name in _OPTIONAL_SERIES:
            series = getattr(trace, name)
            if series is not None:
                row[name] = float(series[i])
        if label is not None:
            row["label"] = label
        if i == 0 and trace.meta:
            row["meta"] = trace.meta
        # allow_nan=False: the format is strict JSON; repr-based floats round-trip exactly.
        yield json.dumps(row, allow_nan=False, separators=(", ", ": "))


def write_traces(traces: Iterable[CurveTrace], path: str | os.PathLike[str]) -> None:
    """Write traces to a JSONL file atomically (temporary file in the same folder + os.replace).

    Args:
        traces: The traces; run ids must be unique.
        path: Destination file; parent folders are created.

    Raises:
        CurveTraceError: Duplicate run ids or a ``meta`` that is not JSON-serialisable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for trace in traces:
                if trace.run_id in seen:
                    raise CurveTraceError(f"{path}: duplicate run_id {trace.run_id!r}")
                seen.add(trace.run_id)
                try:
                    for line in _trace_lines(trace):
                        fh.write(line + "\n")
                except (TypeError, ValueError) as exc:
                    raise CurveTraceError(
                        f"{path}: run {trace.run_id!r} field 'meta' is not JSON-serialisable: {exc}"
                    ) from exc
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _number(value: Any, path: Any, line: int, name: str, *, integer: bool = False) -> float:
    """Check a JSON value is a finite number (an integer if asked) and return it."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and not math.isfinite(value):
        ok = False
    if ok and integer and not float(value).is_integer():
        ok = False
    if not ok:
        allowed = "a non-negative integer" if integer else "a finite number"
        raise CurveTraceError(
            f"{_where(path, line)}: field {name!r}: expected {allowed}, got {value!r}"
        )
    return int(value) if integer else float(value)


def _parse_label(value: Any, path: Any, line: int) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool | str) and value in _LABEL_VALUES:
        return _LABEL_VALUES[value]
    raise CurveTraceError(
        f'{_where(path, line)}: field \'label\': expected "hacking", "healthy", true, false or '
        f"null, got {value!r}"
    )


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for every non-blank line of a JSONL file."""
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise CurveTraceError(f"{path}: cannot open: {exc.strerror}") from exc
    with fh:
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise CurveTraceError(
                    f"{_where(path, lineno)}: not valid JSON ({exc.msg} at column {exc.colno}); "
                    "each line must be one JSON object"
                ) from None
            if not isinstance(obj, dict):
                raise CurveTraceError(
                    f"{_where(path, lineno)}: expected a JSON object, got {type(obj).__name__}"
                )
            yield lineno, obj


def read_traces(path: str | os.PathLike[str]) -> list[CurveTrace]:
    """Read a JSONL trace file written by :func:`write_traces` (or by hand, see module doc).

    Args:
        path: The JSONL file.

    Returns:
        The traces, in order of first appearance of their run id.

    Raises:
        CurveTraceError: Any malformed line; the message names the file, 1-based line and field.
    """
    path = Path(path)
    known = {"run_id", "step", "eval", "loss", "label", "meta", *_OPTIONAL_SERIES}
    runs: dict[str, dict[str, Any]] = {}
    for lineno, obj in _json_lines(path):
        unknown = sorted(set(obj) - known)
        if unknown:
            raise CurveTraceError(
                f"{_where(path, lineno)}: unknown field {unknown[0]!r}; allowed: {sorted(known)}"
            )
        for name in ("run_id", "step", "eval", "loss"):
            if name not in obj:
                raise CurveTraceError(f"{_where(path, lineno)}: missing required field {name!r}")
        run_id = obj["run_id"]
        if not isinstance(run_id, str) or not run_id:
            raise CurveTraceError(
                f"{_where(path, lineno)}: field 'run_id': expected a non-empty string, "
                f"got {run_id!r}"
            )
        step = _number(obj["step"], path, lineno, "step", integer=True)
        if step < 0:
            raise CurveTraceError(
                f"{_where(path, lineno)}: field 'step': expected a non-negative integer, got {step}"
            )
        run = runs.get(run_id)
        if run is None:
            run = runs[run_id] = {
                "first_line": lineno,
                "cols": {k: [] for k in ("step", "eval", "loss")},
                "optional": {k: [] for k in _OPTIONAL_SERIES if k in obj},
                "label": _parse_label(obj.get("label"), path, lineno),
                "has_label": "label" in obj,
                "meta": None,
            }
        elif run["cols"]["step"] and step <= run["cols"]["step"][-1]:
            raise CurveTraceError(
                f"{_where(path, lineno)}: field 'step': {step} does not increase on the previous "
                f"step {run['cols']['step'][-1]} of run {run_id!r}; steps must be strictly "
                "increasing within a run"
            )
        present = {k for k in _OPTIONAL_SERIES if k in obj}
        if present != set(run["optional"]):
            name = sorted(present ^ set(run["optional"]))[0]
            raise CurveTraceError(
                f"{_where(path, lineno)}: field {name!r} is present on some lines of run "
                f"{run_id!r} but not others (first line {run['first_line']}); an optional field "
                "must be on every line of a run or on none"
            )
        label = _parse_label(obj.get("label"), path, lineno)
        if "label" in obj and run["has_label"] and label != run["label"]:
            raise CurveTraceError(
                f"{_where(path, lineno)}: field 'label': {obj['label']!r} differs from the label "
                f"{run['label']!r} given earlier for run {run_id!r}"
            )
        if "label" in obj and not run["has_label"]:
            run["label"], run["has_label"] = label, True
        if "meta" in obj:
            if not isinstance(obj["meta"], dict):
                raise CurveTraceError(
                    f"{_where(path, lineno)}: field 'meta': expected a JSON object, "
                    f"got {obj['meta']!r}"
                )
            if run["meta"] is not None and run["meta"] != obj["meta"]:
                raise CurveTraceError(
                    f"{_where(path, lineno)}: field 'meta' differs from the meta given earlier for "
                    f"run {run_id!r}"
                )
            run["meta"] = obj["meta"]
        run["cols"]["step"].append(step)
        run["cols"]["eval"].append(_number(obj["eval"], path, lineno, "eval"))
        run["cols"]["loss"].append(_number(obj["loss"], path, lineno, "loss"))
        for name in run["optional"]:
            value = _number(obj[name], path, lineno, name)
            if name == "kl" and value < 0:
                raise CurveTraceError(
                    f"{_where(path, lineno)}: field 'kl': expected a number >= 0, got {value!r}"
                )
            run["optional"][name].append(value)
    if not runs:
        raise CurveTraceError(f"{path}: no checkpoints (the file is empty)")
    return [
        CurveTrace(
            run_id=run_id,
            step=np.array(run["cols"]["step"], dtype=np.int64),
            eval=np.array(run["cols"]["eval"]),
            loss=np.array(run["cols"]["loss"]),
            label=run["label"],
            meta=run["meta"] or {},
            **{k: np.array(v) for k, v in run["optional"].items()},
        )
        for run_id, run in runs.items()
    ]


# --------------------------------------------------------------------------------------------
# Loaders for other tools' logs
# --------------------------------------------------------------------------------------------


def _align_last(series_steps: Sequence[int], values: Sequence[float], at: np.ndarray) -> np.ndarray:
    """Value of a logged series at each step of ``at``: the last value logged at or before it.

    Steps earlier than the first logged value take the first value (e.g. an eval at step 0,
    before any training loss exists): the loss before training is closest to the first loss.
    """
    steps = np.asarray(series_steps, dtype=np.int64)
    order = np.argsort(steps, kind="stable")  # stable: among equal steps the later log wins
    steps, vals = steps[order], np.asarray(values, dtype=np.float64)[order]
    idx = np.searchsorted(steps, at, side="right") - 1
    return vals[np.clip(idx, 0, None)]


def _build_from_records(
    path: Path,
    records: Sequence[tuple[int, int, Mapping[str, Any]]],
    *,
    where_word: str,
    eval_key: str,
    loss_key: str,
    proxy_key: str | None,
    kl_key: str | None,
    gold_key: str | None,
    run_id: str,
    meta: dict[str, Any],
) -> CurveTrace:
    """Turn (position, step, metrics) records into a trace; shared by the log loaders.

    Eval records define the checkpoints; loss, proxy, KL and gold are aligned to them with
    :func:`_align_last` (gold, when logged with the eval, is aligned the same way).
    """

    def loc(pos: int) -> str:
        return f"{path}: {where_word} {pos}"

    eval_steps: list[int] = []
    eval_vals: list[float] = []
    series: dict[str, tuple[list[int], list[float]]] = {}
    wanted = {"loss": loss_key, "proxy": proxy_key, "kl": kl_key, "gold": gold_key}
    for pos, step, rec in records:
        for role, key in [("eval", eval_key), *wanted.items()]:
            if key is None or key not in rec or rec[key] is None or rec[key] == "":
                continue
            value = rec[key]
            if isinstance(value, str):
                try:
                    value = float(value)
                except ValueError:
                    raise CurveTraceError(
                        f"{loc(pos)}: field {key!r}: expected a finite number, got {value!r}"
                    ) from None
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise CurveTraceError(
                    f"{loc(pos)}: field {key!r}: expected a finite number, got {value!r}"
                )
            if not math.isfinite(value):
                raise CurveTraceError(
                    f"{loc(pos)}: field {key!r}: expected a finite number, got {value!r}"
                )
            if role == "kl" and value < 0:
                raise CurveTraceError(
                    f"{loc(pos)}: field {key!r}: expected a number >= 0, got {value!r}"
                )
            if role == "eval":
                if eval_steps and step <= eval_steps[-1]:
                    raise CurveTraceError(
                        f"{loc(pos)}: field {key!r} logged at step {step}, not after the previous "
                        f"eval step {eval_steps[-1]}; eval steps must be strictly increasing"
                    )
                eval_steps.append(step)
                eval_vals.append(float(value))
            else:
                s, v = series.setdefault(role, ([], []))
                s.append(step)
                v.append(float(value))
    if not eval_steps:
        raise CurveTraceError(
            f"{path}: no entry carries the eval key {eval_key!r}; pass eval_key= to choose the "
            "logged eval metric"
        )
    if "loss" not in series:
        raise CurveTraceError(
            f"{path}: no entry carries the loss key {loss_key!r}; pass loss_key= to choose the "
            "logged training loss"
        )
    at = np.array(eval_steps, dtype=np.int64)
    aligned = {role: _align_last(*series[role], at) for role in series}
    gold = aligned.get("gold")
    return CurveTrace(
        run_id=run_id,
        step=at,
        eval=np.array(eval_vals),
        loss=aligned["loss"],
        proxy=aligned.get("proxy"),
        kl=aligned.get("kl"),
        gold=gold,
        label=None if gold is None else label_hacking(gold),
        meta=meta,
    )


def _default_run_id(path: Path) -> str:
    # HF writes trainer_state.json into output_dir/checkpoint-N/: the run is the output dir.
    parent = path.resolve().parent
    if parent.name.startswith("checkpoint-") and parent.parent.name:
        return parent.parent.name
    return parent.name or path.stem


def _step_of(value: Any, path: Path, where: str, key: str) -> int:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not float(value).is_integer()
        or value < 0
    ):
        raise CurveTraceError(
            f"{path}: {where}: field {key!r}: expected a non-negative integer step, got {value!r}"
        )
    return int(value)


def load_trl_trainer_state(
    path: str | os.PathLike[str],
    eval_key: str = "eval_reward",
    loss_key: str = "loss",
    run_id: str | None = None,
    *,
    proxy_key: str | None = None,
    kl_key: str | None = None,
    gold_key: str | None = None,
) -> CurveTrace:
    """Load a HuggingFace/TRL ``trainer_state.json`` as a trace.

    The checkpoints are the ``log_history`` entries carrying ``eval_key``; the training loss (and
    the optional proxy, KL and gold series) at each is the last one logged at or before that
    step (the first one, for evals logged before any training entry).

    Args:
        path: The ``trainer_state.json`` file.
        eval_key: Metric of the eval entries, e.g. ``"eval_reward"`` or
            ``"eval_rewards/accuracies"``.
        loss_key: Metric of the training entries.
        run_id: Name of the run; default: the output folder (the parent of ``checkpoint-N``).
        proxy_key: Optional proxy-reward metric, e.g. ``"objective/scores"``.
        kl_key: Optional KL metric, e.g. ``"objective/kl"``.
        gold_key: Optional gold metric; when given the trace is labelled by
            :func:`label_hacking`.

    Returns:
        The trace, ``meta = {"source": "trl", "path": ...}``.

    Raises:
        CurveTraceError: Invalid JSON (with its line), no ``log_history`` list, an entry that is
            not an object or lacks a valid ``step`` (with its ``log_history`` index), a
            non-numeric metric, non-increasing eval steps, or a missing eval or loss key.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CurveTraceError(f"{path}: cannot open: {exc.strerror}") from exc
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CurveTraceError(
            f"{_where(path, exc.lineno)}: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise CurveTraceError(
            f"{path}: field 'log_history': expected a top-level object with a 'log_history' list"
        )
    records = []
    for i, entry in enumerate(state["log_history"]):
        where = f"log_history[{i}]"
        if not isinstance(entry, dict):
            raise CurveTraceError(f"{path}: {where}: expected an object, got {entry!r}")
        if "step" not in entry:
            raise CurveTraceError(f"{path}: {where}: missing required field 'step'")
        records.append((i, _step_of(entry["step"], path, where, "step"), entry))
    return _build_from_records(
        path,
        [(i, step, rec) for i, step, rec in records],
        where_word="log_history index",
        eval_key=eval_key,
        loss_key=loss_key,
        proxy_key=proxy_key,
        kl_key=kl_key,
        gold_key=gold_key,
        run_id=run_id or _default_run_id(path),
        meta={"source": "trl", "path": str(path)},
    )


_OPENRLHF_STEP_KEYS = ("global_step", "step", "train/global_step", "eval/global_step")


def load_openrlhf_log(
    path: str | os.PathLike[str],
    eval_key: str = "eval/reward",
    loss_key: str = "train/policy_loss",
    run_id: str | None = None,
    *,
    proxy_key: str | None = "train/reward",
    kl_key: str | None = "train/kl",
    gold_key: str | None = None,
    step_key: str | None = None,
    fmt: str | None = None,
) -> CurveTrace:
    """Load an OpenRLHF-style metric log (JSONL or CSV) as a trace.

    Each row holds a step column and any of ``train/...`` and ``eval/...`` metrics (empty CSV
    cells or missing JSON keys mean "not logged in this row"). The checkpoints are the rows
    carrying ``eval_key``; the other series are aligned to them as in
    :func:`load_trl_trainer_state`. Optional series whose key never appears are ``None``.

    Args:
        path: The ``.jsonl``/``.json``/``.log`` (JSON lines) or ``.csv`` file.
        eval_key: The eval metric.
        loss_key: The training loss metric.
        run_id: Name of the run; default: the file name without extension.
        proxy_key: Proxy-reward metric (``None`` to skip).
        kl_key: KL metric (``None`` to skip).
        gold_key: Gold metric; when given the trace is labelled by :func:`label_hacking`.
        step_key: Step column; default: the first of ``global_step``, ``step``,
            ``train/global_step``, ``eval/global_step`` present in each row.
        fmt: ``"jsonl"`` or ``"csv"``; default: from the file extension.

    Returns:
        The trace, ``meta = {"source": "openrlhf", "path": ...}``.

    Raises:
        CurveTraceError: A malformed row; the message names the file, 1-based line and field.
    """
    path = Path(path)
    fmt = fmt or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
    if fmt not in ("jsonl", "csv"):
        raise CurveTraceError(f"{path}: format {fmt!r} unknown; allowed: 'jsonl', 'csv'")
    step_keys = (step_key,) if step_key else _OPENRLHF_STEP_KEYS

    def step_in(lineno: int, row: Mapping[str, Any]) -> int:
        for key in step_keys:
            if key in row and row[key] not in (None, ""):
                return _step_of(row[key], path, f"line {lineno}", key)
        raise CurveTraceError(
            f"{_where(path, lineno)}: missing step field; expected one of {list(step_keys)}"
        )

    records: list[tuple[int, int, Mapping[str, Any]]] = []
    if fmt == "jsonl":
        for lineno, obj in _json_lines(path):
            records.append((lineno, step_in(lineno, obj), obj))
    else:
        try:
            fh = path.open(encoding="utf-8", newline="")
        except OSError as exc:
            raise CurveTraceError(f"{path}: cannot open: {exc.strerror}") from exc
        with fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames:
                raise CurveTraceError(f"{_where(path, 1)}: missing CSV header row")
            for row in reader:
                # line_num counts physical lines read so far, i.e. this row's (last) line.
                lineno = reader.line_num
                if None in row:
                    raise CurveTraceError(
                        f"{_where(path, lineno)}: {len(row[None])} more cells than the "
                        f"{len(reader.fieldnames)} header columns"
                    )
                if any(v is None for v in row.values()):
                    raise CurveTraceError(
                        f"{_where(path, lineno)}: fewer cells than the "
                        f"{len(reader.fieldnames)} header columns"
                    )
                if not any(v.strip() for v in row.values()):
                    continue
                records.append((lineno, step_in(lineno, row), row))
    return _build_from_records(
        path,
        records,
        where_word="line",
        eval_key=eval_key,
        loss_key=loss_key,
        proxy_key=proxy_key,
        kl_key=kl_key,
        gold_key=gold_key,
        run_id=run_id or path.stem,
        meta={"source": "openrlhf", "path": str(path)},
    )


# --------------------------------------------------------------------------------------------
# Labels, resampling, Gao et al. law
# --------------------------------------------------------------------------------------------


def label_hacking(
    gold_or_eval: Sequence[float] | np.ndarray,
    *,
    min_drop: float = 0.2,
    min_tail: float = 0.1,
    min_abs_drop: float = 0.0,
) -> bool:
    """Whether a run is *hacking*: its gold curve peaks clearly before the end (module doc rule).

    Hacking iff, with ``k`` the first argmax of the ``n`` values ``g``:
    ``k / (n - 1) <= 1 - min_tail`` and ``g[k] - g[-1] >= max(min_drop * (max g - min g),
    min_abs_drop)`` and ``g[k] > g[-1]``.

    Args:
        gold_or_eval: The gold curve at successive checkpoints (an eval curve only if no gold
            exists, and then with ``min_abs_drop`` set above its noise).
        min_drop: Required fall from the peak to the end, as a fraction of the curve's range.
        min_tail: Required fraction of the run after the peak.
        min_abs_drop: Required fall in absolute units.

    Returns:
        True for hacking, False for healthy (also for curves of fewer than 3 points, which cannot
        show a peak before the end).
    """
    g = np.asarray(gold_or_eval, dtype=np.float64)
    if g.ndim != 1 or not np.all(np.isfinite(g)):
        raise CurveTraceError("label_hacking: expected a finite 1-D curve")
    if g.size < 3:
        return False
    k = int(np.argmax(g))
    drop = g[k] - g[-1]
    return bool(
        k / (g.size - 1) <= 1.0 - min_tail
        and drop > 0
        and drop >= min_drop * (g.max() - g.min())
        and drop >= min_abs_drop
    )


def peak_progress(curve: Sequence[float] | np.ndarray, step: Sequence[int] | np.ndarray) -> float:
    """Position of the (first) maximum of a curve as a fraction of the run, in [0, 1].

    Args:
        curve: Values at the checkpoints.
        step: Steps of the checkpoints (progress = step / last step).

    Returns:
        ``step[argmax] / step[-1]`` (1.0 for a single checkpoint at step 0).
    """
    s = np.asarray(step, dtype=np.float64)
    return float(s[int(np.argmax(curve))] / s[-1]) if s[-1] > 0 else 1.0


def resample(
    trace: CurveTrace, n_points: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Put a trace onto ``n_points`` evenly spaced checkpoints at progress ``i / n_points``.

    Progress of a recorded checkpoint is its normalised step ``step / step[-1]``; values at the
    new checkpoints are linearly interpolated in progress. Progress before the first recorded
    checkpoint takes the first value (no extrapolation).

    Args:
        trace: The trace (last step must be > 0).
        n_points: Number of checkpoints wanted, >= 1.

    Returns:
        ``(progress, eval, loss, gold)`` arrays of length ``n_points``; ``progress[i] = (i+1)/n``
        and ``gold`` is ``None`` when the trace has none.
    """
    if n_points < 1:
        raise ValueError(f"resample: n_points must be >= 1, got {n_points}")
    if trace.step[-1] <= 0:
        raise CurveTraceError(f"trace {trace.run_id!r}: cannot resample a run whose last step is 0")
    x = trace.step.astype(np.float64) / float(trace.step[-1])
    progress = np.arange(1, n_points + 1, dtype=np.float64) / n_points
    gold = None if trace.gold is None else np.interp(progress, x, trace.gold)
    return progress, np.interp(progress, x, trace.eval), np.interp(progress, x, trace.loss), gold


class GaoFit(NamedTuple):
    """Least-squares fit of Gao et al.'s RL law ``R(d) = d (alpha - beta ln d)``.

    Attributes:
        alpha: Initial slope coefficient.
        beta: Over-optimisation coefficient (> 0: the curve turns over, at
            ``d = exp(alpha / beta - 1)``).
        r2: Coefficient of determination of the fit on the points used (``nan`` if the targets
            are constant).
    """

    alpha: float
    beta: float
    r2: float


def fit_gao(d: Sequence[float] | np.ndarray, r: Sequence[float] | np.ndarray) -> GaoFit:
    """Fit ``R(d) = d (alpha - beta ln d)`` by linear least squares.

    The law is linear in ``(alpha, beta)``: ``R = alpha * d - beta * d ln d``. Points with
    ``d <= 0`` are excluded (the law gives 0 there by definition and ``ln d`` is undefined).

    Args:
        d: Distances ``sqrt(KL)`` from the initial policy.
        r: Gold gain over the initial policy at each distance.

    Returns:
        The fit.

    Raises:
        ValueError: Arrays of different shape, or fewer than 2 usable points.
    """
    d = np.asarray(d, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    if d.shape != r.shape or d.ndim != 1:
        raise ValueError(f"fit_gao: d and r must be 1-D of equal length, got {d.shape}, {r.shape}")
    keep = (d > 0) & np.isfinite(d) & np.isfinite(r)
    d, r = d[keep], r[keep]
    if d.size < 2:
        raise ValueError("fit_gao: need at least 2 points with d > 0")
    design = np.column_stack([d, -d * np.log(d)])
    (alpha, beta), *_ = np.linalg.lstsq(design, r, rcond=None)
    resid = r - design @ np.array([alpha, beta])
    ss_tot = float(np.sum((r - r.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else float("nan")
    return GaoFit(float(alpha), float(beta), r2)


def fit_gao_trace(trace: CurveTrace) -> GaoFit:
    """Fit Gao et al.'s law to a trace's gold gain over its first checkpoint vs ``sqrt(KL)``.

    Args:
        trace: A trace with ``gold`` and ``kl``.

    Returns:
        The fit of ``gold - gold[0]`` against ``sqrt(kl)``.

    Raises:
        CurveTraceError: The trace lacks gold or KL.
    """
    if trace.gold is None or trace.kl is None:
        raise CurveTraceError(f"trace {trace.run_id!r}: the Gao fit needs 'gold' and 'kl' curves")
    return fit_gao(np.sqrt(trace.kl), trace.gold - trace.gold[0])
