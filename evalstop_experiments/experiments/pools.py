"""E11: EvalStop on heterogeneous GPU pools, under both placements, beside the homogeneous cluster.

The paper's limitations name homogeneous hardware.  E11 reruns E1's setting
(heavy-RLHF, SRTF-Est, NoStop vs EvalStop on the same seeds) on clusters of
typed pools (:mod:`evalstop_gym.sim.pools`), each under the heterogeneity-blind
``first-fit`` placement and the Gavel-like ``fastest`` one:

* ``homogeneous``: 64 reference GPUs (E1 itself);
* ``a100+h100``: 32 A100 + 32 H100, the same job stream (so less contended:
  the H100s add capacity);
* ``a100+h100 load-matched``: the same cluster at the offered load that gives
  it the homogeneous cluster's contention (:func:`matched_load`);
* ``v100+a100``: 32 V100 + 32 A100 (slower than the reference: more contended).

Reported: EvalStop's paired ΔJCT and Δ total GPU-hours (wall clock) against
NoStop on each cluster, and its detection figures.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalstop_gym.sim.pools import GPU_SPEEDS, PLACEMENTS
from evalstop_gym.sim.workloads import get_workload, with_overrides

from ..cells import EVALSTOP, NOSTOP, Cell, base_env, env_sweep
from ..plan import Experiment, Plan, ReproduceOptions
from ..summary import find, num, pct

#: The heterogeneous clusters of E11 (GPU type -> GPUs), 64 GPUs each like E1's.
CLUSTERS: dict[str, dict[str, int]] = {
    "a100+h100": {"a100": 32, "h100": 32},
    "v100+a100": {"v100": 32, "a100": 32},
}
#: The cluster also run at matched contention.
MATCHED = "a100+h100"
HOMOGENEOUS = "homogeneous"
POLICIES = (NOSTOP, EVALSTOP)


def effective_gpus(pools: dict[str, int], env: dict[str, Any]) -> float:
    """Reference-GPU equivalents of ``pools`` for the workload of ``env``.

    A pool's effective speed is the harmonic mean of its per-type speeds
    weighted by each type's share of the offered GPU-hours (time per unit of
    work averages over the mix); the cluster's is the size-weighted sum.
    """
    wl = get_workload(env.get("workload", "heavy-rlhf"))
    share = [m * p.mean_gpu_hours() for m, p in zip(wl.type_mix, wl.profiles)]
    total = sum(share)
    return sum(
        size / sum(w / total / s for w, s in zip(share, GPU_SPEEDS[gpu]) if w > 0)
        for gpu, size in pools.items()
    )


def matched_load(pools: dict[str, int], env: dict[str, Any]) -> float:
    """The offered load at which ``pools`` is as contended as E1's homogeneous cluster.

    The engine offers ``load x num_gpus`` reference GPU-hours per hour; scaling
    the load by effective / nominal GPUs keeps offered work / capacity fixed.
    """
    wl = with_overrides(get_workload(env.get("workload", "heavy-rlhf")), load=env.get("load"))
    return wl.load * effective_gpus(pools, env) / sum(pools.values())


def e11_cells(overrides: dict[str, Any]) -> list[Cell]:
    """NoStop and EvalStop on the homogeneous and each heterogeneous cluster, both placements."""
    env0 = base_env(overrides)
    cells = [Cell("E11", p, env0, variant=HOMOGENEOUS) for p in POLICIES]
    settings = [(name, {**env0, "pools": pools}) for name, pools in CLUSTERS.items()]
    if "trace" not in env0:  # a trace fixes its arrivals: no load to match
        pools = CLUSTERS[MATCHED]
        load = round(matched_load(pools, env0), 4)
        settings.insert(1, (f"{MATCHED} load-matched", {**env0, "pools": pools, "load": load}))
    for name, env in settings:
        cells += env_sweep("E11", env, "placement", PLACEMENTS, POLICIES, variant=name)
    return cells


def _sentence(summary: list[dict[str, Any]], base: dict[str, Any] | None) -> list[str]:
    """How far EvalStop's gains on each heterogeneous cluster move from the homogeneous ones."""
    if base is None or math.isnan(base["d_jct_pct"]):
        return []
    lines = []
    for s in summary:
        if s["experiment"] != "E11" or s["variant"] == HOMOGENEOUS:
            continue
        if not EVALSTOP.same_policy(s):
            continue
        d = s["d_jct_pct"] - base["d_jct_pct"]
        g = s["d_gpu_hours_pct"] - base["d_gpu_hours_pct"]
        lines.append(
            f"- {s['variant']}, {s['value']}: EvalStop ΔJCT {s['d_jct_pct']:.1f} % "
            f"({d:+.1f} points vs homogeneous), ΔGPU-hours {s['d_gpu_hours_pct']:.1f} % "
            f"({g:+.1f} points)."
        )
    return lines


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E11 section: one row per cluster and placement."""
    rows = [s for s in summary if s["experiment"] == "E11"]
    settings = list(dict.fromkeys((s["variant"], s["value"]) for s in rows))
    lines = [
        f"## E11 — {EXPERIMENT.title}",
        "",
        "EvalStop vs NoStop on the same seeds and job stream. GPU-hours are wall-clock "
        "GPU-hours on the pool each job ran on; waste is in reference GPU-hours. Speeds: "
        "documented approximations (evalstop_gym/sim/pools.py).",
        "",
        "| cluster | placement | NoStop JCT h | EvalStop JCT h | ΔJCT % | NoStop GPU-h | "
        "ΔGPU-hours % | Δwaste % | precision | recall |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant, value in settings:
        b = find(summary, "E11", NOSTOP, value, variant)
        e = find(summary, "E11", EVALSTOP, value, variant)
        lines.append(
            f"| {variant} | {value or '–'} | {num(b, 'mean_jct_h')} | {num(e, 'mean_jct_h')} | "
            f"{pct(e, 'd_jct_pct')} | {num(b, 'gpu_hours', 0)} | {pct(e, 'd_gpu_hours_pct')} | "
            f"{pct(e, 'd_waste_pct')} | {pct(e, 'precision')} | {pct(e, 'recall')} |"
        )
    lines += ["", *_sentence(rows, find(summary, "E11", EVALSTOP, None, HOMOGENEOUS)), ""]
    return lines


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E1's setting on heterogeneous GPU pools, both placements, beside the homogeneous."""
    plan.cells += e11_cells(opts.overrides)


EXPERIMENT = Experiment(
    "E11",
    "Heterogeneous GPU pools (A100/H100/V100), first-fit vs fastest placement",
    11,
    build,
    section=section,
    work="pools",
)
