"""The curve-trace format: per-checkpoint training curves of one run, its JSONL file and checks.

This module needs only numpy (no torch), so the simulator can read trace corpora anywhere.

On-disk format (JSONL)
----------------------
One JSON object per line, one line per checkpoint. Lines of one run share ``run_id``; within a
run, lines appear in strictly increasing ``step`` order (runs may be interleaved, the reader
groups them by ``run_id`` in order of first appearance). Blank lines are ignored.

=================  ========  =====================================================================
field              required  meaning
=================  ========  =====================================================================
run_id             yes       non-empty string naming the run
step               yes       non-negative integer optimiser step of the checkpoint
eval               yes       number: the measured (noisy) eval score the stopper observes
loss               yes       finite number: the training loss at that checkpoint
proxy              no        finite number: proxy reward (reward-model score) of the policy
kl                 no        finite number: KL(policy || initial policy) as logged, nats (signed, below)
gold               no        finite number: the true ("gold") score, measured with little noise
label              no        ``"hacking"``, ``"healthy"``, ``true`` (= hacking), ``false`` or ``null``
meta               no        JSON object of run-level information (hyperparameters, source)
reward_std         no        finite number: standard deviation of the proxy reward over the batch
entropy            no        finite number: mean per-token entropy of the policy's completions, nats
completion_length  no        finite number: mean completion length, tokens
clip_ratio         no        finite number: share of tokens whose ratio the PPO-style clip cut
=================  ========  =====================================================================

``proxy``, ``kl``, ``reward_std``, ``entropy``, ``completion_length`` and ``clip_ratio`` are the
*training-side signals* a trainer logs beside its loss (TRL's ``reward``, ``kl``,
``reward_std``, ``entropy``, ``completions/mean_length``, ``clip_ratio/region_mean``; see
:data:`SIGNAL_SERIES` and docs/SIGNALS.md); a stopper sees them only when asked for
(``obs_fields``).

Numbers are finite with magnitude at most 1e9 (``MAX_ABS_VALUE``); steps are at most 1e15. Files are
UTF-8 (a byte-order mark is accepted). An optional field is present on every line of a run or on
none of them; ``label`` must be the same
on every line that carries it; ``meta`` is written on a run's first line and, if repeated, must be
identical. Non-finite numbers (``NaN``, ``Infinity``) are rejected. A true KL is >= 0, but real
logs carry *estimates*: TRL's ``RLOOTrainer`` logs the mean log-ratio of sampled tokens, a signed
estimate that is negative whenever the sampled tokens happen to be likelier under the reference
than under the policy.  So a KL is kept as logged, of either sign; only a non-finite one is
refused. Example::

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

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EvalStopError
from ..fileio import atomic_open, bounded_lines, open_regular, utf8_error_line

__all__ = ["SIGNAL_SERIES", "CurveTrace", "CurveTraceError", "read_traces", "write_traces"]

#: The optional per-checkpoint series, in the order a file's line carries them.
_OPTIONAL_SERIES = (
    "proxy",
    "kl",
    "gold",
    "reward_std",
    "entropy",
    "completion_length",
    "clip_ratio",
)
#: The training-side signals among them: what a trainer logs beside its loss.
SIGNAL_SERIES: tuple[str, ...] = (
    "proxy",
    "reward_std",
    "kl",
    "entropy",
    "completion_length",
    "clip_ratio",
)
#: Largest magnitude of a curve value.  Eval, gold, loss, proxy and KL of real runs are many
#: orders of magnitude below; a larger value (1e308) is a corrupt file, and would turn the
#: simulator's rescaled curves and rewards into inf and NaN.
MAX_ABS_VALUE = 1e9
#: Largest optimiser step (steps are stored as int64).
MAX_STEP = 10**15
#: Most evaluations a live or replayed run may plan (``n_checkpoints`` of a stopper
#: deciding a user's run): far beyond any run's evaluations; a stopper's arrays grow with
#: it (about 85 bytes each), so a mistyped 10**12 is refused instead of exhausting memory.
MAX_RUN_EVALS = 100_000
#: Kept for code that imports it: a logged KL estimate is now accepted at any sign (TRL
#: RLOO's mean log-ratio is signed), so no tolerance below 0 applies.
KL_TOLERANCE = math.inf
#: What a KL may be: a signed estimate, finite.
KL_ALLOWED = f"a finite number of magnitude <= {MAX_ABS_VALUE:g} (a signed KL estimate)"
_LABEL_VALUES = {"hacking": True, "healthy": False, True: True, False: False}


class CurveTraceError(EvalStopError):
    """A malformed curve file or trace; the message names file, line, field and what is allowed."""


def location(path: str | os.PathLike[str] | None, line: int | None, what: str | None = None) -> str:
    """Where a reader's error is: ``"path: line N: what"`` (the parts that are known)."""
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
        reward_std: Standard deviation of the proxy reward over the batch, if logged.
        entropy: Mean per-token entropy of the policy's completions (nats), if logged.
        completion_length: Mean completion length (tokens), if logged.
        clip_ratio: Share of tokens the clipped objective cut, if logged.
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
    reward_std: np.ndarray | None = None
    entropy: np.ndarray | None = None
    completion_length: np.ndarray | None = None
    clip_ratio: np.ndarray | None = None

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
        if np.any(step > MAX_STEP):
            raise CurveTraceError(f"{where}: field 'step' must be <= {MAX_STEP}")
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
            if not np.all(np.abs(arr) <= MAX_ABS_VALUE):  # also rejects NaN and inf
                raise CurveTraceError(
                    f"{where}: field {name!r} must be finite, of magnitude <= {MAX_ABS_VALUE:g}"
                )
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
    seen: set[str] = set()
    with atomic_open(path, "w") as fh:
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


def as_bounded_number(value: Any, *, integer: bool = False) -> float | int | None:
    """``value`` as a float (an int if ``integer``) if it is a bounded real number, else None.

    Bounded: finite and of magnitude <= :data:`MAX_ABS_VALUE` (steps: 0 to :data:`MAX_STEP`).
    Bools are not numbers here; integers too large for a float are refused, not overflowed.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if integer:
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            return None
        return int(value) if 0 <= value <= MAX_STEP else None
    return float(value) if -MAX_ABS_VALUE <= value <= MAX_ABS_VALUE else None


def _number(value: Any, path: Any, line: int, name: str, *, integer: bool = False) -> float:
    """Check a JSON value is a bounded number (an integer if asked) and return it."""
    number = as_bounded_number(value, integer=integer)
    if number is None:
        allowed = (
            f"an integer in [0, {MAX_STEP}]"
            if integer
            else f"a finite number of magnitude <= {MAX_ABS_VALUE:g}"
        )
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise CurveTraceError(
            f"{location(path, line)}: field {name!r}: expected {allowed}, got {shown}"
        )
    return number


def _parse_label(value: Any, path: Any, line: int) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool | str) and value in _LABEL_VALUES:
        return _LABEL_VALUES[value]
    raise CurveTraceError(
        f'{location(path, line)}: field \'label\': expected "hacking", "healthy", true, false or '
        f"null, got {value!r}"
    )


def parse_json(text: str, where: str) -> Any:
    """``json.loads`` whose every failure is a :class:`CurveTraceError` naming ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CurveTraceError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); "
            "each line must be one JSON object"
        ) from None
    except RecursionError:
        raise CurveTraceError(f"{where}: JSON nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise CurveTraceError(f"{where}: not valid JSON ({exc})") from None


def read_text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, text) of a UTF-8 file (BOM accepted); errors name the line."""
    try:
        # a regular file within the size cap, read a bounded line at a time: a FIFO,
        # /dev/zero or a huge sparse file is refused before a byte is read
        fh = open_regular(path, encoding="utf-8-sig", field="curves")
    except OSError as exc:
        raise CurveTraceError(f"{path}: cannot open: {exc.strerror}") from exc
    with fh:
        try:
            yield from enumerate(bounded_lines(fh, field="curves", where=str(path)), start=1)
        except UnicodeDecodeError as exc:
            line, msg = utf8_error_line(path, exc)
            raise CurveTraceError(f"{location(path, line)}: {msg}") from None


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for every non-blank line of a JSONL file."""
    for lineno, text in read_text_lines(path):
        if not text.strip():
            continue
        obj = parse_json(text, location(path, lineno))
        if not isinstance(obj, dict):
            raise CurveTraceError(
                f"{location(path, lineno)}: expected a JSON object, got {type(obj).__name__}"
            )
        yield lineno, obj


def read_traces(path: str | os.PathLike[str], *, min_checkpoints: int = 1) -> list[CurveTrace]:
    """Read a JSONL trace file written by :func:`write_traces` (or by hand, see module doc).

    Args:
        path: The JSONL file.
        min_checkpoints: Refuse a run with fewer checkpoints (the simulator needs 2: a run
            is resampled onto a job's checkpoints by its progress, step / last step).

    Returns:
        The traces, in order of first appearance of their run id.

    Raises:
        CurveTraceError: Any malformed line; the message names the file, 1-based line and field.
    """
    path = Path(path)
    known = {"run_id", "step", "eval", "loss", "label", "meta", *_OPTIONAL_SERIES}
    runs: dict[str, dict[str, Any]] = {}
    for lineno, obj in json_lines(path):
        unknown = sorted(set(obj) - known)
        if unknown:
            raise CurveTraceError(
                f"{location(path, lineno)}: unknown field {unknown[0]!r}; allowed: {sorted(known)}"
            )
        for name in ("run_id", "step", "eval", "loss"):
            if name not in obj:
                raise CurveTraceError(f"{location(path, lineno)}: missing required field {name!r}")
        run_id = obj["run_id"]
        if not isinstance(run_id, str) or not run_id:
            raise CurveTraceError(
                f"{location(path, lineno)}: field 'run_id': expected a non-empty string, "
                f"got {run_id!r}"
            )
        step = _number(obj["step"], path, lineno, "step", integer=True)
        if step < 0:
            raise CurveTraceError(
                f"{location(path, lineno)}: field 'step': expected a non-negative integer, got {step}"
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
                f"{location(path, lineno)}: field 'step': {step} does not increase on the previous "
                f"step {run['cols']['step'][-1]} of run {run_id!r}; steps must be strictly "
                "increasing within a run"
            )
        present = {k for k in _OPTIONAL_SERIES if k in obj}
        if present != set(run["optional"]):
            name = sorted(present ^ set(run["optional"]))[0]
            raise CurveTraceError(
                f"{location(path, lineno)}: field {name!r} is present on some lines of run "
                f"{run_id!r} but not others (first line {run['first_line']}); an optional field "
                "must be on every line of a run or on none"
            )
        label = _parse_label(obj.get("label"), path, lineno)
        if "label" in obj and run["has_label"] and label != run["label"]:
            raise CurveTraceError(
                f"{location(path, lineno)}: field 'label': {obj['label']!r} differs from the label "
                f"{run['label']!r} given earlier for run {run_id!r}"
            )
        if "label" in obj and not run["has_label"]:
            run["label"], run["has_label"] = label, True
        if "meta" in obj:
            if not isinstance(obj["meta"], dict):
                raise CurveTraceError(
                    f"{location(path, lineno)}: field 'meta': expected a JSON object, "
                    f"got {obj['meta']!r}"
                )
            if run["meta"] is not None and run["meta"] != obj["meta"]:
                raise CurveTraceError(
                    f"{location(path, lineno)}: field 'meta' differs from the meta given earlier for "
                    f"run {run_id!r}"
                )
            run["meta"] = obj["meta"]
        run["cols"]["step"].append(step)
        run["cols"]["eval"].append(_number(obj["eval"], path, lineno, "eval"))
        run["cols"]["loss"].append(_number(obj["loss"], path, lineno, "loss"))
        for name in run["optional"]:
            run["optional"][name].append(_number(obj[name], path, lineno, name))
    if not runs:
        raise CurveTraceError(f"{path}: no checkpoints (the file is empty)")
    for run_id, run in runs.items():
        if len(run["cols"]["step"]) < min_checkpoints:
            raise CurveTraceError(
                f"{location(path, run['first_line'])}: run {run_id!r} has "
                f"{len(run['cols']['step'])} checkpoint(s); at least {min_checkpoints} are needed"
            )
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
