"""Curve corpora shipped with the package, each with a sidecar recording how it was made.

``evalstop_gym/corpus/data/<name>.jsonl`` is a corpus in the JSONL trace format and
``<name>.json`` its sidecar: the command and seed that made it, the package versions, the number
of runs and the SHA-256 of the JSONL file. Numpy only: reading a shipped corpus needs neither
torch nor TRL.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..fileio import atomic_write, read_regular
from .format import CurveTrace, CurveTraceError, read_traces

#: Folder of the shipped corpora.
DATA_DIR = Path(__file__).resolve().parent / "data"
#: The TRL (GRPO) corpus: 48 runs, and its quick version of 8 shorter runs.
TRL_CORPUS = "trl_gao"
TRL_CORPUS_QUICK = "trl_gao_quick"
#: The English RLHF corpus (GRPO, RLOO and online DPO; docs/REAL_RUNS.md) and its quick version.
ENGLISH_CORPUS = "english_rlhf"
ENGLISH_CORPUS_QUICK = "english_rlhf_quick"


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    # A regular file of bounded size: a FIFO or a device is refused, not read forever.
    return hashlib.sha256(read_regular(path, max_line=None, field="corpus")).hexdigest()


def corpus_path(name: str) -> Path:
    """Path of the shipped corpus ``name`` (e.g. :data:`TRL_CORPUS`).

    Raises:
        CurveTraceError: No such corpus; the message lists the shipped ones.
    """
    path = DATA_DIR / f"{name}.jsonl"
    if not path.exists():
        shipped = sorted(p.stem for p in DATA_DIR.glob("*.jsonl"))
        raise CurveTraceError(f"{path}: no shipped corpus {name!r}; shipped: {shipped}")
    return path


def sidecar(name: str) -> dict[str, Any]:
    """The sidecar of the shipped corpus ``name`` (command, seed, versions, runs, sha256)."""
    data = read_regular(DATA_DIR / f"{name}.json", max_bytes=2**20, field="sidecar")
    return json.loads(data.decode("utf-8"))


def load_corpus(name: str) -> list[CurveTrace]:
    """Read a shipped corpus after checking its bytes against the SHA-256 of its sidecar.

    Raises:
        CurveTraceError: The file's hash differs from the recorded one (the message names both).
    """
    path = corpus_path(name)
    recorded, actual = sidecar(name)["sha256"], sha256_of(path)
    if recorded != actual:
        raise CurveTraceError(
            f"{path}: SHA-256 {actual} differs from {recorded} recorded in {path.with_suffix('.json')}"
        )
    return read_traces(path)


def write_sidecar(jsonl: str | os.PathLike[str], **fields: Any) -> Path:
    """Write ``<jsonl without suffix>.json`` with ``fields`` plus the JSONL's ``sha256``."""
    jsonl = Path(jsonl)
    out = jsonl.with_suffix(".json")
    atomic_write(out, json.dumps({**fields, "sha256": sha256_of(jsonl)}, indent=2) + "\n")
    return out
