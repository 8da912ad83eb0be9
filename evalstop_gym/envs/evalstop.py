"""``EvalStop-v0``: the Gymnasium face (spaces, reset and step, the manual) over an ``EpisodeCore``."""

from __future__ import annotations

from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..errors import ConfigError, shown
from ..sim.config import SimConfig
from ..sim.engine import Simulator
from .config import EvalStopConfig
from .core import EpisodeCore
from .render import ansi_frame, rgb_frame


class EvalStopEnv(gym.Env[dict[str, np.ndarray], np.int64]):
    """
    ## Description

    A 64-GPU, multi-tenant LLM fine-tuning cluster in which some RLHF runs
    reward-hack: their proxy reward and training loss keep improving while their
    downstream eval score peaks and then falls.  A base scheduler (FIFO,
    SJF-Est, SRTF-Est, LossAware, Tiresias) runs the cluster; the agent is the
    *stopper* wrapped around it, as in the EvalStop paper.  Each step is one
    eval checkpoint of one job: the agent sees what the platform may see of that
    job (the information boundary) and decides to let it continue or to stop it,
    which frees its GPUs at once and delivers its best observed checkpoint.

    ## Action Space

    `Discrete(2)`: `0` continue, `1` stop and save the best observed checkpoint.
    Both actions are always valid for the job being decided, so `action_masks()`
    (sb3-contrib's `MaskablePPO` convention) returns `[True, True]` at every step.
    With `deprioritize=True`, `Discrete(3)`: `2` deprioritises the job (the prior
    work's alternative to stopping: it keeps running only while no waiting job
    could use its GPUs, at the back of the base scheduler's order; see
    `Simulator.decide`); `action_masks()` is then all True too.

    ## Observation Space

    A `Dict` of float32 `Box`es holding exactly the boundary fields listed in
    `obs_fields` (all by default).  W is `eval_window`, by default the number of
    checkpoints a job declares (10 in the paper calibration).

    | key | shape | meaning | min | max |
    |---|---|---|---|---|
    | `job_type` | (3,) | one-hot LoRA, DPO, RLHF | 0 | 1 |
    | `evals` | (2W,) | first W: the last W observed eval scores, oldest first, right-aligned and zero-padded (clipped to ±10); last W: 1 where a score is present, else 0 | -10 | 10 |
    | `consecutive_declines` | (1,) | evals in a row lower than the one before | 0 | K |
    | `progress` | (1,) | declared progress, checkpoints done / declared | 0 | 1 |
    | `loss` | (2W,) | the same for the training loss (relative to its initial value) | 0 | 10 |

    Opt-in, off by default: the training-side signals a trainer logs (`reward`,
    `reward_std`, `kl`, `entropy`, `completion_length`, `clip_ratio`; TRL's keys,
    docs/SIGNALS.md), each a (2W,) window like `evals` (values as logged, clipped
    to ±1e6; mask 0 for a job whose run did not log it: every synthetic job).  Ask
    with `obs_fields=["kl", ...]` (signals alone add to every boundary field) on
    `curves=` a corpus whose runs logged them (a job on a run that did not sees it
    absent); they come after the boundary fields in a flat row.

    Hidden and never observed (nor in a step's `info`): the hack label, the true
    peak, the true duration, the noise-free curve.

    Two things a policy can still infer, by design or by necessity:

    * `info["time_h"]` is the cluster clock.  With checkpoints evenly spaced in
      time, K times the gap between two consecutive checkpoints of a running
      job is its true duration.  The calibration's `step_time_jitter` (a
      log-sd; 0.3 in `hard`, 0 in `paper` and `realistic`, so their figures
      do not move)
      spreads each job's checkpoints unevenly in time, keeping its total run
      time, so one gap no longer gives the duration.
    * Without `progress` in `obs_fields`, the number of filled slots of the
      `evals` window (its mask) still counts the checkpoints done, i.e. the
      progress, until the window is full.  This is inherent in observing eval
      scores: a policy that sees a job's evals knows how many it has seen.

    ## Rewards

    `reward="utility"` (default), per job: delivered true quality minus a price on
    GPU-hours.  Let V_i = Q_j(delivered if the job ends at checkpoint i) -
    price * GPUs_j * T_j * i / K, where Q is the noise-free eval score, a job
    ended before K delivers its best observed checkpoint and one that runs to K
    its final checkpoint.  The reward of a decision on job j at checkpoint i is
    the change of V it causes: continuing pays V_{i+1} - V_i, stopping pays 0.
    Summed over a job this telescopes to V_end - V_1, so the episode return is,
    in closed form, `sum_j [Q_j(delivered) - Q_j(1)] - price * sum_j
    [GPU-hours_j - GPUs_j * T_j / K]`: delivered quality minus the GPU bill,
    less a per-job constant no policy can change (what checkpoint 1 already
    delivered and cost).  Under privileged knowledge its optimum is to stop each
    hacking run right after its peak and never stop a healthy one.  With
    `deliver="best"` a job that runs to K delivers its best observed
    checkpoint too.  The
    simulator draws every checkpoint when the episode is built, so it can pay
    V_{i+1} - V_i at decision i: exact, immediate per-job credit, with zero
    reward for a job left alone, while the observation holds only the past.
    `price` is `gpu_hour_price` (per GPU-hour, in eval-score units).

    **The dense utility reward leaks the next checkpoint.**  The reward of a
    "continue" is computed from the noise-free *next* checkpoint: it tells a
    learner, before the agent could know it, whether the next eval will be a
    new best (when it is not, the reward is exactly -price * GPUs * T / K).  It
    is a training signal (exact credit assignment), never information a
    deployed stopper has: a policy that conditions on past rewards can learn
    the hack label from them.  `reward_timing="delayed"` removes the leak: a
    step's reward is the sum of V_end - V_1 of the jobs that *left the cluster*
    (finished or stopped) since the previous step, so the episode return is the
    same closed form as the dense mode, but each job is paid only when its
    outcome is settled.  (With `step_time_jitter`, T / K above is the job's own
    first interval, T x f_1, and an interval costs its own share of T.)

    A deprioritisation pays what a continue pays: the job runs on, to its end.
    The utility reward prices training time only; the costs of a real cluster
    (`costs`, `restore_h`, `eval_cost_h`) show in the system reward and the
    metrics.

    `reward="system"`: time in system plus quality (park/Decima style).  The
    reward of a step is `-time_cost * (integral of jobs in system dt)` over the
    simulated time from this decision to the next, plus `quality_weight * Q` of
    every job delivered in that interval.  The time before the first decision
    is no action's consequence and is not charged, so the return is, in closed
    form, `-time_cost * (sum_j JCT_j - A_0) + quality_weight * sum_j
    Q_j(delivered)`, with A_0 the integral of jobs in system dt from time 0 to
    the first decision.

    ## Starting State

    `reset(seed=s)` draws a new workload (arrivals, sizes, durations, hack
    labels, curves, noise) from `s` and runs the cluster to the first checkpoint
    that needs a decision.

    ## Episode End

    Terminated when every job has finished or been stopped; the final step's
    `info["episode_metrics"]` holds the episode's metrics (JCT, waste,
    precision, recall, ...) as finite floats, and, with `deprioritize=True` or a
    nonzero cost, the cluster metrics (preemptions, paid costs, deprioritised
    jobs' starvation; `evalstop_gym.sim.metrics.cluster_metrics`).  A metric undefined in an episode
    (precision with no job stopped, the mean JCT of a job type absent from the
    workload) is left out of `info`, never NaN or None there: NaN breaks
    `check_environments_match` (NaN != NaN) and both break replay buffers that
    refuse nulls (Tianshou).  `env.unwrapped.episode_metrics()` has every key,
    with `None` for an undefined metric, and the `EpisodeMetricsInfo` wrapper
    copies every key of `METRIC_KEYS` to the top level of `info` (`None` where
    undefined), so SB3's `Monitor(info_keywords=...)` finds them all.  No
    truncation: an episode has at most `sum_j (K - 1)` steps.

    Under a time limit (`max_episode_steps=N` in `gym.make`, Gymnasium's
    `TimeLimit`) the episode is truncated outside the env, which cannot tell
    that step from any other: its `info` is unchanged, with no
    `episode_metrics`.  `env.unwrapped.episode_metrics()` works at any step and
    gives the metrics so far: those of the jobs that have ended (finished or
    been stopped), `n_jobs` counting them, with the cluster's counters
    (`n_events`, `n_decisions`, preemptions, paid costs) and the return's
    components so far.  The `EpisodeMetricsSoFar` wrapper, put around the time
    limit (`EpisodeMetricsSoFar(gym.make(env_id, max_episode_steps=N))`),
    adds them to a truncated episode's last `info` as `info["episode_metrics"]`
    with `info["episode_metrics_partial"] = True`; `EpisodeMetricsInfo` does
    the same before lifting the keys.  Every other `info` stays the env's own.

    The spec has no `reward_threshold`: the return's scale depends on the
    workload, `n_jobs` and the reward mode, so "solved" has no fixed number;
    compare with `EvalStop(k=2)` on the same seeds instead.

    ## Rendering

    `render_mode="ansi"`: `render()` returns the text view of the cluster and
    the job being decided.  `"human"`: that text is printed at `reset()` and
    after every `step()` (`render()` prints nothing more, so a loop that also
    calls it, like `rl_zoo3.enjoy`, shows each state once).  `"rgb_array"`: a
    96 x 320 picture.

    ## Arguments

    ```python
    gym.make("EvalStop-v0", workload="heavy-rlhf", scheduler="srtf-est", num_gpus=64,
             n_jobs=None, load=None, eval_noise=None, hack_fraction=None,
             eval_window=None, obs_fields=None, reward="utility",
             trace=None, trace_cluster=None, calibration="paper", curves=None,
             deliver="final", gpu_hour_price=5e-4, time_cost=0.01, quality_weight=1.0, render_mode=None,
             reward_timing="dense", pools=None, placement="first-fit", deprioritize=False,
             costs="free", restore_h=None, eval_cost_h=None, scheduler_options={},
             curve_scale="run", curve_split="all", curve_noise="recorded", curve_jitter=0.0,
             curve_warp=0.0)
    ```

    These are the fields of `EvalStopConfig` (`evalstop_gym.envs.config`: the
    simulator's `SimConfig`, then the env's own), the one place their defaults
    and allowed values are written; `env_config=EvalStopConfig(...)` passes a
    whole config instead (with `render_mode` only).  `env.env_config` is the
    config in effect, `env.config` its `SimConfig`.

    `workload`: `heavy-rlhf`, `balanced` or `light-rlhf`.  `scheduler`: `fifo`,
    `sjf-est`, `srtf-est`, `loss-aware`, `tiresias`; `scheduler_options`: the
    keyword arguments of its class (e.g. `{"window": 3}` for `loss-aware`).  `n_jobs`, `load`,
    `eval_noise`, `hack_fraction`: override the preset (None keeps it).
    `trace`: a CSV in the Philly format to replay (`n_jobs=None` replays all of
    it); `trace_cluster`: keep one virtual cluster.  `obs_fields`: a list or a
    comma-separated string of boundary fields.  `calibration`: `paper`, `hard` or
    `realistic` (see docs/CALIBRATION.md).  `curves`: a curve-trace corpus (JSONL,
    docs/CURVE_TRACES.md) whose real runs replace the synthetic RLHF curves;
    `curve_scale`, `curve_split`, `curve_noise`, `curve_jitter`, `curve_warp`: how
    they are mapped, which side of the corpus's split, recorded or fresh noise.
    `reward_timing`: `dense` (default; the utility paid decision by decision)
    or `delayed` (each job's utility paid when it leaves the cluster; utility
    mode only).  `pools`: a heterogeneous cluster, GPU type -> count (e.g.
    `{"a100": 32, "h100": 32}` or `"a100=32,h100=32"`; `num_gpus` becomes the
    total); `placement`: `first-fit` or `fastest` (Gavel-like); see
    `evalstop_gym.sim.pools`.  On
    pools the utility's GPU bill counts work in reference GPU-hours (what the job
    would take on the reference GPU), the metrics' `gpu_hours` wall-clock ones.
    `deprioritize`: offer action 2 (not with pools).  `costs`, `restore_h`,
    `eval_cost_h`: the costs of a real cluster (`SimConfig`; 0 by default).
    Bounds: `num_gpus` 1 to 100,000, `n_jobs` 1 to 1,000,000,
    `load` 0.001 to 1000, `eval_noise` 0 to 10, `eval_window` 1 to K,
    `gpu_hour_price`, `time_cost`, `quality_weight` 0 to 1000; integers may be
    NumPy integers, never bools.  Anything else raises `ConfigError` naming the
    argument, the value and what is allowed; so does an unknown argument.
    `deliver`: `final` (the paper's setting) or `best` (a job that runs to the end
    also delivers its best observed checkpoint; the benchmark suite's setting).

    ## Example

    >>> import gymnasium as gym
    >>> import evalstop_gym
    >>> env = gym.make("EvalStop-v0", n_jobs=20)
    >>> obs, info = env.reset(seed=0)
    >>> sorted(obs)
    ['consecutive_declines', 'evals', 'job_type', 'loss', 'progress']
    >>> obs["evals"].shape, env.action_space
    ((20,), Discrete(2))
    >>> obs, reward, terminated, truncated, info = env.step(0)
    >>> sorted(info)
    ['decisions', 'free_gpus', 'jobs_done', 'jobs_in_system', 'time_h']

    ## Version History

    * v0: initial version; later, without changing the dynamics: the `human`
      render mode, `action_masks()`, undefined metrics left out of `info`
      instead of NaN.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human", "rgb_array"],
        "render_fps": 4,
    }

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        """Build the env; every argument is described in the class docstring (Arguments).

        ``kwargs`` are the fields of :class:`~evalstop_gym.envs.config.EvalStopConfig`
        (the simulator's and the env's), or ``env_config=`` one such config.
        """
        if "env_config" in kwargs:
            config = kwargs.pop("env_config")
            if kwargs or not isinstance(config, EvalStopConfig):
                raise ConfigError(
                    "env_config", config, "an EvalStopConfig, and no other argument but render_mode"
                )
        else:
            config = EvalStopConfig.from_kwargs(**kwargs)
        if render_mode is not None and (
            not isinstance(render_mode, str) or render_mode not in self.metadata["render_modes"]
        ):
            raise ConfigError(
                "render_mode", render_mode, f"None or {self.metadata['render_modes']}"
            )
        #: The env's whole config; ``config`` is its simulator part.
        self.env_config = config
        self.config: SimConfig = config.sim_config
        self.reward_mode = config.reward
        self.reward_timing = config.reward_timing
        self.gpu_hour_price = config.gpu_hour_price
        self.time_cost = config.time_cost
        self.quality_weight = config.quality_weight
        self.render_mode = render_mode
        self.obs_fields: tuple[str, ...] = config.obs_fields  # type: ignore[assignment]
        self.deprioritize = config.deprioritize
        #: The episode the env steps (its simulator, tables and rewards).
        self.core = core = EpisodeCore(config)
        #: Where each field sits in an observation row.
        self.layout = core.layout
        self.window = core.layout.window
        self.observation_space = core.layout.space
        self.action_space = spaces.Discrete(3 if self.deprioritize else 2)

    @property
    def sim(self) -> Simulator | None:
        """The episode's simulator (None before the first ``reset``)."""
        return self.core.sim

    # ----------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Draw a new episode from ``seed`` and run it to the first decision."""
        super().reset(seed=seed)
        core = self.core
        row = core.reset_row(self.np_random)
        if self.render_mode == "human":
            print(ansi_frame(self.core.sim), end="")
        return self.layout.split(row.copy()), core.info()

    def step(
        self, action: Any
    ) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply the decision on the pending job and run to the next decision."""
        core = self.core
        row, reward = core.step_row(self._parse_action(action))
        info = core.info()
        if self.render_mode == "human":
            print(ansi_frame(self.core.sim), end="")
        if row is None:
            info["episode_metrics"] = core.info_metrics()
            return (
                self.layout.split(np.zeros(self.layout.width, np.float32)),
                reward,
                True,
                False,
                info,
            )
        return self.layout.split(row.copy()), reward, False, False, info

    def render(self) -> str | np.ndarray | None:
        """An ANSI text frame or an RGB picture of the cluster, per ``render_mode``.

        None for ``human``: that mode prints the text frame at every reset and step.
        """
        if self.render_mode == "ansi":
            return ansi_frame(self.core.sim)
        if self.render_mode == "rgb_array":
            return rgb_frame(self.core.sim)
        return None

    def action_masks(self) -> np.ndarray:
        """Which actions are valid now (sb3-contrib ``MaskablePPO`` reads this).

        Always all True: any job being decided may continue or stop (or be
        deprioritised, with ``deprioritize=True``).
        The method exists so that maskable algorithms run without an
        ``ActionMasker`` wrapper.
        """
        return np.ones(int(self.action_space.n), dtype=bool)

    # -------------------------------------------------------------- internals
    def _parse_action(self, action: Any) -> bool | int:
        """True to stop, False to continue, 2 to deprioritise (with ``deprioritize=True``)."""
        if type(action) is int or isinstance(action, np.integer):  # the fast, common path
            # Plain bools out: an np.bool_ decision would make every later comparison slow.
            if action == 0:
                return False
            if action == 1:
                return True
            if action == 2 and self.deprioritize:
                return 2
        else:
            arr = np.asarray(action)
            if arr.size == 1 and arr.dtype.kind in "iub" and int(arr.item()) in (0, 1):
                return int(arr.item()) == 1
            if self.deprioritize and arr.size == 1 and arr.dtype.kind in "iu" and arr.item() == 2:
                return 2
        allowed = "0 (continue) or 1 (stop and save)"
        if self.deprioritize:
            allowed = "0 (continue), 1 (stop and save) or 2 (deprioritise)"
        raise ValueError(f"action={shown(action)} is not allowed: {allowed}")

    def observation_at(self, jid: int, ckpt: int) -> dict[str, np.ndarray]:
        """The observation this episode shows for job ``jid`` after its checkpoint ``ckpt``.

        For the experiment harness (e.g. offline tuning of stoppers on whole
        episodes): it can look at checkpoints not yet reached, so it is never
        given to a policy (policies never get the env).
        """
        if self.sim is None:
            raise RuntimeError("observation_at() called before reset()")
        return self.layout.split(self.core.row(jid, ckpt).copy())

    def episode_metrics(self) -> dict[str, float | None]:
        """Metrics of the episode, plus the return's components; so far, mid-episode.

        The same keys every episode; an undefined metric (NaN in the
        simulator's metrics) is None.  ``info["episode_metrics"]`` is this
        without the None entries.  Before the end (a truncated episode): over
        the jobs that have ended so far (see the class docstring, Episode End).
        """
        return self.core.episode_metrics()
