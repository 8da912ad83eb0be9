"""Learned stoppers: a Stable-Baselines3 model behind the scripted policies' interface.

A model file is SB3's zip with one more entry, ``evalstop_gym.json``, that
records what the model was trained on (algorithm, observation fields, window,
whether the observation was flattened, environment arguments, budget).  A
model refuses an environment whose observation differs from its training one.
"""

from __future__ import annotations

import importlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import read_verified

META_NAME = "evalstop_gym.json"

#: Folder of the shipped models (package data): ``<name>.zip`` and its ``.sha256`` record.
PRETRAINED_DIR = Path(__file__).with_name("pretrained")
#: SHA-256 of each shipped model, pinned in the code: a model whose bytes differ is never
#: loaded, even if its ``.sha256`` record beside it was changed with it.
PRETRAINED: dict[str, str] = {
    "hard": "59b6e6eb600c33810e99baf51a51f15a1e03aeb2859f6018a4c57f829c786602",
}


def read_meta(path: str | Path) -> dict[str, Any]:
    """The metadata stored in a model file (``.zip`` may be left out of ``path``)."""
    p = Path(path)
    if not p.is_file() and p.with_suffix(".zip").is_file():
        p = p.with_suffix(".zip")
    try:
        with zipfile.ZipFile(p) as zf, zf.open(META_NAME) as fh:
            return json.load(fh)
    except (FileNotFoundError, zipfile.BadZipFile, KeyError) as e:
        raise ValueError(
            f"{path} is not an evalstop-gym model file (an SB3 zip with {META_NAME}): {e}"
        ) from None


def write_meta(path: str | Path, meta: dict[str, Any]) -> None:
    """Add ``meta`` to the SB3 zip at ``path`` as :data:`META_NAME`."""
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(META_NAME, json.dumps(meta, indent=2, sort_keys=True))


#: Every algorithm ``train`` writes and ``Learned`` loads: its module and class, imported
#: on use (sb3-contrib only for a recurrent model).
ALGO_CLASSES: dict[str, tuple[str, str]] = {
    "a2c": ("stable_baselines3", "A2C"),
    "dqn": ("stable_baselines3", "DQN"),
    "ppo": ("stable_baselines3", "PPO"),
    "recurrentppo": ("sb3_contrib", "RecurrentPPO"),
}
#: Algorithms whose policy carries a recurrent (LSTM) state from one decision to the next.
RECURRENT_ALGOS = ("recurrentppo",)


def algo_class(name: str) -> Any:
    """The SB3 algorithm class of ``name`` (a key of :data:`ALGO_CLASSES`), imported now.

    The one place that turns an algorithm name into its class, for training
    (:func:`baselines.training.train`) and for loading a model (:class:`Learned`).
    """
    if name not in ALGO_CLASSES:
        raise ValueError(f"algo={name!r} is not allowed: one of {sorted(ALGO_CLASSES)}")
    module, cls = ALGO_CLASSES[name]
    return getattr(importlib.import_module(module), cls)


def history_key(obs: dict[str, np.ndarray], drop_last: bool = False) -> tuple[bytes, ...]:
    """A job's observed history in ``obs``: its type and every eval (and loss) seen so far.

    With a window covering every checkpoint, the history of a job at one decision
    is its history at the previous decision plus one value per window field, so
    ``history_key(obs, drop_last=True)`` is the key of that job's previous
    decision: the thread from which a recurrent policy's per-job state continues.
    """
    from .policies import observed

    cut = -1 if drop_last else None
    parts = [np.asarray(obs["job_type"]).tobytes()] if "job_type" in obs else []
    parts += [observed(obs[f])[:cut].tobytes() for f in ("evals", "loss") if f in obs]
    return tuple(parts)


class _JobStates:
    """One LSTM state per job, for a recurrent model playing interleaved cluster steps.

    The model was trained on per-job episodes (``JobEpisodes``): its state is one
    job's memory.  On a cluster episode consecutive decisions are on different
    jobs, so the state of each job is kept under its history (:func:`history_key`)
    and resumed at that job's next decision; a job seen for the first time starts
    from the initial state.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.states: dict[tuple[bytes, ...], Any] = {}

    def predict(self, x: Any, obs: dict[str, np.ndarray], deterministic: bool) -> Any:
        """The action on ``x`` (the model's input for ``obs``), continuing ``obs``'s job."""
        state = self.states.pop(history_key(obs, drop_last=True), None)
        action, state = self.model.predict(
            x, state=state, episode_start=np.array([state is None]), deterministic=deterministic
        )
        self.states[history_key(obs)] = state
        return action


class Learned:
    """A trained SB3 stopper: ``reset()``, ``act(obs) -> int``, like the scripted ones.

    Args:
        path: The model file written by ``evalstop-gym train``.
        deterministic: Act greedily (default) rather than sampling.
        label: Name in tables (default: ``Learned-<algo>[<fields>]``).
    """

    def __init__(
        self,
        path: str | Path,
        deterministic: bool = True,
        label: str | None = None,
        *,
        sha256: str | None = None,
        trust: bool = False,
    ):
        """Load the model at ``path`` once its bytes match their hash record.

        An SB3 zip holds cloudpickle data: loading it runs code.  So the file is
        loaded only if its SHA-256 equals ``sha256`` or the ``<path>.sha256``
        record that ``evalstop-gym train`` writes; ``trust=True`` skips the check
        (only for a file whose author you trust).  Raises
        :class:`evalstop_gym.fileio.UntrustedFileError` otherwise.
        """
        self.path = str(path)
        self.meta = read_meta(path)
        self.algo = self.meta["algo"]
        self.obs_fields = tuple(self.meta["obs_fields"])
        self.flatten = bool(self.meta["flatten"])
        self.deterministic = deterministic
        p = Path(self.path)
        if not p.is_file() and p.with_suffix(".zip").is_file():
            p = p.with_suffix(".zip")
        # The checked bytes are the loaded bytes: no window to swap the file in between.
        data = p.read_bytes() if trust else read_verified(p, sha256)
        self.model = algo_class(self.algo).load(io.BytesIO(data), device="cpu")
        self._dict_space = spaces.Dict(
            {
                k: spaces.Box(
                    np.asarray(v["low"], np.float32),
                    np.asarray(v["high"], np.float32),
                    dtype=np.float32,
                )
                for k, v in self.meta["observation_space"].items()
            }
        )
        self.name = label or self.meta.get("label") or f"Learned-{self.algo}"
        self._jobs = _JobStates(self.model) if self.algo in RECURRENT_ALGOS else None
        if self._jobs is not None and "evals" not in self.obs_fields:
            raise ValueError(
                f"{self.path}: a recurrent model needs 'evals' in its observation to tell "
                f"jobs apart; it was trained on {list(self.obs_fields)}"
            )

    @classmethod
    def pretrained(
        cls, name: str = "hard", deterministic: bool = True, label: str | None = None
    ) -> Learned:
        """A model shipped with the package (:data:`PRETRAINED`), loaded once its hash matches.

        ``Learned.pretrained("hard")`` is PPO trained on the ``hard`` regime (docs/LEARNED.md,
        "A learned stopper that ships"); play it on that task's env arguments
        (``evalstop_gym.suite_task("hard-0.05")``: the whole eval history).

        Raises:
            ConfigError: an unknown ``name``.
            evalstop_gym.fileio.UntrustedFileError: the file's bytes differ from the pinned hash.
        """
        if name not in PRETRAINED:
            raise ConfigError("pretrained", name, f"one of {sorted(PRETRAINED)}")
        return cls(
            PRETRAINED_DIR / f"{name}.zip",
            deterministic,
            label or f"Learned-pretrained[{name}]",
            sha256=PRETRAINED[name],
        )

    def reset(self) -> None:
        """Forget the per-job states of a recurrent model (others are stateless)."""
        if self._jobs is not None:
            self._jobs.states.clear()

    def check_observation_space(self, space: spaces.Dict) -> None:
        """Refuse an observation space other than the one the model was trained on."""
        got = {k: tuple(s.shape) for k, s in space.spaces.items()}
        want = {k: tuple(s.shape) for k, s in self._dict_space.spaces.items()}
        if got != want:
            raise ValueError(
                f"{self.path} was trained on obs_fields={list(want)} with shapes {want}; "
                f"this environment gives {got}. Make the env with "
                f"obs_fields={list(want)} and eval_window={self.meta.get('eval_window')}."
            )

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """The model's action (0 continue, 1 stop) on a Dict observation."""
        if tuple(k for k in obs) != self.obs_fields and set(obs) != set(self.obs_fields):
            raise ValueError(
                f"{self.path} was trained on obs_fields={list(self.obs_fields)}, "
                f"got an observation with {sorted(obs)}"
            )
        x: Any = spaces.flatten(self._dict_space, obs) if self.flatten else obs
        if self._jobs is not None:
            action = self._jobs.predict(x, obs, self.deterministic)
        else:
            action, _ = self.model.predict(x, deterministic=self.deterministic)
        return int(np.asarray(action).item())

    def __repr__(self) -> str:
        """``Learned('models/dqn.zip')``."""
        return f"Learned({self.path!r})"


#: Prefixes of :func:`from_spec`: how ``evalstop-gym benchmark --policy`` names a learned stopper.
SPEC_PREFIXES = ("pretrained", "model")


def from_spec(spec: str) -> Learned:
    """The learned stopper a command-line spec names.

    ``pretrained:NAME`` is :meth:`Learned.pretrained` (``pretrained:hard``);
    ``model:PATH`` a model file with its ``.sha256`` record (as ``train`` writes).

    Raises:
        ConfigError: a spec of another form, or an unknown pretrained name.
    """
    kind, sep, arg = spec.partition(":")
    if not sep or kind not in SPEC_PREFIXES or not arg:
        raise ConfigError(
            "policy", spec, f"'pretrained:NAME' (NAME in {sorted(PRETRAINED)}) or 'model:PATH'"
        )
    return Learned.pretrained(arg) if kind == "pretrained" else Learned(arg)
