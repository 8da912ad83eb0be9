"""The backward-induction model file: its members, its bounds, and the checks on its bytes.

A model file is an ``.npz`` of plain arrays (:data:`ARRAY_KEYS`) plus its JSON metadata
(:data:`META_KEY`), read from bytes verified against their SHA-256 first
(:func:`read_model_bytes`), bounded before parsing (:func:`member_count`,
:func:`read_members`: never unpickled) and refused when a traversal could index out of
its arrays, loop in them or misread them (:func:`check_model`).
"""

from __future__ import annotations

import io
import json
import math
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.errors import EvalStopError
from evalstop_gym.fileio import MAX_MODEL_BYTES, read_regular, read_verified

from .features import FEATURE_SETS, SETTINGS
from .trees import max_depth


class ModelFileError(EvalStopError):
    """A model file that is not a readable evalstop-gym model (its zip or its metadata)."""


def read_model_bytes(p: Path, shown: Any, trust: bool, sha256: str | None) -> bytes:
    """A model file's bytes: checked against its SHA-256 record first (``trust``: not).

    Every parser reads from these very bytes, so no unverified byte is ever parsed and
    the file cannot be swapped between the check and the read.  ``shown`` names the file
    in the messages.

    Raises:
        ModelFileError: a missing or unreadable file.
        evalstop_gym.fileio.UntrustedFileError: its hash differs from the record.
    """
    try:
        if trust:
            return read_regular(p, max_bytes=MAX_MODEL_BYTES, max_line=None, field="model")
        return read_verified(p, sha256)
    except FileNotFoundError:
        raise ModelFileError(f"{shown}: no such model file") from None
    except OSError as e:
        raise ModelFileError(f"{shown}: cannot read the model file ({e.strerror})") from None


#: The file format's version (metadata ``format``).
FORMAT = "evalstop-gym-backward-1"
#: The metadata member of a model file (JSON bytes as a uint8 array).
META_KEY = "meta_json"
#: Node arrays of every tree, concatenated; index arrays are absolute.
NODE_KEYS = ("feature", "threshold", "left", "right", "missing_left", "leaf", "value")
#: Members an ``.npz`` model holds: the node arrays, the trees and buckets, the metadata.
ARRAY_KEYS = (*NODE_KEYS, "roots", "model_trees", "baseline", "buckets", META_KEY)
#: The largest member a model file may declare (uncompressed), and the most nodes.
MAX_MEMBER_BYTES = 256 * 2**20
MAX_NODES = 2**24
#: The deepest tree a model may hold.
MAX_DEPTH = 64
#: The most trees one bucket's model may hold (a fit makes max_iter of them; 100 here).
#: A routed decision walks several models' trees padded to the longest: this bounds it.
MAX_BUCKET_TREES = 4096


def member_count(data: bytes, where: str, limit: int) -> int:
    """The entry count of a zip's end-of-central-directory record, before zipfile parses it.

    Raises:
        ModelFileError: not a zip, a ZIP64 archive, or more than ``limit`` members.
    """
    # The record is the last 22 bytes plus a comment of at most 65535 bytes.
    at = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 65535))
    if at < 0 or len(data) - at < 22:
        raise ModelFileError(f"{where} is not an evalstop-gym model file: not a zip file")
    disk_entries, total = struct.unpack_from("<HH", data, at + 8)
    if total == 0xFFFF or disk_entries == 0xFFFF:  # ZIP64: never written for a model
        raise ModelFileError(
            f"{where} is not an evalstop-gym model file: a ZIP64 archive "
            f"(a model zip holds at most {limit} members)"
        )
    if total > limit:
        raise ModelFileError(f"{where}: {total} members, at most {limit} allowed")
    return total


def read_members(
    data: bytes, where: str, bad: str, limit: int, meta_key: str
) -> tuple[dict[str, np.ndarray], Any]:
    """The arrays of an untrusted ``.npz`` and its JSON metadata member, bounded and never
    unpickled: at most ``limit`` members of at most :data:`MAX_MEMBER_BYTES` each.

    Raises:
        ModelFileError: ``bad`` and why (not a zip, too large, no metadata, not JSON).
    """
    member_count(data, where, limit)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if info.file_size > MAX_MEMBER_BYTES:
                    raise ModelFileError(
                        f"{bad}: member {info.filename[:80]!r} declares {info.file_size} "
                        f"bytes, at most {MAX_MEMBER_BYTES} allowed"
                    )
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if meta_key not in z.files:
                raise ModelFileError(f"{bad}: no member {meta_key!r}")
            got = {k: z[k] for k in z.files}
    except ModelFileError:
        raise
    except Exception as e:  # untrusted bytes: zipfile, zlib and numpy raise many types
        raise ModelFileError(f"{bad}: {type(e).__name__}: {str(e)[:200]}") from None
    try:
        meta = json.loads(got.pop(meta_key).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ModelFileError(f"{bad}: its metadata is not JSON ({str(e)[:200]})") from None
    return got, meta


def check_grid_and_settings(meta: dict[str, Any], bad: str) -> None:
    """Refuse metadata whose ``grid`` or ``default_settings`` a stopper could not use."""
    grid = meta.get("grid")
    if not isinstance(grid, int) or isinstance(grid, bool) or not 1 <= grid <= 4096:
        raise ModelFileError(f"{bad}: grid must be an integer in [1, 4096]")
    defaults = meta.get("default_settings")
    if not isinstance(defaults, dict) or not all(
        isinstance(defaults.get(s), int | float) and math.isfinite(defaults[s]) for s in SETTINGS
    ):
        raise ModelFileError(f"{bad}: default_settings must give {list(SETTINGS)} as numbers")


def check_model(a: dict[str, np.ndarray], meta: Any, bad: str) -> None:
    """Refuse arrays a traversal could index out of, loop in, or misread."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFileError(f"{bad}: metadata format is not {FORMAT!r}")
    features = meta.get("features")
    if not any(features == list(f) for f in FEATURE_SETS.values()):
        raise ModelFileError(
            f"{bad}: its features are none of this version's sets ({sorted(FEATURE_SETS)})"
        )
    check_grid_and_settings(meta, bad)
    n = len(a["feature"])
    if not 0 < n <= MAX_NODES or any(a[k].shape != (n,) for k in NODE_KEYS):
        raise ModelFileError(f"{bad}: node arrays of different lengths or over {MAX_NODES}")
    for k in ("feature", "left", "right", "roots", "model_trees", "buckets"):
        if a[k].dtype.kind not in "iu":
            raise ModelFileError(f"{bad}: {k} must hold integers")
    for k in ("threshold", "value", "baseline"):
        if a[k].dtype.kind != "f":
            raise ModelFileError(f"{bad}: {k} must hold floats")
    leaf = a["leaf"].astype(bool)
    idx = np.arange(n)
    inner = ~leaf
    if inner.any() and not (
        (a["left"][inner] > idx[inner]).all()
        and (a["right"][inner] > idx[inner]).all()
        and (a["left"][inner] < n).all()
        and (a["right"][inner] < n).all()
    ):
        raise ModelFileError(f"{bad}: a node's children are out of range")
    # Every node's feature, leaves too: a traversal reads x at a leaf's feature before it
    # sees that the node is a leaf (scikit-learn's leaves, packed, hold 0).
    if not ((a["feature"] >= 0).all() and (a["feature"] < len(features)).all()):
        raise ModelFileError(f"{bad}: a node's feature is out of range")
    if not np.isfinite(a["value"][leaf]).all() or not np.isfinite(a["baseline"]).all():
        raise ModelFileError(f"{bad}: a leaf value or baseline is not finite")
    t, b = len(a["roots"]), len(a["baseline"])
    mt = a["model_trees"]
    if (
        t == 0
        or not ((a["roots"] >= 0) & (a["roots"] < n)).all()
        or mt.shape != (b + 1,)
        or a["buckets"].shape != (b,)
        or mt[0] != 0
        or mt[-1] != t
        or (np.diff(mt) < 0).any()
        or len(set(a["buckets"].tolist())) != b
    ):
        raise ModelFileError(f"{bad}: tree or bucket offsets are inconsistent")
    if (np.diff(mt) > MAX_BUCKET_TREES).any():
        raise ModelFileError(f"{bad}: a bucket model of more than {MAX_BUCKET_TREES} trees")
    if (
        max_depth(a["left"].astype(np.intp), a["right"].astype(np.intp), leaf, a["roots"])
        > MAX_DEPTH
    ):
        raise ModelFileError(f"{bad}: a tree deeper than {MAX_DEPTH}")
