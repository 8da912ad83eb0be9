"""Optimisations keep results bit-identical: whole episodes against stored values.

Two fixtures: ``golden_episodes`` (the engine of commit 1524925, default
regimes) and ``golden_regimes`` (commit e0ed0e9: jitter, pools, paid costs,
deprioritising, the cluster and flat envs).
"""

from __future__ import annotations

import json
from types import ModuleType

import golden_episodes
import golden_regimes
import pytest

SOURCES = {"episodes": golden_episodes, "regimes": golden_regimes}
CASES = [
    (name, case)
    for name, mod in SOURCES.items()
    for case in sorted(json.loads(mod.FIXTURE.read_text()))
]
_results: dict[str, dict[str, dict]] = {}


def _collected(mod: ModuleType) -> dict[str, dict]:
    """Every case of a fixture's module, run once per test session."""
    if mod.__name__ not in _results:
        _results[mod.__name__] = mod.collect()
    return _results[mod.__name__]


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_fixture_covers_every_case(source: str) -> None:
    mod = SOURCES[source]
    stored = json.loads(mod.FIXTURE.read_text())
    assert sorted(stored) == sorted(_collected(mod))


@pytest.mark.parametrize(("source", "case"), CASES)
def test_episode_matches_stored_values(source: str, case: str) -> None:
    mod = SOURCES[source]
    stored = json.loads(mod.FIXTURE.read_text())[case]
    got = _collected(mod)[case]
    # Metrics added later are not in the fixture: compare the stored ones only.
    diff = {k: (v, got["metrics"].get(k)) for k, v in stored["metrics"].items()}
    assert {k: v for k, v in diff.items() if v[0] != v[1]} == {}
    assert {k: v for k, v in got.items() if k != "metrics"} == {
        k: v for k, v in stored.items() if k != "metrics"
    }
