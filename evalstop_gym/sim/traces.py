"""Trace replay: jobs read from a CSV in the Philly format.

A trace row gives a job's submission time, run time, GPU demand and virtual
cluster (the columns of :data:`TRACE_COLUMNS`, named as in Microsoft's Philly
trace, Jeon et al., USENIX ATC'19).  :func:`read_trace` parses and validates
a file once per version of it; :func:`trace_jobs` turns its rows into an
episode's :class:`~evalstop_gym.sim.workloads.JobBatch`, drawing what a trace
does not hold (job types, hack labels, duration estimates).
"""

from __future__ import annotations

import csv
import functools
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, TraceError
from ..fileio import bounded_lines, file_identity, open_regular, utf8_error_line
from .workloads import WORKLOADS, JobBatch, assign_types

#: Largest trace file read (1 GiB: Philly's whole trace is about 30 MB).
MAX_TRACE_BYTES = 2**30
#: Longest trace line, in characters (a row is tens of characters).
MAX_TRACE_LINE = 2**20

#: Longest job a trace may hold, in seconds (about 3 years; Philly's longest is weeks).  A
#: larger value is a corrupt row, and would make every time and GPU-hour sum meaningless.
MAX_TRACE_DURATION_S = 1e8
#: Largest GPU demand a trace row may hold (the largest cluster ``SimConfig`` accepts).
MAX_TRACE_GPUS = 100_000

#: The tiny hand-made sample in the Philly format, shipped for unit tests and examples.
SAMPLE_TRACE = str(Path(__file__).with_name("data") / "philly_sample.csv")

#: Job-type mix assigned to trace rows (a trace says nothing about job types):
#: the heavy-RLHF mix, so trace replays study the paper's setting.
TRACE_TYPE_MIX = WORKLOADS["heavy-rlhf"].type_mix


@dataclass(frozen=True)
class TraceRows:
    """Rows of a Philly-format trace, parsed and validated once."""

    path: str
    arrival_s: np.ndarray  # seconds since the first submission of the *file*
    duration_s: np.ndarray
    gpus: np.ndarray
    cluster: np.ndarray  # str
    line: np.ndarray  # 1-based line number in the file (header is line 1)


TRACE_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")


def _parse_trace_row(
    path: str, lineno: int, row: list[str], cols: tuple[int, int, int, int]
) -> tuple[float, float, int, str]:
    """(timestamp s, duration s, GPUs, cluster) of one row, or :class:`TraceError`."""
    its, idur, igpu, iclu = cols
    try:
        ts = datetime.fromisoformat(row[its].strip()).timestamp()
    except (ValueError, OverflowError, OSError):
        raise TraceError(
            path, lineno, "timestamp", f"{row[its]!r} is not 'YYYY-MM-DD HH:MM:SS'"
        ) from None
    try:
        dur = float(row[idur])
    except ValueError:
        dur = float("nan")
    if not 0 < dur <= MAX_TRACE_DURATION_S:
        raise TraceError(
            path,
            lineno,
            "duration",
            f"{row[idur][:40]!r} is not a number of seconds in (0, {MAX_TRACE_DURATION_S:g}]",
        )
    try:
        g = int(row[igpu])
    except ValueError:  # also a number of more than 4300 digits
        g = 0
    if not 1 <= g <= MAX_TRACE_GPUS:
        raise TraceError(
            path,
            lineno,
            "num_gpus",
            f"{row[igpu][:40]!r} is not an integer in [1, {MAX_TRACE_GPUS}]",
        )
    cl = row[iclu].strip()
    if not cl:
        raise TraceError(path, lineno, "cluster", "empty virtual-cluster id")
    return ts, dur, g, cl


def _trace_header(path: str, reader: Any) -> tuple[int, int, int, int]:
    """Column indices of the trace's required columns, from its header row."""
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(path, 1, "header", "the file is empty") from None
    col = {name.strip(): i for i, name in enumerate(header)}
    missing = [c for c in TRACE_COLUMNS if c not in col]
    if missing:
        raise TraceError(
            path, 1, missing[0], f"missing column; the header must hold {list(TRACE_COLUMNS)}"
        )
    its, idur, igpu, iclu = (col[c] for c in TRACE_COLUMNS)
    return its, idur, igpu, iclu


def _trace_records(path: str) -> list[tuple[int, tuple[float, float, int, str]]]:
    """(line, parsed row) of every job row; decoding and CSV errors become TraceErrors."""
    out: list[tuple[int, tuple[float, float, int, str]]] = []
    # utf-8-sig: a byte-order mark (as spreadsheet programs write) is not part of the header.
    # open_regular: a FIFO, a device or an oversized file is refused before a byte is read.
    with open_regular(
        path, "r", max_bytes=MAX_TRACE_BYTES, field="trace", newline="", encoding="utf-8-sig"
    ) as fh:
        reader = csv.reader(bounded_lines(fh, max_line=MAX_TRACE_LINE, field="trace", where=path))
        try:
            cols = _trace_header(path, reader)
            width = max(cols) + 1
            for row in reader:
                lineno = reader.line_num
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) < width:
                    raise TraceError(
                        path, lineno, "row", f"{len(row)} columns, expected >= {width}"
                    )
                out.append((lineno, _parse_trace_row(path, lineno, row, cols)))
        except UnicodeDecodeError as exc:
            line, msg = utf8_error_line(path, exc)
            raise TraceError(path, line, "encoding", msg) from None
        except csv.Error as exc:  # e.g. a field over csv.field_size_limit() or a NUL byte
            raise TraceError(
                path,
                reader.line_num,
                "row",
                f"not a valid CSV row ({exc}); fields may hold at "
                f"most {csv.field_size_limit()} characters",
            ) from None
    return out


@functools.lru_cache(maxsize=4)
def _read_trace_cached(path: str, identity: tuple[int, ...]) -> TraceRows:
    del identity  # part of the cache key only: a changed or replaced file is re-read
    records = _trace_records(path)
    if not records:
        raise TraceError(path, 2, "row", "the trace holds no job")
    ts_arr = np.asarray([r[1][0] for r in records])
    return TraceRows(
        path=path,
        arrival_s=ts_arr - ts_arr.min(),
        duration_s=np.asarray([r[1][1] for r in records]),
        gpus=np.asarray([r[1][2] for r in records], dtype=np.int64),
        cluster=np.asarray([r[1][3] for r in records]),
        line=np.asarray([r[0] for r in records], dtype=np.int64),
    )


def read_trace(path: str | os.PathLike[str]) -> TraceRows:
    """Parse and validate a trace CSV in the Philly format (cached per file version).

    Raises:
        FileNotFoundError: the file does not exist.
        TraceError: a malformed row; the message names the file, line and field.
        ConfigError: not a regular file (a FIFO, a device), over 1 GiB, or a line over 1 MiB.
    """
    p = os.fspath(path)
    # Device, inode, size, mtime and ctime: a same-size rewrite with its old mtime restored
    # still changes the ctime, so the cache never serves the old rows.
    return _read_trace_cached(os.path.abspath(p), file_identity(p))


def trace_jobs(
    path: str | os.PathLike[str],
    num_gpus: int,
    rng: np.random.Generator,
    *,
    cluster: str | None = None,
    n_jobs: int | None = None,
    hack_fraction: float = 0.6,
    type_mix: tuple[float, float, float] = TRACE_TYPE_MIX,
    estimate_log_sd: float = 0.5,
) -> JobBatch:
    """Replay a trace: arrivals, GPU demands and durations from the file.

    Jobs are taken in submission order (optionally one virtual cluster only, and
    the first ``n_jobs`` of them); job types and hack labels are drawn from
    ``type_mix`` and ``hack_fraction`` since a trace carries neither.
    """
    rows = read_trace(path)
    sel = np.arange(len(rows.arrival_s))
    if cluster is not None:
        sel = sel[rows.cluster == cluster]
        if len(sel) == 0:
            known = sorted(set(rows.cluster.tolist()))
            raise ConfigError("trace_cluster", cluster, f"a cluster of the trace: {known}")
    sel = sel[np.argsort(rows.arrival_s[sel], kind="stable")]
    if n_jobs is not None:
        if not isinstance(n_jobs, int) or n_jobs < 1:
            raise ConfigError("n_jobs", n_jobs, "an integer >= 1, or None for the whole trace")
        sel = sel[:n_jobs]
    too_big = sel[rows.gpus[sel] > num_gpus]
    if len(too_big):
        i = too_big[0]
        raise TraceError(
            rows.path,
            int(rows.line[i]),
            "num_gpus",
            f"{int(rows.gpus[i])} GPUs exceed the cluster's num_gpus={num_gpus}; "
            "use a larger cluster or filter with trace_cluster",
        )
    n = len(sel)
    arrival_h = (rows.arrival_s[sel] - rows.arrival_s[sel][0]) / 3600.0
    duration_h = rows.duration_s[sel] / 3600.0
    types, hacking = assign_types(rng, n, type_mix, hack_fraction)
    estimate = duration_h * np.exp(estimate_log_sd * rng.standard_normal(n))
    return JobBatch(arrival_h, types, rows.gpus[sel].copy(), duration_h, estimate, hacking)
