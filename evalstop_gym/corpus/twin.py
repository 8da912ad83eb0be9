"""The twin: a generative model of a corpus's runs, fitted on its train runs, and its draws.

The ``grounded`` regime describes real runs by a parametric curve family whose statistics
match the corpus's; its stopper scores did not predict the real runs' (docs/SIM_TO_REAL.md).
The twin describes them by the runs themselves: within each class of runs (hack label x
trainer), a Gaussian over the whole run, with the class's own mean and covariance over the
train runs.  A drawn run is a new run (a random combination of its class's deviations from
the class mean, never a recorded run), with the class's correlations between checkpoints,
between the eval and the loss, and between a run's gain and its eval noise.

One run is the vector ``[g0, log gain, shape(1..m-1), loss(0..m-1), log sd]``:

* ``g0`` its first gold value; ``gain`` = max(gold) - g0, floored at
  :data:`GAIN_FLOOR_FRACTION` of the gold's range (as the replay floors it);
* ``shape`` = (gold - g0) / gain at the later checkpoints (0 at the start, 1 at the peak);
* ``loss`` the training loss at every checkpoint;
* ``sd`` the sd of its measured eval (``meta["eval_noise_sd"]``, the ``eval_batch``-sample
  mean's sd).

A drawn run's gold is ``g0 + gain * shape``, its recorded eval that gold plus Gaussian noise
of sd ``sd`` (the replay draws fresh noise at that sd; ``curve_noise="fresh"``), and its label
the corpus's own rule on its gold (:func:`~.analysis.label_hacking`, with the noise floor of
``evalstop_corpora.english``: ``2 sqrt 2`` standard errors of a gold point), not its class's.

The recipe: ``eval_batch`` scales every drawn sd by ``sqrt(fitted eval_batch / eval_batch)``
(the sd of a mean of independent completions), the one setting of the recipe the twin can be
set to.  Numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from .analysis import GAIN_FLOOR_FRACTION, NOISE_MULTIPLE, label_hacking
from .format import CurveTrace

#: Fewest train runs a class needs to be fitted (a covariance of fewer is mostly noise).
MIN_CLASS_RUNS = 4


@dataclass(frozen=True)
class TwinClass:
    """One class of runs: its share of the train runs, mean vector and centred runs.

    Attributes:
        label: The class's hack label (the corpus's).
        group: Its value of the grouping field (``""``: one class per label).
        weight: Its share of the fitted runs.
        mean: (d,) mean of the class's run vectors.
        deviations: (n, d) the class's run vectors less ``mean``, over ``sqrt(n - 1)``: a draw
            is ``mean + w @ deviations`` with ``w`` standard normal, a Gaussian of the class's
            sample covariance.
    """

    label: bool
    group: str
    weight: float
    mean: np.ndarray
    deviations: np.ndarray


@dataclass(frozen=True)
class TwinModel:
    """The fitted twin: its classes and the recipe of the runs it was fitted on.

    Attributes:
        classes: One :class:`TwinClass` per (label, group) with enough runs.
        steps: The fitted runs' checkpoint steps (every run shares them).
        eval_batch: The fitted runs' eval batch (their ``meta["eval_batch"]``).
        gold_batch: Their gold batch (``meta["gold_batch"]``).
        source: What it was fitted on (e.g. ``"english_rlhf:train"``).
    """

    classes: tuple[TwinClass, ...]
    steps: np.ndarray
    eval_batch: int
    gold_batch: int
    source: str


def _run_vector(trace: CurveTrace) -> np.ndarray:
    """The run vector of one trace (module doc)."""
    gold = np.asarray(trace.gold, dtype=float)
    g0 = float(gold[0])
    rng = float(gold.max() - gold.min())
    gain = max(float(gold.max()) - g0, GAIN_FLOOR_FRACTION * rng, 1e-9)
    sd = trace.meta.get("eval_noise_sd")
    if not isinstance(sd, int | float) or not sd > 0:
        raise ConfigError(
            "traces", trace.run_id, "runs whose meta['eval_noise_sd'] is a number > 0"
        )
    shape = (gold[1:] - g0) / gain
    loss = np.asarray(trace.loss, dtype=float)
    return np.concatenate([[g0, math.log(gain)], shape, loss, [math.log(float(sd))]])


def fit_twin(
    traces: Sequence[CurveTrace], source: str = "corpus", *, by: str | None = None
) -> TwinModel:
    """Fit the twin on ``traces`` (a corpus's train runs), one Gaussian per (label, group).

    ``by`` names the ``meta`` field whose values split each label into groups (e.g.
    ``"trainer"``); None (the default) fits one Gaussian per label.

    Every trace needs a gold curve, a label, ``meta["eval_noise_sd"]`` and the same steps;
    a class of fewer than :data:`MIN_CLASS_RUNS` runs is refused (name it, or fit on more).

    Raises:
        ConfigError: an empty corpus, a run without what the twin reads, runs of different
            steps, or a class too small to fit.
    """
    if not traces:
        raise ConfigError("traces", 0, "at least one labelled run with a gold curve")
    steps = np.asarray(traces[0].step)
    groups: dict[tuple[bool, str], list[np.ndarray]] = {}
    for t in traces:
        if t.gold is None or t.label is None:
            raise ConfigError("traces", t.run_id, "runs with a gold curve and a label")
        if t.step.shape != steps.shape or not np.array_equal(t.step, steps):
            raise ConfigError(
                "traces", t.run_id, f"runs logged at the same steps as the first ({steps.tolist()})"
            )
        key = (bool(t.label), "" if by is None else str(t.meta.get(by, "")))
        groups.setdefault(key, []).append(_run_vector(t))
    classes = []
    for (label, group), rows in sorted(groups.items()):
        if len(rows) < MIN_CLASS_RUNS:
            raise ConfigError(
                "traces",
                f"{len(rows)} runs of class (label={label}, {by}={group!r})",
                f"at least {MIN_CLASS_RUNS} runs in every class",
            )
        x = np.array(rows)
        mean = x.mean(axis=0)
        dev = (x - mean) / math.sqrt(len(rows) - 1)
        mean.flags.writeable = dev.flags.writeable = False
        classes.append(TwinClass(label, group, len(rows) / len(traces), mean, dev))
    meta = traces[0].meta
    return TwinModel(
        tuple(classes),
        steps.copy(),
        int(meta.get("eval_batch", 1)),
        int(meta.get("gold_batch", meta.get("eval_batch", 1))),
        source,
    )


def draw_twin(
    model: TwinModel,
    n_runs: int,
    seed: int = 0,
    *,
    bandwidth: float = 1.0,
    eval_batch: int | None = None,
) -> list[CurveTrace]:
    """``n_runs`` new runs from the twin, deterministic in ``seed``.

    Each run's class is drawn by the classes' weights, then its vector: with ``bandwidth``
    h = 1, from the class's Gaussian; with h < 1, a variance-preserving smoothed bootstrap
    (West's shrinkage kernel): ``mean + sqrt(1 - h**2) (x_j - mean) + h e``, ``x_j`` one of
    the class's runs drawn at random and ``e`` a draw of the class's Gaussian less its mean,
    so the class's mean and covariance are kept and more of its runs' non-Gaussian shape
    (flat ends, skewed gains) survives.  Its label is the corpus's rule on its gold.
    ``eval_batch`` (default the fitted runs') scales the eval noise as the sd of a mean of
    that many completions.

    Raises:
        ConfigError: ``n_runs`` < 1, ``bandwidth`` outside (0, 1] or ``eval_batch`` < 1.
    """
    if not isinstance(bandwidth, int | float) or not 0.0 < bandwidth <= 1.0:
        raise ConfigError("bandwidth", bandwidth, "a number in (0, 1]")
    if not isinstance(n_runs, int) or isinstance(n_runs, bool) or n_runs < 1:
        raise ConfigError("n_runs", n_runs, "an integer >= 1")
    batch = model.eval_batch if eval_batch is None else eval_batch
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ConfigError("eval_batch", eval_batch, "an integer >= 1 (or None)")
    rng = np.random.default_rng(seed)
    m = len(model.steps)
    weights = np.array([c.weight for c in model.classes])
    which = rng.choice(len(model.classes), size=n_runs, p=weights / weights.sum())
    noise_scale = math.sqrt(model.eval_batch / batch)
    width = len(str(n_runs - 1))
    out = []
    for i, ci in enumerate(which):
        c = model.classes[int(ci)]
        n_c = c.deviations.shape[0]
        v = c.mean + bandwidth * (rng.standard_normal(n_c) @ c.deviations)
        if bandwidth < 1.0:  # a run of the class, shrunk towards the mean (the kernel's centre)
            j = int(rng.integers(n_c))
            v = v + math.sqrt(1.0 - bandwidth**2) * math.sqrt(n_c - 1) * c.deviations[j]
        g0, gain = float(v[0]), math.exp(float(v[1]))
        gold = g0 + gain * np.concatenate([[0.0], v[2 : m + 1]])
        loss = v[m + 1 : 2 * m + 1]
        sd = math.exp(float(v[2 * m + 1])) * noise_scale
        gold_se = sd * math.sqrt(batch / max(model.gold_batch, batch))
        label = label_hacking(gold, min_abs_drop=NOISE_MULTIPLE * gold_se)
        obs = gold + rng.normal(0.0, sd, size=m)
        meta: dict[str, Any] = {
            "source": "twin",
            "twin_of": model.source,
            "twin_group": c.group,
            "class_label": c.label,
            "eval_batch": batch,
            "gold_batch": max(model.gold_batch, batch),
            "eval_noise_sd": sd,
            "gold_noise_sd": gold_se,
        }
        out.append(
            CurveTrace(
                run_id=f"twin-{i:0{width}d}",
                step=model.steps,
                eval=obs,
                loss=loss,
                gold=gold,
                label=label,
                meta=meta,
            )
        )
    return out


__all__ = ["GAIN_FLOOR_FRACTION", "TwinClass", "TwinModel", "draw_twin", "fit_twin"]
