"""A learned stopper's seeds played side by side give the rows each seed played alone gives.

``run_episodes`` plays the seeds of a greedy, non-recurrent model in lockstep with one
network call per step (``Learned.batch_actor``); ``reproduce``'s runner hands a worker
every seed of a learned cell at once.  Both must write exactly what the one-episode path
(``run_episode``, ``run_task``) writes, also when the model's Q-values are near-ties that
the last bit of a product decides.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

import torch

from baselines.evaluate import run_episode, run_episodes
from baselines.learned import Learned
from baselines.training import train
from evalstop_experiments.cells import EVALSTOP, Cell, PolicySpec
from evalstop_experiments.runner import run_task, run_unit, work_units
from evalstop_gym.parallel import Executor

ENV = {"n_jobs": 15, "eval_noise": 0.12}
SEEDS = [0, 1, 2, 5, 11]


def _encode(rows: list[dict]) -> list[str]:
    return [json.dumps(r, sort_keys=True, allow_nan=True) for r in rows]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """A DQN on the Dict observation (E6's kind) and a PPO on the flattened one."""
    folder = tmp_path_factory.mktemp("lockstep")
    out = {}
    for algo, policy in (("dqn", "multi"), ("ppo", "mlp")):
        res = train(
            folder / f"{algo}.zip",
            algo=algo,
            policy=policy,
            timesteps=600,
            n_envs=1,
            env_kwargs=ENV,
            eval_freq=600,
            eval_episodes=1,
            progress=False,
        )
        out[algo] = res.path
    return out


def _near_ties(policy: Learned) -> Learned:
    """``policy`` with its last layer shrunk: the actions hinge on the last bits of a product."""
    net = policy.model.policy
    last = net.q_net.q_net[-1] if policy.algo == "dqn" else net.action_net
    with torch.no_grad():
        last.weight.mul_(1e-4)
        last.bias.zero_()
    return policy


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
@pytest.mark.parametrize("ties", [False, True])
def test_side_by_side_episodes_are_the_one_by_one_episodes(models, algo, ties) -> None:
    make = (lambda: _near_ties(Learned(models[algo]))) if ties else lambda: Learned(models[algo])
    policy = make()
    assert policy.batch_actor() is not None  # the batched path is the one under test
    batched = run_episodes(policy, SEEDS, ENV)
    alone = [run_episode(make(), s, **ENV) for s in SEEDS]
    assert _encode(batched) == _encode(alone)
    if algo == "ppo":  # it stops jobs: episodes of several lengths, some envs finish first
        assert len({r["steps"] for r in alone}) > 1


def test_more_seeds_than_side_by_side_play_in_blocks_with_the_same_rows(
    models, monkeypatch
) -> None:
    # The module (the package's ``evaluate`` attribute is the function of that name).
    evaluate = importlib.import_module("baselines.evaluate")
    policy = Learned(models["ppo"])
    want = run_episodes(policy, SEEDS, ENV)
    monkeypatch.setattr(evaluate, "SIDE_BY_SIDE", 2)  # blocks of 2, 2 and 1
    assert _encode(run_episodes(policy, SEEDS, ENV)) == _encode(want)


def test_a_policy_without_a_batch_actor_plays_the_seeds_one_by_one(models) -> None:
    sampling = Learned(models["dqn"], deterministic=False)
    assert sampling.batch_actor() is None
    scripted = EVALSTOP.build()
    assert _encode(run_episodes(scripted, SEEDS, ENV)) == _encode(
        [run_episode(scripted, s, **ENV) for s in SEEDS]
    )


def test_a_learned_cells_seeds_go_to_one_worker_and_give_run_tasks_rows(models) -> None:
    learned = Cell("E6", PolicySpec("Learned", {"path": str(models["dqn"])}, label="DQN"), ENV)
    scripted = Cell("E6", EVALSTOP, ENV)
    episodes = [(c, s) for c in (scripted, learned) for s in (0, 1, 2)]
    units = work_units(episodes)
    assert units == [
        ((scripted, (0,)), [0]),
        ((scripted, (1,)), [1]),
        ((scripted, (2,)), [2]),
        ((learned, (0, 1, 2)), [3, 4, 5]),
    ]
    assert _encode(run_unit(units[-1][0])) == _encode([run_task((learned, s)) for s in (0, 1, 2)])
    # On two workers the three learned episodes go two and one (ceil(3 / 2) to a unit); on
    # three or more, one each: a wide executor still spreads them.
    assert [u for u, _ in work_units(episodes, 2)][3:] == [(learned, (0, 1)), (learned, (2,))]
    assert [u for u, _ in work_units(episodes, 8)][3:] == [(learned, (s,)) for s in (0, 1, 2)]
    # Two learned cells on two workers: 6 episodes, at most 3 to a unit, a cell each.
    other = Cell(
        "E6",
        PolicySpec("Learned", {"path": str(models["dqn"])}, label="B"),
        {**ENV, "eval_noise": 0.05},
    )
    both = [(c, s) for c in (learned, other) for s in (0, 1, 2)]
    assert [u for u, _ in work_units(both, 2)] == [(learned, (0, 1, 2)), (other, (0, 1, 2))]


def test_reproduces_runner_writes_the_one_by_one_files(models, tmp_path) -> None:
    from evalstop_experiments.runner import run_tasks, task_path

    learned = Cell("E6", PolicySpec("Learned", {"path": str(models["dqn"])}, label="DQN"), ENV)
    tasks = [(c, s) for c in (learned, Cell("E6", EVALSTOP, ENV)) for s in SEEDS]
    st = run_tasks(tasks, tmp_path, executor=Executor(workers=1))
    assert st.ran == st.simulated == len(tasks)
    for cell, seed in tasks:
        written = task_path(tmp_path, cell, seed).read_text()
        assert written == json.dumps(run_task((cell, seed)), sort_keys=True, allow_nan=True)
