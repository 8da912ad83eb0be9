"""Backward-induction stoppers: the value of continuing, regressed decision by decision.

A :class:`BackwardStopper` decides a job from features of its boundary
observation (:data:`FEATURES`: progress, the last eval, the running max and
the gaps to it, trailing means, evals since the best, declines, slopes, the
last evals relative to the max, the loss and its change, the job type) and
the task settings a platform knows (:data:`SETTINGS`: the eval-noise level,
the GPU-hour price, the evals per run).  It stops when the predicted gain of
continuing, ``E[V(end under the policy) - V(stop now) | features]``, is below 0.

Training is Longstaff-Schwartz backward induction (:func:`fit_backward`): one
regressor per decision index (a progress bucket, so tasks with 10 and 20
checkpoints share one model), from the last decision to the first, each fitted
to the *realised* utility of continuing under the decisions already fitted
after it, minus the utility of stopping now.  The per-job utility terms come
from recorded episodes (``TrainingEpisode``: the observation arrays of
:class:`~baselines.floors.EpisodeArrays` and the stop values of every job),
so one episode of ``n`` jobs gives ``n`` paths.  The regressor is
scikit-learn's ``HistGradientBoostingRegressor`` (imported only to train).

A model file is an ``.npz`` of plain arrays (every tree's node arrays, the
baselines, the buckets) plus its JSON metadata as a byte array, read with
``allow_pickle=False`` once its SHA-256 matches its record or a pinned hash:
loading never runs code and needs numpy only.  ``pretrained:general``
(:data:`PRETRAINED`) is one model trained over the synthetic regimes, noise
levels and prices (docs/LEARNED.md has its training command).

The parts live in :mod:`baselines.backward_parts` (the features and task settings, the
trees' walk, the model file's format and checks, the model, the training); this module
keeps the stopper and the shipped models and keeps every name the parts define
importable from here.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evalstop_gym.errors import ConfigError

from .backward_parts import features as _features
from .backward_parts import modelfile as _modelfile
from .backward_parts import training as _training
from .backward_parts import trees as _trees
from .backward_parts.features import (
    DEFAULT_FEATURES,
    DEFAULT_GRID,
    FEATURE_SETS,
    FEATURES,
    NOISE_FLOOR,
    SETTINGS,
    SMOOTH_FEATURES,
    bucket_of,
    feature_matrix,
    features_at,
    settings_for_task,
)
from .backward_parts.model import BackwardModel
from .backward_parts.modelfile import (
    ARRAY_KEYS,
    FORMAT,
    MAX_BUCKET_TREES,
    MAX_DEPTH,
    MAX_MEMBER_BYTES,
    MAX_NODES,
    META_KEY,
    NODE_KEYS,
    ModelFileError,
    check_grid_and_settings,
    check_model,
    member_count,
    read_members,
    read_model_bytes,
)
from .backward_parts.training import DEFAULT_PARAMS, TrainingEpisode, fit_backward, pack_model
from .backward_parts.trees import leaf_nodes, max_depth
from .floors import EpisodeArrays
from .policies import Obs, need_field, observed

# The parts' private names and the old private spellings of the names made public:
# assigned, since a module imports no other module's private name
# (tests/test_architecture.py).  fit_backward looks features_at up in
# backward_parts.training, BackwardStopper.ends here: patch both.
_smooth_columns = _features._smooth_columns
_fit = _training._fit
_max_depth = _trees.max_depth
_check_model = _modelfile.check_model

#: Folder of the shipped models (package data), shared with the SB3 models.
PRETRAINED_DIR = Path(__file__).with_name("pretrained")
#: SHA-256 of each shipped backward-induction model (``<name>.npz``), pinned in the code.
PRETRAINED: dict[str, str] = {
    "general": "182f374980759d237857392da781456650d9d63406c833fce25278d01ab58be4",
}


class BackwardStopper:
    """A backward-induction stopper: ``reset()``, ``act(obs) -> 0/1``, ``__call__(view)``.

    Args:
        model: A :class:`BackwardModel`, or the path of a model file (``.npz``, loaded
            once its hash matches its ``.sha256`` record or ``sha256``).
        settings: The task's ``eval_noise`` and ``gpu_hour_price`` (a platform knows
            them); missing ones default to the model's training settings
            (``meta["default_settings"]``).  :meth:`bind_task` sets them from env kwargs.
        label: Name in tables.

    Needs the whole eval history in view (``eval_window = K``, as every suite task has).
    """

    #: The model type it plays (a path is loaded as one).
    model_class: Any = BackwardModel
    #: The shipped models :meth:`pretrained` loads (name -> pinned SHA-256), and their label.
    shipped: ClassVar[dict[str, str]] = PRETRAINED
    shipped_label = "Backward-pretrained"
    #: Its name in tables when neither ``label`` nor the model's metadata gives one.
    default_name = "Backward"

    def __init__(
        self,
        model: BackwardModel | str | Path,
        settings: Mapping[str, float] | None = None,
        label: str | None = None,
        *,
        sha256: str | None = None,
        trust: bool = False,
    ) -> None:
        """Load (or take) the model and fix the task settings it reads."""
        if isinstance(model, self.model_class):
            self.model, self.path = model, "<in memory>"
        else:
            self.model = self.model_class.load(model, sha256=sha256, trust=trust)
            self.path = str(model)
        self.meta = self.model.meta
        self.settings = dict(self.meta["default_settings"])
        if settings:
            self.set_settings(settings)
        self.name = label or self.meta.get("label") or self.default_name
        self.reset()

    @classmethod
    def pretrained(cls, name: str | None = None, label: str | None = None) -> BackwardStopper:
        """A model shipped with the package (``shipped``: :data:`PRETRAINED` here; default
        its first, ``general``), loaded once its hash matches.

        Raises:
            ConfigError: an unknown ``name``.
            evalstop_gym.fileio.UntrustedFileError: the file's bytes differ from the pinned hash.
        """
        name = next(iter(cls.shipped), "") if name is None else name
        if name not in cls.shipped:
            raise ConfigError("pretrained", name, f"one of {sorted(cls.shipped)}")
        return cls(
            PRETRAINED_DIR / f"{name}.npz",
            label=label or f"{cls.shipped_label}[{name}]",
            sha256=cls.shipped[name],
        )

    def set_settings(self, settings: Mapping[str, float]) -> None:
        """Set the task settings (:data:`SETTINGS`) it reads; others are refused."""
        for k, v in settings.items():
            if k not in SETTINGS:
                raise ConfigError("settings", k, f"one of {list(SETTINGS)}")
            if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise ConfigError(k, v, "a finite number >= 0")
            self.settings[k] = float(v)

    def bind_task(self, kw: Mapping[str, Any], price_factor: float = 1.0) -> BackwardStopper:
        """Read the task settings from env kwargs (``evalstop_gym.suite_task``'s); returns self.

        What it is told is :func:`settings_for_task`'s: on real runs the noise of a
        measured eval, as the Bayes stopper is told it.
        """
        self.set_settings(settings_for_task(kw, price_factor))
        return self

    @classmethod
    def for_task(
        cls, model: BackwardModel | str | Path, task: str, price_factor: float = 1.0, **kwargs: Any
    ) -> BackwardStopper:
        """The stopper of ``model`` bound to a named suite task at a price multiple."""
        from evalstop_gym.suite import suite_task

        return cls(model, **kwargs).bind_task(suite_task(task), price_factor)

    def reset(self) -> None:
        """Stateless: every decision is made from the observation."""

    def check_observation_space(self, space: Any) -> None:
        """Refuse an observation without a field the features read."""
        missing = [f for f in ("job_type", "evals", "progress", "consecutive_declines", "loss")
                   if f not in space.spaces]  # fmt: skip
        if missing:
            raise ConfigError(
                "obs_fields",
                sorted(space.spaces),
                f"every boundary field ({self.name} reads {missing[0]!r})",
            )

    def decide(
        self,
        job_type: int,
        evals: np.ndarray,
        loss: np.ndarray,
        progress: float,
        declines: float,
    ) -> bool:
        """Whether to stop a job with these observed values (the whole history so far)."""
        evals = np.asarray(evals, dtype=float)
        i = len(evals)
        if i == 0 or progress <= 0 or progress >= 1.0 - 1e-6:
            return False
        k = round(i / progress)
        x = feature_matrix(
            evals[None, :],
            np.asarray(loss, dtype=float)[None, :],
            np.array([job_type]),
            progress,
            np.array([declines]),
            self.settings["eval_noise"],
            self.settings["gpu_hour_price"],
            self.model.smoothed,
        )
        return self._stops(i, k, bucket_of(i, k, self.model.grid), x)

    def _stops(self, i: int, k: int, bucket: int, x: np.ndarray) -> bool:
        """Whether to stop at decision ``i`` of ``k`` (``bucket``), features ``x`` (1, F)."""
        if not self.model.has_bucket(bucket):
            return False
        return bool(self.model.predict(bucket, x)[0] < 0.0)

    def act(self, obs: Obs) -> int:
        """0 continue, 1 stop, from the env's observation (needs ``eval_window = K``)."""
        return int(
            self.decide(
                int(np.argmax(need_field(obs, "job_type", self.name))),
                observed(need_field(obs, "evals", self.name)),
                observed(need_field(obs, "loss", self.name)),
                float(need_field(obs, "progress", self.name)[0]),
                float(need_field(obs, "consecutive_declines", self.name)[0]),
            )
        )

    def __call__(self, view: Any) -> bool:
        """The simulator's stopper interface (``Simulator.run(stopper)``), on a ``JobView``."""
        return self.decide(
            view.job_type, view.evals, view.loss, view.progress, view.consecutive_declines
        )

    def ends(self, arrays: EpisodeArrays, margin: float = 0.0) -> np.ndarray:
        """(n,) the checkpoint after which each job of an episode ends under this stopper.

        The decisions :meth:`act` makes on the same observations, made for every job
        of the episode at once (a job that is never stopped ends at K).  ``margin``
        stops when the predicted gain of continuing is below ``-margin`` instead of 0
        (a threshold study, ``benchmarks/research/heldout_threshold.py``; :meth:`act` uses 0).
        """
        n, k = arrays.evals.shape
        end = np.full(n, k)
        alive = np.ones(n, dtype=bool)
        for i in range(1, k):
            bucket = bucket_of(i, k, self.model.grid)
            if not self.model.has_bucket(bucket) or not alive.any():
                continue
            rows = np.flatnonzero(alive)
            x = features_at(arrays, rows, i, self.settings, self.model.smoothed)
            stop = self.model.predict(bucket, x) < -margin
            end[rows[stop]] = i
            alive[rows[stop]] = False
        return end

    def __repr__(self) -> str:
        """The model file and the settings it reads."""
        shown = ", ".join(f"{k}={v:g}" for k, v in self.settings.items())
        return f"BackwardStopper({self.path!r}, {shown})"
