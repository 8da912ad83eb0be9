"""Scoring untrusted stoppers: an isolated stopper sees observations only; fresh seeds defeat replay.

In-process, a stopper is code beside the evaluator: the frame-peeker reaches the
env and plays like the Oracle (the hole is real).  Isolated (its own process,
observations in, actions out) and on fresh 64-bit seeds, neither the
frame-peeker nor the seed-matcher scores better than the fair EvalStop(2).
"""

from __future__ import annotations

import gc
import secrets
import sys
import textwrap
import time
from pathlib import Path

import pytest

from baselines.evaluate import play_episode
from baselines.policies import NoStop
from evalstop_experiments.isolated import IsolatedPolicy, IsolatedSource, IsolationError
from evalstop_experiments.scoring import (
    EVALSTOP,
    EXTRA,
    NOSTOP,
    Stopper,
    StopperSpec,
    reference_stopper,
    score,
    score_task,
)
from evalstop_gym.errors import ConfigError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from hostile_stoppers import Fair, FramePeeker  # noqa: E402

HOSTILE = str(HERE / "hostile_stoppers.py")
TASK, N_JOBS = "hard-0.12", 40


def _kw() -> dict:
    from evalstop_experiments.scoring import env_kwargs

    return env_kwargs(TASK, n_jobs=N_JOBS)


def _write(tmp_path: Path, body: str) -> str:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "stopper.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return str(path)


def _gone(proc: object, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:  # type: ignore[attr-defined]
            return True
        time.sleep(0.05)
    return False


def test_in_process_the_frame_peeker_reaches_the_env() -> None:
    kw = _kw()
    peek, _ = play_episode(FramePeeker(), 3, kw)
    oracle, _ = play_episode(None, 3, kw)
    fair, _ = play_episode(Fair(), 3, kw)
    assert peek["utility"] == oracle["utility"] > fair["utility"]


@pytest.mark.slow
def test_isolated_cheaters_on_fresh_seeds_score_no_better_than_a_fair_stopper() -> None:
    kw = _kw()
    seeds = [secrets.randbits(64) for _ in range(10)]
    peeker = IsolatedSource(f"{HOSTILE}:FramePeeker")
    matcher = IsolatedSource(f"{HOSTILE}:SeedMatcher")
    fair = IsolatedSource(f"{HOSTILE}:Fair")
    stoppers = [
        Stopper(NOSTOP, "NoStop", NoStop()),
        Stopper(EVALSTOP, "Fair", fair(TASK, kw)),
        Stopper(EXTRA, "FramePeeker", peeker(TASK, kw)),
        Stopper(EXTRA, "SeedMatcher", matcher(TASK, kw)),
        reference_stopper(kw),
    ]
    try:
        rows = {r.stopper: r for r in score_task(TASK, 1.0, kw, stoppers, seeds)}
    finally:
        for st in stoppers[1:4]:
            st.policy.close()  # type: ignore[union-attr]
    for cheat in ("FramePeeker", "SeedMatcher"):
        assert rows[cheat].score <= rows["Fair"].score + 1e-12
        assert rows[cheat].u_minus_u0 <= rows["Fair"].u_minus_u0 + 1e-12
    # Isolation alone does not stop replay on a public seed: hence the fresh seeds.
    replay = matcher(TASK, kw)
    try:
        public, _ = play_episode(replay, 4, kw)
    finally:
        replay.close()
    assert public["utility"] == play_episode(None, 4, kw)[0]["utility"]


@pytest.mark.slow
def test_score_takes_an_isolated_stopper_spec() -> None:
    spec = StopperSpec("Fair (isolated)", IsolatedSource(f"{HOSTILE}:Fair"))
    seeds = [secrets.randbits(64) for _ in range(2)]
    (row,) = score(spec, TASK, seeds=seeds, n_jobs=N_JOBS)
    (plain,) = score(Fair(), TASK, seeds=seeds, n_jobs=N_JOBS)
    assert row.stopper == "Fair (isolated)" and row.params.startswith("isolated(")
    assert row.score == plain.score and row.metrics == plain.metrics


@pytest.mark.slow
def test_bad_actions_errors_and_timeouts_are_one_line_and_kill_the_child(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """
        import time
        class Stopper:
            name = "s"
            def reset(self):
                self.n = 0
            def act(self, obs):
                self.n += 1
                if obs["progress"][0] > 0.5 and self.n > 3:
                    return {"two": 2, "str": "1"}.get(MODE, 0)
                if self.n > 1 and MODE == "slow":
                    time.sleep(30)
                if self.n > 1 and MODE == "exit":
                    import os, sys
                    print("exiting now", file=sys.stderr, flush=True)
                    os._exit(3)
                if self.n > 1 and MODE == "raise":
                    raise RuntimeError("boom\\nsecond line")
                return 0
        MODE = "two"
        """
    )
    kw = _kw()
    for mode, match in (
        ("two", "not an action in 0..1"),
        ("str", "not an integer action"),
        ("raise", "RuntimeError: boom second line"),
        ("slow", "no answer within 1 s"),
        ("exit", "its process exited .stderr: exiting now"),
    ):
        spec = _write(tmp_path / mode, source.replace('MODE = "two"', f"MODE = {mode!r}"))
        policy = IsolatedPolicy(f"{spec}:Stopper", TASK, kw, timeout=1.0)
        proc = policy._proc
        with pytest.raises(IsolationError, match=match) as err:
            play_episode(policy, 0, kw)
        assert "\n" not in str(err.value)
        assert _gone(proc)


def test_the_child_is_stopped_on_close_and_on_garbage_collection() -> None:
    policy = IsolatedPolicy(f"{HOSTILE}:Fair", TASK, _kw())
    proc = policy._proc
    policy.close()
    assert _gone(proc)
    with pytest.raises(IsolationError, match="after close"):
        policy.reset()
    policy = IsolatedPolicy(f"{HOSTILE}:Fair", TASK, _kw())
    proc = policy._proc
    del policy
    gc.collect()
    assert _gone(proc)


def test_specs_are_checked_before_any_episode_and_never_imported_here(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    spec = _write(
        tmp_path,
        f"""
        import os
        open({str(marker)!r} + str(os.getpid()), "w").close()
        class Stopper:
            name = "s"
            def reset(self): pass
            def act(self, obs): return 0
        """,
    )
    import os

    IsolatedSource(f"{spec}:Stopper")  # the probe loads it in a child
    assert list(tmp_path.glob("imported*")) and not (tmp_path / f"imported{os.getpid()}").exists()
    for bad in ("nocolon", f"{spec}:Missing", 3, f"{tmp_path}/none.py:X"):
        with pytest.raises(ConfigError, match="policy"):
            IsolatedSource(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout"):
        IsolatedSource(f"{spec}:Stopper", timeout=float("nan"))
    with pytest.raises(TypeError, match="IsolatedSource"):
        import pickle

        pickle.dumps(IsolatedPolicy(f"{spec}:Stopper", TASK, _kw()))


@pytest.mark.slow
def test_score_isolated_flag_plays_the_spec_from_a_child() -> None:
    """``score(spec, isolated=True)`` is the same score as in-process, and refuses an object."""
    seeds = [secrets.randbits(64) for _ in range(2)]
    (row,) = score(f"{HOSTILE}:Fair", TASK, seeds=seeds, n_jobs=N_JOBS, isolated=True)
    (plain,) = score(Fair(), TASK, seeds=seeds, n_jobs=N_JOBS)
    assert row.params.startswith("isolated(") and row.score == plain.score
    with pytest.raises(ConfigError, match="isolated=True"):
        score(Fair(), TASK, seeds=seeds, n_jobs=N_JOBS, isolated=True)


def test_benchmark_suite_has_an_isolated_flag() -> None:
    from evalstop_cli.main import build_parser

    args = build_parser().parse_args(["benchmark", "--suite", "--isolated", "--fresh-seeds"])
    assert args.isolated and args.fresh_seeds
