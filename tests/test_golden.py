"""Optimisations keep results bit-identical: whole episodes against stored values."""

from __future__ import annotations

import json

import pytest
from golden_episodes import FIXTURE, collect


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    return collect()


def test_fixture_covers_every_case(results: dict[str, dict]) -> None:
    stored = json.loads(FIXTURE.read_text())
    assert sorted(stored) == sorted(results)


@pytest.mark.parametrize("case", sorted(json.loads(FIXTURE.read_text())))
def test_episode_matches_stored_values(case: str, results: dict[str, dict]) -> None:
    stored = json.loads(FIXTURE.read_text())[case]
    got = results[case]
    # Metrics added later are not in the fixture: compare the stored ones only.
    diff = {k: (v, got["metrics"].get(k)) for k, v in stored["metrics"].items()}
    assert {k: v for k, v in diff.items() if v[0] != v[1]} == {}
    assert {k: v for k, v in got.items() if k != "metrics"} == {
        k: v for k, v in stored.items() if k != "metrics"
    }
