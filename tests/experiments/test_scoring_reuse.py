"""The scoring path plays an episode once where two stoppers are the same: the Best floor
is its family's tuned floor (the same policy object), and its rows are those of playing it
again; the bootstrap weights of a held-out task are drawn once per shape and seed."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from evalstop_experiments import scoring


def test_the_best_floor_reuses_its_floors_episodes_with_the_same_rows(monkeypatch) -> None:
    kw = scoring.env_kwargs("trl-heldout", 1.0, 30, split="test")
    stoppers = scoring.suite_stoppers("trl-heldout", kw, (2000, 2001))
    best = next(st for st in stoppers if st.kind == scoring.BEST_FLOOR)
    assert any(st.policy is best.policy for st in stoppers if st.kind in scoring.FLOOR_KINDS)
    played: list[str] = []
    original = scoring.play

    def counting(kw, seed, policy, job_terms=None):
        played.append(getattr(policy, "name", "Oracle"))
        return original(kw, seed, policy, job_terms=job_terms)

    monkeypatch.setattr(scoring.task, "play", counting)  # where play_stoppers looks it up
    seeds = [0, 1]
    reused = scoring.score_task("trl-heldout", 1.0, kw, stoppers, seeds)
    assert len(played) == (len(stoppers) - 1) * len(seeds)
    # The Best floor played as a policy of its own (a copy): the same rows, number for number.
    apart = [
        dataclasses.replace(st, policy=copy.deepcopy(st.policy)) if st is best else st
        for st in stoppers
    ]
    again = scoring.score_task("trl-heldout", 1.0, kw, apart, seeds)
    assert len(played) == (2 * len(stoppers) - 1) * len(seeds)
    assert [repr(r.as_dict()) for r in reused] == [repr(r.as_dict()) for r in again]
    assert [r.per_seed for r in reused] == [r.per_seed for r in again]


def test_bootstrap_weights_are_drawn_once_and_read_only() -> None:
    a = scoring._boot_weights(7, 3, 50, 0)
    b = scoring._boot_weights(7, 3, 50, 0)
    assert a[0] is b[0] and not a[0].flags.writeable and not a[1].flags.writeable
    rng = np.random.default_rng(0)
    wr = rng.multinomial(7, np.full(7, 1 / 7), size=50)
    ws = rng.multinomial(3, np.full(3, 1 / 3), size=50)
    assert np.array_equal(a[0], wr) and np.array_equal(a[1], ws)


def test_an_episode_of_a_rewritten_corpus_file_is_built_again(tmp_path) -> None:
    """The built-episode cache keys a corpus by its file, not only by its path."""
    import os

    from evalstop_gym.corpus import read_traces, write_traces

    kw = scoring.env_kwargs("trl-heldout", 1.0, 30, split="test")
    path = tmp_path / "corpus.jsonl"
    traces = read_traces(kw["curves"])
    write_traces(traces, path)
    kw["curves"] = str(path)
    first = scoring.episode_arrays(kw, 0)
    assert scoring.episode_arrays(kw, 0).arrays is first.arrays  # cached while unchanged
    # The same path, new contents: every gold curve (what the task replays) tilted upwards.
    write_traces(
        [dataclasses.replace(t, gold=t.gold + np.linspace(0, 0.1, len(t.gold))) for t in traces],
        path,
    )
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a coarse clock
    again = scoring.episode_arrays(kw, 0)
    assert again.arrays is not first.arrays
    assert not np.array_equal(again.arrays.evals, first.arrays.evals)
    fresh, _ = scoring._build_episode(kw, 0)
    assert np.array_equal(again.arrays.evals, fresh.evals, equal_nan=True)
