"""Training a backward-induction model: Longstaff-Schwartz backward induction.

One regressor per decision bucket, from the last decision to the first, each fitted to
the *realised* utility of continuing under the decisions already fitted after it, minus
the utility of stopping now (:func:`fit_backward`, over :class:`TrainingEpisode`s);
scikit-learn's ``HistGradientBoostingRegressor`` (imported only to train), its trees
packed into a :class:`~baselines.backward_parts.model.BackwardModel` (:func:`pack_model`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalstop_gym.errors import ConfigError

from ..floors import EpisodeArrays
from .features import DEFAULT_FEATURES, FEATURE_SETS, SETTINGS, bucket_of, features_at
from .model import BackwardModel
from .modelfile import FORMAT, NODE_KEYS

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
