"""The vector env's shared row table: the same batches as each core's own rows, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import evalstop_gym
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.envs import EvalStopEnv, EvalStopVectorEnv
from evalstop_gym.envs.tables import SharedRows


def _play(venv: EvalStopVectorEnv, seed: int, steps: int) -> list[tuple]:
    """Every step's (observation copy, rewards, terminated) under seeded random actions."""
    obs, _ = venv.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [(_copied(obs), None, None)]
    for _ in range(steps):
        obs, rew, term, _, _ = venv.step(rng.integers(0, 2, venv.num_envs))
        out.append((_copied(obs), rew.copy(), term.copy()))
    return out


def _copied(obs: object) -> object:
    return {k: v.copy() for k, v in obs.items()} if isinstance(obs, dict) else obs.copy()


def _same(a: list[tuple], b: list[tuple]) -> None:
    assert len(a) == len(b)
    for (oa, ra, ta), (ob, rb, tb) in zip(a, b):
        if isinstance(oa, dict):
            assert oa.keys() == ob.keys()
            for k in oa:
                np.testing.assert_array_equal(oa[k], ob[k])
                assert oa[k].tobytes() == ob[k].tobytes()
        else:
            assert oa.tobytes() == ob.tobytes()
        if ra is not None:
            assert ra.tobytes() == rb.tobytes() and (ta == tb).all()


@pytest.mark.parametrize(
    ("kw", "mode"),
    [
        ({}, "NextStep"),
        ({"flatten": True}, "SameStep"),
        ({"copy": False, "reward": "system", "scheduler": "tiresias"}, "NextStep"),
        ({"obs_fields": "progress,evals", "eval_window": 3}, "SameStep"),
    ],
)
def test_shared_rows_give_the_batches_of_each_cores_own_rows(kw: dict, mode: str) -> None:
    shared = EvalStopVectorEnv(3, autoreset_mode=mode, n_jobs=6, **kw)
    own = EvalStopVectorEnv(3, autoreset_mode=mode, n_jobs=6, **kw)
    assert shared.shared_rows is not None
    own.shared_rows = None  # each core's row views, joined (the path trace replays take)
    _same(_play(shared, 4, 120), _play(own, 4, 120))


def test_signal_fields_are_tabulated_into_the_shared_rows_as_into_the_cores() -> None:
    kw = {"curves": str(corpus_path(TRL_CORPUS)), "n_jobs": 6, "obs_fields": ["evals", "kl"]}
    shared, own = EvalStopVectorEnv(2, **kw), EvalStopVectorEnv(2, **kw)
    own.shared_rows = None
    _same(_play(shared, 2, 60), _play(own, 2, 60))


def test_a_trace_replay_keeps_each_cores_rows() -> None:
    kw = {"trace": evalstop_gym.SAMPLE_TRACE, "n_jobs": 12, "num_gpus": 32}
    venv = EvalStopVectorEnv(2, **kw)
    assert venv.shared_rows is None
    obs, _ = venv.reset(seed=3)
    single = EvalStopEnv(**kw)
    sobs, _ = single.reset(seed=3)
    for k in sobs:
        np.testing.assert_array_equal(obs[k][0], sobs[k])


def test_observations_handed_out_do_not_change_later() -> None:
    venv = EvalStopVectorEnv(4, flatten=True, n_jobs=5)
    obs, _ = venv.reset(seed=0)
    kept = [(obs, obs.copy())]
    for _ in range(150):  # several episodes per sub-environment: their slots are rewritten
        obs, *_ = venv.step(np.ones(4, dtype=np.int64))
        kept.append((obs, obs.copy()))
    for handed, copy in kept:
        assert handed.tobytes() == copy.tobytes()
    assert len({id(h) for h, _ in kept}) == len(kept)


def test_a_grown_table_keeps_every_slots_rows_at_their_keys() -> None:
    def init(view: np.ndarray) -> None:
        view[:, :, 0] = 7.0  # a constant column

    rows = SharedRows(2, 3, 2, init)
    first = rows.slot(1, 2)
    first[:, :, 1] = np.arange(6, dtype=np.float32).reshape(2, 3)
    keys = [0, 1 * 3 + 2]  # slot 0's zeros; slot 1, job 1 after checkpoint 2
    before = rows.take(keys)
    rows.slot(0, 5)  # a bigger episode grows every slot
    assert rows.cap == 5
    assert rows.take(keys).tobytes() == before.tobytes()
    assert before.tolist() == [[0.0, 0.0], [7.0, 4.0]]
    assert (rows.slot(1, 5)[:, :, 0] == 7.0).all()  # the new jobs' constant columns too
    out = np.empty((2, 2), np.float32)
    assert rows.take(keys, out) is out and out.tobytes() == before.tobytes()
