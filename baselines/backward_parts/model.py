"""The backward-induction model: one tree ensemble per decision bucket, as plain arrays.

A :class:`BackwardModel` predicts the gain of continuing at a decision bucket from
feature rows, and is what a model file holds (:meth:`BackwardModel.save`,
:meth:`BackwardModel.load`: loading never runs code and needs numpy only).
"""

from __future__ import annotations

import functools
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.fileio import atomic_write, write_hash_record

from .features import FEATURE_SETS
from .modelfile import (
    ARRAY_KEYS,
    META_KEY,
    ModelFileError,
    check_model,
    read_members,
    read_model_bytes,
)
from .trees import leaf_nodes, max_depth


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
        return max_depth(self.left, self.right, self.leaf, self.roots)

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
        check_model(got, meta, bad)
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
