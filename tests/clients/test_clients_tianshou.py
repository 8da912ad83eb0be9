"""Tianshou 2.x DQN trains on EvalStopFlat-v0 (its buffer refuses NaN/None in info)."""

from __future__ import annotations

import math

import pytest
from readme_snippets import run_snippet

pytest.importorskip("tianshou")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
def test_tianshou_snippet_from_the_readme() -> None:
    result = run_snippet("tianshou")["result"]
    assert result.train_step > 0
    assert math.isfinite(result.best_reward)
