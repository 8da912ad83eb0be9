"""EvalStopStopper in a real (tiny) Ray Tune run: one declining trial, one healthy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray")
try:
    from ray import tune
except ImportError as exc:  # ray without its tune extra (pandas, pyarrow ...)
    pytest.skip(f"ray.tune does not import: {exc}", allow_module_level=True)

from baselines import EvalStop
from baselines.online import OnlineStopper
from evalstop_gym.errors import ConfigError
from evalstop_integrations.ray_tune import EvalStopStopper

N, PEAK = 10, 4


def curve(kind: str) -> list[float]:
    steps = np.arange(N, dtype=float)
    if kind == "healthy":
        return list(np.log1p(steps))
    return list(np.log1p(np.minimum(steps, PEAK)) - 0.3 * np.maximum(steps - PEAK, 0))


def train_fn(config: dict) -> None:
    for value in curve(config["kind"]):
        tune.report({"score": float(value)})


def test_the_stopper_without_ray_running_matches_the_offline_replay() -> None:
    stop = EvalStopStopper(EvalStop(2), metric="score", mode="min", n_checkpoints=N)
    values = [-v for v in curve("declining")]
    said = [stop("t", {"score": v, "training_iteration": i + 1}) for i, v in enumerate(values)]
    offline = OnlineStopper(EvalStop(2), N, greater_is_better=False)
    for i, v in enumerate(values):
        if offline.observe(v, step=i + 1):
            break
    assert said.index(True) + 1 == offline.stop_step == PEAK + 3
    assert all(said[said.index(True) :])  # once stopped, it stays stopped
    assert stop.stopper("t").best_step == offline.best_step == PEAK + 1
    again = EvalStopStopper(EvalStop(2), metric="score", n_checkpoints=N)
    assert again("v", {"score": 1.0, "training_iteration": 1}) is False
    assert again("v", {"score": 1.0, "training_iteration": 1}) is False  # Tune's repeat
    assert len(again.stopper("v").decisions) == 1
    assert stop("t", {"other": 1.0}) is True and stop("u", {"other": 1.0}) is False
    assert stop.stop_all() is False and stop.trials == ["t", "u"]


def test_bad_arguments_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="mode='maximise'"):
        EvalStopStopper(metric="score", mode="maximise", n_checkpoints=3)
    with pytest.raises(ConfigError, match="n_checkpoints"):
        EvalStopStopper(metric="score", n_checkpoints=-1)


@pytest.mark.slow
def test_a_tune_run_stops_the_declining_trial(tmp_path) -> None:
    import sys

    import ray
    from ray import cloudpickle

    from evalstop_gym.parallel import ray_runtime_env

    stop = EvalStopStopper(EvalStop(2), metric="score", mode="max", n_checkpoints=N)
    # The workers cannot import this test file by name: ship its functions by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env=ray_runtime_env()
    )
    try:
        grid = tune.Tuner(
            train_fn,
            param_space={"kind": tune.grid_search(["declining", "healthy"])},
            run_config=tune.RunConfig(stop=stop, storage_path=str(tmp_path), verbose=0),
        ).fit()
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    iterations = {r.config["kind"]: r.metrics["training_iteration"] for r in grid}
    assert iterations == {"declining": PEAK + 3, "healthy": N}
    assert sorted(stop.stopper(t).stopped for t in stop.trials) == [False, True]
