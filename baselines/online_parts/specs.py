"""Short specs of the package's stoppers (``evalstop:2``, ``cusum:0.1``, ``bayes:hard``, ...).

:func:`short_spec_factory` builds a factory ``n_checkpoints -> fresh policy`` from one
(:data:`SHORT_SPECS`): what ``evalstop-gym curves replay --policy`` and the live adapters take.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.calibration import get_calibration
from evalstop_gym.sim.workloads import JOB_TYPES

from ..bayes import REAL_CURVE_NOISE, BayesStopper
from ..changepoint import Cusum
from ..floors import FirstEvalGate
from ..policies import EvalStop, LossPlateau, NoStop, Policy, StopAtProgress

#: The short names of the package's stoppers a ``--policy`` spec may use, with their form.
SHORT_SPECS: dict[str, str] = {
    "nostop": "nostop",
    "evalstop": "evalstop[:K] (K consecutive declines, default 2)",
    "cusum": "cusum[:THRESHOLD[,DRIFT]] (eval units, default 0.1,0)",
    "bayes": "bayes[:CALIBRATION] (paper, realistic or hard; default hard)",
    "lossplateau": "lossplateau[:WINDOW,TOLERANCE] (default 3,0.02)",
    "stopat": "stopat:PROGRESS (stop at that share of the run)",
    "gate": "gate:STOP_AT,THRESHOLD (FirstEvalGate, eval units)",
}


#: The short forms, for a refusal.
SHORT_FORMS = "; ".join(SHORT_SPECS.values())


def _numbers(spec: str, arg: str, n_max: int) -> list[float]:
    parts = [p for p in arg.split(",") if p.strip()] if arg else []
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
        parts = ["?"]
    if len(parts) > n_max or len(values) != len(parts):
        raise ConfigError("policy", spec, SHORT_SPECS[spec.partition(":")[0].lower()])
    return values


def short_spec_factory(spec: str) -> Callable[[int], Policy] | None:
    """A factory ``n_checkpoints -> fresh policy`` for a short spec (:data:`SHORT_SPECS`).

    None when ``spec`` names no package stopper (the caller tries its other forms).  The
    factory takes the run's number of evaluations because Bayes models a run of exactly
    that many (its calibration is rebuilt with ``evals_per_job = n``, its eval noise at
    least the real-curve level).

    Raises:
        ConfigError: a short name with malformed arguments, naming its form.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError("policy", spec, SHORT_FORMS)
    name, _, arg = spec.strip().partition(":")
    kind = name.lower()
    factory: Callable[[int], Policy]
    if kind == "nostop" and not arg:
        factory = lambda n: NoStop()  # noqa: E731
    elif kind == "evalstop":
        (k,) = _numbers(spec, arg, 1) or [2]
        if k != int(k):
            raise ConfigError("policy", spec, SHORT_SPECS["evalstop"])
        EvalStop(int(k))
        factory = lambda n: EvalStop(int(k))  # noqa: E731
    elif kind == "cusum":
        values = _numbers(spec, arg, 2)
        threshold, drift = (values + [0.1, 0.0][len(values) :])[:2]
        Cusum(threshold, drift)
        factory = lambda n: Cusum(threshold, drift)  # noqa: E731
    elif kind == "lossplateau":
        values = _numbers(spec, arg, 2)
        if len(values) == 1:
            raise ConfigError("policy", spec, SHORT_SPECS["lossplateau"])
        window, tol = values or [3, 0.02]
        if window != int(window):
            raise ConfigError("policy", spec, SHORT_SPECS["lossplateau"])
        LossPlateau(int(window), tol)
        factory = lambda n: LossPlateau(int(window), tol)  # noqa: E731
    elif kind == "stopat":
        values = _numbers(spec, arg, 1)
        if not values:
            raise ConfigError("policy", spec, SHORT_SPECS["stopat"])
        StopAtProgress(values[0])
        factory = lambda n: StopAtProgress(values[0], job_types=JOB_TYPES)  # noqa: E731
    elif kind == "gate":
        values = _numbers(spec, arg, 2)
        if len(values) != 2:
            raise ConfigError("policy", spec, SHORT_SPECS["gate"])
        FirstEvalGate(*values)
        factory = lambda n: FirstEvalGate(*values)  # noqa: E731
    elif kind == "bayes":
        cal = get_calibration(arg or "hard")
        noise = max(cal.eval_noise, REAL_CURVE_NOISE)

        def factory(n: int) -> Policy:
            if n < 2:
                raise ConfigError(
                    "policy", spec, "a run of >= 2 evaluations (Bayes models a curve)"
                )
            return BayesStopper(dataclasses.replace(cal, evals_per_job=n), eval_noise=noise)

    elif kind in SHORT_SPECS:
        raise ConfigError("policy", spec, SHORT_SPECS[kind])
    else:
        return None
    return factory
