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
* **Bounded reads**: :func:`open_regular` / :func:`read_regular` open a path without blocking,
  refuse anything but a regular file (a FIFO, ``/dev/zero``, a folder) and a file over a size
  cap before reading a byte, and bound the length of one line.
* **File modes**: written files get the mode a plain ``open`` would give (``0o666`` less the
  umask), not ``mkstemp``'s private ``0o600``.
* **Folder locks**: :func:`folder_lock` takes an exclusive, non-blocking ``flock`` on a lock
  file inside a folder, naming the holder's pid and command to whoever finds it taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shlex
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from .errors import ConfigError, EvalStopError

__all__ = [
    "HASH_SUFFIX",
    "LOCK_NAME",
    "MAX_LINE_BYTES",
    "MAX_MODEL_BYTES",
    "MAX_TEXT_BYTES",
    "TEMP_PATTERN",
    "FolderInUseError",
    "UntrustedFileError",
    "atomic_open",
    "atomic_savefig",
    "atomic_write",
    "bounded_lines",
    "file_identity",
    "folder_lock",
    "open_regular",
    "read_regular",
    "read_verified",
    "remove_orphan_temporaries",
    "sha256_bytes",
    "utf8_error_line",
    "verify_hash_record",
    "write_hash_record",
]

#: Suffix of the sidecar that records a file's SHA-256.
HASH_SUFFIX = ".sha256"


class UntrustedFileError(EvalStopError):
    """A file holding code (a pickled model) has no matching hash record, so it is not loaded."""


class FolderInUseError(EvalStopError):
    """Another process holds the folder's lock (see :func:`folder_lock`)."""


#: Default cap of :func:`open_regular`: the largest text file a reader takes in (256 MiB).
MAX_TEXT_BYTES = 256 * 2**20
#: Default cap on one line of a text file (16 MiB): a file with no newline is refused early.
MAX_LINE_BYTES = 16 * 2**20
#: The names :func:`atomic_open` gives its temporaries: ``.<name>.<random>.tmp``.
TEMP_PATTERN = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")

_UMASK: int | None = None
_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process umask, read once (``os.umask`` can only be read by setting it)."""
    global _UMASK
    if _UMASK is None:
        with _UMASK_LOCK:
            if _UMASK is None:
                # Linux reports it without touching it; elsewhere set-and-restore under a lock.
                try:
                    with open("/proc/self/status", encoding="ascii") as fh:
                        line = next(ln for ln in fh if ln.startswith("Umask:"))
                    _UMASK = int(line.split()[1], 8)
                except (OSError, StopIteration, ValueError, IndexError):
                    old = os.umask(0o022)
                    os.umask(old)
                    _UMASK = old
    return _UMASK


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
            # mkstemp makes the file private (0o600); give it the mode open() would.
            os.fchmod(fh.fileno(), 0o666 & ~_umask())
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(dest.parent)


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def open_regular(
    path: str | os.PathLike[str],
    mode: str = "r",
    *,
    max_bytes: int = MAX_TEXT_BYTES,
    field: str = "path",
    **kwargs: Any,
) -> IO[Any]:
    """Open ``path`` for reading once it is a regular file of at most ``max_bytes`` bytes.

    The file is opened with ``O_NONBLOCK`` (a FIFO with no writer does not hang the open)
    and checked with ``fstat`` on the opened descriptor (no window to swap the file), before
    a byte is read.  ``/dev/zero``, ``/dev/urandom``, a FIFO, a socket or a folder is refused,
    and so is a file over the cap (a sparse 2 GB file costs nothing to refuse).

    Args:
        path: The file.
        mode: ``"r"`` (text; ``encoding=`` defaults to UTF-8) or ``"rb"``.
        max_bytes: The largest size accepted.
        field: The input's name in the error (``trace``, ``curves``, ...).
        **kwargs: Passed to :func:`open` (``encoding=``, ``newline=``).

    Raises:
        ConfigError: not a regular file, or larger than ``max_bytes``.
        OSError: the file cannot be opened (missing, no permission).
    """
    if mode not in ("r", "rb"):
        raise ValueError(f"mode={mode!r} is not allowed: 'r' or 'rb'")
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(
                field, os.fspath(path), f"a regular file; this is {_kind(st.st_mode)}"
            )
        if st.st_size > max_bytes:
            raise ConfigError(
                field,
                os.fspath(path),
                f"a file of at most {_mib(max_bytes)}; this one holds {_mib(st.st_size)}",
            )
        os.set_blocking(fd, True)
        if mode == "r":
            kwargs.setdefault("encoding", "utf-8")
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_TEXT_BYTES,
    max_line: int | None = MAX_LINE_BYTES,
    field: str = "path",
) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`), with bounded lines.

    At most ``max_bytes + 1`` bytes are read, so a file that grows after the check is refused
    too; a line (bytes between newlines) longer than ``max_line`` is refused (None: no bound).

    Raises:
        ConfigError: not a regular file, too large, or a line too long.
        OSError: the file cannot be opened.
    """
    with open_regular(path, "rb", max_bytes=max_bytes, field=field) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ConfigError(
            field, os.fspath(path), f"a file of at most {_mib(max_bytes)}; this one grew past it"
        )
    if max_line is not None and len(data) > max_line:
        long = re.search(rb"[^\n]{%d}" % (max_line + 1), data)
        if long is not None:
            line = data.count(b"\n", 0, long.start()) + 1
            raise ConfigError(
                field,
                os.fspath(path),
                f"lines of at most {_mib(max_line)}; line {line} is longer",
            )
    return data


def bounded_lines(
    fh: IO[str], *, max_line: int = MAX_LINE_BYTES, field: str = "path", where: str = ""
) -> Iterator[str]:
    """The lines of the text stream ``fh``, refusing one longer than ``max_line`` characters.

    Each line is read with ``readline(max_line + 1)``, so a file without newlines costs at
    most one bounded read before it is refused (``csv.reader`` takes this iterator as it
    takes a file).

    Raises:
        ConfigError: a line longer than ``max_line``; the message names its number.
    """
    n = 0
    while True:
        line = fh.readline(max_line + 1)
        if not line:
            return
        n += 1
        if len(line) > max_line:
            raise ConfigError(
                field,
                where or getattr(fh, "name", "?"),
                f"lines of at most {max_line} characters; line {n} is longer",
            )
        yield line


def file_identity(path: str | os.PathLike[str]) -> tuple[int, ...]:
    """A cache key for the file at ``path``: device, inode, size, mtime and ctime (ns).

    A file rewritten in place with its old size and mtime restored still changes its ctime
    (``os.utime`` sets it), and a file replaced by another has another inode.
    """
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def remove_orphan_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporaries :func:`atomic_open` left under ``folder`` (a killed writer's).

    Only regular files named as :func:`atomic_open` names them (:data:`TEMP_PATTERN`) are
    removed; call it only while no other process writes in ``folder``. Returns what went.
    """
    gone = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            p = Path(root) / name
            if TEMP_PATTERN.match(name) and p.is_file() and not p.is_symlink():
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                    gone.append(p)
    return gone


#: Name of the lock file :func:`folder_lock` keeps inside the folder.
LOCK_NAME = ".evalstop-gym.lock"


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], what: str = "another run") -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` for the block (``flock`` on ``folder/.evalstop-gym.lock``).

    Non-blocking: if another process holds it, :class:`FolderInUseError` names that process
    (pid and command, which the holder writes into the lock file).  The lock goes with the
    process, so a killed run leaves no stale lock.
    """
    import fcntl  # POSIX only, like the rest of the run's file handling

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            except OSError:
                holder = ""
            raise FolderInUseError(
                f"{folder} is in use by {what} ({holder or 'a process that did not say which'}); "
                "wait for it to end, or choose another output folder"
            ) from None
        cmd = shlex.join([os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]])
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {cmd}\n".encode(), 0)
        yield lock
    finally:
        os.close(fd)  # releases the flock


def refuse_overwrite(
    field: str, value: Any, paths: Iterable[str | os.PathLike[str]], what: str = "a new file"
) -> None:
    """Refuse ``field=value`` (a :class:`ConfigError`, before any work) if any of ``paths``
    exists: finished work, and a file the package did not write, are never overwritten.

    ``what`` says what is allowed (a new file, a folder without those files).
    """
    there = [str(p) for p in paths if Path(p).exists()]
    if there:
        raise ConfigError(
            field,
            value,
            f"{what} ({', '.join(there)} {'exists' if len(there) == 1 else 'exist'} and is never "
            "overwritten: choose another or move it)",
        )


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


#: The largest model file :func:`read_verified` reads (512 MiB; the shipped one is 0.3 MiB).
MAX_MODEL_BYTES = 512 * 2**20


def read_verified(
    path: str | os.PathLike[str],
    expected: str | None = None,
    *,
    max_bytes: int = MAX_MODEL_BYTES,
) -> bytes:
    """The bytes of ``path``, once their SHA-256 matches ``expected`` or the file's hash record.

    The bytes are read once and returned, so what was checked is what the caller loads (no
    window in which the file could be swapped between the check and the load).

    Raises:
        UntrustedFileError: no record (and no ``expected``), or a hash that differs.
        ConfigError: not a regular file, or over ``max_bytes``.
    """
    p = Path(path)
    data = read_regular(p, max_bytes=max_bytes, max_line=None, field="model")
    if expected is None:
        rec = _record_path(p)
        try:
            expected = (
                read_regular(rec, max_bytes=4096, max_line=None, field="hash record")
                .decode("utf-8")
                .split()[0]
            )
        except (OSError, UnicodeDecodeError, IndexError, ConfigError):
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
    except (OSError, EvalStopError):
        return False
    return True


def utf8_error_line(path: str | os.PathLike[str], exc: UnicodeDecodeError) -> tuple[int, str]:
    """The 1-based line and a description of the first byte of ``path`` that is not UTF-8.

    ``exc.start`` counts from the start of the chunk being decoded, not of the file, so the
    file is scanned again for the first invalid byte.
    """
    try:
        data = read_regular(path, max_line=None)
    except (OSError, EvalStopError):
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
