"""E12's bootstrap CIs: the resamples drawn once and the shares over a matrix of them are
the numbers the per-resample loop gives, bit for bit."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_experiments.experiments import signals as e12mod

# detection_row looks _first_stop and _boot up in the module that defines it.
from evalstop_experiments.experiments.signals_parts import detection as e12det


def test_resamples_are_the_one_at_a_time_draws() -> None:
    for n, n_boot, seed in ((1, 5, 0), (7, 300, 0), (24, 2000, 3)):
        rng = np.random.default_rng(seed)
        want = [rng.integers(0, n, n) for _ in range(n_boot)]
        got = e12mod._resamples(n, n_boot, seed)
        assert got.shape == (n_boot, n) and not got.flags.writeable
        np.testing.assert_array_equal(got, np.array(want))


def _row(monkeypatch, stops, hacking, peak_ckpt, k, batched: bool):
    runs = iter(stops)
    monkeypatch.setattr(e12det, "_first_stop", lambda policy, run: next(runs))
    if not batched:
        per_draw = e12det._boot
        monkeypatch.setattr(
            e12det, "_boot", lambda fn, n, n_boot, batch=None: per_draw(fn, n, n_boot)
        )
    n = len(stops)
    test = SimpleNamespace(
        observations=[[None] * k for _ in range(n)],
        hacking=np.asarray(hacking, bool),
        peak_ckpt=np.asarray(peak_ckpt),
        peak_progress=(np.asarray(peak_ckpt) + 0.5) / k,
    )
    det = e12mod.Detector("d", "evals", "policy", ("evals",), 0.5)
    return e12mod.detection_row(det, test, n_boot=200)


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 30),
    k=st.integers(2, 20),
)
def test_detection_row_batched_equals_the_per_resample_loop(data, n, k) -> None:
    """Every CI of a detection row, with the batched shares and with the loop (NaNs too)."""
    stops = data.draw(st.lists(st.integers(-1, k - 1), min_size=n, max_size=n))
    hacking = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    peak = data.draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    with pytest.MonkeyPatch.context() as mp:
        batched = _row(mp, stops, hacking, peak, k, True)
    with pytest.MonkeyPatch.context() as mp:
        looped = _row(mp, stops, hacking, peak, k, False)
    assert batched.keys() == looped.keys()
    for key, value in batched.items():
        other = looped[key]
        if isinstance(value, float) and math.isnan(value):
            assert isinstance(other, float) and math.isnan(other), key
        else:
            assert value == other and type(value) is type(other), key
