"""A fixed split of a corpus's runs into train and test, by run and by grid cell.

Every consumer of a real-run corpus (the held-out real-run task, the learned stoppers,
the signal experiment) tunes and trains on the *train* runs and scores on the *test*
runs of the same split, so that nothing scored was ever seen.  The split is

* **by grid cell**: runs that differ only by their seed (``run_id`` ending in
  ``-s<digits>``, or the same ``meta["cell"]``) always fall on the same side, so no
  stopper is scored on a cell it was tuned on;
* **stratified by label**: cells with a hacking run and cells without are split
  separately, so both sides hold about ``test_fraction`` of each;
* **fixed and order-free**: a cell's side depends only on its name and ``salt``
  (its SHA-256 rank within its stratum), not on the corpus's order or size, so adding
  runs to a corpus never moves an old cell to the other side unless a stratum's quota
  does.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import ConfigError
from .format import CurveTrace

#: The default share of cells held out for scoring.
TEST_FRACTION = 0.5
#: The default salt of the split's hash (change it only to draw a different split).
SALT = "evalstop-split-v1"
#: The sides a caller may ask for.
SIDES = ("train", "test", "all")

_SEED_SUFFIX = re.compile(r"-s\d+$")


class RunSplit(NamedTuple):
    """The run ids on each side of a split (each tuple sorted)."""

    train: tuple[str, ...]
    test: tuple[str, ...]

    def side(self, name: str) -> tuple[str, ...]:
        """The run ids of side ``name`` ("train", "test" or "all")."""
        check_side(name)
        if name == "all":
            return tuple(sorted(self.train + self.test))
        return self.train if name == "train" else self.test


def check_side(name: str) -> str:
    """``name`` if it is a side of :data:`SIDES`; else a :class:`ConfigError`."""
    if name not in SIDES:
        raise ConfigError("split", name, f"one of {list(SIDES)}")
    return name


def cell_of(trace: CurveTrace) -> str:
    """The grid cell of a run: ``meta["cell"]`` if given, else its id without ``-s<seed>``."""
    cell = trace.meta.get("cell") if trace.meta else None
    if isinstance(cell, str) and cell:
        return cell
    return _SEED_SUFFIX.sub("", trace.run_id)


def _rank_key(cell: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}\0{cell}".encode()).hexdigest()


def split_runs(
    traces: Sequence[CurveTrace], test_fraction: float = TEST_FRACTION, salt: str = SALT
) -> RunSplit:
    """Split ``traces`` into train and test runs, by cell, stratified by label.

    A cell is *hacking* when any of its runs is labelled hacking.  Within each stratum
    the cells are ranked by SHA-256 of ``salt`` and the cell name; the first
    ``round(test_fraction * n)`` go to test (at least one and at most n - 1 when the
    stratum has two or more cells).

    Raises:
        ConfigError: ``test_fraction`` outside (0, 1), or two runs with the same id.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError("test_fraction", test_fraction, "a number strictly between 0 and 1")
    ids = [t.run_id for t in traces]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[0]
        raise ConfigError("traces", dup, "a corpus whose run ids are unique")
    cells: dict[str, list[CurveTrace]] = {}
    for t in traces:
        cells.setdefault(cell_of(t), []).append(t)
    strata: dict[bool, list[str]] = {True: [], False: []}
    for cell, runs in cells.items():
        strata[any(bool(r.label) for r in runs)].append(cell)
    test_cells: set[str] = set()
    for members in strata.values():
        ranked = sorted(members, key=lambda c: _rank_key(c, salt))
        n = len(ranked)
        k = round(test_fraction * n)
        if n >= 2:
            k = min(max(k, 1), n - 1)
        test_cells.update(ranked[:k])
    train = tuple(sorted(t.run_id for t in traces if cell_of(t) not in test_cells))
    test = tuple(sorted(t.run_id for t in traces if cell_of(t) in test_cells))
    return RunSplit(train, test)


def select(traces: Sequence[CurveTrace], split: RunSplit, side: str) -> list[CurveTrace]:
    """The traces of ``side`` of ``split``, in their corpus order."""
    keep = set(split.side(side))
    return [t for t in traces if t.run_id in keep]
