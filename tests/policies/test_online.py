"""OnlineStopper decides on a run fed one evaluation at a time exactly as EvalStop-v0 does."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from baselines import Cusum, EvalStop, LossPlateau, NoStop
from baselines.bayes import BayesStopper
from baselines.floors import FirstEvalGate
from baselines.online import OnlineStopper, ScaleRule
from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.envs.core import BOUNDS, ObservationLayout
from evalstop_gym.envs.tables import observation_rows, observed
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.checkpoints import checkpoint_tables
from evalstop_gym.sim.workloads import JOB_TYPES


class Recorder:
    """Wraps a policy; records every observation and action the env hands it, by job."""

    def __init__(self, policy, env: EvalStopEnv) -> None:
        self.policy, self.env = policy, env
        self.name = policy.name
        self.seen: dict[int, list[tuple[dict[str, np.ndarray], int]]] = {}

    def reset(self) -> None:
        self.policy.reset()

    def act(self, obs):
        action = self.policy.act(obs)
        core = self.env.core
        self.seen.setdefault(core.jid, []).append(({k: v.copy() for k, v in obs.items()}, action))
        return action


def play(env: EvalStopEnv, policy, seed: int) -> None:
    obs, _ = env.reset(seed=seed)
    done = False
    while not done:
        obs, _, done, _, _ = env.step(policy.act(obs))


@pytest.mark.parametrize(
    "make, kw",
    [
        (lambda: EvalStop(2), {}),
        (lambda: EvalStop(3), {"eval_window": 4}),
        (lambda: Cusum(0.05, 0.01), {"calibration": "hard", "eval_noise": 0.05}),
        (lambda: LossPlateau(), {"eval_window": 6}),
        (lambda: FirstEvalGate(0.3, 0.35), {"calibration": "hard"}),
    ],
)
def test_observations_and_decisions_equal_the_envs(make, kw) -> None:
    env = EvalStopEnv(n_jobs=25, **kw)
    rec = Recorder(make(), env)
    play(env, rec, seed=3)
    sim = env.sim
    k = sim.curves.obs_eval.shape[1]
    n_stops = 0
    for jid, seen in rec.seen.items():
        online = OnlineStopper(
            make(),
            k,
            job_type=JOB_TYPES[int(sim.batch.job_type[jid])],
            relative_loss=False,
            eval_window=env.layout.window,
        )
        for i, (obs, action) in enumerate(seen):
            stop = online.observe(
                float(sim.curves.obs_eval[jid, i]), loss=float(sim.curves.loss[jid, i])
            )
            got = online.observation()
            assert got.keys() == obs.keys()
            for f in obs:
                np.testing.assert_array_equal(got[f], obs[f], err_msg=f"job {jid} ckpt {i + 1} {f}")
            assert stop == bool(action)
        n_stops += online.stopped
        # The env stopped (or finished) the job where the stopper's record ends.
        assert online.stopped == bool(seen[-1][1])
    assert rec.seen


@pytest.mark.parametrize("window", [1, 3, 12])
def test_each_observation_is_the_env_tables_row(window: int) -> None:
    # Values beyond the env's bounds (clipped), ties, declines and a loss: every row of the
    # env's own table function for a lone job equals the online observation after it.
    rng = np.random.default_rng(window)
    k = 12
    ev = np.round(rng.normal(0, 6, (1, k)), 1)
    ev[0, 4] = ev[0, 3]  # a tie is no decline
    loss = np.abs(rng.normal(3, 5, (1, k)))
    declines = checkpoint_tables(ev)[1]
    fields = ("job_type", "evals", "consecutive_declines", "progress", "loss")
    table = observation_rows(fields, np.array([1]), declines, ev, loss, window, 3, BOUNDS)
    layout = ObservationLayout(fields, window, k)
    s = OnlineStopper(NoStop(), k, job_type="dpo", relative_loss=False, eval_window=window)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the clip warning
        for i in range(k):
            s.observe(float(ev[0, i]), loss=float(loss[0, i]))
            want = layout.split(table[0, i])
            got = s.observation()
            for f in fields:
                assert got[f].dtype == np.float32
                np.testing.assert_array_equal(got[f], want[f], err_msg=f"ckpt {i + 1} {f}")


def test_the_env_default_window_and_a_stop_happen() -> None:
    env = EvalStopEnv(n_jobs=40, calibration="hard")
    rec = Recorder(EvalStop(2), env)
    play(env, rec, seed=1)
    stops = [j for j, s in rec.seen.items() if s[-1][1]]
    assert stops, "the episode should stop some job"
    sim, k = env.sim, env.sim.curves.obs_eval.shape[1]
    for jid in stops[:5]:
        online = OnlineStopper(EvalStop(2), k, job_type=JOB_TYPES[int(sim.batch.job_type[jid])])
        for i in range(len(rec.seen[jid])):
            online.observe(float(sim.curves.obs_eval[jid, i]), step=10 * (i + 1))
        assert online.stopped and online.stop_step == 10 * len(rec.seen[jid])
        # It delivers the best observed checkpoint, as the simulator does.
        best = int(sim.best_observed[jid, len(rec.seen[jid]) - 1])
        assert online.best_step == 10 * (best + 1)


def test_bayes_decides_as_in_the_env() -> None:
    env = EvalStopEnv(n_jobs=12, calibration="hard", eval_noise=0.05)
    bayes = BayesStopper.from_config(env.env_config)
    rec = Recorder(bayes, env)
    play(env, rec, seed=0)
    sim, k = env.sim, env.sim.curves.obs_eval.shape[1]
    for jid, seen in list(rec.seen.items())[:6]:
        online = OnlineStopper(bayes, k, job_type=JOB_TYPES[int(sim.batch.job_type[jid])])
        for i, (_, action) in enumerate(seen):
            assert online.observe(float(sim.curves.obs_eval[jid, i])) == bool(action)


def test_bayes_with_other_checkpoints_is_refused() -> None:
    with pytest.raises(ConfigError, match="n_checkpoints"):
        OnlineStopper(BayesStopper("hard"), 7)


def test_the_last_evaluation_is_no_decision_and_later_ones_warn() -> None:
    s = OnlineStopper(EvalStop(1), 3)
    assert not s.observe(1.0)
    assert not s.observe(2.0)
    assert not s.observe(1.0)  # the 3rd of 3: the run has ended, nothing to decide
    with pytest.warns(UserWarning, match="beyond n_checkpoints=3"):
        assert not s.observe(0.5)
    assert [d["action"] for d in s.decisions] == ["continue", "continue", "end", "end"]
    assert s.best_step == 2 and not s.stopped


def test_after_a_stop_further_calls_return_true_and_record_nothing() -> None:
    s = OnlineStopper(EvalStop(2), 10)
    for v in (0.1, 0.5, 0.4):
        assert not s.observe(v)
    assert s.observe(0.3)
    assert s.stop_step == 4 and s.best_step == 2 and s.best_value == 0.5
    assert s.observe(0.9) and s.n_observed == 4


def test_lower_is_better_negates_the_metric() -> None:
    losses = [1.0, 0.8, 0.7, 0.75, 0.9, 1.2]
    low = OnlineStopper(EvalStop(2), 10, greater_is_better=False)
    high = OnlineStopper(EvalStop(2), 10)
    stops_low = [low.observe(v) for v in losses]
    stops_high = [high.observe(v) for v in losses]
    # Read as a loss, two rises are two declines: stop after 0.9; the best is 0.7.
    assert stops_low.index(True) == 4 and low.best_value == 0.7
    # Read as a score, the first two evals are declines already.
    assert stops_high.index(True) == 2 and high.best_value == 1.0


def test_scale_maps_the_metric_before_the_policy_sees_it() -> None:
    # CUSUM with threshold 0.1 on a reward of a few units: identity stops on a wiggle,
    # the fitted map (median start -> 0.3, median gain -> 0.6) only on a real fall.
    runs = [[1.0, 3.0, 5.0], [1.2, 2.7, 3.6], [0.9, 4.2, 3.9]]
    rule = ScaleRule.fit(runs)
    assert rule(1.0) == pytest.approx(0.3) and rule(4.3) == pytest.approx(0.9)
    curve = [1.0, 3.0, 2.8, 3.5, 3.9, 3.0, 2.0]
    raw = OnlineStopper(Cusum(0.1), 10)
    scaled = OnlineStopper(Cusum(0.1), 10, scale=rule)
    assert [raw.observe(v) for v in curve].index(True) == 2
    assert [scaled.observe(v) for v in curve].index(True) == 5
    assert observed(scaled.observation()["evals"])[0] == pytest.approx(rule(1.0))
    # Direction first, then scale: a loss's median start and gain.
    lo = ScaleRule.fit([[2.0, 1.0], [3.0, 1.0]], greater_is_better=False)
    assert lo(-2.5) == pytest.approx(0.3) and lo(-1.0) == pytest.approx(0.9)


def test_a_metric_beyond_the_envs_bounds_warns_once() -> None:
    s = OnlineStopper(Cusum(0.1), 10)
    with pytest.warns(UserWarning, match="clips to"):
        s.observe(250.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.observe(260.0)
    assert list(observed(s.observation()["evals"])) == [10.0, 10.0]


def test_scale_fit_refuses_runs_that_never_improve() -> None:
    with pytest.raises(ConfigError, match="median gain"):
        ScaleRule.fit([[1.0, 0.5], [2.0, 2.0]])
    with pytest.raises(ConfigError, match="factor"):
        ScaleRule(0.0, -1.0)


def test_resume_from_state_dict_gives_identical_later_decisions() -> None:
    rng = np.random.default_rng(0)
    curve = np.cumsum(rng.normal(0.02, 0.05, 30))
    losses = np.linspace(2.0, 0.5, 30)
    for make in (lambda: EvalStop(3), lambda: Cusum(0.08), lambda: LossPlateau(2, 0.05)):
        whole = OnlineStopper(make(), 30)
        for i, (v, lo) in enumerate(zip(curve, losses, strict=True)):
            if whole.observe(float(v), loss=float(lo), step=5 * i):
                break
        part = OnlineStopper(make(), 30)
        for i in range(4):
            part.observe(float(curve[i]), loss=float(losses[i]), step=5 * i)
        state = json.loads(json.dumps(part.state_dict()))
        resumed = OnlineStopper(make(), 30)
        resumed.load_state_dict(state)
        for i in range(4, 30):
            if resumed.stopped or resumed.observe(
                float(curve[i]), loss=float(losses[i]), step=5 * i
            ):
                break
        assert resumed.decisions == whole.decisions
        assert (resumed.stop_step, resumed.best_step) == (whole.stop_step, whole.best_step)


def test_a_state_of_other_settings_is_refused() -> None:
    s = OnlineStopper(EvalStop(2), 10)
    s.observe(1.0)
    with pytest.raises(ConfigError, match="greater_is_better"):
        OnlineStopper(EvalStop(2), 10, greater_is_better=False).load_state_dict(s.state_dict())
    with pytest.raises(ConfigError, match="n_checkpoints"):
        OnlineStopper(EvalStop(2), 11).load_state_dict(s.state_dict())


def test_a_changed_decision_on_resume_warns_and_keeps_the_record() -> None:
    s = OnlineStopper(EvalStop(2), 10)
    for v in (1.0, 0.9, 0.8):
        s.observe(v)
    state = s.state_dict()
    other = OnlineStopper(NoStop(), 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other.load_state_dict(state)
    assert any("decides differently" in str(w.message) for w in caught)
    assert other.stopped and other.stop_step == 3


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"n_checkpoints": 0}, "n_checkpoints"),
        ({"job_type": "ppo"}, "job_type"),
        ({"scale": 2.0}, "scale"),
        ({"eval_window": 0}, "eval_window"),
        ({"obs_fields": ["evals", "nope"]}, "obs_fields"),
    ],
)
def test_bad_arguments_are_one_line_errors(kwargs, field) -> None:
    args = {"n_checkpoints": 10, **kwargs}
    k = args.pop("n_checkpoints")
    with pytest.raises(ConfigError, match=field):
        OnlineStopper(EvalStop(2), k, **args)


def test_bad_observations_are_refused() -> None:
    s = OnlineStopper(EvalStop(2), 10)
    with pytest.raises(ConfigError, match="value"):
        s.observe(float("nan"))
    s.observe(1.0, step=5)
    with pytest.raises(ConfigError, match="step"):
        s.observe(1.0, step=5)


@pytest.mark.slow
def test_a_learned_model_plays_on_its_own_window() -> None:
    pytest.importorskip("stable_baselines3")
    from baselines.learned import Learned

    model = Learned.pretrained("hard")
    s = OnlineStopper(model, 20)
    assert s.layout.window == model.meta["eval_window"]
    for v in np.linspace(0.3, 0.9, 10):
        s.observe(float(v), loss=1.0)
    assert len(s.decisions) == 10
    with pytest.raises(ValueError, match="trained on"):
        OnlineStopper(model, 20, eval_window=5)
