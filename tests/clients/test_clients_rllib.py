"""Ray RLlib (new API stack) trains PPO on EvalStopFlat-v0 with a remote env runner.

``ray[rllib]`` pins an older Gymnasium than the main suite's, so CI runs this
file in its own virtual environment (``.ci/run``); elsewhere it is skipped.
"""

from __future__ import annotations

import math

import pytest
from readme_snippets import run_snippet

pytest.importorskip("ray.rllib")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
def test_rllib_snippet_from_the_readme(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    # One intra-op thread in the driver and in Ray's workers (they inherit it).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    try:
        ns = run_snippet("rllib")
    finally:
        ray.shutdown()
    assert ns["config"].num_env_runners == 1  # the env is built in another process
    runners = ns["result"]["env_runners"]
    assert runners["num_episodes_lifetime"] > 0
    assert math.isfinite(runners["episode_return_mean"])
