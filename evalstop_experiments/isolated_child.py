"""The child process of an isolated stopper (:mod:`evalstop_experiments.isolated`).

Run as ``python -m evalstop_experiments.isolated_child READ_FD WRITE_FD`` by
:class:`~evalstop_experiments.isolated.IsolatedPolicy`.  It builds the stopper
from its spec with :class:`~evalstop_experiments.scoring.PolicySource`, then
answers frames: a reset, or an observation (raw arrays, rebuilt here as fresh
NumPy arrays) to which it answers one action byte.  Any exception becomes one
error line sent back; the parent then kills this process.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from typing import Any

import numpy as np

from .isolated import ACT, ACTION, ERROR, HEADER, INIT, OK, QUIT, RESET, read_frame, write_frame


def _build(spec: str, task: str, kw: dict[str, Any] | None) -> Any:
    """The stopper (None for a probe: the spec's class is loaded, nothing is built)."""
    from .scoring import PolicySource

    source = PolicySource(spec)  # loads the class (or model) the spec names
    return None if kw is None else source(task, kw)


def _action(policy: Any, obs: Any) -> int:
    """The stopper's decision as an int in 0..255 (the parent checks it against the space)."""
    a = policy.act(obs)
    arr = np.asarray(a)
    if arr.size != 1 or arr.dtype.kind not in "iub":
        raise ValueError(f"act() returned {a!r}, not an integer action")
    value = int(arr.item())
    if not 0 <= value <= 255:
        raise ValueError(f"act() returned {value}, not an action")
    return value


def serve(rfd: int, wfd: int) -> None:
    """Answer the parent's frames until it says quit or closes its end."""
    policy: Any = None
    layout: list[tuple[str, np.dtype, tuple[int, ...], int]] = []
    while True:
        frame = read_frame(rfd)
        if frame is None or frame[:1] == QUIT:
            return
        kind, body = frame[:1], frame[1:]
        try:
            if kind == INIT:
                spec, task, kw, path = pickle.loads(body)  # from the parent, which we trust
                sys.path[:] = path
                policy = _build(spec, task, kw)
                write_frame(wfd, OK)
            elif kind == HEADER:
                layout = [
                    (k, np.dtype(d), tuple(s), int(np.dtype(d).itemsize * np.prod(s, dtype=int)))
                    for k, d, s in json.loads(body)
                ]
            elif kind == RESET:
                policy.reset()
                write_frame(wfd, OK)
            elif kind == ACT:
                obs, at = {}, 0
                for k, dtype, shape, size in layout:
                    obs[k] = np.frombuffer(body[at : at + size], dtype).reshape(shape).copy()
                    at += size
                value = obs[""] if list(obs) == [""] else obs
                write_frame(wfd, ACTION, bytes([_action(policy, value)]))
            else:
                raise ValueError(f"unknown frame {kind!r}")
        except Exception as e:  # any failure of the stopper is reported, not raised
            text = " ".join(f"{type(e).__name__}: {e}".split())
            write_frame(wfd, ERROR, text.encode("utf-8", "replace")[:1000])
            return


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
    os._exit(0)  # skip interpreter teardown of whatever the stopper started
