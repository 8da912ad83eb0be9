"""Loaders for other tools' training logs: TRL ``trainer_state.json`` and OpenRLHF metrics.

Both read a log into a :class:`~evalstop_gym.corpus.format.CurveTrace` and label it with the one
rule of :func:`~evalstop_gym.corpus.analysis.label_hacking`. Numpy only.
"""

from __future__ import annotations

import csv
import difflib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..fileio import bounded_lines, open_regular, utf8_error_line
from .analysis import label_hacking
from .format import (
    MAX_ABS_VALUE,
    MAX_RUN_EVALS,
    MAX_STEP,
    CurveTrace,
    CurveTraceError,
    as_bounded_number,
    json_lines,
    location,
    parse_json,
)

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


#: Keys of a log row that are bookkeeping, not metrics: never offered as an eval or loss key.
_BOOKKEEPING = frozenset(
    {"step", "epoch", "global_step", "train/global_step", "eval/global_step", "total_flos"}
)


def _keys_like(records: Sequence[tuple[int, int, Mapping[str, Any]]], eval_side: bool) -> list[str]:
    """The metric keys the records carry: the eval ones (``eval_*``, ``eval/*``) or the others."""
    keys: set[str] = set()
    for _, _, rec in records:
        keys.update(k for k in rec if isinstance(k, str) and k not in _BOOKKEEPING)
    evals = {k for k in keys if k.startswith(("eval_", "eval/"))}
    return sorted(evals if eval_side else keys - evals)


def _shown(keys: list[str], wanted: str, limit: int = 40) -> str:
    """``keys`` as a list for a message (cut after ``limit``), and the ones close to ``wanted``."""
    listed = (
        repr(keys)
        if len(keys) <= limit
        else repr(keys[:limit])[:-1] + f", ... {len(keys) - limit} more]"
    )
    close = difflib.get_close_matches(wanted, keys, n=3, cutoff=0.5)
    return listed + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")


def _warn(path: Path, message: str) -> None:
    """One line naming the file: a loader's result that is valid but probably not what was meant."""
    warnings.warn(f"{path}: {message}", UserWarning, stacklevel=4)


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
    greater_is_better: bool = True,
    default_keys: frozenset[str] = frozenset(),
    signal_keys: Mapping[str, str | None] | None = None,
) -> CurveTrace:
    """Turn (position, step, metrics) records into a trace; shared by the log loaders.

    Eval records define the checkpoints; loss, proxy, KL, gold and the other signals
    (``signal_keys``: trace field -> logged key) are aligned to them with
    :func:`_align_last` (gold, when logged with the eval, is aligned the same way).
    ``greater_is_better=False`` negates the eval (a trace's eval is a score: higher is
    better), recorded as ``meta["eval_negated"] = True``.  Warns (one line naming the file
    and key) when an optional key not in ``default_keys`` never occurs, when an aligned
    series is constant, and when a loss-like eval key is read as higher-is-better.
    """

    def loc(pos: int) -> str:
        return f"{path}: {where_word} {pos}"

    eval_steps: list[int] = []
    eval_vals: list[float] = []
    series: dict[str, tuple[list[int], list[float]]] = {}
    wanted = {"loss": loss_key, "proxy": proxy_key, "kl": kl_key, "gold": gold_key}
    wanted.update(signal_keys or {})
    for pos, step, rec in records:
        for role, key in [("eval", eval_key), *wanted.items()]:
            if key is None or key not in rec or rec[key] is None or rec[key] == "":
                continue
            # A KL is kept at either sign: RLOO's estimate (mean log-ratio) is signed.
            value = _metric_value(rec[key], f"{loc(pos)}: field {key!r}")
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
            f"{path}: no entry carries the eval key {eval_key!r}; the file's eval keys: "
            f"{_shown(_keys_like(records, eval_side=True), eval_key)}; pass eval_key= to choose the "
            "logged eval metric"
        )
    if "loss" not in series:
        raise CurveTraceError(
            f"{path}: no entry carries the loss key {loss_key!r}; the file's training keys: "
            f"{_shown(_keys_like(records, eval_side=False), loss_key)}; pass loss_key= to choose the "
            "logged training loss"
        )
    for role in wanted:
        if role == "loss":
            continue
        key = wanted[role]
        if key is not None and role not in series and key not in default_keys:
            _warn(
                path,
                f"{role}_key {key!r} never occurs, so the trace has no {role} series; the file's "
                f"keys: {_shown(_keys_like(records, False) + _keys_like(records, True), key)}",
            )
    at = np.array(eval_steps, dtype=np.int64)
    aligned = {role: _align_last(*series[role], at) for role in series}
    if len(at) > 1:
        constant = [("eval", eval_key, np.array(eval_vals))]
        # A signal read by default and constant (GRPO's clip ratio is 0 at every step when
        # each batch is optimised once) is the trainer's, not a wrong key: no warning.
        quiet = {r for r, k in (signal_keys or {}).items() if k in default_keys}
        constant += [(role, wanted[role], aligned[role]) for role in aligned if role not in quiet]
        for role, key, values in constant:
            # Constant up to float noise (RLOO's eval_loss is 0 +- 1e-7 at every eval).
            if np.ptp(values) <= 1e-6 * max(1.0, float(np.abs(values).max())):
                once = (
                    f" (logged only at step {series[role][0][0]}: a summary key such as HF's "
                    "end-of-training 'train_loss'?)"
                    if role != "eval" and len(set(series[role][0])) < 2
                    else ""
                )
                _warn(
                    path,
                    f"{role} key {key!r} gives every one of the {len(at)} checkpoints the same "
                    f"value {values[0]:.6g}{once}",
                )
    evals = np.array(eval_vals)
    if greater_is_better:
        if "loss" in eval_key.lower():
            _warn(
                path,
                f"eval key {eval_key!r} is read as higher-is-better; for a loss pass "
                "greater_is_better=False",
            )
    else:
        evals = -evals
        meta = {**meta, "eval_negated": True}
    gold = aligned.get("gold")
    return CurveTrace(
        run_id=run_id,
        step=at,
        eval=evals,
        loss=aligned["loss"],
        gold=gold,
        label=None if gold is None else label_hacking(gold),
        meta=meta,
        **{role: aligned.get(role) for role in wanted if role not in ("loss", "gold")},
    )


def _metric_value(value: Any, where: str) -> float:
    """A logged metric (a JSON number or a CSV cell) as a bounded float, or CurveTraceError."""
    given = value  # the message shows what the file holds, not its failed conversion
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    number = as_bounded_number(value)
    if number is None:
        shown = repr(given) if len(repr(given)) <= 60 else repr(given)[:57] + "..."
        raise CurveTraceError(
            f"{where}: expected a finite number of magnitude <= {MAX_ABS_VALUE:g}, got {shown}"
        )
    return float(number)


def _default_run_id(path: Path) -> str:
    # HF writes trainer_state.json into output_dir/checkpoint-N/: the run is the output dir.
    parent = path.resolve().parent
    if parent.name.startswith("checkpoint-") and parent.parent.name:
        return parent.parent.name
    return parent.name or path.stem


def _step_of(value: Any, path: Path, where: str, key: str) -> int:
    """A logged step (a JSON number or a CSV cell) as an int in [0, MAX_STEP], or CurveTraceError."""
    given = value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    step = as_bounded_number(value, integer=True)
    if step is None:
        shown = repr(given) if len(repr(given)) <= 60 else repr(given)[:57] + "..."
        raise CurveTraceError(
            f"{path}: {where}: field {key!r}: expected an integer step in [0, {MAX_STEP}], "
            f"got {shown}"
        )
    return int(step)


#: TRL's log keys of each training-side signal (trace field -> candidate keys): a log's
#: signal is the first candidate it carries.  The first keys are GRPOTrainer's and
#: RLOOTrainer's (``trl/trainer/grpo_trainer.py``, ``rloo_trainer.py``), the second
#: OnlineDPOTrainer's (``trl/experimental/online_dpo``); TRL 1.16.
TRL_SIGNAL_KEYS: dict[str, tuple[str, ...]] = {
    "proxy": ("reward", "objective/scores"),
    "kl": ("kl", "objective/kl"),
    "reward_std": ("reward_std",),
    "entropy": ("entropy", "objective/entropy"),
    "completion_length": ("completions/mean_length",),
    "clip_ratio": ("clip_ratio/region_mean",),
}
#: The trace fields :func:`load_trl_trainer_state` reads through ``signal_keys``.
TRL_OTHER_SIGNALS = ("reward_std", "entropy", "completion_length", "clip_ratio")

KeySpec = str | Sequence[str] | None


def _pick_key(records: Sequence[tuple[int, int, Mapping[str, Any]]], key: KeySpec) -> str | None:
    """``key``, or of a sequence of candidates the first one a record carries (else the first)."""
    if key is None or isinstance(key, str):
        return key
    candidates = list(key)
    for candidate in candidates:
        if any(rec.get(candidate) not in (None, "") for _, _, rec in records):
            return candidate
    return candidates[0] if candidates else None


def _check_loader_args(
    greater_is_better: Any, keys: Mapping[str, Any], specs: Mapping[str, Any] | None = None
) -> None:
    """Refuse a loader's arguments before the file is read, each in one line.

    ``greater_is_better`` a bool (a truthy ``"no"`` read a loss as a score, silently);
    ``keys`` (name -> value) non-empty strings, or None where the name's default may be;
    ``specs`` (name -> value) a key, a sequence of candidate keys, or None.
    """
    if not isinstance(greater_is_better, bool):
        raise ConfigError("greater_is_better", greater_is_better, "True or False")
    for name, key in keys.items():
        required = name in ("eval_key", "loss_key")
        if not (isinstance(key, str) and key) and (required or key is not None):
            raise ConfigError(name, key, "a non-empty string" + ("" if required else " or None"))
    for name, spec in (specs or {}).items():
        candidates = [spec] if isinstance(spec, str) or spec is None else spec
        if not isinstance(candidates, Sequence) or not all(
            isinstance(k, str | type(None)) for k in candidates
        ):
            raise ConfigError(name, spec, "a key, a list of candidate keys, or None")


def load_trl_trainer_state(
    path: str | os.PathLike[str],
    eval_key: str = "eval_reward",
    loss_key: str = "loss",
    run_id: str | None = None,
    *,
    proxy_key: KeySpec = TRL_SIGNAL_KEYS["proxy"],
    kl_key: KeySpec = TRL_SIGNAL_KEYS["kl"],
    gold_key: str | None = None,
    greater_is_better: bool = True,
    signal_keys: Mapping[str, KeySpec] | None = None,
) -> CurveTrace:
    """Load a HuggingFace/TRL ``trainer_state.json`` as a trace.

    The checkpoints are the ``log_history`` entries carrying ``eval_key``; the training loss (and
    the optional proxy, KL, gold and other signal series) at each is the last one logged at or
    before that step (the first one, for evals logged before any training entry). By default the
    training-side signals TRL's trainers log are read (:data:`TRL_SIGNAL_KEYS`); a signal the
    log lacks is None, silently. The order of entries in
    the file does not matter within a step: an eval logged by a callback's ``on_step_end``
    precedes the training entry of the same step in real TRL output. ``null`` values (TRL
    writes them for metrics with no valid sample) count as "not logged".

    Args:
        path: The ``trainer_state.json`` file.
        eval_key: Metric of the eval entries, e.g. ``"eval_reward"``,
            ``"eval_rewards/accuracies"`` (DPOTrainer) or ``"eval_loss"`` (with
            ``greater_is_better=False``).
        loss_key: Metric of the training entries (``"loss"``; not ``"train_loss"``, HF's
            end-of-training summary, which would give every checkpoint one value).
        run_id: Name of the run; default: the output folder (the parent of ``checkpoint-N``).
        proxy_key: Proxy-reward metric, or candidates of which the first logged is read
            (default ``("reward", "objective/scores")``: GRPOTrainer and RLOOTrainer, then
            OnlineDPOTrainer); e.g. ``"rewards/<reward function>/mean"``; None skips it.
        kl_key: KL metric, or candidates (default ``("kl", "objective/kl")``; GRPOTrainer
            and RLOOTrainer log ``kl`` only when their ``beta`` is not 0; RLOO's is a
            signed estimate, kept at either sign); None skips it.
        gold_key: Optional gold metric; when given the trace is labelled by
            :func:`label_hacking`.
        greater_is_better: False for an eval metric to minimise (``"eval_loss"``): the
            trace's eval is then its negation (a trace's eval is a score), and
            ``meta["eval_negated"]`` is True.
        signal_keys: The other signals, trace field (``reward_std``, ``entropy``,
            ``completion_length``, ``clip_ratio``) -> metric or candidates; None (default)
            reads each from :data:`TRL_SIGNAL_KEYS`; a mapping reads exactly the fields it
            names (``{}``: none of them).

    Returns:
        The trace, ``meta = {"source": "trl", "path": ..., "eval_key": ...}``.

    Warns:
        UserWarning: (one line naming the file and key) an optional key that never occurs,
            a series that is the same at every checkpoint, a loss-like ``eval_key`` read as
            higher-is-better.

    Raises:
        CurveTraceError: Invalid JSON (with its line), no ``log_history`` list, an entry that is
            not an object or lacks a valid ``step`` (with its ``log_history`` index), a
            non-numeric metric, non-increasing eval steps, or a missing eval or loss key (the
            message lists the keys the file has).
    """
    _check_loader_args(
        greater_is_better,
        {"eval_key": eval_key, "loss_key": loss_key, "gold_key": gold_key},
        {"proxy_key": proxy_key, "kl_key": kl_key},
    )
    if signal_keys is not None:
        if not isinstance(signal_keys, Mapping):
            raise ConfigError(
                "signal_keys", signal_keys, f"a mapping from {list(TRL_OTHER_SIGNALS)}"
            )
        _check_loader_args(True, {}, {f"signal_keys[{k!r}]": v for k, v in signal_keys.items()})
    path = Path(path)
    try:
        # a regular file within the size cap (a FIFO or /dev/zero is refused at once);
        # a byte-order mark is accepted
        with open_regular(path, encoding="utf-8-sig", field="trainer_state") as fh:
            text = fh.read()
    except OSError as exc:
        raise CurveTraceError(f"{path}: cannot open: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        line, msg = utf8_error_line(path, exc)
        raise CurveTraceError(f"{location(path, line)}: {msg}") from None
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CurveTraceError(
            f"{location(path, exc.lineno)}: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except (RecursionError, ValueError):
        state = parse_json(text, str(path))  # raises the same error with the file named
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
    if signal_keys is None:
        signal_keys = {f: TRL_SIGNAL_KEYS[f] for f in TRL_OTHER_SIGNALS}
    if not isinstance(signal_keys, Mapping) or set(signal_keys) - set(TRL_OTHER_SIGNALS):
        raise CurveTraceError(
            f"{path}: signal_keys {signal_keys!r}: expected a mapping from "
            f"{list(TRL_OTHER_SIGNALS)} to a metric key, a sequence of them or None"
        )
    specs = {"proxy": proxy_key, "kl": kl_key, **signal_keys}
    picked = {role: _pick_key(records, spec) for role, spec in specs.items()}
    # A key given as candidates may be absent (a trainer that does not log it); a key
    # named alone is the user's choice, and its absence is worth a warning.
    candidates = frozenset(
        key for role, key in picked.items() if key is not None and not isinstance(specs[role], str)
    )
    return _build_from_records(
        path,
        [(i, step, rec) for i, step, rec in records],
        where_word="log_history index",
        eval_key=eval_key,
        loss_key=loss_key,
        proxy_key=picked.pop("proxy"),
        kl_key=picked.pop("kl"),
        gold_key=gold_key,
        signal_keys=picked,
        default_keys=candidates,
        run_id=run_id or _default_run_id(path),
        meta={
            "source": "trl",
            "path": str(path),
            "eval_key": eval_key,
            **_planned_checkpoints(state),
        },
        greater_is_better=greater_is_better,
    )


def _planned_checkpoints(state: Mapping[str, Any]) -> dict[str, int]:
    """``{"n_checkpoints": K}`` if an ``EvalStopCallback`` recorded the run's planned evals.

    A run the callback stopped logs fewer evaluations than it planned; a replay of its log
    must decide with the planned K (the stop eval is not the last one), so the loader
    keeps it.  Anything malformed there is ignored: it is the callback's note, not data.
    """
    stored = state.get("stateful_callbacks")
    entry = stored.get("EvalStopCallback") if isinstance(stored, dict) else None
    if isinstance(entry, list):  # transformers keeps a list when one class is there twice
        entry = entry[0] if entry else None
    args = entry.get("args") if isinstance(entry, dict) else None
    k = args.get("n_checkpoints") if isinstance(args, dict) else None
    if isinstance(k, int) and not isinstance(k, bool) and 2 <= k <= MAX_RUN_EVALS:
        return {"n_checkpoints": k}
    return {}


def _openrlhf_csv_records(path: Path, step_in: Any) -> list[tuple[int, int, Mapping[str, Any]]]:
    """(line, step, row) of each non-blank CSV row; malformed rows raise CurveTraceError."""
    records: list[tuple[int, int, Mapping[str, Any]]] = []
    try:
        # a regular file within the size cap; a byte-order mark is accepted
        fh = open_regular(path, encoding="utf-8-sig", newline="", field="log")
    except OSError as exc:
        raise CurveTraceError(f"{path}: cannot open: {exc.strerror}") from exc
    with fh:
        reader = csv.DictReader(bounded_lines(fh, field="log", where=str(path)))
        try:
            if not reader.fieldnames:
                raise CurveTraceError(f"{location(path, 1)}: missing CSV header row")
            for row in reader:
                # line_num counts physical lines read so far, i.e. this row's (last) line.
                lineno = reader.line_num
                if None in row:
                    raise CurveTraceError(
                        f"{location(path, lineno)}: {len(row[None])} more cells than the "
                        f"{len(reader.fieldnames)} header columns"
                    )
                if any(v is None for v in row.values()):
                    raise CurveTraceError(
                        f"{location(path, lineno)}: fewer cells than the "
                        f"{len(reader.fieldnames)} header columns"
                    )
                if not any(v.strip() for v in row.values()):
                    continue
                records.append((lineno, step_in(lineno, row), row))
        except UnicodeDecodeError as exc:
            line, msg = utf8_error_line(path, exc)
            raise CurveTraceError(f"{location(path, line)}: {msg}") from None
        except csv.Error as exc:  # a field over csv.field_size_limit(), a NUL byte
            raise CurveTraceError(
                # DictReader.line_num is set after a row; its csv.reader's counts the bad line.
                f"{location(path, reader.reader.line_num)}: not a valid CSV row ({exc}); fields may hold "
                f"at most {csv.field_size_limit()} characters"
            ) from None
    return records


#: The optional keys :func:`load_openrlhf_log` reads by default: their absence is no surprise.
_OPENRLHF_DEFAULT_KEYS = frozenset({"train/reward", "train/kl"})
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
    greater_is_better: bool = True,
) -> CurveTrace:
    """Load an OpenRLHF-style metric log (JSONL or CSV) as a trace.

    Each row holds a step column and any of ``train/...`` and ``eval/...`` metrics (empty CSV
    cells or missing JSON keys mean "not logged in this row"). The checkpoints are the rows
    carrying ``eval_key``; the other series are aligned to them as in
    :func:`load_trl_trainer_state`. Optional series whose key never appears are ``None`` (with a
    warning, unless the key is this loader's default).

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
        greater_is_better: False for an eval metric to minimise: as in
            :func:`load_trl_trainer_state`.

    Returns:
        The trace, ``meta = {"source": "openrlhf", "path": ..., "eval_key": ...}``.

    Warns:
        UserWarning: as :func:`load_trl_trainer_state`.

    Raises:
        CurveTraceError: A malformed row; the message names the file, 1-based line and field.
    """
    _check_loader_args(
        greater_is_better,
        {
            "eval_key": eval_key,
            "loss_key": loss_key,
            "proxy_key": proxy_key,
            "kl_key": kl_key,
            "gold_key": gold_key,
            "step_key": step_key,
        },
    )
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
            f"{location(path, lineno)}: missing step field; expected one of {list(step_keys)}"
        )

    records: list[tuple[int, int, Mapping[str, Any]]] = []
    if fmt == "jsonl":
        for lineno, obj in json_lines(path):
            records.append((lineno, step_in(lineno, obj), obj))
    else:
        records = _openrlhf_csv_records(path, step_in)
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
        meta={"source": "openrlhf", "path": str(path), "eval_key": eval_key},
        greater_is_better=greater_is_better,
        default_keys=_OPENRLHF_DEFAULT_KEYS,
    )
