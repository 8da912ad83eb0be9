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
import math
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import MAX_MODEL_BYTES, read_regular

from . import backward, routed
from .backward import ModelFileError, member_count

META_NAME = "evalstop_gym.json"

#: The most members a model zip may hold (SB3 writes six, plus :data:`META_NAME`).
MAX_MEMBERS = 64
#: The largest :data:`META_NAME` member, uncompressed (the shipped model's is 4 kB).
MAX_META_BYTES = 4 * 2**20
#: The largest other member, uncompressed (declared size; SB3 reads them itself).
MAX_MEMBER_BYTES = 512 * 2**20
#: The largest observation field a model may declare (values per field).
MAX_FIELD_SIZE = 2**16


#: Folder of the shipped models (package data): ``<name>.zip`` and its ``.sha256`` record.
PRETRAINED_DIR = Path(__file__).with_name("pretrained")
#: SHA-256 of each shipped model, pinned in the code: a model whose bytes differ is never
#: loaded, even if its ``.sha256`` record beside it was changed with it.
PRETRAINED: dict[str, str] = {
    "hard": "59b6e6eb600c33810e99baf51a51f15a1e03aeb2859f6018a4c57f829c786602",
}


def _model_path(path: str | Path) -> Path:
    p = Path(path)
    if not p.is_file() and p.with_suffix(".zip").is_file():
        return p.with_suffix(".zip")
    return p


def meta_from_bytes(data: bytes, where: str = "model file") -> dict[str, Any]:
    """The checked metadata of the model zip whose bytes are ``data`` (``where`` names it).

    Bounded whatever the bytes hold: at most :data:`MAX_MEMBERS` members, none declaring
    more than :data:`MAX_MEMBER_BYTES`, and the metadata read up to :data:`MAX_META_BYTES`
    plus one byte, so a member that inflates to gigabytes is refused after a few MiB.

    Raises:
        ModelFileError: not a zip, too many or too large members, no metadata, or metadata
            without the fields a model needs.
    """
    bad = f"{where} is not an evalstop-gym model file (an SB3 zip with {META_NAME})"
    member_count(data, where, MAX_MEMBERS)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise ModelFileError(f"{bad}: {len(infos)} members, at most {MAX_MEMBERS}")
            for info in infos:
                cap = MAX_META_BYTES if info.filename == META_NAME else MAX_MEMBER_BYTES
                if info.file_size > cap:
                    raise ModelFileError(
                        f"{bad}: member {info.filename[:80]!r} declares {info.file_size} bytes, "
                        f"at most {cap} allowed"
                    )
            metas = [i for i in infos if i.filename == META_NAME]
            if not metas:
                raise ModelFileError(f"{bad}: no {META_NAME} member")
            with zf.open(metas[-1]) as fh:
                raw = fh.read(MAX_META_BYTES + 1)
    except ModelFileError:
        raise
    except Exception as e:  # untrusted bytes: zipfile, zlib, bz2 and lzma raise many types
        raise ModelFileError(f"{bad}: {type(e).__name__}: {str(e)[:200]}") from None
    if len(raw) > MAX_META_BYTES:
        raise ModelFileError(f"{bad}: {META_NAME} inflates past {MAX_META_BYTES} bytes")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ModelFileError(f"{bad}: {META_NAME} is not JSON ({str(e)[:200]})") from None
    _check_meta(meta, bad)
    return meta


def _shape(v: Any, depth: int = 0) -> tuple[int, ...] | None:
    """The shape of a (nested) list of numbers, None if ragged, too deep or not numbers."""
    if isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v):
        return ()
    if not isinstance(v, list) or not v or depth > 3 or len(v) > MAX_FIELD_SIZE:
        return None
    inner = {_shape(x, depth + 1) for x in v[:MAX_FIELD_SIZE]}
    if len(inner) != 1 or None in inner:
        return None
    return (len(v), *inner.pop())


def _check_meta(meta: Any, bad: str) -> None:
    """Refuse metadata without the fields :class:`Learned` builds its spaces from."""
    if not isinstance(meta, dict):
        raise ModelFileError(f"{bad}: {META_NAME} is not a JSON object")
    if not isinstance(meta.get("algo"), str) or meta["algo"] not in ALGO_CLASSES:
        raise ModelFileError(
            f"{bad}: algo={str(meta.get('algo'))[:40]!r}, one of {sorted(ALGO_CLASSES)} allowed"
        )
    fields = meta.get("obs_fields")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ModelFileError(f"{bad}: obs_fields must be a list of names")
    if not isinstance(meta.get("flatten"), bool):
        raise ModelFileError(f"{bad}: flatten must be true or false")
    space = meta.get("observation_space")
    if not isinstance(space, dict):
        raise ModelFileError(f"{bad}: observation_space must be an object")
    for name, box in space.items():
        shape = _shape(box.get("low")) if isinstance(box, dict) else None
        ok = (
            shape is not None
            and shape != ()
            and _shape(box.get("high")) == shape
            and math.prod(shape) <= MAX_FIELD_SIZE
        )
        if not ok:
            raise ModelFileError(
                f"{bad}: observation_space[{str(name)[:40]!r}] must hold 'low' and 'high', "
                f"(nested) lists of at most {MAX_FIELD_SIZE} numbers of the same shape"
            )
    for key in ("label", "eval_window"):
        if meta.get(key) is not None and not isinstance(meta[key], str | int):
            raise ModelFileError(f"{bad}: {key} must be a string or a number")
    if not isinstance(meta.get("env_kwargs", {}), dict):
        raise ModelFileError(f"{bad}: env_kwargs must be an object")


def read_meta(path: str | Path) -> dict[str, Any]:
    """The metadata stored in a model file (``.zip`` may be left out of ``path``).

    Reads no pickled data, so needs no hash record; bounded as :func:`meta_from_bytes` is.

    Raises:
        ModelFileError: not a model file (also a missing file, a FIFO, a device).
    """
    p = _model_path(path)
    try:
        data = read_regular(p, max_bytes=MAX_MODEL_BYTES, max_line=None, field="model")
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such model file") from None
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read the model file ({e.strerror})") from None
    except ConfigError as e:
        raise ModelFileError(str(e)) from None
    return meta_from_bytes(data, str(path))


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

    def __new__(cls, path: str | Path | None = None, *args: Any, **kwargs: Any) -> Any:
        """A backward-induction ``.npz`` is loaded as its own stopper class (same trust rules).

        So every place that builds ``Learned(path)`` (a benchmark cell, ``model:PATH``)
        plays either kind of model file.  No path: a bare object for ``copy.deepcopy`` to
        fill (the live-run integrations copy the policy for each trial).
        """
        if path is not None and cls is Learned and is_backward_file(path):
            label = kwargs.get("label", args[1] if len(args) > 1 else None)
            return routed.load_stopper(
                path, label=label, sha256=kwargs.get("sha256"), trust=kwargs.get("trust", False)
            )
        return super().__new__(cls)

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
        p = _model_path(path)
        # The bytes are checked first, then everything (metadata, model) is read from those
        # very bytes: no window to swap the file, and no parsing of unverified input.
        data = backward.read_model_bytes(p, path, trust, sha256)
        self.meta = meta_from_bytes(data, self.path)
        self.algo = self.meta["algo"]
        self.obs_fields = tuple(self.meta["obs_fields"])
        self.flatten = bool(self.meta["flatten"])
        self.deterministic = deterministic
        cls = algo_class(self.algo)
        try:
            self.model = cls.load(io.BytesIO(data), device="cpu")
        except Exception as e:  # a recorded file SB3 cannot load: one line, not its traceback
            raise ModelFileError(
                f"{path}: SB3's {cls.__name__}.load failed: {type(e).__name__}: {str(e)[:200]}"
            ) from None
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
        # Greedy actions of a non-recurrent policy skip ``predict``'s per-call set-up (the
        # same tensors into the same forward pass: the same actions, bit for bit).
        from .training.lean_predict import lean_predict, supports

        self._lean_predict = lean_predict
        self._lean = self._jobs is None and deterministic and supports(self.model.policy)
        if self._lean:
            self.model.policy.set_training_mode(False)
            self._device = self.model.policy.device
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
        """Refuse an observation space other than the one the model was trained on.

        The message names what fixes it: the env the model was trained on (its suite task
        when it was trained on one, e.g. ``hard-0.05`` for ``pretrained:hard``).
        """
        got = {k: tuple(s.shape) for k, s in space.spaces.items()}
        want = {k: tuple(s.shape) for k, s in self._dict_space.spaces.items()}
        if got != want:
            raise ConfigError(
                "observation_space",
                got,
                f"the one {self.path} was trained on obs_fields={list(want)} with shapes "
                f"{want}; {self.training_env_advice()}",
            )

    def training_env(self) -> tuple[str | None, dict[str, Any]]:
        """The suite task the model was trained on (None: none matches) and its env arguments."""
        from evalstop_gym.suite import suite_task

        env = dict(self.meta.get("env_kwargs") or {})
        cal, noise = env.get("calibration"), env.get("eval_noise")
        if isinstance(cal, str) and isinstance(noise, int | float):
            name = f"{cal}-{noise:g}"
            try:
                task = suite_task(name)
            except ConfigError:
                return None, env
            if all(env.get(k) == v for k, v in task.items() if k != "curves"):
                return name, env
        return None, env

    def training_env_advice(self) -> str:
        """How to make an env this model can play: its training task, in Python and as flags."""
        task, env = self.training_env()
        flags = [
            f"--{k.replace('_', '-')} {env[k]}"
            for k in ("calibration", "eval_noise", "eval_window", "curves")
            if env.get(k) is not None
        ]
        if list(self.obs_fields) != list(env.get("obs_fields") or self.obs_fields):
            flags.append(f"--obs-fields {','.join(self.obs_fields)}")
        shown = " ".join(flags)
        if task is not None:
            return (
                f"play it on the task it was trained on, {task}: "
                f"gym.make('EvalStop-v0', **evalstop_gym.suite_task({task!r})); on the command "
                f"line `benchmark --suite --tasks {task}`, or `benchmark {shown}`"
            )
        how = f" (on the command line `{shown}`)" if flags else ""
        return f"make the env with the arguments it was trained on, {env}{how}"

    def _input(self, obs: dict[str, np.ndarray]) -> Any:
        """The model's input for a Dict observation; refuses one of other fields."""
        if tuple(k for k in obs) != self.obs_fields and set(obs) != set(self.obs_fields):
            raise ValueError(
                f"{self.path} was trained on obs_fields={list(self.obs_fields)}, "
                f"got an observation with {sorted(obs)}"
            )
        return spaces.flatten(self._dict_space, obs) if self.flatten else obs

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """The model's action (0 continue, 1 stop) on a Dict observation."""
        x = self._input(obs)
        if self._jobs is not None:
            action = self._jobs.predict(x, obs, self.deterministic)
        elif self._lean and not self.model.policy.training:
            action = self._lean_predict(self.model.policy, x, self._device)
        else:
            action, _ = self.model.predict(x, deterministic=self.deterministic)
        return int(np.asarray(action).item())

    def batch_actor(self) -> Callable[[Sequence[dict[str, np.ndarray]]], list[int]] | None:
        """``act`` on many episodes' observations in one network call; None if not allowed.

        For episodes played side by side (:func:`baselines.evaluate.run_episodes`): one
        call per step of them all instead of one per decision, whose set-up (SB3's
        feature extraction, module calls) costs more than the network on one row.  Only a
        model on the lean path gets one (greedy, not recurrent: its decisions do not
        depend on earlier ones, so interleaving episodes changes nothing).  Each row goes
        through every computing layer alone, as ``act``'s one-row call does
        (:func:`baselines.training.batch_eval.policy_actions`; a product over many rows
        may round differently), from the very arrays ``act`` would hand the network, so
        each action is ``act``'s, bit for bit.
        """
        if not self._lean:
            return None
        from .training.batch_eval import policy_actions

        network = policy_actions(self.model.policy)
        space = self.model.policy.observation_space

        def act(observations: Sequence[dict[str, np.ndarray]]) -> list[int]:
            rows = [self._input(o) for o in observations]
            n = len(rows)
            # The rows stacked, each keeping its dtype and values (lean_predict's tensors).
            if isinstance(space, spaces.Dict):
                batch: Any = {
                    k: np.array([r[k] for r in rows]).reshape((n, *sub.shape))
                    for k, sub in space.spaces.items()
                }
            else:
                batch = np.array(rows).reshape((n, *space.shape))
            return [int(a) for a in network(batch)]

        return act

    def __repr__(self) -> str:
        """``Learned('models/dqn.zip')``."""
        return f"Learned({self.path!r})"


#: Prefixes of :func:`from_spec`: how ``evalstop-gym benchmark --policy`` names a learned stopper.
SPEC_PREFIXES = ("pretrained", "model")


#: The backward-induction stopper classes with shipped models (``pretrained:NAME``).
BACKWARD_SHIPPED: tuple[type[backward.BackwardStopper], ...] = (
    backward.BackwardStopper,
    routed.RoutedStopper,
)


def pretrained_names() -> list[str]:
    """Every shipped model's name: the SB3 ones and the backward-induction ones."""
    return sorted({*PRETRAINED, *(n for c in BACKWARD_SHIPPED for n in c.shipped)})


def pretrained_sha256(name: str) -> str:
    """The pinned SHA-256 of the shipped model ``name`` (any kind)."""
    if name in PRETRAINED:
        return PRETRAINED[name]
    for c in BACKWARD_SHIPPED:
        if name in c.shipped:
            return c.shipped[name]
    raise ConfigError("pretrained", name, f"one of {pretrained_names()}")


def is_backward_file(path: str | Path) -> bool:
    """Whether ``path`` names a backward-induction model (``.npz``), not an SB3 zip."""
    return Path(path).suffix == ".npz"


def load_model(
    path: str | Path, label: str | None = None, *, sha256: str | None = None
) -> Learned | backward.BackwardStopper:
    """The learned stopper in the model file at ``path``: an SB3 zip or a backward ``.npz``.

    Both are loaded only once their bytes match ``sha256`` or their ``.sha256`` record.
    """
    if is_backward_file(path):
        return routed.load_stopper(path, label=label, sha256=sha256)
    return Learned(path, label=label, sha256=sha256)


def from_spec(spec: str) -> Learned | backward.BackwardStopper:
    """The learned stopper a command-line spec names.

    ``pretrained:NAME`` is a shipped model (:meth:`Learned.pretrained`, ``hard``;
    :meth:`~baselines.backward.BackwardStopper.pretrained`, ``general``; or
    :meth:`~baselines.routed.RoutedStopper.pretrained`, ``routed``);
    ``model:PATH`` a model file with its ``.sha256`` record (as ``train`` writes): an
    SB3 zip, or a backward-induction ``.npz`` (``train --algo lsm``).  A
    backward-induction stopper reads the task's noise and price from
    :meth:`~baselines.backward.BackwardStopper.bind_task` (else its training defaults).

    Raises:
        ConfigError: a spec of another form, or an unknown pretrained name.
    """
    kind, sep, arg = spec.partition(":")
    if not sep or kind not in SPEC_PREFIXES or not arg:
        raise ConfigError(
            "policy", spec, f"'pretrained:NAME' (NAME in {pretrained_names()}) or 'model:PATH'"
        )
    if kind == "pretrained":
        for c in BACKWARD_SHIPPED:
            if arg in c.shipped:
                return c.pretrained(arg)
        if arg not in PRETRAINED:
            raise ConfigError("pretrained", arg, f"one of {pretrained_names()}")
        return Learned.pretrained(arg)
    return load_model(arg)
