"""Several backward models' trees walked as one: a routed decision's single traversal."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backward import BackwardModel, leaf_nodes


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
