"""EvalStopPruner in a real (tiny) Optuna study with a planted decline in some trials."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from baselines import EvalStop  # noqa: E402
from baselines.online import OnlineStopper  # noqa: E402
from evalstop_gym.errors import ConfigError  # noqa: E402
from evalstop_integrations.optuna import EvalStopPruner  # noqa: E402

N = 12
PEAK = 5  # the declining trials peak at this step


def curve(kind: str, noise_seed: int) -> np.ndarray:
    """A trial's reported values: healthy ones rise; declining ones peak at PEAK, then fall."""
    steps = np.arange(N, dtype=float)
    jitter = np.random.default_rng(noise_seed).normal(0.0, 0.002, N)
    if kind == "healthy":
        return np.log1p(steps) + jitter
    return np.log1p(np.minimum(steps, PEAK)) - 0.3 * np.maximum(steps - PEAK, 0) + jitter


def run_study(direction: str, pruner: EvalStopPruner) -> tuple[optuna.Study, dict[int, np.ndarray]]:
    sign = 1.0 if direction == "maximize" else -1.0
    reported: dict[int, np.ndarray] = {}

    def objective(trial: optuna.Trial) -> float:
        kind = trial.suggest_categorical("kind", ["healthy", "declining"])
        values = sign * curve(kind, trial.number)
        reported[trial.number] = values
        for step, value in enumerate(values):
            trial.report(float(value), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return float(values[-1])

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction=direction, pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=0)
    )
    study.optimize(objective, n_trials=8)
    return study, reported


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_it_prunes_the_declining_trials_where_the_stopper_says(direction: str) -> None:
    pruner = EvalStopPruner(EvalStop(2), n_checkpoints=N)
    study, reported = run_study(direction, pruner)
    kinds = {t.number: t.params["kind"] for t in study.trials}
    assert set(kinds.values()) == {"healthy", "declining"}
    for trial in study.trials:
        pruned = trial.state == optuna.trial.TrialState.PRUNED
        assert pruned == (kinds[trial.number] == "declining"), trial.number
        # The same values fed offline decide the same: stop two declines after the peak.
        offline = OnlineStopper(EvalStop(2), N, greater_is_better=direction == "maximize")
        for step, value in enumerate(reported[trial.number]):
            if offline.observe(float(value), step=step):
                break
        assert offline.stopped == pruned
        if pruned:
            assert trial.last_step == offline.stop_step == PEAK + 2
            assert pruner.stopper(study, trial).best_step == offline.best_step == PEAK


def test_a_restored_pruner_decides_the_same() -> None:
    pruner = EvalStopPruner(EvalStop(2), n_checkpoints=N)
    study, _ = run_study("maximize", pruner)
    fresh = pickle.loads(pickle.dumps(EvalStopPruner(EvalStop(2), n_checkpoints=N)))
    for trial in study.trials:
        assert fresh.prune(study, trial) == pruner.prune(study, trial)


def test_bad_arguments_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="n_checkpoints"):
        EvalStopPruner(EvalStop(2))
    with pytest.raises(ConfigError, match="policy"):
        EvalStopPruner("EvalStop", n_checkpoints=3)


def test_the_readme_optuna_snippet_runs() -> None:
    from readme_snippets import run_snippet

    study = run_snippet("live-optuna")["study"]
    states = {t.number: t.state for t in study.trials}
    high = [t.number for t in study.trials if t.params["lr"] >= 0.3]
    assert high, "the sampler drew no learning rate that peaks early"
    assert all(states[n] == optuna.trial.TrialState.PRUNED for n in high)
    assert all(t.last_step == 7 for t in study.trials if t.number in high)
    assert all(
        states[t.number] == optuna.trial.TrialState.COMPLETE
        for t in study.trials
        if t.number not in high
    )


def test_a_pruner_reused_for_a_new_study_of_the_same_name_decides_afresh() -> None:
    """Its state was kept by (study name, trial number): trial 0 of a second study named
    like the first picked up the first's stopped stopper and a rising trial was pruned."""
    pruner = EvalStopPruner(EvalStop(2), n_checkpoints=10)
    declining = [0.5, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
    rising = [0.1 * i for i in range(1, 11)]

    def study_of(values: list[float], every: int) -> optuna.Study:
        def objective(trial: optuna.Trial) -> float:
            for step, value in enumerate(values):
                trial.report(value, step)
                if step % every == every - 1 and trial.should_prune():
                    raise optuna.TrialPruned()
            return values[-1]

        study = optuna.create_study(direction="maximize", pruner=pruner, study_name="sweep")
        study.optimize(objective, n_trials=1)
        return study

    assert study_of(declining, 1).trials[0].state == optuna.trial.TrialState.PRUNED
    second = study_of(rising, 5).trials[0]
    assert second.state == optuna.trial.TrialState.COMPLETE


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"policy": EvalStop}, "not its class"),
        ({"job_type": "bogus"}, "job_type='bogus'"),
        ({"scale": "bogus"}, "scale='bogus'"),
        ({"n_checkpoints": 10**12}, r"an integer in \[1, 100000\]"),
    ],
)
def test_arguments_that_failed_only_at_the_first_prune_fail_at_construction(kwargs, match) -> None:
    """They aborted ``study.optimize`` at the first ``should_prune``."""
    with pytest.raises(ConfigError, match=match):
        EvalStopPruner(**{"n_checkpoints": 5, **kwargs})


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: __import__("baselines").BayesStopper.for_task("hard-0.12"), id="Bayes"
        ),
        pytest.param(
            lambda: pytest.importorskip("baselines.learned").Learned.pretrained("hard"),
            id="Learned",
        ),
    ],
)
def test_a_stopper_of_fixed_k_or_that_copies_deeply_prunes_as_the_online_stopper(make) -> None:
    values = [0.3 + 0.03 * i for i in range(12)] + [0.63 - 0.05 * i for i in range(1, 9)]
    pruner = EvalStopPruner(make(), n_checkpoints=20)
    online = OnlineStopper(make(), 20)

    def objective(trial: optuna.Trial) -> float:
        for step, value in enumerate(values):
            trial.report(value, step)
            expected = online.observe(value, step=step)
            assert trial.should_prune() == expected
            if expected:
                raise optuna.TrialPruned()
        return values[-1]

    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.optimize(objective, n_trials=1)
    assert pruner.stopper(study, study.trials[0]).decisions == online.decisions
