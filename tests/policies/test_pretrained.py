"""The shipped learned stopper: pinned hash, package data, play, tamper refusal, benchmark CLI."""

from __future__ import annotations

import fnmatch
import re
import shutil
import zipfile
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("stable_baselines3")

import evalstop_gym  # noqa: F401
from baselines import learned as learned_mod
from baselines.learned import PRETRAINED, PRETRAINED_DIR, Learned, from_spec
from evalstop_cli.main import main
from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import UntrustedFileError, sha256_bytes
from evalstop_gym.suite import suite_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(PRETRAINED))
def test_shipped_model_matches_its_pinned_hash_and_record(name: str) -> None:
    path = PRETRAINED_DIR / f"{name}.zip"
    data = path.read_bytes()
    assert len(data) <= 1_000_000
    assert sha256_bytes(data) == PRETRAINED[name]
    record = Path(f"{path}.sha256").read_text().split()
    assert record == [PRETRAINED[name], path.name]


def test_shipped_models_are_package_data() -> None:
    # pyproject's [tool.setuptools.package-data] line for baselines (tomllib is 3.11+)
    line = re.search(r"^baselines = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert line is not None
    patterns = re.findall(r'"([^"]+)"', line.group(1))
    for path in PRETRAINED_DIR.iterdir():
        rel = path.relative_to(ROOT / "baselines").as_posix()
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


def test_pretrained_hard_plays_a_short_hard_episode_within_the_action_space() -> None:
    policy = Learned.pretrained("hard")
    env = gym.make("EvalStop-v0", **{**suite_task("hard-0.05"), "n_jobs": 12})
    policy.check_observation_space(env.observation_space)
    obs, _ = env.reset(seed=3)
    actions, done = [], False
    while not done:
        a = policy.act(obs)
        assert env.action_space.contains(a)
        actions.append(a)
        obs, _, done, _, _ = env.step(a)
    assert len(actions) >= 12


def test_readme_snippet_runs() -> None:
    from readme_snippets import run_snippet

    rows = run_snippet("pretrained")["rows"]
    assert len(rows) == 2 and all(r["policy"] == "Learned-pretrained[hard]" for r in rows)


def test_unknown_pretrained_name_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match=r"pretrained='nope'.*'hard'"):
        Learned.pretrained("nope")
    with pytest.raises(ConfigError, match="pretrained:NAME"):
        from_spec("hard")


def _tampered_copy(tmp_path: Path, rewrite_record: bool) -> Path:
    src = PRETRAINED_DIR / "hard.zip"
    dst = tmp_path / "hard.zip"
    shutil.copy(src, dst)
    with zipfile.ZipFile(dst, "a") as zf:  # still a valid model zip, other bytes
        zf.writestr("payload.txt", "not what was shipped")
    record = sha256_bytes(dst.read_bytes()) if rewrite_record else PRETRAINED["hard"]
    Path(f"{dst}.sha256").write_text(f"{record}  hard.zip\n")
    return dst


@pytest.mark.parametrize("rewrite_record", [False, True])
def test_tampered_pretrained_bytes_are_refused(tmp_path, monkeypatch, rewrite_record) -> None:
    _tampered_copy(tmp_path, rewrite_record)
    monkeypatch.setattr(learned_mod, "PRETRAINED_DIR", tmp_path)
    # The hash is pinned in the code: a record rewritten beside the file does not help.
    with pytest.raises(UntrustedFileError, match="differs"):
        Learned.pretrained("hard")


def test_benchmark_accepts_the_pretrained_model(capsys) -> None:
    argv = ["benchmark", "--seeds", "2", "--workers", "1", "--n-jobs", "10"]
    assert main([*argv, "--calibration", "hard", "--policy", "pretrained:hard"]) == 0
    out = capsys.readouterr().out
    assert "pretrained:hard" in out and "EvalStop" in out


def test_benchmark_refuses_a_bad_spec_or_an_env_the_model_cannot_see(capsys) -> None:
    argv = ["benchmark", "--seeds", "2", "--workers", "1", "--n-jobs", "10"]
    assert main([*argv, "--policy", "pretrained:nope"]) == 2
    assert "hard" in capsys.readouterr().err
    assert main([*argv, "--calibration", "paper", "--policy", "pretrained:hard"]) == 2
    err = capsys.readouterr().err
    assert "obs_fields" in err and "hard-0.05" in err  # the task it was trained on


@pytest.mark.slow
def test_benchmark_suite_scores_the_pretrained_model(tmp_path, capsys) -> None:
    argv = ["benchmark", "--suite", "--tasks", "hard-0.05", "--seeds", "2", "--n-jobs", "10"]
    assert main([*argv, "--policy", "pretrained:hard", "--out", str(tmp_path)]) == 0
    rows = (tmp_path / "E8.md").read_text()
    assert "| hard-0.05 | Bayes | pretrained:hard |" in rows
