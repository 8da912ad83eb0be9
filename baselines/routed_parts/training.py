"""Training a routed model: one backward model per regime, and the regime classifiers.

:func:`fit_routed` fits each regime's expert by backward induction
(:func:`~baselines.backward.fit_backward`) and, per decision bucket, a scikit-learn
``HistGradientBoostingClassifier`` of the regime, packed as one score model per regime.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evalstop_gym.errors import ConfigError

from ..backward import (
    FEATURE_SETS,
    FORMAT,
    SETTINGS,
    BackwardModel,
    TrainingEpisode,
    bucket_of,
    features_at,
    fit_backward,
    pack_model,
)
from .model import MAX_REGIMES, ROUTED_FORMAT, RoutedModel

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
