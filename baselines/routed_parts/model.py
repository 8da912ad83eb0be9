"""The routed model: per-regime experts and per-bucket regime classifiers, and its file.

A :class:`RoutedModel` holds one backward model per regime (its experts) and the
classifiers' raw regime scores as backward models too; its file is an ``.npz`` of their
own model files and a JSON metadata member, bounded and checked before use.
"""

from __future__ import annotations

import functools
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backward import (
    FEATURE_SETS,
    BackwardModel,
    ModelFileError,
    check_grid_and_settings,
    read_members,
    read_model_bytes,
)
from .evidence import averaged_gain, regime_log_probs
from .forest import JointForest

#: The format tag of a routed model file's metadata.
ROUTED_FORMAT = "evalstop-gym-routed-1"
#: The metadata member (JSON bytes as a uint8 array).
ROUTED_META = "routed_json"
#: The most regimes a routed model may hold.
MAX_REGIMES = 16


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
