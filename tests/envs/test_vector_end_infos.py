"""The vector env's episode-end infos, built column by column, against Gymnasium's ``_add_info``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from vector_infos import assert_same_info

from evalstop_gym.envs.vector import EvalStopVectorEnv

KEYS = ("n_jobs", "mean_jct_h", "detection_delay_evals", "return", "precision")
N = 5


def _ended(values: st.SearchStrategy) -> st.SearchStrategy:
    """Lists of (sub-environment, metrics), one per sub-environment, in index order."""
    metrics = st.dictionaries(st.sampled_from(KEYS), values, min_size=1)
    return st.lists(st.tuples(st.integers(0, N - 1), metrics), min_size=1, max_size=N).map(
        lambda pairs: sorted(dict(pairs).items())
    )


# Python floats (the column path), or some integers among them (the general path: kept
# finite and small, what Gymnasium's own integer arrays can hold).
_any_ended = _ended(st.floats(allow_nan=True, allow_infinity=True)) | _ended(
    st.integers(-3, 3) | st.floats(-10.0, 10.0)
)


@settings(max_examples=150, deadline=None)
@given(ended=_any_ended, same_step=st.booleans(), flatten=st.booleans())
def test_end_infos_are_add_infos_bytes(
    ended: list[tuple[int, dict]], same_step: bool, flatten: bool
) -> None:
    # Ended episodes with different key sets (an undefined metric is left out), NaNs,
    # infinities and, for the general path, integers.
    mode = "SameStep" if same_step else "NextStep"
    venv = EvalStopVectorEnv(N, flatten=flatten, autoreset_mode=mode, n_jobs=2)
    want: dict = {}
    for i, metrics in ended:
        extra: dict = {"episode_metrics": metrics}
        if same_step:
            final = np.zeros(venv.layout.width, np.float32)
            extra = {
                "final_obs": final if flatten else venv.layout.split(final),
                "final_info": extra,
            }
        want = venv._add_info(want, extra, i)
    assert_same_info(venv._end_infos(ended), want)
