"""Scoring your own stopper: one call (:func:`evalstop_experiments.score`) or one command."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from baselines.policies import EvalStop
from evalstop_cli.main import main
from evalstop_experiments import ScoreRow, compare, score, scoring
from evalstop_experiments.experiments.suite import run_task
from evalstop_gym import ConfigError

USER_FILE = textwrap.dedent(
    '''
    import numpy as np

    class Mine:
        """Stop an RLHF run at half its progress: a stopper as a user writes one."""

        name = "Mine"
        seen = []

        def reset(self):
            pass

        def check_observation_space(self, space):
            type(self).seen.append(space)

        def act(self, obs):
            type(self).seen.append(sorted(obs))
            return int(np.argmax(obs["job_type"]) == 2 and obs["progress"][0] >= 0.5)
    '''
)

SMALL = {"seeds": range(2), "n_jobs": 20}


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_stopper.py"
    path.write_text(USER_FILE)
    return path


def test_a_stopper_in_a_users_file_is_scored_in_one_call(user_file: Path) -> None:
    rows = score(f"{user_file}:Mine", "hard-0.12", prices=(1.0, 2.0), **SMALL)
    assert [type(r) for r in rows] == [ScoreRow, ScoreRow]
    assert [r.price_factor for r in rows] == [1.0, 2.0]
    for r in rows:
        assert r.task == "hard-0.12" and r.reference is scoring.Reference.BAYES
        assert r.stopper_kind == scoring.EXTRA and r.seeds == 2
        assert math.isfinite(r.score) and r.score_lo <= r.score <= r.score_hi
        assert r.u_minus_u0_lo <= r.u_minus_u0 <= r.u_minus_u0_hi
        for honest in (
            "fpr_rlhf",
            "killed_healthy_gpu_hours",
            "total_gpu_hours",
            "regret_vs_oracle",
        ):
            assert math.isfinite(r.metrics[honest]), honest


def test_the_stopper_sees_observations_and_a_copy_of_the_space_only(user_file: Path) -> None:
    from evalstop_experiments.scoring import PolicySource

    cls = PolicySource(f"{user_file}:Mine").load()
    cls.seen.clear()
    score(cls(), "hard-0.12", **SMALL)
    assert isinstance(cls.seen[0], spaces.Dict)  # check_observation_space: a space, not the env
    assert all(isinstance(x, spaces.Dict) or x == sorted(cls.seen[1]) for x in cls.seen)


def test_score_is_the_suites_own_row() -> None:
    """The public call and the suite give one stopper the same numbers (one path)."""
    mine = score(EvalStop(2), "hard-0.12", **SMALL)[0]
    suite = run_task("hard-0.12", 1.0, range(2), n_jobs=20)
    row = next(r for r in suite if r.stopper_kind == scoring.EVALSTOP)
    assert (mine.score, mine.score_lo, mine.score_hi) == (row.score, row.score_lo, row.score_hi)
    assert mine.metrics == row.metrics


def test_a_given_model_is_told_each_task_and_price_as_a_spec_is() -> None:
    """An object that reads the task's settings is bound at every price, not left at its
    training defaults."""
    from baselines.backward import BackwardStopper

    model = BackwardStopper.pretrained("general")
    told = []
    bind = model.bind_task

    def recording(kw, price_factor=1.0):
        told.append(kw["gpu_hour_price"])
        return bind(kw, price_factor)

    model.bind_task = recording  # type: ignore[method-assign]
    given = score(model, "hard-0.12", seeds=range(1), n_jobs=10, prices=(0.5, 2.0))
    spec = score("pretrained:general", "hard-0.12", seeds=range(1), n_jobs=10, prices=(0.5, 2.0))
    base = scoring.env_kwargs("hard-0.12", 1.0, 10, None)["gpu_hour_price"]
    assert told == [pytest.approx(0.5 * base), pytest.approx(2.0 * base)]
    assert [r.score for r in given] == [r.score for r in spec]


def test_corpus_tasks_are_scored_against_the_oracle() -> None:
    row = score(EvalStop(2), "trl-gao", seeds=range(2), n_jobs=10)[0]
    assert row.reference is scoring.Reference.ORACLE and row.as_dict()["reference"] == "Oracle"


@pytest.mark.parametrize("spec", ["nosuchmodule_xyz:Mine", "no-colon", "/nonexistent.py:Mine"])
def test_a_bad_spec_fails_with_the_field_named(spec: str) -> None:
    with pytest.raises(ConfigError, match="policy"):
        score(spec, "hard-0.12", **SMALL)


@pytest.mark.slow
def test_benchmark_suite_scores_a_users_file(user_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["benchmark", "--suite", "--tasks", "hard-0.12", "--seeds", "2", "--n-jobs", "20"]
    assert main([*argv, "--policy", f"{user_file}:Mine", "--out", str(out)]) == 0
    assert f"| hard-0.12 | Bayes | {user_file}:Mine |" in (out / "E8.md").read_text()
    capsys.readouterr()
    assert main([*argv, "--policy", f"{user_file}:Nope", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalstop-gym: error: policy")
    # the finished table is never overwritten: a second run into its folder is refused
    table = (out / "E8.csv").read_bytes(), (out / "E8.md").read_bytes()
    assert main([*argv, "--policy", f"{user_file}:Mine", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalstop-gym: error: out") and "E8.csv" in err[0]
    assert ((out / "E8.csv").read_bytes(), (out / "E8.md").read_bytes()) == table


def test_the_readme_scores_a_stopper_from_a_users_file(tmp_path, monkeypatch) -> None:
    """The README's two snippets as a user runs them: the file, then the one call."""
    from readme_snippets import snippet

    (tmp_path / "my_stopper.py").write_text(snippet("my-stopper"))
    monkeypatch.chdir(tmp_path)
    call = snippet("score")
    assert "seeds=range(30)" in call
    call = call.replace("seeds=range(30)", "seeds=range(2), n_jobs=20")  # the same call, smaller
    namespace: dict = {}
    exec(compile(call, "README.md:score", "exec"), namespace)
    row = namespace["row"]
    assert isinstance(row, ScoreRow)
    assert row.stopper == "my_stopper.py:LateDrop" and row.task == "hard-0.12"
    assert math.isfinite(row.score) and row.score_lo <= row.score <= row.score_hi


def test_fresh_seeds_span_the_64_bit_seed_space_and_are_listed(monkeypatch) -> None:
    monkeypatch.setattr(scoring.api, "FRESH_SEEDS", 2)  # where resolve_seeds reads it
    row = score(EvalStop(2), "hard-0.12", seeds="fresh", n_jobs=10)[0]
    assert row.seeds == 2 and len(row.test_seeds) == 2
    assert all(0 <= s < 2**64 for s in row.test_seeds)
    assert len({s for _ in range(20) for s in scoring.fresh_seeds(3)}) == 60  # no repeats
    assert max(s for _ in range(50) for s in scoring.fresh_seeds(4)) > 2**60


def test_the_env_accepts_the_largest_seed() -> None:
    kw = scoring.env_kwargs("hard-0.12", 1.0, n_jobs=5)
    assert math.isfinite(scoring.play(kw, 2**64 - 1, EvalStop(2))["utility"])


@pytest.mark.parametrize(
    "seeds", ["random", [-1], [2**64], [], [0.5], [True], 1.5, 0, np.int64(3), [3, 1, 3]]
)
def test_bad_seeds_fail_with_the_field_named(seeds) -> None:
    with pytest.raises(ConfigError, match=r"seeds=.* is not allowed: a non-empty iterable"):
        score(EvalStop(2), "hard-0.12", seeds=seeds, n_jobs=10)


def test_a_count_of_seeds_or_a_repeated_seed_is_refused_saying_why() -> None:
    """``seeds=30`` was a TypeError ('int' object is not iterable); ``seeds=[1, 1]`` played
    seed 1 twice and counted it twice, a narrower interval on no new evidence."""
    with pytest.raises(ConfigError, match=r"range\(30\): the first 30 seeds"):
        score(EvalStop(2), "hard-0.12", seeds=30, n_jobs=10)
    with pytest.raises(ConfigError, match="3 repeated: a repeated seed counts twice"):
        compare(EvalStop(2), EvalStop(3), "hard-0.12", seeds=[3, 1, 3], n_jobs=10)


PRIVILEGED_FILE = textwrap.dedent(
    '''
    from baselines.curve_oracle import CurveOracle

    class Declared(CurveOracle):
        """A tweak of the CurveOracle: it reads the simulator, so it is no stopper."""

    class Sneaky:
        """Declares itself privileged only once built."""

        name = "Sneaky"

        def __init__(self):
            self.privileged = True

        def bind(self, sim, price):
            raise AssertionError("bound to the simulator")

        def reset(self):
            pass

        def act(self, obs):
            return 0
    '''
)


@pytest.fixture
def no_episode(monkeypatch) -> None:
    """Any episode played fails the test: a refusal must come first."""

    def played(*args, **kwargs):
        raise AssertionError("an episode was played")

    # where the parts look them up: play_stoppers and suite_stoppers in task, tuned_stoppers in tuning
    monkeypatch.setattr(scoring.task, "play", played)
    monkeypatch.setattr(scoring.task, "tune_floors", played)
    monkeypatch.setattr(scoring.tuning, "tune_floors", played)


def test_what_would_read_the_simulator_is_refused_before_any_episode(
    tmp_path: Path, no_episode
) -> None:
    from baselines.curve_oracle import CurveOracle
    from baselines.oracle import OracleStopper

    path = tmp_path / "privileged.py"
    path.write_text(PRIVILEGED_FILE)
    hidden = "privileged|hidden curves"
    for policy, match in [
        (None, hidden),  # would play the Oracle
        (OracleStopper(), hidden),
        (CurveOracle(), hidden),
        (f"{path}:Declared", hidden),  # refused when the spec is read
        (f"{path}:Sneaky", hidden),  # refused when built, before it plays
        (42, "act"),
        (object(), "act"),
    ]:
        with pytest.raises(ConfigError, match=match):
            score(policy, "hard-0.12", **SMALL)
        with pytest.raises(ConfigError, match=match):
            scoring.compare_each([EvalStop(2)], [policy], "hard-0.12", **SMALL)
    with pytest.raises(ConfigError, match=hidden):
        scoring.stopper_spec(f"{path}:Declared")


def test_benchmark_suite_refuses_a_privileged_class_in_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "privileged.py"
    path.write_text(PRIVILEGED_FILE)
    argv = ["benchmark", "--suite", "--tasks", "hard-0.12", "--seeds", "2", "--n-jobs", "20"]
    assert main([*argv, "--policy", f"{path}:Declared", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Declared" in err[0] and "privileged" in err[0]
    assert not (tmp_path / "out").exists()
