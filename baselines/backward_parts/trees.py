"""Trees as node arrays, walked: the leaf each row reaches, and the deepest path.

A model's trees (and a routed model's several models' trees joined) are plain node
arrays; :func:`leaf_nodes` walks them together for many rows at once and
:func:`max_depth` bounds the walk.
"""

from __future__ import annotations

from typing import Any

import numpy as np


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


def max_depth(left: np.ndarray, right: np.ndarray, leaf: np.ndarray, roots: np.ndarray) -> int:
    """The longest root-to-leaf path of the trees (children always follow their parent)."""
    depth = np.zeros(len(leaf), dtype=np.intp)
    inner = np.flatnonzero(~leaf)
    # Parents come before their children (checked), so one forward pass sets every depth.
    for node in inner:
        d = depth[node] + 1
        depth[left[node]] = d
        depth[right[node]] = d
    return int(depth.max(initial=0))
