"""Scoring untrusted stoppers: the stopper in its own process, seeing observations only.

A stopper scored in-process is code running beside the evaluator: it can walk
the call stack (``sys._getframe``) to the env that plays it and read the
simulator's hidden curves.  :class:`IsolatedPolicy` is a
:class:`~baselines.policies.Policy` proxy whose real stopper is built from a
spec (``module:Class``, ``path/to/file.py:Class``, ``pretrained:NAME``,
``model:PATH``, as :class:`~evalstop_experiments.scoring.PolicySource` reads
them) in a child process (:mod:`evalstop_experiments.isolated_child`, started
with :mod:`subprocess`: a fresh interpreter, none of this process's memory).
The child receives the observations as raw arrays and returns one action byte
per decision; nothing else crosses.  Its standard output is discarded; when it
dies, the last line of its standard error is shown in the error.

The protocol is length-prefixed frames over two pipes.  The parent never
unpickles what the child sends (unpickling is code execution): the child's
answers are an action byte, an acknowledgement, or a one-line error text of
bounded length.  Every answer has a timeout; an action outside the action
space, a late answer, or a child that dies ends the scoring with an
:class:`IsolationError` naming the stopper.  The child is killed on
:meth:`IsolatedPolicy.close`, when the proxy is garbage-collected, and at exit.

What isolation does not cover (see docs/SAFETY.md): the child has the user's
file-system and network rights and no CPU or memory limit beyond the per-answer
timeout; and a stopper that recognises a public seed from its first observation
can replay it in its own env, so untrusted stoppers are scored on fresh seeds.

Score one with ``StopperSpec(name, IsolatedSource(spec))``
(:class:`~evalstop_experiments.scoring.StopperSpec`), which crosses into worker
processes and starts one child per task and price.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from evalstop_gym.envs.evalstop import EvalStopEnv
from evalstop_gym.errors import ConfigError, EvalStopError

#: Seconds a child may take to import and build its stopper (a learned one imports torch).
START_TIMEOUT_S = 120.0
#: Seconds a child may take to answer one observation (or a reset).
ACT_TIMEOUT_S = 10.0
#: Longest frame the parent reads from a child (an error line; actions are one byte).
MAX_ANSWER_BYTES = 2048
#: The spec prefixes of learned stoppers (``baselines.learned.SPEC_PREFIXES``; not imported
#: here so that the parent never imports what the child loads).
_LEARNED_PREFIXES = ("pretrained", "model")

_HEADER = struct.Struct("<I")

# Frame kinds.  Parent -> child: init, header (observation layout), reset, act, quit.
INIT, HEADER, RESET, ACT, QUIT = b"I", b"H", b"R", b"A", b"Q"
# Child -> parent: ok, action, error.
OK, ACTION, ERROR = b"K", b"a", b"E"


class IsolationError(EvalStopError):
    """An isolated stopper failed: it raised, answered late or wrongly, or its process died."""

    def __init__(self, message: str) -> None:
        """One line: which stopper, and what went wrong."""
        super().__init__(" ".join(str(message).split()))


def check_spec(spec: Any) -> str:
    """``spec`` if it has the form of a stopper spec (its loading happens in the child)."""
    if not isinstance(spec, str):
        raise ConfigError("policy", spec, "a spec string such as 'module:Class'")
    where, sep, attr = spec.rpartition(":")
    if where in _LEARNED_PREFIXES and attr:
        return spec
    if not sep or not where or not attr.isidentifier():
        raise ConfigError(
            "policy",
            spec,
            "'module:Class', 'path/to/file.py:Class', 'pretrained:NAME' or 'model:PATH'",
        )
    return spec


def write_frame(fd: int, kind: bytes, payload: bytes = b"") -> None:
    """Send one frame: its length, its kind byte, its payload."""
    data = _HEADER.pack(len(payload) + 1) + kind + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_frame(fd: int, deadline: float | None = None, limit: int | None = None) -> bytes | None:
    """One frame's kind byte and payload; None if the other end closed.

    Raises:
        TimeoutError: past ``deadline`` (a :func:`time.monotonic` time).
        ValueError: a frame longer than ``limit`` bytes.
    """
    head = _read_exact(fd, _HEADER.size, deadline)
    if head is None:
        return None
    (size,) = _HEADER.unpack(head)
    if size < 1 or (limit is not None and size > limit):
        raise ValueError(f"a frame of {size} bytes (at most {limit})")
    return _read_exact(fd, size, deadline)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """Exactly ``n`` bytes from ``fd``, None at end of file; TimeoutError past ``deadline``."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _kill(proc: subprocess.Popen[bytes], fds: tuple[int, ...]) -> None:
    """Stop the child (politely, then by force) and close our pipe ends."""
    try:
        if proc.poll() is None:
            try:
                write_frame(fds[1], QUIT)
                proc.wait(timeout=1.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5.0)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


class IsolatedPolicy:
    """A stopper built from ``spec`` in its own process; this proxy sends observations only.

    Args:
        spec: The stopper's spec (``module:Class``, ``path/to/file.py:Class``,
            ``pretrained:NAME``, ``model:PATH``); it is loaded in the child only.
        task: The task's name (shown in errors, given to the child's builder).
        env_kwargs: The env keyword arguments it plays (the child's builder checks
            the stopper's ``check_observation_space`` against their space); None
            only loads the stopper's class (a probe that the spec loads).
        name: Its display name (default: the spec).
        timeout: Seconds the child may take per answer.
        start_timeout: Seconds the child may take to start and build its stopper.
    """

    def __init__(
        self,
        spec: str,
        task: str = "",
        env_kwargs: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        timeout: float = ACT_TIMEOUT_S,
        start_timeout: float = START_TIMEOUT_S,
    ) -> None:
        """Start the child and wait until its stopper is built."""
        self.spec = check_spec(spec)
        self.name = name or spec
        self.task = task
        self.env_kwargs = dict(env_kwargs or {})
        self.timeout = float(timeout)
        self.n_actions = 3 if self.env_kwargs.get("deprioritize") else 2
        self._layout: tuple[tuple[str, str, tuple[int, ...]], ...] | None = None
        self._space: Any = None
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115  (closed in close())
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *sys.path])}
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "evalstop_experiments.isolated_child",
                    str(to_child_r),
                    str(from_child_w),
                ],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                env=env,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._fds = (from_child_r, to_child_w)
        self._finalizer = weakref.finalize(self, _kill, self._proc, self._fds)
        # No env kwargs: the child only loads the stopper's class (a probe of the spec).
        init = pickle.dumps((self.spec, task, env_kwargs, list(sys.path)))
        self._ask(INIT, init, start_timeout, "starting")

    # ------------------------------------------------------------ Policy API
    def check_observation_space(self, space: Any) -> None:
        """Refuse a space other than the one of the env kwargs the child's stopper was built for."""
        if self._space is None:
            self._space = EvalStopEnv(**self.env_kwargs).observation_space
        if space != self._space:
            raise ValueError(
                f"isolated stopper {self.name} was built for the observation space of "
                f"{self.task or 'its env kwargs'}, not {space}"
            )

    def reset(self) -> None:
        """Tell the child's stopper a new episode starts."""
        self._ask(RESET, b"", self.timeout, "reset()")

    def act(self, obs: Any) -> int:
        """The child's decision on ``obs`` (arrays only cross), checked against the action space."""
        if isinstance(obs, dict):
            arrays = [(k, np.ascontiguousarray(v)) for k, v in obs.items()]
        else:
            arrays = [("", np.ascontiguousarray(obs))]
        layout = tuple((k, a.dtype.str, a.shape) for k, a in arrays)
        if layout != self._layout:
            header = json.dumps([[k, d, list(s)] for k, d, s in layout]).encode()
            self._send(HEADER, header, "act()")
            self._layout = layout
        answer = self._ask(ACT, b"".join(a.tobytes() for _, a in arrays), self.timeout, "act()")
        if len(answer) != 1 or answer[0] >= self.n_actions:
            shown = answer[0] if len(answer) == 1 else answer
            self._fail("act()", f"returned {shown!r}, not an action in 0..{self.n_actions - 1}")
        return answer[0]

    def close(self) -> None:
        """Stop the child (it is also stopped when this proxy is garbage-collected)."""
        self._finalizer()
        self._stderr.close()

    def __repr__(self) -> str:
        """Shown as the params of its score rows."""
        return f"isolated({self.spec!r})"

    def __reduce__(self) -> Any:
        """Refused: a proxy owns its process; send an :class:`IsolatedSource` instead."""
        raise TypeError("an IsolatedPolicy does not pickle: send an IsolatedSource")

    # ------------------------------------------------------------- internals
    def _send(self, kind: bytes, payload: bytes, what: str) -> None:
        if not self._finalizer.alive:
            raise IsolationError(f"isolated stopper {self.name}: {what} after close()")
        try:
            write_frame(self._fds[1], kind, payload)
            return
        except OSError:
            pass
        self._fail(what, "its process is gone")

    def _ask(self, kind: bytes, payload: bytes, timeout: float, what: str) -> bytes:
        """Send a frame and return the child's answer payload (an ACTION's byte, or b"")."""
        self._send(kind, payload, what)
        problem = ""
        try:
            frame = read_frame(self._fds[0], time.monotonic() + timeout, MAX_ANSWER_BYTES)
        except TimeoutError:
            problem = f"no answer within {timeout:g} s"
        except ValueError as e:
            problem = f"a malformed answer ({e})"
        if problem:  # raised outside the handler: one error, not a chain of two
            self._fail(what, problem)
        if frame is None:
            self._fail(what, "its process exited")
        answer_kind, body = frame[:1], frame[1:]
        if answer_kind == ERROR:
            self._fail(what, body.decode("utf-8", "replace"))
        if (answer_kind == OK and kind != ACT) or (answer_kind == ACTION and kind == ACT):
            return body
        self._fail(what, f"an unexpected answer {frame[:20]!r}")
        raise AssertionError  # unreachable: _fail raises

    def _fail(self, what: str, why: str) -> Any:
        """Kill the child and raise one line (with its last stderr line if it died silently)."""
        self._finalizer()
        last = ""
        try:
            self._stderr.seek(0)
            lines = self._stderr.read()[-4096:].decode("utf-8", "replace").strip().splitlines()
            last = lines[-1] if lines else ""
        except (OSError, ValueError):
            pass
        tail = f" (stderr: {last[:300]})" if last and "exited" in why else ""
        raise IsolationError(f"isolated stopper {self.name}, {what}: {why[:500]}{tail}")


@dataclass(frozen=True)
class IsolatedSource:
    """A picklable factory ``(task, env_kwargs) -> IsolatedPolicy`` (a StopperSpec's factory).

    Args:
        spec: The stopper's spec; checked for form now, loaded only in children.
        timeout: Seconds a child may take per answer.
        probe: Start one child now, so that a spec that does not load fails before
            any episode (the class is imported there, never in this process).
    """

    spec: str
    timeout: float = ACT_TIMEOUT_S
    probe: bool = True

    def __post_init__(self) -> None:
        """Refuse a malformed spec at once (and one that does not load, with ``probe``)."""
        check_spec(self.spec)
        if not (isinstance(self.timeout, int | float) and 0 < self.timeout <= 3600):
            raise ConfigError("timeout", self.timeout, "seconds in (0, 3600]")
        if self.probe:
            try:
                IsolatedPolicy(self.spec, timeout=self.timeout).close()
            except IsolationError as e:
                raise ConfigError("policy", self.spec, f"a stopper that loads ({e})") from None

    def __call__(self, task: str, kw: dict[str, Any]) -> IsolatedPolicy:
        """A proxy whose child builds the stopper for ``task`` and checks its observation space."""
        return IsolatedPolicy(self.spec, task, copy.deepcopy(kw), timeout=self.timeout)
