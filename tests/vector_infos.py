"""One check the vector env's tests share: two vector-env ``info`` dicts are the same."""

from __future__ import annotations

import numpy as np


def assert_same_info(got: dict, want: dict) -> None:
    """The same keys in the same order, dtypes, shapes and bytes, nested dicts alike."""
    assert list(got) == list(want)
    for k, v in want.items():
        if isinstance(v, dict):
            assert_same_info(got[k], v)
        elif v.dtype == object:  # final_obs: one observation (or None) per sub-environment
            for a, b in zip(got[k], v, strict=True):
                if b is None:
                    assert a is None
                elif isinstance(b, dict):
                    assert a.keys() == b.keys() and all((a[f] == b[f]).all() for f in b)
                else:
                    np.testing.assert_array_equal(a, b)
        else:
            assert got[k].dtype == v.dtype and got[k].shape == v.shape
            assert got[k].tobytes() == v.tobytes()
