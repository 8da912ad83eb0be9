"""A routed backward-induction stopper: one model per regime, chosen by pooled evidence.

One backward-induction model (:mod:`baselines.backward`) fitted on a mixture of
regimes shares its trees between regimes whose best decisions differ (the ``hard``
regime's healthy runs rise to the end, ``grounded``'s fall).  A
:class:`RoutedStopper` holds one model per regime (its *experts*) and, per
decision bucket, a classifier of the regime from the same features.  Which expert
decides is read from evidence a platform has: the jobs of an episode share their
regime, so the stopper **pools** the classifier's log-probabilities over the jobs
it has seen (each job counts once, at its decision :func:`evidence_index`, half-way
through its run) and adds the deciding job's own.  The experts' predicted gains of
continuing are averaged under the resulting posterior over regimes; it stops when
the average is below 0.

The stopper is therefore *stateful*: :meth:`RoutedStopper.reset` clears the
evidence (``play_episode`` calls it at the start of every episode), and its
decisions depend on the order the jobs were seen in.  It is scored by playing
episodes in time order, never from :func:`~baselines.floors.EpisodeArrays` (which
hold no timeline): ``stateful = True`` tells the harness.

A model file is an ``.npz`` whose members are the experts' and the classifiers'
own backward-model files (each parsed and checked by
:meth:`~baselines.backward.BackwardModel.from_bytes`) and a JSON metadata member;
it is read with ``allow_pickle=False`` once its SHA-256 matches, as every model is.
A classifier of R regimes is stored as R backward models, model r holding the trees
and baseline of regime r's raw score (scikit-learn's ``decision_function``); its
probabilities are their softmax.

The parts live in :mod:`baselines.routed_parts` (the regime evidence, the joint walk of
the models' trees, the model and its file, the training); this module keeps the
stoppers and the loader of either model file and keeps every name the parts define
importable from here.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

import functools
import io
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .backward import (
    ARRAY_KEYS,
    DEFAULT_FEATURES,
    FEATURE_SETS,
    FORMAT,
    META_KEY,
    SETTINGS,
    BackwardModel,
    BackwardStopper,
    ModelFileError,
    TrainingEpisode,
    bucket_of,
    check_grid_and_settings,
    features_at,
    fit_backward,
    leaf_nodes,
    member_count,
    pack_model,
    read_members,
    read_model_bytes,
)
from .floors import EpisodeArrays
from .routed_parts import model as _model
from .routed_parts import training as _training
from .routed_parts.evidence import (
    MIN_WEIGHT,
    PROB_FLOOR,
    averaged_gain,
    evidence_index,
    regime_log_probs,
)
from .routed_parts.forest import JointForest
from .routed_parts.model import MAX_REGIMES, ROUTED_FORMAT, ROUTED_META, RoutedModel
from .routed_parts.training import CLASSIFIER_MASKED, CLASSIFIER_PARAMS, fit_routed

# The parts' private names, which callers may reach: assigned, since a module imports no
# other module's private name (tests/test_architecture.py).
_check_meta = _model._check_meta
_fit_classifiers = _training._fit_classifiers


class RoutedStopper(BackwardStopper):
    """Per-regime experts routed by regime evidence pooled over the jobs seen this episode.

    ``reset()`` clears the evidence; ``act(obs)`` / ``__call__(view)`` decide one job
    and, at the job's :func:`evidence_index`, add its regime evidence to the pool.
    Settings are told as to :class:`~baselines.backward.BackwardStopper`.

    Takes :class:`~baselines.backward.BackwardStopper`'s arguments; ``model`` is a
    :class:`RoutedModel` or the path of a routed model file.
    """

    #: Decisions depend on the jobs seen before: score it by playing episodes in order.
    stateful = True
    #: Whether a job's evidence joins the episode's pool (False: :class:`LoneRoutedStopper`).
    pooled: ClassVar[bool] = True
    model_class: Any = RoutedModel
    #: The shipped routed model (``pretrained:routed``, ``baselines/pretrained/routed.npz``):
    #: ``evalstop-gym train --algo lsm --task routed``; its SHA-256, pinned.
    shipped: ClassVar[dict[str, str]] = {
        "routed": "5c049a8064fe6ef3517358bcc486fdadcb82462e236a7dc7134893e7e13bb62b",
    }
    shipped_label = "Routed-pretrained"
    default_name = "Routed"

    @functools.cached_property
    def _log_prior(self) -> np.ndarray:
        log_prior = np.log(np.asarray(self.meta["prior"], dtype=float))
        return log_prior - np.log(np.exp(log_prior).sum())

    def reset(self) -> None:
        """Forget the evidence of the jobs seen (a new episode, a new platform)."""
        self.evidence = np.zeros(len(self.meta["regimes"]))
        self.jobs_seen = 0

    def posterior(self, own: np.ndarray | float = 0.0) -> np.ndarray:
        """(R,) the regime posterior from the pooled evidence (the prior before any job), and
        ``own``: a deciding job's log-probabilities not yet in the pool."""
        z = self._log_prior + self.evidence + own
        p = np.exp(z - z.max())
        return p / p.sum()

    def decide(
        self,
        job_type: int,
        evals: np.ndarray,
        loss: np.ndarray,
        progress: float,
        declines: float,
    ) -> bool:
        """:meth:`BackwardStopper.decide <baselines.backward.BackwardStopper.decide>`, reading
        a job's predictions from :meth:`primed` ones when it holds them."""
        memo = getattr(self, "_primed", None)
        if memo:
            got = memo.get(_prime_key(job_type, evals, loss, progress, declines))
            if got is not None:
                return self._stops_with(*got)
        return super().decide(job_type, evals, loss, progress, declines)

    def primed(self, arrays: EpisodeArrays) -> RoutedStopper:
        """Compute the model's predictions for every job and decision of an episode at once.

        :meth:`decide` then reads a job's predictions at a decision from them instead of
        walking the trees for that job alone: the same numbers (every model's prediction
        of a row reads that row only; a test compares them), so the same decisions, and
        the evidence is still pooled in the order the episode asks.  Keyed by what the
        decision reads (job type, the evals and losses seen, progress, declines), so an
        observation of another episode is decided as before.  Cleared by :meth:`unprime`
        and by a change of settings.  Returns self.
        """
        n, k = arrays.evals.shape
        memo: dict[tuple[Any, ...], tuple[int, int, np.ndarray, np.ndarray]] = {}
        rows = np.arange(n)
        for i in range(1, k):
            progress = float(arrays.progress[i - 1])
            if progress <= 0 or progress >= 1.0 - 1e-6:
                continue
            kk = round(i / progress)
            x = features_at(arrays, rows, i, self.settings, self.model.smoothed)
            raw, gains = self.model.predictions(bucket_of(i, kk, self.model.grid), x)
            for j in range(n):
                key = _prime_key(
                    int(arrays.job_type[j]),
                    arrays.evals[j, :i],
                    arrays.loss[j, :i],
                    progress,
                    float(arrays.declines[j, i - 1]),
                )
                memo[key] = (i, kk, raw[j : j + 1], gains[j : j + 1])
        self._primed = memo
        return self

    def unprime(self) -> None:
        """Forget the predictions :meth:`primed` computed."""
        self._primed = None

    def set_settings(self, settings: Mapping[str, float]) -> None:
        """Set the task settings; predictions primed under others are forgotten."""
        self.unprime()
        super().set_settings(settings)

    def _stops(self, i: int, k: int, bucket: int, x: np.ndarray) -> bool:
        """Whether to stop a job at decision ``i`` of ``k``; adds its evidence at its turn."""
        raw, gains = self.model.predictions(bucket, x)
        return self._stops_with(i, k, raw, gains)

    def _stops_with(self, i: int, k: int, raw: np.ndarray, gains: np.ndarray) -> bool:
        """:meth:`_stops` given the job's (1, R) raw regime scores and experts' gains."""
        own = regime_log_probs(raw)
        if own is not None and self.pooled and i == evidence_index(k, self.meta["share"]):
            self.evidence = self.evidence + own[0]
            self.jobs_seen += 1
            own = None  # now in the pool: not counted twice
        w = self.posterior(own[0] if own is not None else 0.0)
        q = averaged_gain(gains, w[None, :])
        return bool(q is not None and q[0] < 0.0)

    def ends(self, arrays: EpisodeArrays) -> np.ndarray:
        """Refused: a routed stopper's decisions depend on the order jobs are seen in, which
        an episode's arrays do not hold.  Play the episode (``play_episode``) instead."""
        raise TypeError(
            f"{self.name} pools evidence across the jobs of an episode in time order: "
            "score it by playing episodes (baselines.evaluate.play_episode), not from arrays"
        )

    def __repr__(self) -> str:
        """The model file, the regimes and the settings it reads."""
        shown = ", ".join(f"{k}={v:g}" for k, v in self.settings.items())
        return f"RoutedStopper({self.path!r}, regimes={self.model.regimes}, {shown})"


def _prime_key(
    job_type: int, evals: Any, loss: Any, progress: float, declines: float
) -> tuple[Any, ...]:
    """What a routed decision reads, as a dict key (the values as the decision reads them)."""
    return (
        int(job_type),
        np.asarray(evals, dtype=float).tobytes(),
        np.asarray(loss, dtype=float).tobytes(),
        float(progress),
        float(declines),
    )


class LoneRoutedStopper(RoutedStopper):
    """The routed stopper as one live run plays it: nothing is pooled across jobs.

    Each job is routed by the regimes' prior weights and its own evidence only, as
    each run's :class:`~baselines.online.OnlineStopper` sees it (its policy is
    reset per run); played over a whole episode, it measures what the pooled stopper's
    suite scores owe to the pool (``--policy baselines.routed:lone_pretrained``).
    """

    pooled = False
    shipped_label = "Routed-lone-pretrained"
    default_name = "Routed-lone"


def lone_pretrained() -> LoneRoutedStopper:
    """The shipped routed model, unpooled (a ``--policy module:callable`` with no arguments)."""
    return LoneRoutedStopper.pretrained()


def load_stopper(
    path: str | Path,
    *,
    label: str | None = None,
    sha256: str | None = None,
    trust: bool = False,
) -> BackwardStopper:
    """The stopper of a backward-induction model file of either format, read once its bytes
    match ``sha256`` or their ``.sha256`` record: a routed file (it holds the routed
    metadata member) as a :class:`RoutedStopper`, any other as a
    :class:`~baselines.backward.BackwardStopper` (whose loader says what is wrong with it).
    """
    data = read_model_bytes(Path(path), path, trust, sha256)
    names = _member_names(data, str(path))
    # np.load names a member with or without its .npy suffix: either spelling counts.
    routed = any(m in names for m in (ROUTED_META, f"{ROUTED_META}.npy")) and not any(
        m in names for m in (META_KEY, f"{META_KEY}.npy")
    )
    cls = RoutedStopper if routed else BackwardStopper
    stopper = cls(cls.model_class.from_bytes(data, str(path)), label=label)
    stopper.path = str(path)
    return stopper


def _member_names(data: bytes, where: str) -> set[str]:
    """The member names of the (bounded) zip ``data`` (empty: not a readable zip)."""
    try:
        member_count(data, where, 2 * MAX_REGIMES + 1 + len(ARRAY_KEYS))
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return set(zf.namelist())
    except Exception:  # untrusted bytes: the format's own loader reports them
        return set()


__all__ = [
    "CLASSIFIER_PARAMS",
    "DEFAULT_FEATURES",
    "RoutedModel",
    "RoutedStopper",
    "evidence_index",
    "fit_routed",
    "load_stopper",
]
