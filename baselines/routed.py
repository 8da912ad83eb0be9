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
"""

from __future__ import annotations

import functools
import io
import json
import math
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evalstop_gym.errors import ConfigError

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

#: The format tag of a routed model file's metadata.
ROUTED_FORMAT = "evalstop-gym-routed-1"
#: The metadata member (JSON bytes as a uint8 array).
ROUTED_META = "routed_json"
#: The most regimes a routed model may hold.
MAX_REGIMES = 16
#: The regime classifiers' scikit-learn settings (``HistGradientBoostingClassifier``).
CLASSIFIER_PARAMS: dict[str, Any] = {
    "max_iter": 40,
    "max_leaf_nodes": 15,
    "min_samples_leaf": 40,
    "random_state": 0,
}
#: Features the regime classifiers never read (zeroed): the task settings.  They are
#: drawn per training episode independently of the regime, so a classifier reading them
#: learns which episode a row came from (training accuracy 1.0 on 60 episodes) and
#: names a suite task's regime by the training episode nearest its noise and price.
CLASSIFIER_MASKED: tuple[str, ...] = ("eval_noise", "price_milli", "remaining_cost")
#: A regime's probability is floored here before its log is pooled: one confident
#: misreading cannot rule a regime out for the rest of the episode.
PROB_FLOOR = 1e-6
#: Experts whose posterior weight is below this are not evaluated (their share of the
#: average is below it too).
MIN_WEIGHT = 1e-6


def evidence_index(k: int, share: float) -> int:
    """The decision (evals seen) of a ``k``-checkpoint job at which it adds its evidence."""
    return min(k - 1, max(1, round(share * k)))


@dataclass(frozen=True, eq=False)
class RoutedModel:
    """Per-regime experts and per-bucket regime classifiers (what a routed model file holds).

    Attributes:
        experts: One backward model per regime (the regime's gain of continuing).
        scores: One backward model per regime: its raw classifier score per bucket (a
            bucket a regime never reached in training has no model: probability 0).
        meta: ``regimes`` (names), ``prior`` (their training weights), ``share`` (where a
            job adds its evidence), ``grid``, ``default_settings``, the training record.
    """

    experts: tuple[BackwardModel, ...]
    scores: tuple[BackwardModel, ...]
    meta: dict[str, Any]

    @property
    def regimes(self) -> list[str]:
        """The regime names, in the order of the experts."""
        return list(self.meta["regimes"])

    @property
    def grid(self) -> int:
        """Decision buckets per run (shared by every expert and classifier)."""
        return int(self.meta["grid"])

    @property
    def smoothed(self) -> bool:
        """Whether the models read the smoothed feature set."""
        return self.experts[0].smoothed

    @functools.cached_property
    def _masked(self) -> list[int]:
        names = self.experts[0].meta["features"]
        return [names.index(f) for f in self.meta["classifier_masked"]]

    def predictions(self, bucket: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, R) the classifiers' raw regime scores (-inf: no classifier of the regime at
        ``bucket``) and (n, R) the experts' gains of continuing (NaN: no expert there).

        Every model's trees at ``bucket`` are walked in one pass (:class:`JointForest`);
        each value is the one its model's own ``predict`` gives, bit for bit (a test).
        """
        x = np.asarray(x, dtype=float)
        masked = x.copy()
        masked[:, self._masked] = 0.0
        got = self._joint.predict(bucket, np.concatenate([x, masked], axis=1))
        r = len(self.experts)
        gains, raw = np.full((len(x), r), np.nan), np.full((len(x), r), -np.inf)
        for m, values in got.items():
            (gains if m < r else raw)[:, m % r] = values
        return raw, gains

    @functools.cached_property
    def _joint(self) -> JointForest:
        # The classifiers read the masked copy of the features: columns F..2F-1.
        f = len(self.experts[0].meta["features"])
        return JointForest(
            (*self.experts, *self.scores), [0] * len(self.experts) + [f] * len(self.scores)
        )

    def log_probs(self, bucket: int, x: np.ndarray) -> np.ndarray | None:
        """(n, R) the regime classifier's floored log-probabilities (None: no classifier there)."""
        return regime_log_probs(self.predictions(bucket, x)[0])

    def gain(self, bucket: int, x: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
        """(n,) the experts' gains of continuing averaged under ``weights`` (n, R) (renormalised
        over the experts fitted for ``bucket``; None: none is)."""
        return averaged_gain(self.predictions(bucket, x)[1], weights)

    def save(self, path: str | Path) -> str:
        """Write the model to ``path`` (``.npz``) and its ``.sha256`` record; return the hash."""
        from evalstop_gym.fileio import atomic_write, write_hash_record

        atomic_write(path, self.to_bytes())
        return write_hash_record(path)

    def to_bytes(self) -> bytes:
        """The model file's bytes."""
        members: dict[str, np.ndarray] = {}
        for role, models in (("expert", self.experts), ("score", self.scores)):
            for r, m in enumerate(models):
                members[f"{role}_{r}"] = np.frombuffer(m.to_bytes(), np.uint8)
        meta = json.dumps(self.meta, sort_keys=True).encode("utf-8")
        members[ROUTED_META] = np.frombuffer(meta, np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **members)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "model file") -> RoutedModel:
        """The model whose file bytes are ``data``: bounded, checked, never unpickled.

        Raises:
            ModelFileError: not a routed model file, or one whose parts are inconsistent.
        """
        bad = f"{where} is not an evalstop-gym routed model (.npz)"
        got, meta = read_members(data, where, bad, 2 * MAX_REGIMES + 1, ROUTED_META)
        n = _check_meta(meta, bad)
        expected = {f"{role}_{r}" for role in ("expert", "score") for r in range(n)}
        if set(got) != expected:
            extra = sorted(set(got) ^ expected)[0]
            raise ModelFileError(f"{bad}: member {extra!r} missing or unexpected")
        parts: dict[str, list[BackwardModel]] = {"expert": [], "score": []}
        for role in parts:
            for r in range(n):
                a = got[f"{role}_{r}"]
                if a.dtype != np.uint8 or a.ndim != 1:
                    raise ModelFileError(f"{bad}: member '{role}_{r}' is not bytes")
                parts[role].append(BackwardModel.from_bytes(a.tobytes(), f"{where}:{role}_{r}"))
        models = parts["expert"] + parts["score"]
        if any(m.grid != meta["grid"] or m.meta["features"] != models[0].meta["features"]
               for m in models):  # fmt: skip
            raise ModelFileError(f"{bad}: its models differ in grid or features")
        return cls(tuple(parts["expert"]), tuple(parts["score"]), meta)

    @classmethod
    def load(
        cls, path: str | Path, *, sha256: str | None = None, trust: bool = False
    ) -> RoutedModel:
        """The model at ``path``, once its bytes match ``sha256`` or their ``.sha256`` record."""
        return cls.from_bytes(read_model_bytes(Path(path), path, trust, sha256), str(path))


def regime_log_probs(raw: np.ndarray) -> np.ndarray | None:
    """(n, R) floored log-probabilities of the regimes from their raw scores (-inf: a regime
    without a classifier; None: no regime has one)."""
    if not np.isfinite(raw).any():
        return None
    raw = raw - raw.max(axis=1, keepdims=True)
    p = np.exp(raw)
    p /= p.sum(axis=1, keepdims=True)
    return np.log(np.maximum(p, PROB_FLOOR))


def averaged_gain(gains: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """(n,) the experts' gains (n, R; NaN: no expert) averaged under ``weights`` (n, R),
    weights below :data:`MIN_WEIGHT` dropped and the rest renormalised (None: no expert)."""
    q, w = np.zeros(len(gains)), np.zeros(len(gains))
    for r in range(gains.shape[1]):
        wr = weights[:, r]
        if np.isnan(gains[:, r]).all() or not (wr >= MIN_WEIGHT).any():
            continue
        wr = np.where(wr >= MIN_WEIGHT, wr, 0.0)
        q += wr * gains[:, r]
        w += wr
    if not (w > 0).any():
        return None
    return np.where(w > 0, q / np.where(w > 0, w, 1.0), np.inf)


class JointForest:
    """Several backward models' trees as one set of node arrays, walked in one pass.

    A routed decision asks up to 2R models about one job; walking their trees together
    costs one traversal instead of 2R.  Model m reads feature columns from
    ``offsets[m]`` on (the routed classifiers read a masked copy of the features).
    Each model's value is its baseline plus its trees' leaf values added in tree order
    (a cumulative sum, padded with zeros at the end): what :meth:`BackwardModel.predict`
    adds, in the same order.
    """

    def __init__(self, models: Sequence[BackwardModel], offsets: Sequence[int]) -> None:
        starts = np.cumsum([0] + [len(m.feature) for m in models])
        self.feature = np.concatenate(
            [m.feature.astype(np.intp) + o for m, o in zip(models, offsets, strict=True)]
        )
        self.threshold = np.concatenate([m.threshold for m in models])
        self.left = np.concatenate([m.left.astype(np.intp) + s for m, s in zip(models, starts)])
        self.right = np.concatenate([m.right.astype(np.intp) + s for m, s in zip(models, starts)])
        self.missing_left = np.concatenate([m.missing_left for m in models])
        self.leaf = np.concatenate([m.leaf for m in models])
        self.value = np.concatenate([m.value for m in models])
        self.depth = max(m.depth for m in models)
        self._models, self._starts = tuple(models), starts
        self._buckets: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]] = {}

    def _bucket(self, bucket: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
        """The bucket's roots, its (M, T) gather of leaf values, baselines and models."""
        if bucket not in self._buckets:
            roots, slices, base, members, at = [], [], [], [], 0
            for m, model in enumerate(self._models):
                if not model.has_bucket(bucket):
                    continue
                r, b0 = model.bucket_trees(bucket)
                slices.append(np.arange(at, at + len(r)))
                roots.append(r.astype(np.intp) + self._starts[m])
                base.append(b0)
                members.append(m)
                at += len(r)
            flat = np.concatenate(roots) if roots else np.zeros(0, np.intp)
            width = max((len(c) for c in slices), default=0)
            gather = np.full((len(slices), width), len(flat))  # past the end: a 0.0 pad
            for row, c in enumerate(slices):
                gather[row, : len(c)] = c
            self._buckets[bucket] = (flat, gather, np.asarray(base), members)
        return self._buckets[bucket]

    def predict(self, bucket: int, x: np.ndarray) -> dict[int, np.ndarray]:
        """Model index -> (n,) its prediction at ``bucket`` for rows ``x`` (models without
        a fit for ``bucket`` are absent)."""
        roots, gather, base, members = self._bucket(bucket)
        if not members:
            return {}
        node = leaf_nodes(self, roots, x)
        vals = np.concatenate([self.value[node], np.zeros((len(x), 1))], axis=1)
        terms = np.concatenate(
            [np.broadcast_to(base[None, :, None], (len(x), len(base), 1)), vals[:, gather]], axis=2
        )
        total = np.cumsum(terms, axis=2)[:, :, -1]
        return {m: total[:, row] for row, m in enumerate(members)}


def _check_meta(meta: Any, bad: str) -> int:
    """The regime count of valid routed metadata; refuse anything else."""
    if not isinstance(meta, dict) or meta.get("format") != ROUTED_FORMAT:
        raise ModelFileError(f"{bad}: metadata format is not {ROUTED_FORMAT!r}")
    regimes, prior = meta.get("regimes"), meta.get("prior")
    if (
        not isinstance(regimes, list)
        or not 2 <= len(regimes) <= MAX_REGIMES
        or not all(isinstance(r, str) for r in regimes)
        or len(set(regimes)) != len(regimes)
    ):
        raise ModelFileError(f"{bad}: regimes must be 2..{MAX_REGIMES} distinct names")
    if (
        not isinstance(prior, list)
        or len(prior) != len(regimes)
        or not all(isinstance(p, int | float) and math.isfinite(p) and p > 0 for p in prior)
    ):
        raise ModelFileError(f"{bad}: prior must give one number > 0 per regime")
    share = meta.get("share")
    if not isinstance(share, int | float) or not 0 < share < 1:
        raise ModelFileError(f"{bad}: share must be a number in (0, 1)")
    check_grid_and_settings(meta, bad)
    masked = meta.get("classifier_masked")
    if not isinstance(masked, list) or not all(f in FEATURE_SETS["boundary"] for f in masked):
        raise ModelFileError(f"{bad}: classifier_masked must list feature names")
    return len(regimes)


# ---------------------------------------------------------------------------------------
# The stopper


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


# ---------------------------------------------------------------------------------------
# Training


def fit_routed(
    episodes: Sequence[TrainingEpisode],
    regimes: Sequence[int],
    names: Sequence[str],
    *,
    prior: Sequence[float] | None = None,
    share: float = 0.5,
    grid: int | None = None,
    params: Mapping[str, Any] | None = None,
    classifier_params: Mapping[str, Any] | None = None,
    label: str = "Routed",
    record: Mapping[str, Any] | None = None,
    default_settings: Mapping[str, float] | None = None,
) -> RoutedModel:
    """Fit one backward model per regime and the per-bucket regime classifiers.

    Args:
        episodes: The training episodes (one regime each).
        regimes: ``regimes[e]``: the index (into ``names``) of episode e's regime.
        names: The regime names.
        prior: The regimes' prior weights (default: their share of the episodes).
        share: Where in its run a job adds its evidence (:func:`evidence_index`).
        grid, params, label, record, default_settings: As :func:`~baselines.backward.fit_backward`'s.
        classifier_params: Over :data:`CLASSIFIER_PARAMS`.

    Raises:
        ConfigError: a regime index out of range, a regime without episodes, a bad share.
    """
    import sklearn.ensemble  # noqa: F401  (first: threadpoolctl limits loaded pools only)
    from threadpoolctl import threadpool_limits

    regimes = [int(r) for r in regimes]
    if len(regimes) != len(episodes):
        raise ConfigError("regimes", len(regimes), f"one per episode ({len(episodes)})")
    if not 2 <= len(names) <= MAX_REGIMES:
        raise ConfigError("names", list(names), f"2..{MAX_REGIMES} regime names")
    bad = [r for r in regimes if not 0 <= r < len(names)]
    if bad:
        raise ConfigError("regimes", bad[0], f"an index into {list(names)}")
    empty = [names[r] for r in range(len(names)) if r not in regimes]
    if empty:
        raise ConfigError("regimes", empty[0], "every regime with at least one episode")
    if not isinstance(share, int | float) or not 0 < share < 1:
        raise ConfigError("share", share, "a number in (0, 1)")
    if prior is None:
        prior = [regimes.count(r) / len(regimes) for r in range(len(names))]
    if len(prior) != len(names) or not all(math.isfinite(p) and p > 0 for p in prior):
        raise ConfigError("prior", list(prior), "one number > 0 per regime")
    grid = grid or max(ep.arrays.k for ep in episodes)
    experts = []
    for r in range(len(names)):
        mine = [ep for ep, got in zip(episodes, regimes, strict=True) if got == r]
        experts.append(
            fit_backward(
                mine,
                grid=grid,
                params=params,
                label=f"{label}[{names[r]}]",
                default_settings=default_settings,
            )
        )
    conf = {**CLASSIFIER_PARAMS, **(classifier_params or {})}
    with threadpool_limits(limits=1):
        scores = _fit_classifiers(episodes, regimes, len(names), grid, conf, experts[0].meta)
    first = episodes[0].settings
    meta = {
        "format": ROUTED_FORMAT,
        "regimes": list(names),
        "prior": [float(p) for p in prior],
        "share": float(share),
        "grid": int(grid),
        "label": label,
        "params": experts[0].meta["params"],
        "classifier_params": conf,
        "classifier_masked": list(CLASSIFIER_MASKED),
        "default_settings": {s: float((default_settings or first)[s]) for s in SETTINGS},
        "episodes": len(episodes),
        **({"record": dict(record)} if record else {}),
    }
    return RoutedModel(tuple(experts), scores, meta)


def _fit_classifiers(
    episodes: Sequence[TrainingEpisode],
    regimes: list[int],
    n: int,
    grid: int,
    conf: dict[str, Any],
    expert_meta: dict[str, Any],
) -> tuple[BackwardModel, ...]:
    """Per bucket a ``HistGradientBoostingClassifier`` of the regime; packed as n score models."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE

    smoothed = expert_meta["features"] == list(FEATURE_SETS["smoothed"])
    at = [{bucket_of(i, ep.arrays.k, grid): i for i in range(1, ep.arrays.k)} for ep in episodes]
    trees: list[list[list[np.ndarray]]] = [[] for _ in range(n)]
    baselines: list[list[float]] = [[] for _ in range(n)]
    buckets: list[list[int]] = [[] for _ in range(n)]
    masked = [expert_meta["features"].index(f) for f in CLASSIFIER_MASKED]
    zero = np.zeros(1, dtype=PREDICTOR_RECORD_DTYPE)
    zero["is_leaf"] = 1  # a one-leaf tree of value 0: a binary fit's reference class
    for b in range(1, grid):
        parts = [(e, at[e][b]) for e in range(len(episodes)) if b in at[e]]
        if not parts:
            continue
        xs = [
            features_at(
                episodes[e].arrays, np.arange(episodes[e].values.shape[0]), i,
                episodes[e].settings, smoothed,
            )
            for e, i in parts
        ]  # fmt: skip
        x = np.concatenate(xs)
        y = np.concatenate([np.full(len(a), regimes[e]) for a, (e, _) in zip(xs, parts)])
        x[:, np.isnan(x).all(axis=0)] = 0.0
        x[:, masked] = 0.0
        classes = np.unique(y)
        if len(classes) == 1:  # one regime reaches this bucket: it is certain there
            trees[classes[0]].append([zero])
            baselines[classes[0]].append(0.0)
            buckets[classes[0]].append(b)
            continue
        c = HistGradientBoostingClassifier(**conf).fit(x, y)
        base = np.asarray(c._baseline_prediction, dtype=float).ravel()
        for j, r in enumerate(c.classes_):
            if len(c.classes_) == 2:  # one raw score: the second class's log-odds
                ts = [zero] if j == 0 else [it[0].nodes for it in c._predictors]
                b0 = 0.0 if j == 0 else float(base[0])
            else:
                ts = [it[j].nodes for it in c._predictors]
                b0 = float(base[j])
            trees[int(r)].append(ts)
            baselines[int(r)].append(b0)
            buckets[int(r)].append(b)
    out = []
    for r in range(n):
        meta = {
            "format": FORMAT,
            "features": expert_meta["features"],
            "settings": list(SETTINGS),
            "grid": int(grid),
            "label": f"regime score {r}",
            "params": conf,
            "default_settings": expert_meta["default_settings"],
            "episodes": len(episodes),
        }
        out.append(pack_model(trees[r], baselines[r], buckets[r], meta))
    return tuple(out)


__all__ = [
    "CLASSIFIER_PARAMS",
    "DEFAULT_FEATURES",
    "RoutedModel",
    "RoutedStopper",
    "evidence_index",
    "fit_routed",
    "load_stopper",
]
