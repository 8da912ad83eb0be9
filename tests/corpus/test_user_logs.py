"""The loaders on genuine TRL logs (tiny DPO, RLOO and GRPO runs, made by make_logs.py).

Each case of a user's log gives the right values or one clear line: the metric's direction,
the keys a file has when one is missing, a warning for a constant series or an optional key
that never occurs, and the signed KL estimate RLOO logs.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.corpus import (
    CurveTrace,
    CurveTraceError,
    load_openrlhf_log,
    load_trl_trainer_state,
    read_traces,
    write_traces,
)

TRL = Path(__file__).resolve().parents[1] / "data" / "curves" / "trl"
DPO_NOISY = TRL / "dpo_noisy" / "trainer_state.json"
DPO_CLEAN = TRL / "dpo_clean" / "trainer_state.json"
RLOO = TRL / "rloo" / "trainer_state.json"
GRPO = TRL / "grpo" / "trainer_state.json"


def _history(path: Path) -> list[dict]:
    return json.loads(path.read_text())["log_history"]


def _quiet(fn, *args, **kwargs):
    """``fn(...)``, failing on any warning: the case must load silently."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def test_eval_loss_with_its_direction() -> None:
    tr = _quiet(load_trl_trainer_state, DPO_NOISY, eval_key="eval_loss", greater_is_better=False)
    logged = [e["eval_loss"] for e in _history(DPO_NOISY) if "eval_loss" in e]
    assert tr.eval.tolist() == [-v for v in logged]
    assert tr.meta["eval_negated"] is True and tr.meta["eval_key"] == "eval_loss"
    assert tr.run_id == "dpo_noisy" and len(tr) == 20
    # The best checkpoint is the lowest eval loss (step 48 of the over-fitting run) ...
    assert int(tr.step[np.argmax(tr.eval)]) == int(tr.step[np.argmin(logged)])


def test_eval_loss_read_as_a_score_warns() -> None:
    with pytest.warns(UserWarning, match=r"dpo_noisy.*'eval_loss' is read as higher-is-better"):
        tr = load_trl_trainer_state(DPO_NOISY, eval_key="eval_loss")
    assert "eval_negated" not in tr.meta


def test_dpo_accuracies_load_silently() -> None:
    tr = _quiet(load_trl_trainer_state, DPO_CLEAN, eval_key="eval_rewards/accuracies")
    assert len(tr) == 6 and tr.kl is None and tr.label is None
    # The training loss at an eval step is the one logged at that step.
    by_step = {e["step"]: e["loss"] for e in _history(DPO_CLEAN) if "loss" in e}
    assert tr.loss.tolist() == [by_step[s] for s in tr.step.tolist()]


def test_the_end_of_training_summary_loss_warns_it_is_constant() -> None:
    with pytest.warns(
        UserWarning, match=r"'train_loss' gives every one of the 20 .*only at step 120"
    ):
        tr = load_trl_trainer_state(
            DPO_NOISY, eval_key="eval_loss", loss_key="train_loss", greater_is_better=False
        )
    assert np.all(tr.loss == tr.loss[0])


def test_a_constant_eval_warns() -> None:
    # RLOO's eval_loss is 0 at every evaluation (its loss is centred by the baseline).
    with pytest.warns(UserWarning, match=r"rloo.*eval key 'eval_loss' gives every one"):
        load_trl_trainer_state(RLOO, eval_key="eval_loss", greater_is_better=False)


def test_a_missing_eval_key_lists_the_files_eval_keys() -> None:
    with pytest.raises(CurveTraceError, match=r"'eval_reward'.*eval keys: \[.*'eval_loss'") as e:
        load_trl_trainer_state(DPO_NOISY)
    assert "'eval_rewards/accuracies'" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_missing_loss_key_lists_the_training_keys() -> None:
    with pytest.raises(CurveTraceError, match=r"'policy_loss'.*training keys: \[.*'loss'"):
        load_trl_trainer_state(GRPO, eval_key="eval_reward", loss_key="policy_loss")


@pytest.mark.parametrize("role", ["kl", "gold", "proxy"])
def test_an_optional_key_that_never_occurs_warns(role: str) -> None:
    with pytest.warns(UserWarning, match=rf"grpo.*{role}_key 'typo' never occurs") as caught:
        tr = load_trl_trainer_state(GRPO, eval_key="eval_reward", **{f"{role}_key": "typo"})
    assert getattr(tr, role) is None
    assert "'kl'" in str(caught[0].message)  # the keys the file does have


def test_grpo_with_kl_proxy_and_gold_loads_silently() -> None:
    tr = _quiet(
        load_trl_trainer_state,
        GRPO,
        eval_key="eval_reward",
        kl_key="kl",
        proxy_key="reward",
        gold_key="eval_rewards/reward/mean",
    )
    assert len(tr) == 4 and tr.label is not None and np.all(tr.kl >= 0)


def test_rloos_signed_kl_estimate_is_accepted_and_kept(tmp_path) -> None:
    logged = [e["kl"] for e in _history(RLOO) if e.get("kl") is not None]
    assert min(logged) < 0  # the genuine log dips below 0 early
    tr = _quiet(load_trl_trainer_state, RLOO, eval_key="eval_reward", kl_key="kl")
    assert len(tr) == 4
    # The format's files accept it too, and read it back as written.
    negative = CurveTrace("r", [0, 1, 2], [0.1, 0.2, 0.3], [1.0, 0.9, 0.8], kl=[0.0, -0.02, 0.1])
    write_traces([negative], tmp_path / "t.jsonl")
    assert read_traces(tmp_path / "t.jsonl")[0].kl.tolist() == [0.0, -0.02, 0.1]


def test_a_signed_kl_estimate_is_kept_and_a_non_finite_one_refused(tmp_path) -> None:
    log = tmp_path / "m.jsonl"
    log.write_text(
        '{"step": 1, "train/policy_loss": 0.3, "train/kl": -0.4}\n'
        '{"step": 2, "train/policy_loss": 0.2, "train/kl": -0.1, "eval/reward": 0.1}\n'
        '{"step": 3, "train/policy_loss": 0.1, "train/kl": 0.2, "eval/reward": 0.2}\n'
    )
    assert _quiet(load_openrlhf_log, log).kl.tolist() == [-0.1, 0.2]
    log.write_text('{"step": 1, "train/policy_loss": 0.3, "train/kl": NaN}\n')
    with pytest.raises(CurveTraceError, match=r"line 1.*'train/kl'.*finite"):
        load_openrlhf_log(log)


def test_openrlhf_default_keys_absent_are_silent_and_typos_warn(tmp_path) -> None:
    log = tmp_path / "m.jsonl"
    log.write_text(
        '{"step": 1, "train/policy_loss": 0.3}\n{"step": 2, "train/policy_loss": 0.2, '
        '"eval/reward": 0.1}\n{"step": 3, "train/policy_loss": 0.1, "eval/reward": 0.2}\n'
    )
    tr = _quiet(load_openrlhf_log, log)
    assert tr.kl is None and tr.proxy is None
    with pytest.warns(UserWarning, match="kl_key 'train/kll' never occurs"):
        load_openrlhf_log(log, kl_key="train/kll")
    with pytest.raises(CurveTraceError, match=r"eval keys: \['eval/reward'\]"):
        load_openrlhf_log(log, eval_key="eval/score")
    assert load_openrlhf_log(log, greater_is_better=False).eval.tolist() == [-0.1, -0.2]


@pytest.mark.slow
def test_a_real_tiny_rloo_run_loads_as_its_stored_log(tmp_path) -> None:
    pytest.importorskip("trl")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_logs", TRL / "make_logs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fresh = _quiet(
        load_trl_trainer_state, module.main(tmp_path, "rloo"), eval_key="eval_reward", kl_key="kl"
    )
    stored = load_trl_trainer_state(RLOO, eval_key="eval_reward", kl_key="kl")
    # The same run (one thread, fixed seeds) logs the same curves; timings differ.
    np.testing.assert_allclose(fresh.eval, stored.eval, rtol=1e-5)
    np.testing.assert_allclose(fresh.kl, stored.kl, rtol=1e-4, atol=1e-6)


def test_gao_fit_takes_a_signed_kl_estimate():
    """A run whose KL estimate dips below 0 (accepted from RLOO logs) still gets a finite fit."""
    import warnings

    import numpy as np

    from evalstop_gym.corpus import CurveTrace, fit_gao_trace

    step = np.arange(1, 9) * 10
    kl = np.array([-0.02, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7])
    gold = 0.3 + np.sqrt(np.maximum(kl, 0)) * (1 - 0.8 * np.sqrt(np.maximum(kl, 0)))
    trace = CurveTrace("rloo", step, gold, np.linspace(1, 0.5, 8), kl=kl, gold=gold)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no sqrt of a negative KL
        fit = fit_gao_trace(trace)
    assert np.isfinite(fit.alpha) and np.isfinite(fit.beta)
