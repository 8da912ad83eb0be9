"""Learned stoppers: a short SB3 training run, save/load, and the common evaluate() path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from baselines import EvalStop, NoStop, evaluate
from baselines.learned import Learned, read_meta
from baselines.training import (
    ALGOS,
    ZOO_KEYS,
    TrainResult,
    load_hyperparams,
    load_zoo_config,
    train,
)
from evalstop_cli.main import main
from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.fileio import UntrustedFileError

ENV = {"n_jobs": 15}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> TrainResult:
    out = tmp_path_factory.mktemp("models") / "ppo.zip"
    res = train(out, timesteps=3000, n_envs=2, env_kwargs=ENV, eval_freq=1500, progress=False)
    assert res.path == out and out.exists()
    assert res.timesteps >= 3000 and res.steps_per_second > 0
    return res


@pytest.fixture(scope="module")
def model_path(trained: TrainResult) -> Path:
    return trained.path


def _hand_built_observations(w: int = 10) -> list[dict[str, np.ndarray]]:
    """A hacking-looking and a healthy-looking RLHF checkpoint, and a LoRA one."""
    out = []
    for job_type, evals, declines in (
        (2, [0.2, 0.5, 0.7, 0.6, 0.4], 2),
        (2, [0.1, 0.2, 0.3, 0.4, 0.5], 0),
        (0, [0.3, 0.6, 0.7, 0.75, 0.77], 0),
    ):
        ev = np.zeros(2 * w, np.float32)
        ev[: len(evals)], ev[w : w + len(evals)] = evals, 1
        loss = np.zeros(2 * w, np.float32)
        loss[: len(evals)], loss[w : w + len(evals)] = np.linspace(1, 0.5, len(evals)), 1
        out.append(
            {
                "job_type": np.eye(3, dtype=np.float32)[job_type],
                "evals": ev,
                "consecutive_declines": np.array([declines], np.float32),
                "progress": np.array([len(evals) / w], np.float32),
                "loss": loss,
            }
        )
    return out


def test_short_training_produces_a_model_that_acts(model_path: Path) -> None:
    meta = read_meta(model_path)
    assert meta["algo"] == "ppo"
    assert set(meta["obs_fields"]) == {
        "job_type",
        "evals",
        "consecutive_declines",
        "progress",
        "loss",
    }
    assert meta["learning_curve"], "EvalCallback should have evaluated at least once"
    # EvalStop on the same evaluation episodes, the learning curve's reference line
    assert np.isfinite(meta["evalstop_reference"])
    best = max(meta["learning_curve"], key=lambda c: c[1])
    assert meta["selected"] == "best periodic evaluation" and meta["selected_at"] == best[0]


def test_learned_acts_as_the_trained_model_on_hand_built_observations(
    trained: TrainResult,
) -> None:
    policy = Learned(trained.path)
    for obs in _hand_built_observations():
        expected = int(trained.model.predict(obs, deterministic=True)[0])
        assert policy.act(obs) == expected


def _action_probs(model, obs: dict[str, np.ndarray]) -> np.ndarray:
    tensor, _ = model.policy.obs_to_tensor(obs)
    return model.policy.get_distribution(tensor).distribution.probs.detach().numpy()


def test_saved_model_acts_as_the_model_before_saving(trained: TrainResult) -> None:
    loaded = Learned(trained.path)
    env = EvalStopEnv(**ENV)
    obs, _ = env.reset(seed=1)
    done, steps = False, 0
    while not done:
        before = int(trained.model.predict(obs, deterministic=True)[0])
        assert loaded.act(obs) == before
        np.testing.assert_array_equal(
            _action_probs(loaded.model, obs), _action_probs(trained.model, obs)
        )
        obs, _, done, _, _ = env.step(before)
        steps += 1
    assert steps > 10


def test_learned_runs_through_evaluate_with_the_scripted_keys(model_path: Path) -> None:
    learned = evaluate(Learned(model_path), [0, 1], **ENV)
    scripted = evaluate(EvalStop(), [0, 1], **ENV)
    assert [set(r) for r in learned] == [set(r) for r in scripted]
    assert all(np.isfinite(r["mean_jct_h"]) for r in learned)


def test_a_model_refuses_other_observation_fields(model_path: Path) -> None:
    with pytest.raises(ValueError, match=r"trained on obs_fields=.*progress"):
        evaluate(Learned(model_path), [0], obs_fields="job_type,evals,consecutive_declines", **ENV)
    with pytest.raises(ValueError, match="trained on obs_fields"):
        Learned(model_path).act({"evals": np.zeros(20, np.float32)})


def test_not_a_model_file(tmp_path: Path) -> None:
    p = tmp_path / "x.zip"
    p.write_bytes(b"not a zip")
    with pytest.raises(UntrustedFileError, match="no hash record"):
        Learned(p)  # the bytes are verified before anything in them is parsed
    with pytest.raises(ValueError, match="not an evalstop-gym model file"):
        Learned(p, trust=True)


def test_cli_train_restricted_fields_and_mlp(tmp_path: Path, capsys) -> None:
    out = tmp_path / "a2c.zip"
    code = main(
        [
            "train",
            "--algo",
            "a2c",
            "--timesteps",
            "600",
            "--n-envs",
            "1",
            "--policy",
            "mlp",
            "--out",
            str(out),
            "--no-progress",
            "--eval-freq",
            "300",
            "--obs-fields",
            "job_type,evals,consecutive_declines",
            "--eval-noise",
            "0.12",
            "--n-jobs",
            "10",
        ]
    )
    assert code == 0 and "saved" in capsys.readouterr().out
    meta = read_meta(out)
    assert meta["flatten"] and set(meta["obs_fields"]) == {
        "job_type",
        "evals",
        "consecutive_declines",
    }
    assert meta["env_kwargs"]["eval_noise"] == 0.12
    rows = evaluate(Learned(out), [0], obs_fields="job_type,evals,consecutive_declines", n_jobs=10)
    assert rows[0]["policy"].startswith("Learned")


def test_training_uses_the_zoo_files_hyperparameters(trained: TrainResult) -> None:
    meta = read_meta(trained.path)
    assert meta["hyperparams"] == load_hyperparams("ppo")
    assert meta["env_kwargs"]["n_jobs"] == ENV["n_jobs"]  # the caller's override wins
    for algo in ALGOS:
        conf = load_zoo_config(algo)
        assert conf["policy_kwargs"]["net_arch"] == [64, 64]
        assert conf["env_kwargs"]["n_jobs"] == 100 and conf["n_envs"] == 4
        assert not set(load_hyperparams(algo)) & set(ZOO_KEYS)


def test_train_config_is_what_the_keyword_call_builds() -> None:
    from baselines.training import TrainConfig
    from baselines.training.train import _as_config

    config = TrainConfig("m.zip", algo="dqn", timesteps=10)
    assert _as_config("m.zip", {"algo": "dqn", "timesteps": 10}) == config
    assert _as_config(None, {"out": "m.zip", "algo": "dqn", "timesteps": 10}) == config
    assert _as_config(config, {"seed": 3}) == TrainConfig("m.zip", algo="dqn", timesteps=10, seed=3)
    bads = (
        {"policy": "cnn"},
        {"vec": "subproc"},
        {"timesteps": 0},
        {"algo": "sac"},
        {"eval_episodes": 0},
        {"eval_episodes": 2.5},
        {"eval_freq": -1},
        {"eval_freq": True},
    )
    for bad in bads:
        with pytest.raises(ValueError, match=f"{next(iter(bad))}="):
            TrainConfig("m.zip", **bad)


def test_zoo_policy_kwargs_are_read_as_literals_only(tmp_path: Path, monkeypatch) -> None:
    from baselines.training import zoo

    (tmp_path / "ppo.yml").write_text(
        "EvalStop-v0:\n  policy_kwargs: \"__import__('os').getcwd()\"\n"
    )
    monkeypatch.setattr(zoo, "HYPERPARAMS_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"ppo.yml: policy_kwargs=.* is not allowed"):
        load_zoo_config("ppo")


def _stochastic_return(model, kw: dict, seeds: range) -> float:
    """Mean episode return of the model's stochastic policy (the one PPO optimises)."""
    import torch

    torch.manual_seed(0)
    total = 0.0
    for seed in seeds:
        env = EvalStopEnv(**kw)
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            action = int(model.predict(obs, deterministic=False)[0])
            obs, r, done, _, _ = env.step(action)
            total += r
    return total / len(seeds)


@pytest.mark.slow
def test_ppo_with_the_shipped_defaults_improves_on_its_initial_policy(tmp_path: Path) -> None:
    from stable_baselines3 import PPO

    from evalstop_gym.suite import suite_task

    kw = {**suite_task("hard-0.05"), "n_jobs": 20}
    res = train(
        tmp_path / "ppo.zip",
        timesteps=6000,
        n_envs=2,
        seed=100,
        env_kwargs=kw,
        eval_freq=10**9,
        progress=False,
        keep_best=False,
    )
    # Same seed, same spaces, same hyperparameters: the very weights training started from.
    initial = PPO("MultiInputPolicy", EvalStopEnv(**kw), seed=100, **load_hyperparams("ppo"))
    test = range(3)  # test episodes; training saw seeds 100, 101 and their successors
    before = _stochastic_return(initial, kw, test)
    after = _stochastic_return(res.model, kw, test)
    nostop = np.mean([r["return"] for r in evaluate(NoStop(), test, **kw)])
    assert after > before + 0.5 * (nostop - before), (before, after, nostop)


def test_cli_train_on_a_task_with_ppo_trains_on_job_episodes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ppo.zip"
    args = ["train", "--task", "hard-0.05", "--n-jobs", "8", "--out", str(out)]
    args += ["--timesteps", "600", "--n-envs", "1", "--eval-freq", "600", "--no-progress"]
    assert main(args) == 0 and "saved" in capsys.readouterr().out
    meta = read_meta(out)
    assert meta["env_kwargs"]["calibration"] == "hard"
    assert meta["env_kwargs"]["eval_noise"] == 0.05 and meta["env_kwargs"]["n_jobs"] == 8
    assert meta["env_wrapper"] == "evalstop_gym.envs.wrappers.JobEpisodes"
    assert meta["hyperparams"]["gamma"] == 1.0


@pytest.mark.slow
def test_recurrent_ppo_keeps_each_jobs_lstm_state_across_interleaved_cluster_steps(
    tmp_path: Path,
) -> None:
    """On a cluster episode, Learned threads each job's own LSTM state, as in training.

    Reference: the in-memory model run on each job's observations alone (one
    state per job id, read from the env), i.e. what per-job training episodes
    showed it.  States must match exactly, also when another job decided between.
    """
    pytest.importorskip("sb3_contrib")
    from baselines.learned import history_key
    from evalstop_gym.suite import suite_task

    kw = {**suite_task("hard-0.05"), "n_jobs": 8}
    small = {"n_steps": 64, "batch_size": 32, "n_epochs": 1}
    res = train(tmp_path / "lstm.zip", algo="recurrentppo", timesteps=128, n_envs=1,
                env_kwargs=kw, eval_freq=10**9, progress=False, keep_best=False,
                hyperparams=small)  # fmt: skip
    loaded = Learned(res.path)
    env = EvalStopEnv(**kw)
    obs, _ = env.reset(seed=3)
    threads: dict[int, tuple] = {}
    done, last, resumed_after_other = False, None, 0
    while not done:
        jid = env.core.jid
        resumed_after_other += jid in threads and last != jid
        state = threads.get(jid)
        want, threads[jid] = res.model.predict(
            obs, state=state, episode_start=np.array([state is None]), deterministic=True
        )
        action = loaded.act(obs)
        assert action == int(want)
        for got, ref in zip(loaded._jobs.states[history_key(obs)], threads[jid]):
            np.testing.assert_array_equal(got, ref)
        obs, _, done, _, _ = env.step(action)
        last = jid
    assert resumed_after_other > 5


def test_recurrent_ppo_refuses_whole_cluster_episodes(tmp_path: Path) -> None:
    pytest.importorskip("sb3_contrib")
    with pytest.raises(ValueError, match="needs env_wrapper"):
        train(tmp_path / "x.zip", algo="recurrentppo", timesteps=64, env_kwargs=ENV,
              hyperparams={"env_wrapper": None}, progress=False)  # fmt: skip


@pytest.mark.parametrize(
    ("hyperparams", "match"),
    [
        ([1], "a dict"),
        ({"nonsense": 1}, "nonsense is not one of ppo's keyword arguments"),
        ({"seed": 3}, "seed is not one"),  # TrainConfig.seed sets it
        ({1: 2}, "a dict"),
    ],
)
def test_train_refuses_hyperparams_sb3_does_not_take_before_any_work(
    tmp_path: Path, hyperparams, match
) -> None:
    from baselines.training import TrainConfig

    with pytest.raises(ValueError, match=match):
        TrainConfig(out=str(tmp_path / "m.zip"), hyperparams=hyperparams)
    assert list(tmp_path.iterdir()) == []
    TrainConfig(out=str(tmp_path / "m.zip"), hyperparams={"gamma": 0.9, "env_wrapper": None})


@pytest.mark.parametrize(
    ("algo", "hyperparams", "match"),
    [
        ("ppo", {"n_epochs": 0}, "n_epochs=0 is not allowed for ppo: an integer >= 1"),
        ("ppo", {"gamma": "x"}, r"gamma='x' is not allowed for ppo: a number in \[0, 1\]"),
        ("ppo", {"gamma": 1.5}, "gamma=1.5"),
        ("ppo", {"learning_rate": -1}, "learning_rate=-1 is not allowed for ppo: a number > 0"),
        ("ppo", {"learning_rate": float("nan")}, "learning_rate=nan"),
        ("ppo", {"batch_size": 0}, "batch_size=0 is not allowed for ppo: an integer >= 1"),
        ("ppo", {"n_steps": 2.5}, "n_steps=2.5"),
        ("ppo", {"n_steps": True}, "n_steps=True"),
        ("ppo", {"target_kl": 0}, "target_kl=0 is not allowed for ppo: null or a number > 0"),
        ("ppo", {"normalize_advantage": 1}, "true or false"),
        ("ppo", {"policy_kwargs": {"net_arch": "bad"}}, "net_arch a list of layer sizes"),
        ("ppo", {"policy_kwargs": {"net_arch": [64, 0]}}, "net_arch"),
        ("ppo", {"policy_kwargs": {"net_arch": {"pi": [8], "x": [8]}}}, "under pi, vf or qf"),
        ("ppo", {"policy_kwargs": [1]}, "policy_kwargs=\\[1\\]"),
        ("dqn", {"tau": 0}, r"tau=0 is not allowed for dqn: a number in \(0, 1\]"),
        ("dqn", {"train_freq": [4, "steps"]}, "train_freq"),
        ("dqn", {"gradient_steps": -2}, "an integer >= 0, or -1"),
        ("dqn", {"exploration_final_eps": 2}, "exploration_final_eps=2"),
        ("a2c", {"rms_prop_eps": 0}, "rms_prop_eps=0"),
    ],
)
def test_train_refuses_hyperparam_values_sb3_rejects_late_before_any_work(
    tmp_path: Path, algo, hyperparams, match
) -> None:
    """SB3 rejects these only when the model is built or at its first update, after the
    envs and the log folder were made (``n_epochs=0``: an UnboundLocalError in ``train``)."""
    from baselines.training import TrainConfig

    with pytest.raises(ValueError, match=match):
        TrainConfig(out=str(tmp_path / "m.zip"), algo=algo, hyperparams=hyperparams)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "hyperparams",
    [
        {"gamma": 0, "gae_lambda": 1, "learning_rate": 1e-3, "clip_range_vf": None},
        {"policy_kwargs": {"net_arch": {"pi": [8], "vf": [8, 8]}, "ortho_init": False}},
        {"target_kl": 0.02, "normalize_advantage": False, "batch_size": 1},
        # what SB3 takes from Python beside JSON: schedules, no clipping, tuples
        {"learning_rate": lambda progress: 3e-4 * progress, "clip_range": lambda p: 0.2},
        {"max_grad_norm": float("inf"), "policy_kwargs": {"net_arch": (64, 64)}},
    ],
)
def test_train_config_takes_values_sb3_takes(tmp_path: Path, hyperparams) -> None:
    from baselines.training import TrainConfig

    TrainConfig(out=str(tmp_path / "m.zip"), hyperparams=hyperparams)
    TrainConfig(out=str(tmp_path / "d.zip"), algo="dqn",
                hyperparams={"batch_size": 1, "train_freq": [1, "episode"], "gradient_steps": -1})  # fmt: skip
    TrainConfig(out=str(tmp_path / "d.zip"), algo="dqn", hyperparams={"gradient_steps": 0})


def test_train_refused_by_sb3_leaves_no_folder_and_says_why_in_one_line(tmp_path: Path) -> None:
    """A value only SB3 knows to refuse (a policy keyword it lacks) is reported as one
    ValueError, and the folders the call made are removed; a folder that was there stays."""
    out = tmp_path / "new" / "deeper" / "m.zip"
    bad = {"policy_kwargs": {"nonsense": 1}}
    with pytest.raises(ValueError, match=r"ppo refused them \(TypeError: .*nonsense"):
        train(out, timesteps=64, n_envs=1, env_kwargs=ENV, hyperparams=bad, progress=False)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="n_steps=1 with n_envs=1"):
        train(out, timesteps=64, n_envs=1, env_kwargs=ENV, hyperparams={"n_steps": 1},
              progress=False)  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    mine = tmp_path / "m"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="refused them"):
        train(tmp_path / "m.zip", timesteps=64, n_envs=1, env_kwargs=ENV, hyperparams=bad,
              progress=False)  # fmt: skip
    assert (mine / "notes.txt").read_text() == "mine"


def test_ppo_refuses_what_it_would_assert_only_while_it_normalises_advantages(tmp_path) -> None:
    """PPO asserts batch_size > 1 and n_steps * n_envs > 1 only with normalize_advantage."""
    out = tmp_path / "m.zip"
    for hp, match in (({"batch_size": 1}, "batch_size=1"), ({"n_steps": 1}, "n_steps=1")):
        with pytest.raises(ValueError, match=match + ".*or normalize_advantage false"):
            train(out, timesteps=64, n_envs=1, env_kwargs=ENV, hyperparams=hp, progress=False)
        assert list(tmp_path.iterdir()) == []
    # A2C has no such limit: one step a rollout is a plain A2C.
    res = train(out, algo="a2c", timesteps=8, n_envs=1, env_kwargs=ENV, eval_freq=10**9,
                hyperparams={"n_steps": 1, "env_wrapper": None}, progress=False)  # fmt: skip
    assert res.path.exists()


def test_a_refused_build_removes_only_what_it_made(tmp_path, monkeypatch) -> None:
    """It removed the outermost folder it had made: under a new root two sweeps share, the
    other run's folder went with it."""
    import importlib

    train_module = importlib.import_module("baselines.training.train")  # the module, not train()

    def build_fails(*args, **kwargs):
        (tmp_path / "new" / "b").mkdir()
        (tmp_path / "new" / "b" / "monitor.csv").write_text("the other run's")
        raise TypeError("no such policy keyword")

    monkeypatch.setattr(train_module, "_make_model", build_fails)
    with pytest.raises(ValueError, match=r"ppo could not build its model \(TypeError"):
        train(tmp_path / "new" / "a" / "m.zip", timesteps=64, n_envs=1, env_kwargs=ENV,
              progress=False)  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["b"]
    assert (tmp_path / "new" / "b" / "monitor.csv").read_text() == "the other run's"


def test_a_run_without_evaluations_never_reads_back_an_earlier_runs_logs(tmp_path) -> None:
    """A best_model.zip left in the log folder (an earlier run's, or a file of the user's)
    was loaded, running its pickled code, and saved as this run's model whenever this run
    made no periodic evaluation; its evaluations.npz became this run's learning curve."""
    log = tmp_path / "m"
    log.mkdir()
    (log / "best_model.zip").write_bytes(b"not a model: loading it would fail")
    np.savez(log / "evaluations.npz", timesteps=np.array([99]), results=np.array([[1.0]]))
    res = train(tmp_path / "m.zip", timesteps=64, n_envs=1, env_kwargs=ENV, eval_freq=10**9,
                hyperparams={"n_steps": 64, "batch_size": 32, "n_epochs": 1}, progress=False)  # fmt: skip
    meta = read_meta(res.path)
    assert meta["selected"] == "last" and res.learning_curve == []
    assert (log / "best_model.zip").read_bytes() == b"not a model: loading it would fail"
