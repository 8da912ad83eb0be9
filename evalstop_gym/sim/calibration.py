"""Named calibrations of the eval, loss and proxy curves.

A calibration fixes the *shape* of the curves jobs produce: how many eval
checkpoints a job declares, how much an RLHF run gains, where hacking and
healthy runs peak, how LoRA/DPO runs saturate and how the training loss falls.
The *mix* of jobs (types, hack fraction, sizes, load) lives in
:mod:`evalstop_gym.sim.workloads`.

Four calibrations are offered because, as ``docs/CALIBRATION.md`` explains, a
"k consecutive declines" detector behaves very differently in each regime:

* ``"paper"`` (default): few checkpoints (10) and steep healthy curves, the
  regime in which the paper's figures (FPR ~1.5 %, precision ~98 %) are
  reachable.
* ``"realistic"``: denser checkpoints (20) and healthy RLHF runs whose peak is
  close to the end, so that their curves flatten against the eval noise, as
  real fine-tuning curves near convergence do.
* ``"hard"``: ``realistic`` with hacking and healthy RLHF runs sharing one rise
  until a hacking run's onset, so the first evals do not give the label away,
  and jittered step times (see :data:`HARD`).
* ``"grounded"``: the ``hard`` family, widened, fitted to the statistics of real
  English RLHF runs (peaks from mid-run, collapses of about their gain, healthy
  runs that plateau, decline a little or still gain late; see :data:`GROUNDED`).

Curve forms follow Gao, Schulman & Hilton (2023), "Scaling Laws for Reward
Model Overoptimization": the gold RL score is R(d) = d(alpha - beta ln d) with
d = sqrt(KL); normalised by its peak it is x(1 - ln x) with x = d/d*.  Without
a KL penalty, KL grows about quadratically in steps, so d is about linear in
progress and x = progress / peak_progress.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError

Range = tuple[float, float]

#: Curve families of an RLHF run's true eval (Calibration.rlhf_shape).
RLHF_SHAPES: tuple[str, ...] = ("gao", "rise-decline")
#: Range fields a calibration may draw log-uniformly (Calibration.log_uniform).
LOG_UNIFORM_FIELDS: tuple[str, ...] = ("rlhf_tau", "hack_tau", "hack_drop")


def _check_range(field: str, value: Range, lo: float, hi: float | None = None) -> None:
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(isinstance(v, int | float) for v in value)
    ):
        raise ConfigError(field, value, "a (low, high) pair of numbers")
    a, b = value
    upper = "" if hi is None else f" and <= {hi}"
    if a > b or a < lo or (hi is not None and b > hi):
        raise ConfigError(field, value, f"low <= high, both >= {lo}{upper}")


@dataclass(frozen=True)
class Calibration:
    """Shape parameters of the synthetic curves (all ranges are uniform draws).

    Attributes:
        name: Name under which the calibration is registered.
        evals_per_job: Eval checkpoints each job declares, evenly spaced in
            progress; the last one coincides with the end of the run.
        rlhf_base: True eval score of an RLHF run at progress 0.
        rlhf_amplitude: Gain A of an RLHF run at its peak over its base (eval units).
        hack_peak: Progress at which a hacking run's true eval peaks.
        healthy_peak: Peak position of a healthy RLHF run, in multiples of the
            run length (> 1 means beyond the end, so the run improves throughout).
        sft_base: True eval score of a LoRA/DPO run at progress 0.
        sft_amplitude: Gain of a LoRA/DPO run at the end of the run.
        sft_tau: Saturation constant tau of 1 - exp(-progress / tau).
        eval_noise: Default standard deviation of the observed eval noise.
        loss_floor: Training loss at convergence, relative to its initial value.
        loss_tau: Decay constant of the training loss in progress units.
        loss_plateau_fraction: Fraction of jobs (any type, any label) whose loss
            plateaus early; independent of the hack label (the paper's point).
        loss_plateau_at: Progress at which a plateauing job's loss stops falling.
        loss_noise: Standard deviation of the observed training-loss noise.
        proxy_amplitude: Gain of the proxy (reward-model) score over a run.
        step_time_jitter: Log-sd of a per-job, per-interval factor on the time between two
            checkpoints (0: evenly spaced in time).  With jitter > 0 the gaps a policy can read
            from ``info["time_h"]`` no longer give the job's true duration as K x one gap;
            the intervals are rescaled so that the job's total run time is unchanged.
        rlhf_shape: ``"gao"`` (every calibration but ``hard``): base + A x(1 - ln x)
            with x = progress / peak; or ``"rise-decline"``: every RLHF run rises
            as base + A (1 - e^(-p/tau)) / (1 - e^(-1/tau)) and a hacking run
            also loses A * drop * ((p - onset)+ / (1 - onset))^2, so that before
            the onset the two labels are drawn from one distribution.
        rlhf_tau: Rise constant tau of an RLHF run (``rise-decline`` only).
        hack_onset: Progress at which a hacking run starts to lose (``rise-decline``).
        hack_drop: Loss at the end of a hacking run, in units of its gain A
            (``rise-decline``).
        hack_tau: Rise constant of a hacking run (``rise-decline``); None: hacking and
            healthy runs draw theirs from ``rlhf_tau`` (one draw).
        healthy_drop: Loss at the end of a healthy run, in units of its gain A, from the
            same onset (``rise-decline``): (0, 0) for a pure rise.
        log_uniform: Range fields drawn log-uniformly rather than uniformly, among
            :data:`LOG_UNIFORM_FIELDS` (their lows must be > 0).
        rlhf_rate: Rise rate 1 / tau of every RLHF run, drawn uniformly (``rise-decline``
            only), in place of ``rlhf_tau`` and ``hack_tau``; None: those.  A negative rate
            is a convex rise, base + A (e^(p r') - 1) / (e^(r') - 1) with r' = -rate (a
            slow start that gains late), a rate near 0 a straight line and a large one a
            rise that saturates early: one draw spans all three.
        hack_rate: The hacking runs' rise rate range (with ``rlhf_rate``); None: theirs
            is ``rlhf_rate`` too (one draw for both labels).
    """

    name: str
    evals_per_job: int = 10
    rlhf_base: Range = (0.2, 0.4)
    rlhf_amplitude: Range = (0.5, 0.7)
    hack_peak: Range = (0.25, 0.6)
    healthy_peak: Range = (2.0, 5.0)
    sft_base: Range = (0.2, 0.4)
    sft_amplitude: Range = (0.4, 0.6)
    sft_tau: Range = (0.6, 1.2)
    eval_noise: float = 0.02
    loss_floor: Range = (0.2, 0.5)
    loss_tau: Range = (0.15, 0.4)
    loss_plateau_fraction: float = 0.4
    loss_plateau_at: Range = (0.3, 0.6)
    loss_noise: float = 0.003
    proxy_amplitude: Range = (0.8, 1.2)
    step_time_jitter: float = 0.0
    rlhf_shape: str = "gao"
    rlhf_tau: Range = (0.2, 0.6)
    hack_onset: Range = (0.2, 0.65)
    hack_drop: Range = (0.5, 1.0)
    hack_tau: Range | None = None
    healthy_drop: Range = (0.0, 0.0)
    log_uniform: tuple[str, ...] = ()
    rlhf_rate: Range | None = None
    hack_rate: Range | None = None

    def __post_init__(self) -> None:
        """Validate every field; raise ConfigError naming the first bad one."""
        if not isinstance(self.evals_per_job, int) or self.evals_per_job < 2:
            raise ConfigError("evals_per_job", self.evals_per_job, "an integer >= 2")
        _check_range("rlhf_base", self.rlhf_base, -10.0, 10.0)
        _check_range("rlhf_amplitude", self.rlhf_amplitude, 0.0)
        _check_range("hack_peak", self.hack_peak, 0.0, 1.0)
        if self.hack_peak[0] <= 0:
            raise ConfigError("hack_peak", self.hack_peak, "a peak strictly inside (0, 1)")
        _check_range("healthy_peak", self.healthy_peak, 1.0)
        _check_range("sft_base", self.sft_base, -10.0, 10.0)
        _check_range("sft_amplitude", self.sft_amplitude, 0.0)
        _check_range("sft_tau", self.sft_tau, 1e-3)
        _check_range("loss_floor", self.loss_floor, 0.0, 1.0)
        _check_range("loss_tau", self.loss_tau, 1e-3)
        _check_range("loss_plateau_at", self.loss_plateau_at, 0.0, 1.0)
        _check_range("proxy_amplitude", self.proxy_amplitude, 0.0)
        if self.rlhf_shape not in RLHF_SHAPES:
            raise ConfigError("rlhf_shape", self.rlhf_shape, f"one of {list(RLHF_SHAPES)}")
        _check_range("rlhf_tau", self.rlhf_tau, 1e-3)
        _check_range("hack_onset", self.hack_onset, 0.0, 1.0)
        if self.hack_onset[1] >= 1.0:
            raise ConfigError("hack_onset", self.hack_onset, "an onset strictly before the end")
        _check_range("hack_drop", self.hack_drop, 0.0)
        if self.hack_tau is not None:
            _check_range("hack_tau", self.hack_tau, 1e-3)
        _check_range("healthy_drop", self.healthy_drop, 0.0)
        if self.rlhf_rate is not None:
            _check_range("rlhf_rate", self.rlhf_rate, -50.0, 50.0)
        if self.hack_rate is not None:
            if self.rlhf_rate is None:
                raise ConfigError("hack_rate", self.hack_rate, "None unless rlhf_rate is set")
            _check_range("hack_rate", self.hack_rate, -50.0, 50.0)
        if not isinstance(self.log_uniform, tuple) or any(
            f not in LOG_UNIFORM_FIELDS for f in self.log_uniform
        ):
            raise ConfigError(
                "log_uniform",
                self.log_uniform,
                f"a tuple of names among {list(LOG_UNIFORM_FIELDS)}",
            )
        for f in self.log_uniform:
            r = getattr(self, f)
            if r is not None and r[0] <= 0:
                raise ConfigError(f, r, "a range with low > 0 (it is drawn log-uniformly)")
        if self.rlhf_shape != "rise-decline" and (
            self.hack_tau is not None
            or self.healthy_drop != (0.0, 0.0)
            or self.log_uniform
            or self.rlhf_rate is not None
        ):
            raise ConfigError(
                "rlhf_shape",
                self.rlhf_shape,
                "'rise-decline' when hack_tau, healthy_drop, log_uniform or rlhf_rate is set",
            )
        for field in ("eval_noise", "loss_noise"):
            v = getattr(self, field)
            if not isinstance(v, int | float) or not 0 <= v <= 10:
                raise ConfigError(field, v, "a number in [0, 10]")
        v = self.step_time_jitter
        if not isinstance(v, int | float) or not 0 <= v <= 2:
            raise ConfigError("step_time_jitter", v, "a log-sd in [0, 2] (0: no jitter)")
        if not 0.0 <= self.loss_plateau_fraction <= 1.0:
            raise ConfigError(
                "loss_plateau_fraction", self.loss_plateau_fraction, "a fraction in [0, 1]"
            )


#: The paper's regime: 10 checkpoints, hacking runs peaking at 25-60 % of the
#: run (SPEC section 8), steep healthy curves (healthy RLHF peaks at 2-5x the
#: run length; LoRA/DPO saturate slowly, tau 0.6-1.2).
PAPER = Calibration(name="paper")

#: A realistic regime: 20 checkpoints, hacking peaks anywhere in 25-85 % of the
#: run, healthy RLHF runs peaking just past the
#: end (1.0-1.6x the run length) and LoRA/DPO runs that saturate early
#: (tau 0.2-0.5), so healthy curves are nearly flat against the noise at the end.
REALISTIC = replace(
    PAPER,
    name="realistic",
    evals_per_job=20,
    hack_peak=(0.25, 0.85),
    healthy_peak=(1.0, 1.6),
    sft_tau=(0.2, 0.5),
)

#: A regime that cannot be gamed from the first evals (docs/CALIBRATION.md):
#: hacking and healthy RLHF runs share one rise (tau 0.6-3, from nearly linear
#: to saturating), and a hacking run turns down only after an onset at 20-85 % of
#: the run, losing 0.5-1.0 of its gain by the end.  Before the onset the label is not in the curve at all, as in
#: the micro-RLHF corpus, whose early evals predict the label with AUC 0.5-0.6.
#: 20 checkpoints (a realistic cadence); LoRA/DPO as in ``realistic``.  Step times
#: jitter (log-sd 0.3), so ``info["time_h"]`` does not give a job's true
#: duration as K x one gap; ``paper`` and ``realistic`` keep evenly spaced checkpoints.
HARD = replace(
    REALISTIC,
    name="hard",
    rlhf_shape="rise-decline",
    rlhf_tau=(0.6, 3.0),
    hack_onset=(0.2, 0.85),
    hack_drop=(0.5, 1.0),
    step_time_jitter=0.3,
)

#: A regime fitted to real runs (docs/CALIBRATION.md, "The grounded regime"): every
#: statistic of the criterion in :mod:`evalstop_gym.corpus.analysis` inside the packaged
#: English RLHF corpus's bootstrap interval (216 GRPO, RLOO and online DPO runs on English
#: text with a human-rated gold; ``evalstop-gym curves fit-regime``).  Rise rates 1 / tau,
#: uniform: -5..7 for healthy runs (convex, slow-starting rises that gain late, straight
#: ones and ones that saturate early), -18..8 for hacking ones (more of them start slowly:
#: the corpus's early evals rank hacking runs a little *below* healthy ones), a hacking
#: run's rate raised where needed until it turns over inside the run; an onset anywhere in
#: the first 70 % of the run; a hacking run loses 0.5-1.2 x its gain by the end
#: (log-uniform) and a healthy one 0-0.1 x from the same onset; gains spread as the
#: corpus's (0.1-1.1: sd / mean 0.48, the corpus 0.56).  20 checkpoints, step-time jitter
#: and LoRA/DPO as in ``hard``.
GROUNDED = replace(
    HARD,
    name="grounded",
    rlhf_amplitude=(0.1, 1.1),
    rlhf_rate=(-5.0, 7.0),
    hack_rate=(-18.0, 8.0),
    hack_onset=(0.0, 0.7),
    hack_drop=(0.5, 1.2),
    healthy_drop=(0.0, 0.1),
    log_uniform=("hack_drop",),
)

CALIBRATIONS: dict[str, Calibration] = {c.name: c for c in (PAPER, REALISTIC, HARD, GROUNDED)}


def get_calibration(name: str | Calibration) -> Calibration:
    """Return a registered calibration by name (or pass one through)."""
    if isinstance(name, Calibration):
        return name
    if name not in CALIBRATIONS:
        raise ConfigError("calibration", name, f"one of {sorted(CALIBRATIONS)}")
    return CALIBRATIONS[name]
