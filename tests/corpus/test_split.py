"""The fixed train/test split of a corpus: by cell, stratified, order-free, checked input."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.corpus import CurveTrace
from evalstop_gym.corpus.packaged import load_corpus
from evalstop_gym.corpus.split import cell_of, select, split_runs
from evalstop_gym.errors import ConfigError


def _trace(run_id: str, label: bool, cell: str | None = None) -> CurveTrace:
    meta = {"cell": cell} if cell else {}
    return CurveTrace(run_id, np.arange(3), np.zeros(3), np.ones(3), label=label, meta=meta)


def test_seeds_of_a_cell_stay_together_and_strata_are_split():
    traces = [_trace(f"c{c}-s{s}", label=c % 2 == 0) for c in range(10) for s in range(3)]
    split = split_runs(traces)
    test_cells = {cell_of(t) for t in traces if t.run_id in split.test}
    train_cells = {cell_of(t) for t in traces if t.run_id in split.train}
    assert not test_cells & train_cells
    # 5 cells per stratum, round(0.5 * 5) = 2 of each held out (3 seeds a cell).
    assert len(test_cells) == 4
    for label in (True, False):
        side = [t for t in traces if bool(t.label) == label and t.run_id in split.test]
        assert len(side) == 6
    assert sorted(split.train + split.test) == sorted(t.run_id for t in traces)


def test_split_ignores_order_and_meta_cell_wins():
    traces = [_trace(f"r{i}", label=i < 4, cell=f"cell{i // 2}") for i in range(12)]
    a = split_runs(traces)
    b = split_runs(list(reversed(traces)))
    assert a == b
    for i in range(0, 12, 2):
        assert (f"r{i}" in a.test) == (f"r{i + 1}" in a.test)


def test_packaged_corpus_split_is_fixed_and_balanced():
    traces = load_corpus("trl_gao")
    split = split_runs(traces)
    assert len(split.train) + len(split.test) == len(traces)
    test = select(traces, split, "test")
    assert [t.run_id for t in test] == [t.run_id for t in traces if t.run_id in split.test]
    hack_test = sum(bool(t.label) for t in test)
    hack_all = sum(bool(t.label) for t in traces)
    assert abs(hack_test - hack_all / 2) <= 1


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, float("nan")])
def test_bad_fraction_is_refused(bad):
    with pytest.raises(ConfigError, match="test_fraction"):
        split_runs([_trace("a", True)], test_fraction=bad)


def test_duplicate_ids_and_bad_side_are_refused():
    with pytest.raises(ConfigError, match="unique"):
        split_runs([_trace("a", True), _trace("a", False)])
    split = split_runs([_trace("a", True), _trace("b", True)])
    with pytest.raises(ConfigError, match="split"):
        split.side("valid")
