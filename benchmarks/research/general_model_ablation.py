"""Where the general model's gap to Bayes comes from (the regime it is not told): diagnostics.

    python benchmarks/research/general_model_ablation.py \\
        [--variants shipped,told,hard-only,estimated,experts,experts-told,pooled] [--seeds 30] \\
        [--hard-episodes 1920] [--prices 0.5,1,2] [--pooling] [--out /tmp/general-ablation]

The general backward-induction model (``pretrained:general``) is trained on a mixture
of the four regimes and is told the eval noise and the GPU-hour price, not the
regime; Bayes is built from the regime.  Six models are scored on the five
synthetic suite tasks at 1/2x, 1x and 2x the suite's price, against Bayes, on
*development* seeds (3000.., never a test seed; ``--seeds`` at 1x, 12 at 1/2x and
2x), beside the best floor family:

* ``shipped``: the shipped general model;
* ``told``: the shipped recipe (the same episodes, regressor and features) with the
  regime of each episode appended as four one-hot columns.  No user can run it (a
  platform does not know the regime of its runs): it measures what knowing the
  regime buys this recipe;
* ``hard-only``: the shipped recipe on ``hard`` episodes alone (the same number, noise
  and price still drawn; ``--hard-episodes N``: N of them): is ``hard``'s gap the
  other regimes' share of the data and of the trees, or the spread of noise and price?
* ``estimated``: the shipped recipe with, per decision bucket, a scikit-learn
  ``HistGradientBoostingClassifier``'s probabilities of the four regimes from the
  same features appended (fitted on the training episodes; the induction's own rows
  read two-fold out-of-episode probabilities), so the regime is read off the job's
  own history;
* ``experts``: one model per regime, each fitted on the mixture's episodes of its
  regime (the shipped recipe's data, split), their predicted gains of continuing
  averaged under those classifiers' probabilities of the regimes;
* ``experts-told``: those experts, each task played by its own regime's (told, as
  ``told`` is: what routing by a known regime would buy);
* ``pooled``: :class:`baselines.routed.RoutedStopper`, the package's router: the same
  experts, routed by regime evidence pooled over the jobs seen so far in the episode
  (classifiers that do not read the task settings); played in time order, so it costs
  seconds per episode (its model is kept in ``OUT/pooled.npz``).

``--pooling`` first prints how often the regime classifiers, their log-probabilities
summed over the first m jobs of an episode (held-out episodes of the general model's
distribution), name the episode's regime: what a stopper pooling evidence over the
jobs it has seen could route by.

Prints a line per cell (score of each model, its 95 % CI over the seeds, where it
stops: the median end after a hacking run's true peak, as a share of the run, and
the share of healthy RLHF runs stopped) and each model's mean score and count of
cells >= 0.85 of Bayes.  NoStop and Bayes runs are kept in ``OUT/refs.json``.  The
variants are built here, by wrapping :func:`baselines.backward.features_at` in
this process; nothing of the package changes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's package

import baselines.backward as backward
from baselines.backward_parts import training as backward_training
from evalstop_experiments.experiments import generalisation as gen
from evalstop_experiments.experiments.generalisation_parts import lsm_models
from evalstop_gym.suite import SUITE_PRICE

#: The models this script builds (see the module docstring).
VARIANTS = ("shipped", "told", "hard-only", "estimated", "experts", "experts-told", "pooled")
#: Development seeds: disjoint from the test seeds (0..29), the validation seeds the
#: floors are tuned on and the training seeds (from 20 000).
DEV_SEED = 3000
#: Seeds at 1/2x and 2x (at 1x: ``--seeds``), as in the recipe's own development.
OFF_PRICE_SEEDS = 12
#: The regime classifiers' settings (the regressor's, with fewer iterations).
CLASSIFIER = {"max_iter": 40, "max_leaf_nodes": 15, "min_samples_leaf": 40, "random_state": 0}


def episode_regimes(n: int, seed: int) -> list[int]:
    """The regime index of each of ``general_episodes(n, seed)``'s episodes."""
    return [gen.GENERAL_REGIMES.index(r) for r, _, _ in gen.general_draws(n, seed)]


@contextlib.contextmanager
def extra_columns(column_fn: Any) -> Iterator[None]:
    """Append ``column_fn(arrays, rows, i, x)``'s four columns to every feature row."""
    plain, sets = backward.features_at, dict(backward.FEATURE_SETS)

    def features_at(arrays, rows, i, settings, smoothed=False):  # type: ignore[no-untyped-def]
        x = plain(arrays, rows, i, settings, smoothed)
        return np.concatenate([x, column_fn(arrays, rows, i, x)], axis=1)

    names = tuple(f"regime_{r}" for r in gen.GENERAL_REGIMES)
    # Where each caller looks features_at up: the fit in the training part, the
    # stopper's ends in baselines.backward.
    backward.features_at = backward_training.features_at = features_at
    backward.FEATURE_SETS["smoothed"] = sets["smoothed"] + names
    try:
        yield
    finally:
        backward.features_at = backward_training.features_at = plain
        backward.FEATURE_SETS.clear()
        backward.FEATURE_SETS.update(sets)


def fit(data: list[Any], grid: int | None = None) -> Any:
    """The general model's fit (``train_lsm("general")``'s settings) on ``data``
    (``grid``: its decision buckets, default the most checkpoints of an episode)."""
    return backward.fit_backward(
        data,
        grid=grid or max(ep.arrays.k for ep in data),
        params=gen.GENERAL_PARAMS,
        default_settings={"eval_noise": 0.08, "gpu_hour_price": SUITE_PRICE},
    )


def regime_classifiers(data: list[Any], regimes: list[int]) -> tuple[dict, dict]:
    """Per bucket, a classifier of the regime; and the induction rows' out-of-episode probabilities."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    grid, h = max(ep.arrays.k for ep in data), len(gen.GENERAL_REGIMES)
    models, held_out = {}, {}
    with threadpool_limits(limits=1):
        for b in range(1, grid):
            parts = [
                (e, i)
                for e, ep in enumerate(data)
                for i in range(1, ep.arrays.k)
                if backward.bucket_of(i, ep.arrays.k, grid) == b
            ]
            if not parts:
                continue
            xs = [
                backward.features_at(
                    data[e].arrays, np.arange(data[e].values.shape[0]), i, data[e].settings, True
                )
                for e, i in parts
            ]
            x = np.concatenate(xs)
            y = np.concatenate([np.full(len(a), regimes[e]) for a, (e, _) in zip(xs, parts)])
            fold = np.concatenate([np.full(len(a), e % 2) for a, (e, _) in zip(xs, parts)])
            x[:, np.isnan(x).all(axis=0)] = 0.0
            p = np.zeros((len(x), h))
            for f in (0, 1):
                c = HistGradientBoostingClassifier(**CLASSIFIER).fit(x[fold != f], y[fold != f])
                p[np.ix_(fold == f, c.classes_)] = c.predict_proba(x[fold == f])
            models[b] = HistGradientBoostingClassifier(**CLASSIFIER).fit(x, y)
            at = 0
            for a, (e, i) in zip(xs, parts):
                held_out[(id(data[e].arrays), i)] = p[at : at + len(a)]
                at += len(a)
    return models, held_out


#: Where ``pooled`` keeps its model (set from ``--out``).
POOLED_PATH = Path("/tmp/general-ablation/pooled.npz")
#: ``--pooling``: held-out episodes of the general model's distribution (their own seeds).
POOLING_EPISODES, POOLING_SEED = 200, 90_000


def pooled_regime_accuracy(models: dict, grid: int) -> None:
    """Print how often the regime classifiers, their log-probabilities summed over an
    episode's first m jobs at a share of their run, name the episode's regime."""
    test = gen.general_episodes(POOLING_EPISODES, POOLING_SEED)
    regimes = episode_regimes(POOLING_EPISODES, POOLING_SEED)
    for share in (0.3, 0.5):
        for m in (1, 3, 5, 10, 20):
            right = 0
            for ep, r in zip(test, regimes, strict=True):
                a = ep.arrays
                i = max(1, round(share * a.k))
                x = backward.features_at(
                    a, np.arange(min(m, a.evals.shape[0])), i, ep.settings, True
                )
                c = models[backward.bucket_of(i, a.k, grid)]
                p = np.full((len(x), len(gen.GENERAL_REGIMES)), 1e-6)
                p[:, c.classes_] = c.predict_proba(x)
                right += int(np.log(p).sum(axis=0).argmax() == r)
            print(
                f"regime of the episode from its first {m:2d} jobs at {share:.0%} of their run: "
                f"right in {right / len(test):.3f} of {len(test)} episodes",
                flush=True,
            )


def regime_of(task: str) -> int:
    """The regime index of a synthetic suite task (``hard-0.12``: ``hard``'s)."""
    return gen.GENERAL_REGIMES.index(task.split("-")[0])


def one_hot(r: int, n: int) -> np.ndarray:
    """(n, regimes) rows of the one-hot of regime ``r``."""
    z = np.zeros((n, len(gen.GENERAL_REGIMES)))
    z[:, r] = 1.0
    return z


def build(
    variant: str, data: list[Any], regimes: list[int], hard_episodes: int, classifiers: Any
) -> tuple[Any, Any]:
    """A variant's stopper, and ``task -> its extra columns`` (None: it reads none).

    ``classifiers()``: :func:`regime_classifiers` of ``data`` (fitted once per run).
    """
    if variant == "shipped":
        return backward.BackwardStopper.pretrained("general", label="model"), None
    if variant == "pooled":
        from baselines.routed import RoutedModel, RoutedStopper, fit_routed

        if not POOLED_PATH.exists():
            fit_routed(
                data,
                regimes,
                gen.GENERAL_REGIMES,
                prior=gen.GENERAL_REGIME_WEIGHTS,
                params=gen.GENERAL_PARAMS,
                label="Routed[general]",
                default_settings={"eval_noise": 0.08, "gpu_hour_price": SUITE_PRICE},
            ).save(POOLED_PATH)
        return RoutedStopper(RoutedModel.load(POOLED_PATH), label="model"), None
    if variant == "hard-only":
        n, seed = hard_episodes, gen.GENERAL_TRAIN_SEED
        # Swapped where general_draws reads them: the module that defines it.
        drawn = lsm_models.GENERAL_REGIMES, lsm_models.GENERAL_REGIME_WEIGHTS
        lsm_models.GENERAL_REGIMES, lsm_models.GENERAL_REGIME_WEIGHTS = ("hard",), (1,)
        try:
            only = gen.general_episodes(n, seed)
        finally:
            lsm_models.GENERAL_REGIMES, lsm_models.GENERAL_REGIME_WEIGHTS = drawn
        return backward.BackwardStopper(fit(only), label="model"), None
    if variant == "told":
        by_arrays = {id(ep.arrays): r for ep, r in zip(data, regimes, strict=True)}
        with extra_columns(lambda a, rows, i, x: one_hot(by_arrays[id(a)], len(x))):
            model = fit(data)

        def told(task: str) -> Any:
            return lambda a, rows, i, x: one_hot(regime_of(task), len(x))

        return backward.BackwardStopper(model, label="model"), told
    grid = max(ep.arrays.k for ep in data)
    if variant in ("experts", "experts-told"):
        experts = []
        for r in range(len(gen.GENERAL_REGIMES)):
            mine = [ep for ep, got in zip(data, regimes, strict=True) if got == r]
            experts.append(fit(mine, grid))
        if variant == "experts-told":
            return Gated(experts, None, grid), None
        return Gated(experts, classifiers()[0], grid), None
    models, fitted_rows = classifiers()
    held_out = dict(fitted_rows)  # emptied after the fit; the run's own copy is kept

    def estimate(a: Any, rows: np.ndarray, i: int, x: np.ndarray) -> np.ndarray:
        got = held_out.get((id(a), i))
        if got is not None:  # a training row: its out-of-episode probabilities
            return got[rows]
        c = models[backward.bucket_of(i, a.k, grid)]
        p = np.zeros((len(x), len(gen.GENERAL_REGIMES)))
        p[:, c.classes_] = c.predict_proba(x)
        return p

    with extra_columns(estimate):
        model = fit(data)
    held_out.clear()
    return backward.BackwardStopper(model, label="model"), lambda task: estimate


class Gated:
    """Per-regime experts, their continuation values averaged under the regime classifier's
    probabilities: stop where the average is below 0 (lsm_cell_rows's stopper interface)."""

    def __init__(self, experts: list[Any], classifiers: dict | None, grid: int) -> None:
        self.experts, self.classifiers, self.grid = experts, classifiers, grid
        self.settings: dict[str, float] = dict(experts[0].meta["default_settings"])
        self.regime = -1  # told (``classifiers`` None): the task's regime, by tell_regime

    def tell_regime(self, task: str) -> None:
        """Told the regime: the task's (only without classifiers)."""
        self.regime = regime_of(task)

    def set_settings(self, settings: dict[str, float]) -> None:
        """The task's settings, as :meth:`BackwardStopper.set_settings` takes them."""
        self.settings.update(settings)

    def ends(self, arrays: Any) -> np.ndarray:
        """(n,) the checkpoint after which each job ends, as :meth:`BackwardStopper.ends`."""
        n, k = arrays.evals.shape
        end, alive = np.full(n, k), np.ones(n, dtype=bool)
        for i in range(1, k):
            b = backward.bucket_of(i, k, self.grid)
            if not alive.any():
                continue
            rows = np.flatnonzero(alive)
            x = backward.features_at(arrays, rows, i, self.settings, True)
            p = np.zeros((len(x), len(self.experts)))
            if self.classifiers is None:
                p[:, self.regime] = 1.0
            elif b in self.classifiers:
                c = self.classifiers[b]
                p[:, c.classes_] = c.predict_proba(x)
            else:
                continue
            q, w = np.zeros(len(x)), np.zeros(len(x))
            for r, m in enumerate(self.experts):
                if m.has_bucket(b):  # (a regime of 10 checkpoints has no odd bucket)
                    q += p[:, r] * m.predict(b, x)
                    w += p[:, r]
            stop = (w > 0) & (q < 0.0)
            end[rows[stop]] = i
            alive[rows[stop]] = False
        return end


def score(stopper: Any, cache: dict, n_seeds: int, cells: list, columns: Any = None) -> dict:
    """Per (task, price): the stopper's row and the best floor's, on development seeds."""
    out = {}
    for task, factor in cells:
        seeds = list(range(DEV_SEED, DEV_SEED + (n_seeds if factor == 1.0 else OFF_PRICE_SEEDS)))
        ctx = extra_columns(columns(task)) if columns else contextlib.nullcontext()
        if hasattr(stopper, "tell_regime"):
            stopper.tell_regime(task)
        with ctx:
            rows = gen.lsm_cell_rows({"model": stopper}, task, factor, seeds, cache=cache)
        out[(task, factor)] = {
            "model": next(r for r in rows if r["stopper"] == "model"),
            "floor": next(r for r in rows if r["stopper"].startswith("Best floor")),
        }
    return out


def main() -> None:
    """Build the variants, score them, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--hard-episodes", type=int, default=gen.GENERAL_EPISODES)
    ap.add_argument(
        "--pooling",
        action="store_true",
        help="also print how well the regime classifiers name an episode's regime from m jobs",
    )
    ap.add_argument("--prices", default=",".join(f"{f:g}" for f in gen.LSM_PRICES))
    ap.add_argument("--out", default="/tmp/general-ablation")
    args = ap.parse_args()
    try:
        prices = [float(f) for f in args.prices.split(",")]
    except ValueError:
        ap.error(f"--prices={args.prices}: comma-separated numbers among {gen.LSM_PRICES}")
    if not set(prices) <= set(gen.LSM_PRICES):
        ap.error(f"--prices={args.prices}: each among {gen.LSM_PRICES}")
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"--variants={args.variants}: {sorted(unknown)} not among {', '.join(VARIANTS)}")
    if args.hard_episodes < 1:
        ap.error(f"--hard-episodes={args.hard_episodes}: at least 1")
    if args.seeds < 2:
        ap.error(f"--seeds={args.seeds}: at least 2")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / "refs.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    cells = [(t, f) for f in prices for t in gen.SUITE_SYNTHETIC]
    global POOLED_PATH
    POOLED_PATH = out / "pooled.npz"
    results: dict[str, dict] = {}
    data: list[Any] = []
    regimes: list[int] = []
    if set(variants) - {"shipped", "hard-only"} or args.pooling:
        n, seed = gen.GENERAL_EPISODES, gen.GENERAL_TRAIN_SEED
        data, regimes = gen.general_episodes(n, seed), episode_regimes(n, seed)
        if len(data) != len(regimes):
            raise SystemExit(f"{len(data)} episodes against {len(regimes)} replayed regimes")
    # Fitted the first time a variant (or --pooling) asks: 190-290 CPU-s, once per run.
    classifiers = functools.cache(lambda: regime_classifiers(data, regimes))
    if args.pooling:
        pooled_regime_accuracy(classifiers()[0], max(e.arrays.k for e in data))
    for v in variants:
        t0 = time.process_time()
        stopper, columns = build(v, data, regimes, args.hard_episodes, classifiers)
        train_s = time.process_time() - t0
        results[v] = score(stopper, cache, args.seeds, cells, columns)
        cache_path.write_text(json.dumps(cache))
        print(f"{v}: built in {train_s:.0f} CPU-s", flush=True)
    print(
        f"\nscore against Bayes (95 % CI over development seeds {DEV_SEED}..; 1x: {args.seeds} seeds,"
    )
    print(f"1/2x and 2x: {OFF_PRICE_SEEDS}); where it stops: after-peak median / healthy stopped")
    for task, factor in cells:
        parts = []
        for v in variants:
            r = results[v][(task, factor)]["model"]
            parts.append(
                f"{v} {r['score']:.3f} [{r['score_lo']:.2f}, {r['score_hi']:.2f}] "
                f"{r['hack_after_peak_median']:+.2f}/{r['healthy_stopped_share']:.2f}"
            )
        floor = results[variants[0]][(task, factor)]["floor"]["score"]
        print(f"{task:15s} {factor:3g}x  " + " | ".join(parts) + f" | floor {floor:.3f}")
    for v in variants:
        s = [results[v][c]["model"]["score"] for c in cells]
        print(f"{v}: mean {np.mean(s):.3f}, cells >= 0.85: {sum(x >= 0.85 for x in s)} of {len(s)}")


if __name__ == "__main__":
    main()
