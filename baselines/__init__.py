"""Stopping policies for EvalStop-v0 (scripted and learned) and their benchmarks.

from baselines import NoStop, EvalStop, StopAtProgress, LossPlateau, evaluate

Training a learned stopper (Stable-Baselines3) is :mod:`baselines.training`
(``from baselines.training import TrainConfig, train``).
"""

from __future__ import annotations

from typing import Any

from .bayes import BayesStopper
from .changepoint import Cusum, GatedCusum
from .curve_oracle import CurveOracle
from .evaluate import evaluate, run_episode
from .floors import (
    FLOOR_FAMILIES,
    DeclinesAfter,
    FirstEvalGate,
    GainRule,
    LevelRule,
    LossStall,
    Patience,
    RunningMaxDrop,
)
from .policies import (
    Deprioritize,
    EvalStop,
    LossPlateau,
    NoStop,
    Policy,
    StopAtProgress,
    scripted_policies,
)

__all__ = [
    "FLOOR_FAMILIES",
    "BayesStopper",
    "CurveOracle",
    "Cusum",
    "DeclinesAfter",
    "Deprioritize",
    "EvalStop",
    "FirstEvalGate",
    "GainRule",
    "GatedCusum",
    "LevelRule",
    "LossPlateau",
    "LossStall",
    "NoStop",
    "Patience",
    "Policy",
    "RunningMaxDrop",
    "StopAtProgress",
    "evaluate",
    "run_episode",
    "scripted_policies",
]


def __getattr__(name: str) -> Any:
    # Learned policies need torch and SB3: import them only when asked for.
    if name == "Learned":
        from .learned import Learned

        return Learned
    raise AttributeError(f"module 'baselines' has no attribute {name!r}")
