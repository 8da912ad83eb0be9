"""The suite's one scoring path: play a stopper, normalise its utility, and score your own.

For a task (``evalstop_gym.suite_task``) at a price (the suite's price times a
factor) every stopper plays the same test seeds through ``EvalStop-v0`` and is
scored by

    score = mean_s (U_s - U0_s) / mean_s (Uref_s - U0_s)

with U the episode's utility (the env's return), U0 NoStop's (a practitioner
who runs every job to the end and keeps its best eval checkpoint) and Uref the
reference: the Bayes stopper on synthetic tasks, the privileged Oracle on
corpus tasks, the privileged CurveOracle on held-out real-run tasks
(``trl-heldout``; named in every row, :class:`Reference`).  The 95 % interval is
a paired percentile bootstrap over seeds; on a held-out task it is a bootstrap
over its test runs (:func:`run_bootstrap_score`: every job that replays a run
moves with it), and its floors tune on its train runs
(:func:`evalstop_gym.suite.tuning_kwargs`).  ΔJCT (mean JCT against NoStop's, %) is
given beside each score: the utility counts a job's own GPU-hours, not the
queueing its stop spares the others.

The floors (:data:`baselines.floors.FLOOR_FAMILIES`: StopAt-p, the
first-eval gate, running-max drop, k declines, level, gain, patience, gated
CUSUM, loss stall, stop-by-type) and the classical CUSUM are tuned on
validation seeds (:data:`VALIDATION_SEEDS`, disjoint from the test seeds),
per task and price, by the utility they would reach; the family with the
highest validation utility is the "Best floor".  Tuning is exact and cheap:
each of these stoppers decides a job from that job's own observations, and a
job's utility term depends only on where it ends, so every candidate of a
family is scored at once from the episode's observation arrays
(:func:`episode_arrays`, the values the observation shows) without running
the cluster.  :func:`job_observations` and :func:`offline_utility` are the
per-call reference the array scores are tested against.

Score your own stopper with :func:`score` (also ``evalstop_experiments.score``)::

    from evalstop_experiments import score
    rows = score(MyStopper(), "hard-0.12", seeds=range(5))
    rows[0].score, rows[0].score_lo, rows[0].score_hi

The stopper is a boundary: it receives observations through ``act(obs)``
(after ``reset()``, and, if it has one, ``check_observation_space`` with a copy
of the space) and returns actions; it never sees the env, the simulator or the
rewards.  On the command line: ``evalstop-gym benchmark --suite --policy
module:Class`` (or ``path/to/file.py:Class``).

The parts, one concept each: :mod:`.episodes` (a task's env kwargs, an episode's
observations and arrays, :func:`play`), :mod:`.tuning` (the floors tuned on the
validation seeds), :mod:`.bootstrap` (the intervals over seeds and over runs),
:mod:`.stoppers` (the kinds, :class:`Stopper`, :class:`StopperSpec`), :mod:`.sources`
(``--policy`` specs and isolation), :mod:`.reference` (what a score is normalised to),
:mod:`.task` (one task at one price scored), :mod:`.api` (:func:`score`,
:func:`compare`) and :mod:`.tables` (the Markdown tables and the written files).  This
package keeps every name they define importable from ``evalstop_experiments.scoring``.
"""

# Re-exports: the parts' names stay importable from this package (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

from baselines.policies import NoStop  # importable from here, as it always was

from . import bootstrap as _bootstrap
from . import episodes as _episodes
from .api import (
    FRESH_SEEDS,
    Comparison,
    check_run_arguments,
    compare,
    compare_each,
    fresh_seeds,
    resolve_seeds,
    score,
)
from .bootstrap import (
    UnitSums,
    normalised_score,
    paired_diff_ci,
    paired_score_diff,
    run_bootstrap_diff,
    run_bootstrap_score,
    run_bootstrap_score_diff,
    unit_sums,
)
from .episodes import (
    Episode,
    JobObs,
    env_kwargs,
    episode_arrays,
    episode_job_runs,
    job_observations,
    play,
    stop_positions,
    utility_terms,
)
from .reference import (
    REFERENCE_KIND,
    Reference,
    reference_for,
    reference_stopper,
    references,
    refit_bayes,
)
from .sources import PolicySource, isolated_spec, stopper_spec
from .stoppers import (
    BAYES,
    BAYES_REFIT,
    BEST_FLOOR,
    BY_TYPE_TUNED,
    CURVE_ORACLE,
    CUSUM_TUNED,
    DECLINES_TUNED,
    DROP_TUNED,
    EVALSTOP,
    EXTRA,
    FLOOR_KINDS,
    GAIN_TUNED,
    GATE_TUNED,
    GATED_CUSUM_TUNED,
    LEVEL_TUNED,
    LOSS_PLATEAU,
    LOSS_STALL_TUNED,
    NOSTOP,
    ORACLE,
    PATIENCE_TUNED,
    STOP_AT_TUNED,
    Stopper,
    StopperSpec,
    check_boundary_policy,
)
from .tables import (
    COVERAGE_KINDS,
    HELDOUT_LEGEND,
    SCORE_LEGEND,
    best_family,
    coverage_check,
    coverage_table,
    fmt,
    markdown_table,
    unreliable_prices,
    write_scores,
)
from .task import (
    METRIC_COLUMNS,
    SCORE_COLUMNS,
    ScoreRow,
    play_stoppers,
    reference_sums,
    score_task,
    suite_stoppers,
)
from .tuning import (
    CUSUM_DRIFTS,
    CUSUM_THRESHOLDS,
    GATE_QUANTILES,
    STOP_AT_GRID,
    VALIDATION_SEEDS,
    TunedFloor,
    best_floor,
    family_utilities,
    gate_candidates,
    offline_utility,
    tune,
    tune_family,
    tune_floors,
    tuned_stoppers,
    tuned_stoppers_per_call,
)

# The private names tests and benchmarks reach (the episode cache they clear, the uncached
# build, the bootstrap weights' cache): assigned, since a module imports no other module's
# private name (tests/test_architecture.py).  These are the very objects the parts use.
# Patch what the parts look up where they look it up: play and tune_floors in
# scoring.task (play_stoppers, suite_stoppers), FRESH_SEEDS in scoring.api.
_built_episode = _episodes.built_episode
_build_episode = _episodes.build_episode
_boot_weights = _bootstrap.boot_weights
