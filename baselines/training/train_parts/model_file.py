"""The model file a run writes: its paths, the model selected, its metadata, its publication.

:func:`output_paths` names the ``.zip`` and its log folder; :func:`save_selected` saves
the best-evaluated model or the last one; :func:`observation_meta` is what
:class:`baselines.Learned` needs to rebuild the observation; :func:`publish` moves the
finished file into place and records its hash; :func:`stamp` tells a file rewritten since.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalstop_gym.fileio import write_hash_record

from ...learned import algo_class


def output_paths(out: str | Path) -> tuple[Path, Path]:
    """The model file (``.zip``) and its log folder (``models/ppo.zip`` -> ``models/ppo/``)."""
    out = Path(out)
    if out.suffix != ".zip":
        out = out.with_suffix(".zip")
    return out, out.with_suffix("")


def save_selected(
    model: Any, algo: str, best: Path, keep_best: bool, out: Path
) -> tuple[Any, bool]:
    """Save the best-evaluated model ``best`` (if asked and this run wrote it) or the last
    one to ``out``."""
    selected_best = keep_best and best.exists()
    if selected_best:
        model = algo_class(algo).load(best, device="cpu")
    model.save(out)
    return model, selected_best


def observation_meta(space: Any, window: int, flatten: bool) -> dict[str, Any]:
    """What :class:`baselines.Learned` needs to rebuild and check the observation.

    The window recorded is the one ``space`` shows (a padded base env's may be wider
    than its ``env_kwargs``'), else ``window``.
    """
    from evalstop_gym.envs.wrappers import WINDOW_FIELDS

    shown = [s.shape[0] // 2 for k, s in space.spaces.items() if k in WINDOW_FIELDS]
    return {
        "flatten": flatten,
        "obs_fields": list(space.spaces),
        "eval_window": shown[0] if shown else window,
        "observation_space": {
            k: {"low": s.low.tolist(), "high": s.high.tolist()} for k, s in space.spaces.items()
        },
    }


def publish(tmp_out: Path, out: Path) -> None:
    """Move the finished model file into place and record its hash."""
    with open(tmp_out, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp_out, out)
    # Loading a model runs pickled code: record its hash so that only this file is loaded.
    write_hash_record(out)


def stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a file rewritten since: (inode, size, mtime in ns); None if absent."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
