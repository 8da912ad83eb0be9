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


def test_a_mistyped_metric_is_named_once_with_the_keys_there_are() -> None:
    """A mistyped metric never stopped a trial, and nothing said so."""
    import warnings

    stop = EvalStopStopper(EvalStop(2), metric="scroe", n_checkpoints=5)
    with pytest.warns(UserWarning, match=r"metric='scroe' is in none .*did you mean 'score'"):
        assert stop("t", {"score": 1.0, "training_iteration": 1}) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stop("t", {"score": 0.5, "training_iteration": 2}) is False  # said once


def test_a_metric_reported_every_few_results_is_not_warned_about() -> None:
    """A trial that evaluates every third iteration reports results without the metric:
    that is no typo (the first version warned at the first such result)."""
    import warnings

    stop = EvalStopStopper(EvalStop(2), metric="eval_acc", n_checkpoints=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(1, 16):
            result = {"loss": 1.0 / i, "training_iteration": i}
            if i % 3 == 0:
                result["eval_acc"] = 0.1 * i
            stop("t", result)
    assert len(stop.stopper("t").decisions) == 5
    # No result of a trial ever carrying it, over n_checkpoints results: said once.
    other = EvalStopStopper(EvalStop(2), metric="accuracy", n_checkpoints=3)
    for i in (1, 2):
        other("t", {"loss": 1.0, "training_iteration": i})
    with pytest.warns(UserWarning, match="is in none of trial t's 3 results"):
        other("t", {"loss": 1.0, "training_iteration": 3})


def test_without_a_step_key_every_result_with_the_metric_is_an_evaluation() -> None:
    stop = EvalStopStopper(EvalStop(2), metric="score", n_checkpoints=5, step_key=None)
    for value in (0.5, 0.7, 0.6, 0.5):
        stop("t", {"score": value})
    assert [d["value"] for d in stop.stopper("t").decisions] == [0.5, 0.7, 0.6, 0.5]


@pytest.mark.parametrize("step", [0.5, 1.5, float("nan"), "abc", float("inf")])
def test_a_step_that_is_not_a_whole_number_is_refused(step) -> None:
    """``step_key="epoch"`` with epochs 0.5, 1.0, 1.5 made steps 0, 1, 1: the 1.5 result
    was dropped as a repeat; a NaN or string step was a ValueError from ``int``."""
    stop = EvalStopStopper(EvalStop(2), metric="score", n_checkpoints=5, step_key="epoch")
    assert stop("t", {"score": 1.0, "epoch": 1.0}) is False  # 1.0 is a whole step
    with pytest.raises(ConfigError, match=r"epoch=.* is not allowed: a whole number"):
        stop("t", {"score": 0.9, "epoch": step})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"policy": EvalStop}, "not its class"),
        ({"job_type": "bogus"}, "job_type='bogus'"),
        ({"scale": "bogus"}, "scale='bogus'"),
        (
            {"n_checkpoints": 10**12},
            r"n_checkpoints=1000000000000 is not allowed: an integer in \[1, 100000\]",
        ),
        ({"step_key": []}, "step_key=\\[\\]"),
        ({"step_key": ""}, "step_key=''"),
    ],
)
def test_arguments_that_failed_only_at_the_first_result_fail_at_construction(kwargs, match) -> None:
    args = {"metric": "score", "n_checkpoints": 5, **kwargs}
    with pytest.raises(ConfigError, match=match):
        EvalStopStopper(**args)


def test_a_value_beyond_float_range_is_skipped_as_non_finite() -> None:
    """``10**400`` raised OverflowError from ``float()``; like inf, it is not fed."""
    stop = EvalStopStopper(EvalStop(2), metric="score", n_checkpoints=5)
    assert stop("t", {"score": 10**400, "training_iteration": 1}) is False
    assert stop.stopper("t").decisions == []


FIXED_K = [
    pytest.param(lambda: __import__("baselines").BayesStopper.for_task("hard-0.12"), id="Bayes"),
    pytest.param(
        lambda: pytest.importorskip("baselines.learned").Learned.pretrained("hard"), id="Learned"
    ),
]
#: 20 evaluations (the models' K) that rise, then fall.
PEAKED = [0.3 + 0.03 * i for i in range(12)] + [0.63 - 0.05 * i for i in range(1, 9)]


@pytest.mark.parametrize("make", FIXED_K)
def test_a_stopper_of_fixed_k_or_that_copies_deeply_decides_as_the_online_stopper(make) -> None:
    """Bayes (K fixed by its calibration) and Learned (a torch model, copied per trial):
    the construction check built a 2-checkpoint stopper and refused both."""
    stop = EvalStopStopper(make(), metric="score", n_checkpoints=20)
    online = OnlineStopper(make(), 20)
    for i, value in enumerate(PEAKED, start=1):
        got = stop("t", {"score": value, "training_iteration": i})
        assert got == online.observe(value, step=i)
    assert stop.stopper("t").decisions == online.decisions
