"""Safe file input and output shared by the simulator, the corpus tools, the baselines and the harness.

* **Atomic writes**: :func:`atomic_open` / :func:`atomic_write` write a temporary file in the
  destination's folder, flush and fsync it, then ``os.replace`` it over the destination, so a
  reader (or a crash, or Ctrl-C) sees the old file or the new one, never half of one.
* **Hash records**: :func:`write_hash_record` stores the SHA-256 of a file in a sidecar
  ``<file>.sha256`` (``sha256sum`` format); :func:`verify_hash_record` checks a file against it.
  Used for model files, which hold pickled code: only files whose bytes match the record that
  ``train`` wrote are loaded.
* **Strict text reads**: :func:`utf8_error_line` turns a ``UnicodeDecodeError`` into the
  1-based line of the offending byte, so readers can name it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "HASH_SUFFIX",
    "UntrustedFileError",
    "atomic_open",
    "atomic_savefig",
    "atomic_write",
    "read_verified",
    "sha256_bytes",
    "utf8_error_line",
    "verify_hash_record",
    "write_hash_record",
]

#: Suffix of the sidecar that records a file's SHA-256.
HASH_SUFFIX = ".sha256"


class UntrustedFileError(ValueError):
    """A file holding code (a pickled model) has no matching hash record, so it is not loaded."""


def _fsync_dir(folder: Path) -> None:
    # The rename itself is durable only once the folder's entry is flushed (POSIX).
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """Open a temporary file that replaces ``path`` atomically when the block ends without error.

    Args:
        path: Destination; its parent folders are created.
        mode: ``"w"`` (text, UTF-8 unless ``encoding=`` is given) or ``"wb"``.
        **kwargs: Passed to :func:`open` (``newline=``, ``encoding=``).

    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode={mode!r} is not allowed: 'w' or 'wb'")
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if mode == "w":
        kwargs.setdefault("encoding", "utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(dest.parent)


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, "wb") as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def atomic_savefig(fig: Any, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Save a matplotlib figure to ``path`` atomically (format from the suffix); return the path.

    The figure is rendered to memory first, so a failed render leaves ``path`` untouched.
    Needs no matplotlib import here: ``fig`` is any object with ``savefig(file, format=...)``.
    """
    dest = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=dest.suffix.lstrip(".") or "png", **kwargs)
    atomic_write(dest, buf.getvalue())
    return dest


def sha256_bytes(data: bytes) -> str:
    """The hexadecimal SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + HASH_SUFFIX)


def write_hash_record(path: str | os.PathLike[str]) -> str:
    """Record the SHA-256 of the file at ``path`` in ``<path>.sha256``; return the hash."""
    p = Path(path)
    digest = sha256_bytes(p.read_bytes())
    atomic_write(_record_path(p), f"{digest}  {p.name}\n")
    return digest


def read_verified(path: str | os.PathLike[str], expected: str | None = None) -> bytes:
    """The bytes of ``path``, once their SHA-256 matches ``expected`` or the file's hash record.

    The bytes are read once and returned, so what was checked is what the caller loads (no
    window in which the file could be swapped between the check and the load).

    Raises:
        UntrustedFileError: no record (and no ``expected``), or a hash that differs.
    """
    p = Path(path)
    data = p.read_bytes()
    if expected is None:
        rec = _record_path(p)
        try:
            expected = rec.read_text(encoding="utf-8").split()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            raise UntrustedFileError(
                f"{p}: no hash record {rec.name} (files written by `evalstop-gym train` have one); "
                "a model file holds pickled code, so only recorded files are loaded. Pass the "
                "expected sha256=..., or trust=True if you trust whoever wrote this file"
            ) from None
    got = sha256_bytes(data)
    if got != expected.strip().lower():
        raise UntrustedFileError(
            f"{p}: SHA-256 {got} differs from the recorded {expected}; the file changed since it "
            "was written, so it is not loaded (pass trust=True only if you trust its author)"
        )
    return data


def verify_hash_record(path: str | os.PathLike[str], expected: str | None = None) -> bool:
    """True if ``path`` exists and matches ``expected`` or its hash record (see :func:`read_verified`)."""
    try:
        read_verified(path, expected)
    except (OSError, UntrustedFileError):
        return False
    return True


def utf8_error_line(path: str | os.PathLike[str], exc: UnicodeDecodeError) -> tuple[int, str]:
    """The 1-based line and a description of the first byte of ``path`` that is not UTF-8.

    ``exc.start`` counts from the start of the chunk being decoded, not of the file, so the
    file is scanned again for the first invalid byte.
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        return 1, f"not UTF-8 text ({exc.reason})"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as full:
        line = data.count(b"\n", 0, full.start) + 1
        return (
            line,
            f"byte 0x{data[full.start]:02x} is not UTF-8 ({full.reason}); files must be UTF-8",
        )
    return 1, f"not UTF-8 text ({exc.reason})"
