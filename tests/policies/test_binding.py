"""A conditioned stopper is told the task it plays, on the scoring path and in the runner."""

from __future__ import annotations

from baselines.backward import BackwardStopper
from baselines.binding import for_task
from baselines.policies import EvalStop
from evalstop_experiments.scoring import PolicySource
from evalstop_gym.suite import suite_task


def test_plain_policies_are_played_as_they_are():
    policy = EvalStop(k=2)
    assert for_task(policy, suite_task("hard-0.12")) is policy


def test_the_general_model_reads_each_tasks_noise_and_price():
    low = PolicySource("pretrained:general")("hard-0.05", suite_task("hard-0.05"))
    high = PolicySource("pretrained:general")("hard-0.12", suite_task("hard-0.12"))
    assert isinstance(low, BackwardStopper) and isinstance(high, BackwardStopper)
    default = BackwardStopper.pretrained("general")
    assert low.settings != high.settings
    assert high.settings == default.bind_task(suite_task("hard-0.12")).settings
