"""Metrics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import hand_jobs

from evalstop_gym import METRIC_KEYS, KDeclineRule, SimConfig, Simulator
from evalstop_gym.sim.metrics import EpisodeRecord, episode_metrics


def record() -> EpisodeRecord:
    # Four jobs, K = 4.  Job 0: hacking, peak at 0.5, stopped at ckpt 3 (TP).
    # Job 1: hacking, peak 0.25, ran to the end (FN).  Job 2: healthy RLHF,
    # stopped at ckpt 2 (FP).  Job 3: healthy LoRA, ran to the end (TN).
    te = np.array(
        [
            [0.3, 0.6, 0.5, 0.4],
            [0.7, 0.5, 0.3, 0.1],
            [0.2, 0.3, 0.4, 0.5],
            [0.4, 0.45, 0.5, 0.55],
        ]
    )
    return EpisodeRecord(
        num_gpus=16,
        n_ckpt=4,
        arrival=np.array([0.0, 1.0, 2.0, 3.0]),
        finish=np.array([6.0, 9.0, 5.0, 13.0]),
        first_start=np.array([0.0, 1.0, 3.0, 5.0]),
        job_type=np.array([2, 2, 2, 0]),
        gpus=np.array([8, 8, 4, 2]),
        duration=np.array([8.0, 8.0, 4.0, 8.0]),
        hacking=np.array([True, True, False, False]),
        peak_progress=np.array([0.5, 0.25, np.inf, np.inf]),
        stopped=np.array([True, False, True, False]),
        ckpt_done=np.array([3, 4, 2, 4]),
        delivered=np.array([1, 3, 1, 3]),
        true_eval=te,
        gpu_hours=np.array([48.0, 64.0, 8.0, 16.0]),
    )


def test_hand_computed_metrics() -> None:
    m = episode_metrics(record())
    jct = np.array([6.0, 8.0, 3.0, 10.0])
    assert m["mean_jct_h"] == pytest.approx(jct.mean())
    assert m["p50_jct_h"] == pytest.approx(7.0)
    assert m["p95_jct_h"] == pytest.approx(np.percentile(jct, 95))
    assert m["mean_jct_h_rlhf"] == pytest.approx(17 / 3)
    assert m["mean_jct_h_lora"] == pytest.approx(10.0)
    assert math.isnan(m["mean_jct_h_dpo"])
    assert m["mean_wait_h"] == pytest.approx((0 + 0 + 1 + 2) / 4)
    assert m["makespan_h"] == pytest.approx(13.0)
    assert m["gpu_hours"] == pytest.approx(136.0)
    assert m["utilisation"] == pytest.approx(136.0 / (16 * 13.0))
    # Waste: job 0 ran 0.75 - 0.5 past its peak: 8 GPUs x 8 h x 0.25 = 16;
    # job 1 ran 1.0 - 0.25: 8 x 8 x 0.75 = 48.
    assert m["wasted_gpu_hours"] == pytest.approx(64.0)
    assert (m["tp"], m["fp"], m["fn"]) == (1.0, 1.0, 1.0)
    assert m["precision"] == pytest.approx(0.5)
    assert m["recall"] == pytest.approx(0.5)
    assert m["fpr"] == pytest.approx(0.5)
    assert m["f1"] == pytest.approx(0.5)
    assert m["detection_delay_evals"] == pytest.approx((0.75 - 0.5) * 4)
    assert m["stops_before_peak"] == 0.0
    assert m["mean_delivered_quality"] == pytest.approx((0.6 + 0.1 + 0.3 + 0.55) / 4)
    assert m["mean_regret"] == pytest.approx((0.0 + 0.6 + 0.2 + 0.0) / 4)
    assert set(METRIC_KEYS) <= set(m)
    assert all(isinstance(v, float) for v in m.values())


def test_no_flags_gives_nan_precision_and_zero_recall() -> None:
    r = record()
    r.stopped[:] = False
    r.ckpt_done[:] = 4
    r.delivered[:] = 3
    m = episode_metrics(r)
    assert math.isnan(m["precision"]) and m["recall"] == 0.0 and m["fpr"] == 0.0


def test_unfinished_episode_is_refused() -> None:
    r = record()
    r.finish[0] = np.nan
    with pytest.raises(ValueError, match="finished episode"):
        episode_metrics(r)


def test_engine_metrics_on_a_hand_built_workload() -> None:
    # Two 16-GPU jobs in a 16-GPU cluster, 4 checkpoints of 1 h each.
    hack = [0.2, 0.6, 0.5, 0.4]  # peak at ckpt 2, declines at 3 and 4
    healthy = [0.2, 0.3, 0.4, 0.5]
    jobs = hand_jobs(
        [0.0, 0.0],
        [16, 16],
        [4.0, 4.0],
        evals=[hack, healthy],
        hacking=[True, False],
        peak=[0.5, math.inf],
    )
    cfg = SimConfig(num_gpus=16, scheduler="fifo")
    # k = 1 stops job 0 at ckpt 3 (t = 3); job 1 then runs 3 -> 7.
    m = Simulator(cfg, 0, jobs=jobs).run(KDeclineRule(1))
    assert m["mean_jct_h"] == pytest.approx((3.0 + 7.0) / 2)
    assert m["makespan_h"] == pytest.approx(7.0)
    assert m["gpu_hours"] == pytest.approx(16 * 3 + 16 * 4)
    assert m["wasted_gpu_hours"] == pytest.approx(16 * 4 * 0.25)
    assert (m["precision"], m["recall"], m["fpr"]) == (1.0, 1.0, 0.0)
    assert m["mean_delivered_quality"] == pytest.approx((0.6 + 0.5) / 2)
    # Without stopping: JCT (4 + 8) / 2, waste 16 x 4 x 0.5.
    m0 = Simulator(cfg, 0, jobs=jobs).run()
    assert m0["mean_jct_h"] == pytest.approx(6.0)
    assert m0["wasted_gpu_hours"] == pytest.approx(32.0)
    assert m0["mean_regret"] == pytest.approx(0.1)


def test_honest_metrics_return_exactly_their_listed_keys() -> None:
    from evalstop_gym import SimConfig, Simulator
    from evalstop_gym.sim.metrics import HONEST_METRIC_KEYS, honest_metrics

    sim = Simulator(SimConfig(n_jobs=20, eval_noise=0.05), 0)
    sim.run(None)
    m = honest_metrics(sim.record(), sim.curves.obs_eval, 1e-3, sim.deliver_best, sim.step_frac)
    assert tuple(m) == HONEST_METRIC_KEYS
