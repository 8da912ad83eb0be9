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
"""

from __future__ import annotations

import functools
import io
import json
import math
import struct
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evalstop_gym.errors import ConfigError, EvalStopError
from evalstop_gym.fileio import (
    MAX_MODEL_BYTES,
    atomic_write,
    read_regular,
    read_verified,
    write_hash_record,
)

from .floors import EpisodeArrays
from .policies import Obs, need_field, observed


class ModelFileError(EvalStopError):
    """A model file that is not a readable evalstop-gym model (its zip or its metadata)."""


def read_model_bytes(p: Path, shown: Any, trust: bool, sha256: str | None) -> bytes:
    """A model file's bytes: checked against its SHA-256 record first (``trust``: not).

    Every parser reads from these very bytes, so no unverified byte is ever parsed and
    the file cannot be swapped between the check and the read.  ``shown`` names the file
    in the messages.

    Raises:
        ModelFileError: a missing or unreadable file.
        evalstop_gym.fileio.UntrustedFileError: its hash differs from the record.
    """
    try:
        if trust:
            return read_regular(p, max_bytes=MAX_MODEL_BYTES, max_line=None, field="model")
        return read_verified(p, sha256)
    except FileNotFoundError:
        raise ModelFileError(f"{shown}: no such model file") from None
    except OSError as e:
        raise ModelFileError(f"{shown}: cannot read the model file ({e.strerror})") from None


#: The task settings a model reads besides the observation (a platform knows them).
SETTINGS: tuple[str, ...] = ("eval_noise", "gpu_hour_price")
#: The features of one decision, in column order.
FEATURES: tuple[str, ...] = (
    "progress",
    "evals_seen",
    "evals_per_run",
    "eval_noise",
    "price_milli",
    "remaining_cost",
    "type_lora",
    "type_dpo",
    "type_rlhf",
    "gain_last",
    "gain_max",
    "gap",
    "gap_z",
    "gain_max_z",
    "gain_last_z",
    "tail3_minus_max",
    "tail5_minus_max",
    "since_best",
    "declines",
    "slope3",
    "slope5",
    "slope3_z",
    "rel2",
    "rel3",
    "rel4",
    "rel5",
    "rel6",
    "loss_last",
    "loss_change3",
)
#: Smoothed trend features (the ``smoothed`` set appends them to :data:`FEATURES`): one
#: eval is as noisy as a whole fall at sigma 0.12, so a decline shows only in averages.
#: ``olsW_z``: the least-squares slope of the last W evals; ``meanA_prevA_z``: the mean of
#: the last A evals minus the mean of the A before; ``ma3_*``: the 3-eval moving average's
#: gap below its own max and the evals since that max; then the mean of every eval minus
#: the first and the last three's mean minus it (``_z``: in noise units); the first and
#: the last three evals' mean, the mean of every eval and the moving average's max as
#: levels (regimes start, rise to and end at different levels).
SMOOTH_FEATURES: tuple[str, ...] = (
    "ols4_z",
    "ols6_z",
    "ols10_z",
    "mean3_prev3_z",
    "mean5_prev5_z",
    "ma3_gap_z",
    "ma3_since_best",
    "mean_minus_first_z",
    "tail3_minus_mean_z",
    "first3_mean",
    "last3_mean",
    "mean_level",
    "ma3_max_level",
)
#: The feature sets a model may declare (its metadata ``features`` is one of these lists):
#: ``boundary`` the single-eval features alone, ``smoothed`` with the trend averages.
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "boundary": FEATURES,
    "smoothed": FEATURES + SMOOTH_FEATURES,
}
#: The feature set :func:`fit_backward` trains on unless told otherwise.
DEFAULT_FEATURES = "smoothed"
#: The noise level below which noise-scaled features use this floor (noise-free tasks).
NOISE_FLOOR = 0.01
#: Decision buckets of a model: decision i of a K-checkpoint job is bucket round(i * G / K).
DEFAULT_GRID = 20
#: The regressor's settings (scikit-learn ``HistGradientBoostingRegressor``); no early
#: stopping and a fixed random state, so a fit is a function of its data.
DEFAULT_PARAMS: dict[str, Any] = {
    "max_iter": 100,
    "learning_rate": 0.1,
    "max_leaf_nodes": 15,
    "min_samples_leaf": 40,
    "l2_regularization": 1.0,
    "early_stopping": False,
    "random_state": 0,
}
#: The file format's version (metadata ``format``).
FORMAT = "evalstop-gym-backward-1"
#: The metadata member of a model file (JSON bytes as a uint8 array).
META_KEY = "meta_json"
#: Node arrays of every tree, concatenated; index arrays are absolute.
NODE_KEYS = ("feature", "threshold", "left", "right", "missing_left", "leaf", "value")
#: Members an ``.npz`` model holds: the node arrays, the trees and buckets, the metadata.
ARRAY_KEYS = (*NODE_KEYS, "roots", "model_trees", "baseline", "buckets", META_KEY)
#: The largest member a model file may declare (uncompressed), and the most nodes.
MAX_MEMBER_BYTES = 256 * 2**20
MAX_NODES = 2**24
#: The deepest tree a model may hold.
MAX_DEPTH = 64
#: The most trees one bucket's model may hold (a fit makes max_iter of them; 100 here).
#: A routed decision walks several models' trees padded to the longest: this bounds it.
MAX_BUCKET_TREES = 4096

#: Folder of the shipped models (package data), shared with the SB3 models.
PRETRAINED_DIR = Path(__file__).with_name("pretrained")
#: SHA-256 of each shipped backward-induction model (``<name>.npz``), pinned in the code.
PRETRAINED: dict[str, str] = {
    "general": "182f374980759d237857392da781456650d9d63406c833fce25278d01ab58be4",
}


def member_count(data: bytes, where: str, limit: int) -> int:
    """The entry count of a zip's end-of-central-directory record, before zipfile parses it.

    Raises:
        ModelFileError: not a zip, a ZIP64 archive, or more than ``limit`` members.
    """
    # The record is the last 22 bytes plus a comment of at most 65535 bytes.
    at = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 65535))
    if at < 0 or len(data) - at < 22:
        raise ModelFileError(f"{where} is not an evalstop-gym model file: not a zip file")
    disk_entries, total = struct.unpack_from("<HH", data, at + 8)
    if total == 0xFFFF or disk_entries == 0xFFFF:  # ZIP64: never written for a model
        raise ModelFileError(
            f"{where} is not an evalstop-gym model file: a ZIP64 archive "
            f"(a model zip holds at most {limit} members)"
        )
    if total > limit:
        raise ModelFileError(f"{where}: {total} members, at most {limit} allowed")
    return total


# ---------------------------------------------------------------------------------------
# Features


def feature_matrix(
    evals: np.ndarray,
    loss: np.ndarray,
    job_type: np.ndarray,
    progress: float,
    declines: np.ndarray,
    eval_noise: float,
    gpu_hour_price: float,
    smoothed: bool = False,
) -> np.ndarray:
    """(n, F) features of n jobs at one decision, each with ``i`` evals seen.

    Args:
        evals: (n, i) the evals observed so far, oldest first (the whole history).
        loss: (n, i) the losses observed so far.
        job_type: (n,) job type indices.
        progress: The declared progress i / K (as the observation carries it).
        declines: (n,) the ``consecutive_declines`` field.
        eval_noise: The task's eval-noise level.
        gpu_hour_price: The task's price of a GPU-hour.
        smoothed: Append :data:`SMOOTH_FEATURES` (F = 42; else :data:`FEATURES`, F = 29).

    A value a short history cannot give (a slope over 5 evals after 3) is NaN;
    the trees route it as they learned to.
    """
    e = np.asarray(evals, dtype=float)
    n, i = e.shape
    lo = np.asarray(loss, dtype=float)
    t = np.asarray(job_type)
    sig = max(float(eval_noise), NOISE_FLOOR)
    k = round(i / progress) if progress > 0 else i
    e0, last = e[:, 0], e[:, -1]
    m = e.max(axis=1)
    since = (i - 1 - np.argmax(e, axis=1)).astype(float)
    nan = np.full(n, np.nan)

    def tail(q: int) -> np.ndarray:
        return e[:, -min(q, i) :].mean(axis=1)

    def back(q: int) -> np.ndarray:  # the q-th last eval, NaN if fewer were seen
        return e[:, -q] if i >= q else nan

    slope3 = (last - back(3)) / 2.0
    slope5 = (last - back(5)) / 4.0
    cols = [
        np.full(n, float(progress)),
        np.full(n, float(i)),
        np.full(n, float(k)),
        np.full(n, float(eval_noise)),
        np.full(n, 1e3 * float(gpu_hour_price)),
        np.full(n, 1e3 * float(gpu_hour_price) * (1.0 - float(progress))),
        (t == 0).astype(float),
        (t == 1).astype(float),
        (t == 2).astype(float),
        last - e0,
        m - e0,
        m - last,
        (m - last) / sig,
        (m - e0) / sig,
        (last - e0) / sig,
        tail(3) - m,
        tail(5) - m,
        since,
        np.asarray(declines, dtype=float),
        slope3,
        slope5,
        slope3 / sig,
        *(back(q) - m for q in (2, 3, 4, 5, 6)),
        lo[:, -1] if lo.shape[1] else nan,
        lo[:, -1] - lo[:, -3] if lo.shape[1] >= 3 else nan,
    ]
    if smoothed:
        cols += _smooth_columns(e, sig)
    return np.stack(cols, axis=1)


def _smooth_columns(e: np.ndarray, sig: float) -> list[np.ndarray]:
    """The :data:`SMOOTH_FEATURES` columns of an (n, i) eval history, noise level ``sig``."""
    n, i = e.shape
    nan = np.full(n, np.nan)

    def ols(w: int) -> np.ndarray:  # least-squares slope of the last min(w, i) evals
        if i < 3:
            return nan
        w = min(w, i)
        t = np.arange(w) - (w - 1) / 2.0
        return (e[:, -w:] * t).sum(axis=1) / (t * t).sum() / sig

    def window(a: int, b: int) -> np.ndarray:  # mean of the evals a..b-1 back from the last
        return e[:, i - b : i - a].mean(axis=1) if i >= b else nan

    if i >= 3:
        ma = (e[:, 2:] + e[:, 1:-1] + e[:, :-2]) / 3.0
        ma_max = ma.max(axis=1)
        ma_gap = (ma_max - ma[:, -1]) / sig
        ma_since = (ma.shape[1] - 1 - np.argmax(ma, axis=1)).astype(float)
    else:
        ma_max = ma_gap = ma_since = nan
    mean = e.mean(axis=1)
    return [
        ols(4),
        ols(6),
        ols(10),
        (window(0, 3) - window(3, 6)) / sig,
        (window(0, 5) - window(5, 10)) / sig,
        ma_gap,
        ma_since,
        (mean - e[:, 0]) / sig,
        (e[:, -min(3, i) :].mean(axis=1) - mean) / sig,
        e[:, : min(3, i)].mean(axis=1),
        e[:, -min(3, i) :].mean(axis=1),
        mean,
        ma_max,
    ]


def bucket_of(i: int, k: int, grid: int) -> int:
    """The decision bucket of decision ``i`` (evals seen) of a ``k``-checkpoint job."""
    return round(i * grid / k)


# ---------------------------------------------------------------------------------------
# The model: tree ensembles as arrays


@dataclass(frozen=True, eq=False)
class BackwardModel:
    """One tree ensemble per decision bucket, as plain arrays (what a model file holds).

    Attributes:
        feature, threshold, left, right, missing_left, leaf, value: every tree's nodes,
            concatenated (``left``/``right`` are absolute node indices).
        roots: (T,) the root node of each tree.
        model_trees: (B + 1,) tree offsets: bucket model b owns trees
            ``model_trees[b]:model_trees[b + 1]``.
        baseline: (B,) each bucket model's constant term.
        buckets: (B,) the decision bucket of each model.
        meta: the JSON metadata (features, grid, settings, training record).
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    leaf: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    model_trees: np.ndarray
    baseline: np.ndarray
    buckets: np.ndarray
    meta: dict[str, Any]

    @property
    def smoothed(self) -> bool:
        """Whether the model reads the :data:`SMOOTH_FEATURES` too (its feature set)."""
        return self.meta["features"] == list(FEATURE_SETS["smoothed"])

    @property
    def grid(self) -> int:
        """Decision buckets per run (decision i of K is bucket round(i * grid / K))."""
        return int(self.meta["grid"])

    @functools.cached_property
    def _index(self) -> dict[int, int]:
        return {int(b): j for j, b in enumerate(self.buckets)}

    @functools.cached_property
    def depth(self) -> int:
        """The longest root-to-leaf path (the traversal's step count)."""
        return _max_depth(self.left, self.right, self.leaf, self.roots)

    def has_bucket(self, bucket: int) -> bool:
        """Whether a model was fitted for decision bucket ``bucket``."""
        return bucket in self._index

    def bucket_trees(self, bucket: int) -> tuple[np.ndarray, float]:
        """The root nodes of bucket ``bucket``'s trees, in order, and its baseline."""
        j = self._index[bucket]
        return self.roots[self.model_trees[j] : self.model_trees[j + 1]], float(self.baseline[j])

    def predict(self, bucket: int, x: np.ndarray) -> np.ndarray:
        """(n,) the predicted gain of continuing for feature rows ``x`` (n, F) at ``bucket``.

        The trees of the bucket's model are walked together (NaN goes where the tree
        learned missing values go, a value <= the threshold goes left), and their
        leaf values are added to the baseline in tree order, as scikit-learn adds them.
        """
        roots, baseline = self.bucket_trees(bucket)
        vals = self.value[leaf_nodes(self, roots, np.asarray(x, dtype=float))]
        out = np.full(len(x), baseline)
        for c in range(vals.shape[1]):
            out += vals[:, c]
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """The members of the model file."""
        meta = np.frombuffer(json.dumps(self.meta, sort_keys=True).encode("utf-8"), np.uint8)
        return {**{k: getattr(self, k) for k in ARRAY_KEYS if k != META_KEY}, META_KEY: meta}

    def to_bytes(self) -> bytes:
        """The model file's bytes (a compressed ``.npz`` of :meth:`arrays`)."""
        buf = io.BytesIO()
        np.savez_compressed(buf, **self.arrays())
        return buf.getvalue()

    def save(self, path: str | Path) -> str:
        """Write the model to ``path`` (``.npz``) and its ``.sha256`` record; return the hash."""
        atomic_write(path, self.to_bytes())
        return write_hash_record(path)

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "model file") -> BackwardModel:
        """The model whose file bytes are ``data``: bounded, checked, never unpickled.

        Raises:
            ModelFileError: not a backward-induction model file, or one whose arrays are
                inconsistent (an index out of range, a cycle, a wrong shape).
        """
        bad = f"{where} is not an evalstop-gym backward-induction model (.npz)"
        got, meta = read_members(data, where, bad, len(ARRAY_KEYS) + 4, META_KEY)
        missing = [k for k in ARRAY_KEYS if k != META_KEY and k not in got]
        if missing:
            raise ModelFileError(f"{bad}: no member {missing[0]!r}")
        got = {k: got[k] for k in ARRAY_KEYS if k != META_KEY}
        _check_model(got, meta, bad)
        return cls(
            feature=got["feature"].astype(np.intp),
            threshold=got["threshold"].astype(float),
            left=got["left"].astype(np.intp),
            right=got["right"].astype(np.intp),
            missing_left=got["missing_left"].astype(bool),
            leaf=got["leaf"].astype(bool),
            value=got["value"].astype(float),
            roots=got["roots"].astype(np.intp),
            model_trees=got["model_trees"].astype(np.intp),
            baseline=got["baseline"].astype(float),
            buckets=got["buckets"].astype(np.intp),
            meta=meta,
        )

    @classmethod
    def load(
        cls, path: str | Path, *, sha256: str | None = None, trust: bool = False
    ) -> BackwardModel:
        """The model at ``path``, once its bytes match ``sha256`` or their ``.sha256`` record.

        The bytes are checked first and then parsed (no window to swap the file);
        ``trust=True`` skips the check.  The format holds no code, but an unrecorded
        file is refused as an SB3 one is: what was trained is what plays.

        Raises:
            ModelFileError: a missing or unreadable file, or not a model file.
            evalstop_gym.fileio.UntrustedFileError: its hash differs from the record.
        """
        return cls.from_bytes(read_model_bytes(Path(path), path, trust, sha256), str(path))


def read_members(
    data: bytes, where: str, bad: str, limit: int, meta_key: str
) -> tuple[dict[str, np.ndarray], Any]:
    """The arrays of an untrusted ``.npz`` and its JSON metadata member, bounded and never
    unpickled: at most ``limit`` members of at most :data:`MAX_MEMBER_BYTES` each.

    Raises:
        ModelFileError: ``bad`` and why (not a zip, too large, no metadata, not JSON).
    """
    member_count(data, where, limit)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if info.file_size > MAX_MEMBER_BYTES:
                    raise ModelFileError(
                        f"{bad}: member {info.filename[:80]!r} declares {info.file_size} "
                        f"bytes, at most {MAX_MEMBER_BYTES} allowed"
                    )
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if meta_key not in z.files:
                raise ModelFileError(f"{bad}: no member {meta_key!r}")
            got = {k: z[k] for k in z.files}
    except ModelFileError:
        raise
    except Exception as e:  # untrusted bytes: zipfile, zlib and numpy raise many types
        raise ModelFileError(f"{bad}: {type(e).__name__}: {str(e)[:200]}") from None
    try:
        meta = json.loads(got.pop(meta_key).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ModelFileError(f"{bad}: its metadata is not JSON ({str(e)[:200]})") from None
    return got, meta


def check_grid_and_settings(meta: dict[str, Any], bad: str) -> None:
    """Refuse metadata whose ``grid`` or ``default_settings`` a stopper could not use."""
    grid = meta.get("grid")
    if not isinstance(grid, int) or isinstance(grid, bool) or not 1 <= grid <= 4096:
        raise ModelFileError(f"{bad}: grid must be an integer in [1, 4096]")
    defaults = meta.get("default_settings")
    if not isinstance(defaults, dict) or not all(
        isinstance(defaults.get(s), int | float) and math.isfinite(defaults[s]) for s in SETTINGS
    ):
        raise ModelFileError(f"{bad}: default_settings must give {list(SETTINGS)} as numbers")


def leaf_nodes(forest: Any, roots: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(n, T) the leaf each row of ``x`` (n, F) reaches in each tree rooted at ``roots``.

    ``forest`` holds the node arrays (``feature``, ``threshold``, ``left``, ``right``,
    ``missing_left``, ``leaf``) and ``depth``.  The trees are walked together: NaN goes
    where the tree learned missing values go, a value <= the threshold goes left.
    """
    rows = np.arange(len(x))[:, None]
    node = np.broadcast_to(roots, (len(x), len(roots))).copy()
    for _ in range(forest.depth):
        leaf = forest.leaf[node]
        if leaf.all():
            break
        v = x[rows, forest.feature[node]]
        go_left = np.where(np.isnan(v), forest.missing_left[node], v <= forest.threshold[node])
        nxt = np.where(go_left, forest.left[node], forest.right[node])
        node = np.where(leaf, node, nxt)
    return node


def _max_depth(left: np.ndarray, right: np.ndarray, leaf: np.ndarray, roots: np.ndarray) -> int:
    """The longest root-to-leaf path of the trees (children always follow their parent)."""
    depth = np.zeros(len(leaf), dtype=np.intp)
    inner = np.flatnonzero(~leaf)
    # Parents come before their children (checked), so one forward pass sets every depth.
    for node in inner:
        d = depth[node] + 1
        depth[left[node]] = d
        depth[right[node]] = d
    return int(depth.max(initial=0))


def _check_model(a: dict[str, np.ndarray], meta: Any, bad: str) -> None:
    """Refuse arrays a traversal could index out of, loop in, or misread."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFileError(f"{bad}: metadata format is not {FORMAT!r}")
    features = meta.get("features")
    if not any(features == list(f) for f in FEATURE_SETS.values()):
        raise ModelFileError(
            f"{bad}: its features are none of this version's sets ({sorted(FEATURE_SETS)})"
        )
    check_grid_and_settings(meta, bad)
    n = len(a["feature"])
    if not 0 < n <= MAX_NODES or any(a[k].shape != (n,) for k in NODE_KEYS):
        raise ModelFileError(f"{bad}: node arrays of different lengths or over {MAX_NODES}")
    for k in ("feature", "left", "right", "roots", "model_trees", "buckets"):
        if a[k].dtype.kind not in "iu":
            raise ModelFileError(f"{bad}: {k} must hold integers")
    for k in ("threshold", "value", "baseline"):
        if a[k].dtype.kind != "f":
            raise ModelFileError(f"{bad}: {k} must hold floats")
    leaf = a["leaf"].astype(bool)
    idx = np.arange(n)
    inner = ~leaf
    if inner.any() and not (
        (a["left"][inner] > idx[inner]).all()
        and (a["right"][inner] > idx[inner]).all()
        and (a["left"][inner] < n).all()
        and (a["right"][inner] < n).all()
    ):
        raise ModelFileError(f"{bad}: a node's children are out of range")
    # Every node's feature, leaves too: a traversal reads x at a leaf's feature before it
    # sees that the node is a leaf (scikit-learn's leaves, packed, hold 0).
    if not ((a["feature"] >= 0).all() and (a["feature"] < len(features)).all()):
        raise ModelFileError(f"{bad}: a node's feature is out of range")
    if not np.isfinite(a["value"][leaf]).all() or not np.isfinite(a["baseline"]).all():
        raise ModelFileError(f"{bad}: a leaf value or baseline is not finite")
    t, b = len(a["roots"]), len(a["baseline"])
    mt = a["model_trees"]
    if (
        t == 0
        or not ((a["roots"] >= 0) & (a["roots"] < n)).all()
        or mt.shape != (b + 1,)
        or a["buckets"].shape != (b,)
        or mt[0] != 0
        or mt[-1] != t
        or (np.diff(mt) < 0).any()
        or len(set(a["buckets"].tolist())) != b
    ):
        raise ModelFileError(f"{bad}: tree or bucket offsets are inconsistent")
    if (np.diff(mt) > MAX_BUCKET_TREES).any():
        raise ModelFileError(f"{bad}: a bucket model of more than {MAX_BUCKET_TREES} trees")
    if (
        _max_depth(a["left"].astype(np.intp), a["right"].astype(np.intp), leaf, a["roots"])
        > MAX_DEPTH
    ):
        raise ModelFileError(f"{bad}: a tree deeper than {MAX_DEPTH}")


def settings_for_task(kw: Mapping[str, Any], price_factor: float = 1.0) -> dict[str, float]:
    """The settings (:data:`SETTINGS`) a model is told of the task of env kwargs ``kw``.

    The task's eval noise and its GPU-hour price times ``price_factor``.  On real runs
    (``curves``) a measured eval carries noise of its own: at least the Bayes stopper's
    floor for one (:data:`baselines.bayes.REAL_CURVE_NOISE`) and, on a held-out task,
    the median measured eval sd of its train runs (the figure the suite's scoring tells
    both Bayes stoppers there; a test run's own is never read).
    """
    from evalstop_gym.envs.config import EvalStopConfig

    from .bayes import assumed_eval_noise

    config = EvalStopConfig.from_kwargs(**kw)
    noise = assumed_eval_noise(config.sim_config)
    return {"eval_noise": noise, "gpu_hour_price": float(config.gpu_hour_price) * price_factor}


# ---------------------------------------------------------------------------------------
# The stopper


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


def features_at(
    arrays: EpisodeArrays,
    rows: np.ndarray,
    i: int,
    settings: Mapping[str, float],
    smoothed: bool = False,
) -> np.ndarray:
    """The features of jobs ``rows`` of an episode at decision ``i`` (i evals seen)."""
    return feature_matrix(
        arrays.evals[rows, :i],
        arrays.loss[rows, :i],
        arrays.job_type[rows],
        float(arrays.progress[i - 1]),
        arrays.declines[rows, i - 1],
        settings["eval_noise"],
        settings["gpu_hour_price"],
        smoothed,
    )


# ---------------------------------------------------------------------------------------
# Training


@dataclass(frozen=True)
class TrainingEpisode:
    """One recorded episode to learn from.

    Attributes:
        arrays: What the observation shows of every job (the whole history).
        values: (n, K) each job's utility term if it ends after checkpoint i.
        settings: The task settings of the episode (:data:`SETTINGS`).
    """

    arrays: EpisodeArrays
    values: np.ndarray
    settings: Mapping[str, float]


def fit_backward(
    episodes: Sequence[TrainingEpisode],
    *,
    grid: int | None = None,
    params: Mapping[str, Any] | None = None,
    label: str = "Backward",
    record: Mapping[str, Any] | None = None,
    default_settings: Mapping[str, float] | None = None,
    features: str = DEFAULT_FEATURES,
) -> BackwardModel:
    """Longstaff-Schwartz backward induction over recorded episodes; the fitted model.

    From the last decision bucket to the first: the rows are every job's
    decision in that bucket (features of its observation then), the target its
    realised utility when it continues under the decisions already fitted for
    the later buckets, minus its utility when it stops now; a regressor is fitted
    to them, and the jobs it would stop have their realised path value replaced
    by the stop value, for the earlier buckets' targets.

    Args:
        episodes: The training episodes (their seeds disjoint from any test seed).
        grid: Decision buckets (default the most checkpoints of any episode).
        params: ``HistGradientBoostingRegressor`` settings over :data:`DEFAULT_PARAMS`.
        label: The model's display name.
        record: Training facts stored in the metadata (tasks, seeds, command).
        default_settings: The settings an unbound stopper reads (default: the
            first episode's).
        features: The feature set (:data:`FEATURE_SETS`) the model reads.

    Raises:
        ConfigError: no episodes, or an episode with more checkpoints than ``grid``.
    """
    # scikit-learn first: threadpoolctl limits only the thread pools already loaded.
    import sklearn.ensemble  # noqa: F401
    from threadpoolctl import threadpool_limits

    if features not in FEATURE_SETS:
        raise ConfigError("features", features, f"one of {sorted(FEATURE_SETS)}")
    if not episodes:
        raise ConfigError("episodes", 0, "at least one training episode")
    kmax = max(ep.arrays.k for ep in episodes)
    grid = grid or kmax
    if kmax > grid:
        raise ConfigError("grid", grid, f">= the most checkpoints of an episode ({kmax})")
    conf = {**DEFAULT_PARAMS, **(params or {})}
    # One thread: the fits are small, and OpenMP threads spinning on a busy machine cost
    # more CPU than they save.
    with threadpool_limits(limits=1):
        return _fit(episodes, grid, conf, label, record, default_settings, features)


def _fit(
    episodes: Sequence[TrainingEpisode],
    grid: int,
    conf: dict[str, Any],
    label: str,
    record: Mapping[str, Any] | None,
    default_settings: Mapping[str, float] | None,
    features: str,
) -> BackwardModel:
    """:func:`fit_backward`'s induction, on its checked arguments."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    smoothed = features == "smoothed"
    cont = [ep.values[:, -1].astype(float).copy() for ep in episodes]
    # Each bucket's decision index in each episode (None: no decision of that episode there).
    at = [{bucket_of(i, ep.arrays.k, grid): i for i in range(1, ep.arrays.k)} for ep in episodes]
    trees: list[list[np.ndarray]] = []
    baselines, buckets = [], []
    for b in range(grid - 1, 0, -1):
        parts = [(e, at[e][b]) for e in range(len(episodes)) if b in at[e]]
        if not parts:
            continue
        xs, ys = [], []
        for e, i in parts:
            ep = episodes[e]
            rows = np.arange(ep.arrays.evals.shape[0])
            xs.append(features_at(ep.arrays, rows, i, ep.settings, smoothed))
            ys.append(cont[e] - ep.values[:, i - 1])
        x, y = np.concatenate(xs), np.concatenate(ys)
        # A feature no row has yet (the 6th-last eval at the 3rd decision) is a constant to
        # the trees: scikit-learn cannot bin an all-NaN column.
        empty = np.isnan(x).all(axis=0)
        x[:, empty] = 0.0
        reg = HistGradientBoostingRegressor(**conf).fit(x, y)
        stop = reg.predict(x) < 0.0
        at_row = 0
        for e, i in parts:
            n = episodes[e].values.shape[0]
            s = stop[at_row : at_row + n]
            cont[e][s] = episodes[e].values[s, i - 1]
            at_row += n
        trees.append([p.nodes for p in (it[0] for it in reg._predictors)])
        baselines.append(float(np.asarray(reg._baseline_prediction).ravel()[0]))
        buckets.append(b)
    first = episodes[0].settings
    meta = {
        "format": FORMAT,
        "features": list(FEATURE_SETS[features]),
        "settings": list(SETTINGS),
        "grid": int(grid),
        "label": label,
        "params": conf,
        "default_settings": {s: float((default_settings or first)[s]) for s in SETTINGS},
        "episodes": len(episodes),
        **({"record": dict(record)} if record else {}),
    }
    return pack_model(trees[::-1], baselines[::-1], buckets[::-1], meta)


def pack_model(
    trees: list[list[np.ndarray]], baselines: list[float], buckets: list[int], meta: dict
) -> BackwardModel:
    """Concatenate scikit-learn's per-tree node records into one model's arrays."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in NODE_KEYS}
    roots, model_trees, offset = [], [0], 0
    for bucket_trees in trees:
        for nodes in bucket_trees:
            leaf = nodes["is_leaf"].astype(bool)
            if nodes["is_categorical"].any():
                raise ValueError("categorical splits are not stored (no feature is categorical)")
            cols["feature"].append(np.where(leaf, 0, nodes["feature_idx"]).astype(np.int16))
            cols["threshold"].append(nodes["num_threshold"].astype(float))
            cols["left"].append(np.where(leaf, 0, nodes["left"].astype(np.int64) + offset))
            cols["right"].append(np.where(leaf, 0, nodes["right"].astype(np.int64) + offset))
            cols["missing_left"].append(nodes["missing_go_to_left"].astype(bool))
            cols["leaf"].append(leaf)
            cols["value"].append(nodes["value"].astype(float))
            roots.append(offset)
            offset += len(nodes)
        model_trees.append(len(roots))
    arr = {k: np.concatenate(v) for k, v in cols.items()}
    arr["left"] = arr["left"].astype(np.int32)
    arr["right"] = arr["right"].astype(np.int32)
    model = BackwardModel(
        **arr,
        roots=np.asarray(roots, dtype=np.int32),
        model_trees=np.asarray(model_trees, dtype=np.int32),
        baseline=np.asarray(baselines, dtype=float),
        buckets=np.asarray(buckets, dtype=np.int32),
        meta=meta,
    )
    # Through the file format's own checks, so a fitted model is one a file can hold.
    buf = io.BytesIO()
    np.savez(buf, **model.arrays())
    return BackwardModel.from_bytes(buf.getvalue(), "fitted model")
