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

With ``form="rise"`` the gold enters as it was measured, its rise ``gold - g0`` at the later
checkpoints in place of ``(log gain, shape)`` (stored as log gain 0 and shape = rise, so the
layout is the same).  The ``"shape"`` form divides each run's gold noise by its gain, and a
draw that mixes a small-gain run's shape with a larger gain is rougher than any run it was
fitted on (docs/SIM_TO_REAL.md); the rise keeps the gold noise at its measured scale.

A drawn run's gold is ``g0 + gain * shape``, its recorded eval that gold plus Gaussian noise
of sd ``sd`` (the replay draws fresh noise at that sd; ``curve_noise="fresh"``), and its label
the corpus's own rule on its gold (:func:`~.analysis.label_hacking`, with the noise floor of
``evalstop_corpora.english``: ``2 sqrt 2`` standard errors of a gold point), not its class's.

The recipe: ``eval_batch`` scales every drawn sd by ``sqrt(fitted eval_batch / eval_batch)``
(the sd of a mean of independent completions), and, for a twin fitted by group (``by=``, e.g.
the trainer), ``group_mix`` sets each group's share of the draws (each group keeps its own
hack share).  Runs of several eval batches are fitted together by naming the batch to fit at
(``fit_twin(..., eval_batch=32)``): each run's sd is moved to that batch first.  Numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from .analysis import GAIN_FLOOR_FRACTION, NOISE_MULTIPLE, label_hacking
from .format import CurveTrace

#: Fewest train runs a class needs to be fitted (a covariance of fewer is mostly noise).
MIN_CLASS_RUNS = 4
#: How a run's gold enters its vector (module doc).
FORMS: tuple[str, ...] = ("shape", "rise")


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
        by: The ``meta`` field the classes are grouped by (None: one class per label); each
            draw carries its class's group under that name.
        form: How the gold enters the run vector (:data:`FORMS`).
    """

    classes: tuple[TwinClass, ...]
    steps: np.ndarray
    eval_batch: int
    gold_batch: int
    source: str
    by: str | None = None
    form: str = "shape"

    @property
    def groups(self) -> tuple[str, ...]:
        """The fitted groups, in class order (``("",)`` for a twin of one class per label)."""
        return tuple(dict.fromkeys(c.group for c in self.classes))


def _batch_of(trace: CurveTrace, key: str, default: int = 1) -> int:
    value = trace.meta.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"meta[{key!r}]", f"{trace.run_id}: {value!r}", "an integer >= 1")
    return value


def _eval_sd(trace: CurveTrace) -> float:
    sd = trace.meta.get("eval_noise_sd")
    if not isinstance(sd, int | float) or isinstance(sd, bool) or not sd > 0:
        raise ConfigError(
            "traces", trace.run_id, "runs whose meta['eval_noise_sd'] is a number > 0"
        )
    return float(sd)


def _run_vector(trace: CurveTrace, sd: float, form: str) -> np.ndarray:
    """The run vector of one trace (module doc), with eval sd ``sd``."""
    gold = np.asarray(trace.gold, dtype=float)
    g0 = float(gold[0])
    if form == "rise":
        head, curve = [g0, 0.0], gold[1:] - g0
    else:
        rng = float(gold.max() - gold.min())
        gain = max(float(gold.max()) - g0, GAIN_FLOOR_FRACTION * rng, 1e-9)
        head, curve = [g0, math.log(gain)], (gold[1:] - g0) / gain
    loss = np.asarray(trace.loss, dtype=float)
    return np.concatenate([head, curve, loss, [math.log(sd)]])


def fit_twin(
    traces: Sequence[CurveTrace],
    source: str = "corpus",
    *,
    by: str | None = None,
    eval_batch: int | None = None,
    form: str = "shape",
) -> TwinModel:
    """Fit the twin on ``traces`` (a corpus's train runs), one Gaussian per (label, group).

    ``by`` names the ``meta`` field whose values split each label into groups (e.g.
    ``"trainer"``); None (the default) fits one Gaussian per label.  ``eval_batch`` fits
    runs of several eval batches together: each run's eval sd is first scaled by
    ``sqrt(its meta["eval_batch"] / eval_batch)``, the sd its eval would have had as a mean
    of ``eval_batch`` completions; None (the default) needs every run at one eval batch.
    ``form`` is how the gold enters the run vector (:data:`FORMS`; module doc).

    Every trace needs a gold curve, a label, ``meta["eval_noise_sd"]`` and the same steps
    and gold batch; a class of fewer than :data:`MIN_CLASS_RUNS` runs is refused (name it,
    or fit on more).

    Raises:
        ConfigError: an empty corpus, a run without what the twin reads, runs of different
            steps, gold batches or (without ``eval_batch``) eval batches, or a class too
            small to fit.
    """
    if not traces:
        raise ConfigError("traces", 0, "at least one labelled run with a gold curve")
    if form not in FORMS:
        raise ConfigError("form", form, f"one of {list(FORMS)}")
    if eval_batch is not None and (
        not isinstance(eval_batch, int) or isinstance(eval_batch, bool) or eval_batch < 1
    ):
        raise ConfigError("eval_batch", eval_batch, "an integer >= 1 (or None)")
    first_batch = _batch_of(traces[0], "eval_batch")
    gold_batch = _batch_of(traces[0], "gold_batch", first_batch)
    target = first_batch if eval_batch is None else eval_batch
    steps = np.asarray(traces[0].step)
    groups: dict[tuple[bool, str], list[np.ndarray]] = {}
    for t in traces:
        if t.gold is None or t.label is None:
            raise ConfigError("traces", t.run_id, "runs with a gold curve and a label")
        if t.step.shape != steps.shape or not np.array_equal(t.step, steps):
            raise ConfigError(
                "traces", t.run_id, f"runs logged at the same steps as the first ({steps.tolist()})"
            )
        sd = _eval_sd(t)
        batch = _batch_of(t, "eval_batch")
        if eval_batch is None and batch != first_batch:
            raise ConfigError(
                "traces",
                f"{t.run_id} at eval batch {batch}",
                f"runs at the first run's eval batch ({first_batch}), or fit_twin(..., "
                "eval_batch=N) to fit several batches at one",
            )
        if _batch_of(t, "gold_batch", batch) != gold_batch:
            raise ConfigError(
                "traces",
                f"{t.run_id} at gold batch {t.meta.get('gold_batch')}",
                f"runs at the first run's gold batch ({gold_batch})",
            )
        key = (bool(t.label), "" if by is None else str(t.meta.get(by, "")))
        groups.setdefault(key, []).append(_run_vector(t, sd * math.sqrt(batch / target), form))
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
    return TwinModel(tuple(classes), steps.copy(), target, gold_batch, source, by, form)


def _class_weights(model: TwinModel, group_mix: Mapping[str, float] | None) -> np.ndarray:
    """Each class's probability: its fitted share, or its share of its group times the mix."""
    weights = np.array([c.weight for c in model.classes])
    if group_mix is None:
        return weights / weights.sum()
    groups = model.groups
    allowed = (
        f"a mapping of the twin's {model.by or 'group'}s {list(groups)} to shares >= 0, not all 0"
    )
    if not isinstance(group_mix, Mapping) or not group_mix:
        raise ConfigError("group_mix", group_mix, allowed)
    for g, share in group_mix.items():
        ok = isinstance(share, int | float) and not isinstance(share, bool)
        if g not in groups or not ok or not math.isfinite(share) or share < 0:
            raise ConfigError("group_mix", f"{g!r}: {share!r}", allowed)
    total = float(sum(group_mix.values()))
    if not total > 0:
        raise ConfigError("group_mix", dict(group_mix), allowed)
    in_group = {g: sum(c.weight for c in model.classes if c.group == g) for g in groups}
    return np.array(
        [c.weight / in_group[c.group] * group_mix.get(c.group, 0.0) / total for c in model.classes]
    )


def draw_twin(
    model: TwinModel,
    n_runs: int,
    seed: int = 0,
    *,
    bandwidth: float = 1.0,
    eval_batch: int | None = None,
    group_mix: Mapping[str, float] | None = None,
) -> list[CurveTrace]:
    """``n_runs`` new runs from the twin, deterministic in ``seed``.

    Each run's class is drawn by the classes' weights, then its vector: with ``bandwidth``
    h = 1, from the class's Gaussian; with h < 1, a variance-preserving smoothed bootstrap
    (West's shrinkage kernel): ``mean + sqrt(1 - h**2) (x_j - mean) + h e``, ``x_j`` one of
    the class's runs drawn at random and ``e`` a draw of the class's Gaussian less its mean,
    so the class's mean and covariance are kept and more of its runs' non-Gaussian shape
    (flat ends, skewed gains) survives.  Its label is the corpus's rule on its gold.
    ``eval_batch`` (default the fitted runs') scales the eval noise as the sd of a mean of
    that many completions.  ``group_mix`` (a twin fitted ``by`` a field) gives each group's
    share of the draws, each group keeping its fitted hack share; None keeps the fitted
    shares.  Each draw carries its group under ``meta[model.by]``.

    Raises:
        ConfigError: ``n_runs`` < 1, ``bandwidth`` outside (0, 1], ``eval_batch`` < 1, or a
            ``group_mix`` naming a group the twin has not, a share < 0, or all shares 0.
    """
    if not isinstance(bandwidth, int | float) or not 0.0 < bandwidth <= 1.0:
        raise ConfigError("bandwidth", bandwidth, "a number in (0, 1]")
    if not isinstance(n_runs, int) or isinstance(n_runs, bool) or n_runs < 1:
        raise ConfigError("n_runs", n_runs, "an integer >= 1")
    batch = model.eval_batch if eval_batch is None else eval_batch
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ConfigError("eval_batch", eval_batch, "an integer >= 1 (or None)")
    p = _class_weights(model, group_mix)
    rng = np.random.default_rng(seed)
    m = len(model.steps)
    which = rng.choice(len(model.classes), size=n_runs, p=p)
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
        if model.by is not None:
            meta[model.by] = c.group
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


__all__ = ["FORMS", "GAIN_FLOOR_FRACTION", "TwinClass", "TwinModel", "draw_twin", "fit_twin"]
