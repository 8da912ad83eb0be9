"""Score your own stopper: :func:`score`, :func:`compare` and :func:`compare_each`.

What they accept as a stopper (an object, a :class:`StopperSpec` or a spec string,
optionally isolated), the checks made before any episode (:func:`check_run_arguments`),
the test seeds (:func:`resolve_seeds`, ``"fresh"``: :func:`fresh_seeds`), and the
paired :class:`Comparison` of two stoppers on the same episodes.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines.binding import for_task
from baselines.evaluate import check_seeds
from baselines.policies import NoStop, Policy
from evalstop_gym.errors import ConfigError, is_real
from evalstop_gym.suite import CORPUS_TASKS, HELDOUT_TASKS, suite_task

from .bootstrap import (
    UnitSums,
    paired_diff_ci,
    paired_score_diff,
    run_bootstrap_diff,
    run_bootstrap_score_diff,
    unit_sums,
)
from .episodes import env_kwargs
from .reference import Reference, reference_for, reference_stopper
from .sources import PolicySource, isolated_spec
from .stoppers import NOSTOP, Stopper, StopperSpec, check_boundary_policy
from .task import ScoreRow, play_stoppers, reference_sums, score_task


def score(
    policy: Policy | StopperSpec | str,
    task: str,
    *,
    seeds: Iterable[int] | str = range(30),
    prices: Sequence[float] = (1.0,),
    n_jobs: int | None = None,
    curves: str | None = None,
    name: str | None = None,
    isolated: bool = False,
) -> list[ScoreRow]:
    """Your stopper's normalised score on a suite task, one row per price factor.

    Args:
        policy: A policy object (``reset()`` and ``act(obs) -> 0/1``), a
            :class:`StopperSpec`, or a spec string: ``module:Class``,
            ``path/to/file.py:Class`` (built with no arguments), ``pretrained:NAME``
            or ``model:PATH``.
        task: A suite task (``hard-0.12``, ``paper-0.05``, ``trl-gao``, ``trl-heldout``, ...).
        seeds: Test seeds; NoStop and the reference play the same ones.  The default,
            30, is the fewest the benchmark reports a score on; tune your stopper on
            other seeds (the suite's floors tune on :data:`VALIDATION_SEEDS`).
            ``"fresh"``: 30 seeds drawn now from OS entropy over the whole 64-bit
            seed space (:func:`fresh_seeds`; each row's ``test_seeds`` lists them),
            so no stopper can have seen them.
        prices: Factors of the suite's GPU-hour price.
        n_jobs: Jobs per episode (default: the task's).
        curves: The corpus of a corpus task (``micro-rlhf``), or one a held-out task
            replays in place of its own (its test runs scored, its train runs tuned on).
        name: Its display name (default: its class name or spec).
        isolated: Play the stopper from its own process (:func:`isolated_spec`; ``policy``
            must then be a spec string).  In-process scoring is not a sandbox: an
            untrusted stopper's ``act`` can walk the call stack to the env.  Pair it
            with ``seeds="fresh"``.

    Returns:
        One :class:`ScoreRow` per price: the score against :class:`Reference`
        (Bayes on synthetic tasks, the Oracle on corpus tasks, the CurveOracle on
        held-out tasks, whose CI is over test runs) with its 95 % CI,
        U − U0 with its CI, ΔJCT and the honest metrics.
    """
    spec = _as_spec(policy, name, isolated)
    check_run_arguments(task, prices, curves)
    seeds = resolve_seeds(seeds)
    rows = []
    for factor in prices:
        kw = env_kwargs(task, factor, n_jobs, curves)
        stoppers = [
            Stopper(NOSTOP, "NoStop", NoStop()),
            spec.build(task, kw),
            reference_stopper(kw),
        ]
        rows.append(score_task(task, factor, kw, stoppers, seeds)[1])
    return rows


def check_run_arguments(task: str, prices: Any, curves: Any) -> None:
    """Refuse, before any episode, price factors or a corpus that :func:`score` cannot use.

    ``prices``: a non-empty sequence of finite numbers > 0 (at price 0 stopping saves
    nothing and a score is undefined).  ``curves``: only for a corpus or held-out task.
    """
    if (
        isinstance(prices, str | bytes)
        or not isinstance(prices, Sequence)
        or not prices
        or not all(is_real(f) and math.isfinite(f) and f > 0 for f in prices)
    ):
        raise ConfigError("prices", prices, "a non-empty sequence of price factors > 0")
    if curves is not None and task not in CORPUS_TASKS and task not in HELDOUT_TASKS:
        suite_task(task)  # an unknown name is refused as such first
        raise ConfigError(
            "curves",
            curves,
            f"None for the synthetic task {task!r} (a corpus or held-out task replays one)",
        )


def _as_spec(
    policy: Policy | StopperSpec | str, name: str | None, isolated: bool, arg: str = "policy"
) -> StopperSpec:
    """The :class:`StopperSpec` of what :func:`score` accepts as a policy (checked now)."""
    if not isinstance(isolated, bool):
        raise ConfigError("isolated", isolated, "True or False")
    if isolated and not isinstance(policy, str):
        raise ConfigError(arg, policy, "a spec string ('file.py:Class', ...) with isolated=True")
    if isolated:
        return isolated_spec(policy, name)  # type: ignore[arg-type]
    if isinstance(policy, str):
        return StopperSpec(name or policy, PolicySource(policy))
    if isinstance(policy, StopperSpec):
        return policy
    shown = name or getattr(policy, "name", None) or type(policy).__name__
    check_boundary_policy(policy, str(shown))
    return StopperSpec(str(shown), _Given(policy))


@dataclass(frozen=True)
class Comparison:
    """Two stoppers on the same episodes of one task at one price, and their paired difference.

    ``score_a`` and ``score_b`` are each one's :func:`score` (against ``reference``);
    ``diff`` is ``score_a - score_b`` (``mean(U_a - U_b) / mean(Uref - U0)``) with its
    95 % paired interval ``[diff_lo, diff_hi]``: a bootstrap over seeds, on a held-out
    task over its test runs (the same resampling as the scores').  ``u_diff`` is the mean
    per-episode utility difference ``U_a - U_b`` with its interval, in the env's units.
    An interval that excludes 0 says which stopper is ahead on this task and price.
    """

    task: str
    price_factor: float
    reference: Reference
    seeds: int
    a: str
    b: str
    score_a: float
    score_b: float
    diff: float
    diff_lo: float
    diff_hi: float
    u_diff: float
    u_diff_lo: float
    u_diff_hi: float

    def as_dict(self) -> dict[str, Any]:
        """The fields, the reference by name."""
        d = dict(vars(self))
        d["reference"] = self.reference.value
        return d


def compare(
    a: Policy | StopperSpec | str,
    b: Policy | StopperSpec | str,
    task: str,
    *,
    seeds: Iterable[int] | str = range(30),
    prices: Sequence[float] = (1.0,),
    n_jobs: int | None = None,
    curves: str | None = None,
    names: tuple[str | None, str | None] = (None, None),
    isolated: bool = False,
) -> list[Comparison]:
    """Is ``a`` ahead of ``b`` on a suite task?  One :class:`Comparison` per price factor.

    Both play the same test seeds beside NoStop and the task's reference, as in
    :func:`score` (``a`` and ``b`` take what its ``policy`` takes; ``isolated`` applies to
    both), and their difference is scored paired, episode by episode (run by run on a
    held-out task), which is narrower than comparing two scores' separate intervals.
    :func:`compare_each` compares several stoppers with several others in one play.
    """
    if not isinstance(names, tuple) or len(names) != 2:
        raise ConfigError("names", names, "a pair (name of a or None, name of b or None)")
    spec_a = _as_spec(a, names[0], isolated, "a")
    spec_b = _as_spec(b, names[1], isolated, "b")
    return compare_each(
        [spec_a], [spec_b], task, seeds=seeds, prices=prices, n_jobs=n_jobs, curves=curves
    )


def compare_each(
    stoppers: Sequence[Policy | StopperSpec | str],
    against: Sequence[Policy | StopperSpec | str],
    task: str,
    *,
    seeds: Iterable[int] | str = range(30),
    prices: Sequence[float] = (1.0,),
    n_jobs: int | None = None,
    curves: str | None = None,
    isolated: bool = False,
) -> list[Comparison]:
    """:func:`compare` of every one of ``stoppers`` with every one of ``against``.

    Each stopper plays the test seeds once per price (not once per pair), beside NoStop
    and the task's reference, so a stopper's score is the same in all its pairs.
    Returns the comparisons price by price, then in the order of ``stoppers``, then of
    ``against``.
    """
    for arg, given in (("stoppers", stoppers), ("against", against)):
        if isinstance(given, str | bytes) or not isinstance(given, Sequence) or not given:
            raise ConfigError(arg, given, "a non-empty list of stoppers (objects or specs)")
    specs = [_as_spec(p, None, isolated, "stoppers") for p in stoppers]
    specs += [_as_spec(p, None, isolated, "against") for p in against]
    check_run_arguments(task, prices, curves)
    n_a = len(stoppers)
    seeds = resolve_seeds(seeds)
    out = []
    for factor in prices:
        kw = env_kwargs(task, factor, n_jobs, curves)
        nostop, ref = Stopper(NOSTOP, "NoStop", NoStop()), reference_stopper(kw)
        built = [spec.build(task, kw) for spec in specs]
        stoppers_played = [nostop, *built, ref]
        runs = play_stoppers(kw, stoppers_played, seeds)
        _, u0, uref, groups, units = reference_sums(kw, seeds, stoppers_played, runs)
        played = runs[1:-1]
        utils = [[r["utility"] for r in rs] for rs in played]
        sums = None
        if units is not None:
            sums = [unit_sums(groups, [r["job_terms"] for r in rs]) for rs in played]
        for i in range(n_a):
            for j in range(n_a, len(built)):
                out.append(
                    _comparison(task, factor, kw, seeds, built, utils, sums, u0, uref, units, i, j)
                )
    return out


def _comparison(
    task: str,
    factor: float,
    kw: dict[str, Any],
    seeds: Sequence[int],
    built: Sequence[Stopper],
    utils: Sequence[Sequence[float]],
    sums: Sequence[Any] | None,
    u0: Sequence[float],
    uref: Sequence[float],
    units: tuple[UnitSums, UnitSums] | None,
    i: int,
    j: int,
) -> Comparison:
    """The :class:`Comparison` of played stopper ``i`` with played stopper ``j``."""
    ua, ub = utils[i], utils[j]
    u_diff = paired_diff_ci(ua, ub)  # as score_task takes U - U0; over runs when held out
    if units is None or sums is None:
        scores = paired_score_diff(ua, ub, u0, uref)
    else:
        scores = run_bootstrap_score_diff(sums[i], sums[j], *units)
        u_diff = (u_diff[0], *run_bootstrap_diff(sums[i], sums[j], len(seeds)))
    return Comparison(
        task=task,
        price_factor=factor,
        reference=reference_for(kw),
        seeds=len(seeds),
        a=built[i].name,
        b=built[j].name,
        score_a=scores[0],
        score_b=scores[1],
        diff=scores[2],
        diff_lo=scores[3],
        diff_hi=scores[4],
        u_diff=u_diff[0],
        u_diff_lo=u_diff[1],
        u_diff_hi=u_diff[2],
    )


#: How many seeds ``seeds="fresh"`` draws.
FRESH_SEEDS = 30


def fresh_seeds(n: int = FRESH_SEEDS) -> list[int]:
    """``n`` test seeds from OS entropy, uniform over the 64-bit seed space (``reset(seed=...)``)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError("seeds", n, "a number of fresh seeds >= 1")
    return [secrets.randbits(64) for _ in range(n)]


def resolve_seeds(seeds: Iterable[int] | str) -> list[int]:
    """The test seeds of ``seeds``: the integers given, or :func:`fresh_seeds` for ``"fresh"``."""
    allowed = "a non-empty iterable of distinct ints in [0, 2**64), or 'fresh'"
    if isinstance(seeds, str):
        if seeds != "fresh":
            raise ConfigError("seeds", seeds, allowed)
        return fresh_seeds(FRESH_SEEDS)
    if isinstance(seeds, int | np.integer):
        # A count where seeds were meant (the command line's --seeds N is a count).
        hint = f" (range({seeds}): the first {seeds} seeds)" if seeds >= 1 else ""
        raise ConfigError("seeds", seeds, allowed + hint)
    return check_seeds(seeds, allowed, limit=2**64)


@dataclass(frozen=True)
class _Given:
    """A factory that hands out the one policy object it was given, told the task
    (:func:`baselines.binding.for_task`: a model that reads the task's noise and price
    is told each task's and each price's, as a spec's model is)."""

    policy: Policy

    def __call__(self, task: str, kw: dict[str, Any]) -> Policy:
        return for_task(self.policy, kw)
