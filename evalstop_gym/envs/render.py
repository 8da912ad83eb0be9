"""The envs' frames, without dependencies: a text view and a small RGB picture.

``EvalStop-v0`` draws the simulator and the job being decided;
``EvalStopCluster-v0`` draws its own observation (every job slot).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..sim.engine import Simulator
from ..sim.workloads import JOB_TYPES
from .tables import observed


def _gpu_bar(used: int, num_gpus: int, width: int = 40) -> str:
    """A text bar of busy (#) and free (.) GPUs."""
    busy = round(width * used / num_gpus)
    return "#" * busy + "." * (width - busy)


def _gpu_cells(img: np.ndarray, used: int, num_gpus: int) -> None:
    """Draw the top band of a 320 px frame: one cell per GPU (at most 64), busy dark."""
    cols = min(num_gpus, 64)
    per_cell = num_gpus / cols
    cw = 320 // cols
    for c in range(cols):
        busy = c * per_cell < used
        img[4:28, c * cw + 1 : (c + 1) * cw - 1] = (40, 40, 40) if busy else (200, 220, 200)


def ansi_frame(sim: Simulator | None) -> str:
    """The cluster's GPUs, its job counts and the job being decided, as text lines."""
    if sim is None:
        return "EvalStop-v0 (not reset)"
    g = sim.num_gpus
    used = g - sim.free
    lines = [
        f"t = {sim.now:8.2f} h   GPUs [{_gpu_bar(used, g)}] {used}/{g} busy",
        f"jobs: {sim.n_in_system} in system, {sim.n_waiting} waiting, "
        f"{sim.n_done}/{sim.n_jobs} done, {sim.n_decisions} decisions",
    ]
    v = sim.pending_view
    if v is None:
        lines.append("episode over")
    else:
        spark = " ".join(f"{e:.3f}" for e in v.evals[-6:])
        lines.append(
            f"deciding: {JOB_TYPES[v.job_type].upper()} job at progress {v.progress:.0%}, "
            f"{v.consecutive_declines} consecutive decline(s)"
        )
        lines.append(f"  last evals: {spark}")
        lines.append(f"  last loss : {' '.join(f'{x:.3f}' for x in v.loss[-6:])}")
    return "\n".join(lines) + "\n"


def rgb_frame(sim: Simulator | None) -> np.ndarray:
    """A 96 x 320 picture: one cell per GPU (busy dark), then the job's eval bars."""
    img = np.full((96, 320, 3), 255, np.uint8)
    if sim is None:
        return img
    _gpu_cells(img, sim.num_gpus - sim.free, sim.num_gpus)
    v = sim.pending_view
    if v is not None and v.evals:
        evals = np.asarray(v.evals)
        lo, hi = float(evals.min()) - 0.05, float(evals.max()) + 0.05
        bw = 320 // max(len(evals), 1)
        for i, e in enumerate(evals):
            h = int(60 * (e - lo) / (hi - lo))
            color = (200, 60, 60) if i == len(evals) - 1 else (60, 90, 200)
            img[94 - h : 94, i * bw + 2 : (i + 1) * bw - 2] = color
    return img


def _slot_state(obs: Mapping[str, np.ndarray], slot: int) -> str:
    """A slot's job as the text view names it: deciding, running or waiting."""
    state = "DECIDE" if obs["decide"][slot] > 0.5 else "running"
    if obs["running"][slot] < 0.5:
        state = "waiting"
    return state + ("*" if obs["deprioritized"][slot] > 0.5 else "")


def cluster_ansi_frame(obs: Mapping[str, np.ndarray] | None, num_gpus: int) -> str:
    """``EvalStopCluster-v0``'s observation as text: GPUs, queue, then one line per job slot.

    Only what the observation holds (the boundary fields of ``obs_fields``),
    so the view shows exactly what a policy sees.
    """
    if obs is None:
        return "EvalStopCluster-v0 (not reset)\n"
    free, queue = int(obs["free_gpus"][0]), int(obs["queue_length"][0])
    used = num_gpus - free
    bar = _gpu_bar(used, num_gpus)
    lines = [f"GPUs [{bar}] {used}/{num_gpus} busy, {free} free   queue: {queue} waiting"]
    present = np.flatnonzero(obs["present"] > 0.5)
    if not present.size:
        return lines[0] + "\nepisode over\n"
    lines.append(
        f"{len(present)} job(s) in view, {int(obs['decide'].sum())} deciding (* = deprioritised)"
    )
    lines.append("slot  state     gpus  type  progress  declines  last evals / last loss")
    for s in present:
        kind = "-"
        if "job_type" in obs and obs["job_type"][s].any():
            kind = JOB_TYPES[int(np.argmax(obs["job_type"][s]))].upper()
        progress = f"{obs['progress'][s, 0]:.0%}" if "progress" in obs else "-"
        declines = (
            f"{int(obs['consecutive_declines'][s, 0])}" if "consecutive_declines" in obs else "-"
        )
        evals = observed(obs["evals"][s]) if "evals" in obs else np.zeros(0)
        loss = observed(obs["loss"][s]) if "loss" in obs else np.zeros(0)
        seen = " ".join(f"{e:.3f}" for e in evals[-4:]) or "-"
        if loss.size:
            seen += f" / {loss[-1]:.3f}"
        lines.append(
            f"{s:>4}  {_slot_state(obs, s):<8}  {int(obs['gpus'][s]):>4}  {kind:<4}  "
            f"{progress:>8}  {declines:>8}  {seen}"
        )
    return "\n".join(lines) + "\n"


#: Slot rows an ``EvalStopCluster-v0`` picture shows (the first ones: deciding, then running).
RGB_SLOTS = 24
_STATE_COLOURS = {
    "DECIDE": (200, 60, 60),
    "running": (60, 90, 200),
    "waiting": (170, 170, 170),
}


def cluster_rgb_frame(obs: Mapping[str, np.ndarray] | None, num_gpus: int) -> np.ndarray:
    """A picture of :func:`cluster_ansi_frame`'s view, 320 px wide, of a fixed height per env.

    The top band has one cell per GPU (busy dark); below it one row per slot
    (the first ``RGB_SLOTS``): a state square (red deciding, blue running,
    grey waiting, an orange edge if deprioritised), its GPU demand, its
    progress and its observed evals as bars.
    """
    slots = RGB_SLOTS if obs is None else min(len(obs["present"]), RGB_SLOTS)
    img = np.full((32 + 6 * slots, 320, 3), 255, np.uint8)
    if obs is None:
        return img
    _gpu_cells(img, num_gpus - int(obs["free_gpus"][0]), num_gpus)
    for s in np.flatnonzero(obs["present"][:slots] > 0.5):
        y = 32 + 6 * int(s)
        state = _slot_state(obs, s)
        img[y : y + 5, 2:10] = _STATE_COLOURS[state.rstrip("*")]
        if state.endswith("*"):
            img[y : y + 5, 10:12] = (240, 150, 30)
        img[y : y + 5, 14 : 14 + round(60 * obs["gpus"][s] / num_gpus)] = (90, 90, 90)
        if "progress" in obs:
            img[y : y + 5, 80 : 80 + round(60 * float(obs["progress"][s, 0]))] = (60, 160, 90)
        evals = observed(obs["evals"][s]) if "evals" in obs else np.zeros(0)
        if evals.size:
            w = obs["evals"].shape[1] // 2
            bw = max(170 // w, 1)
            evals = evals[-(170 // bw) :]  # a window wider than 170 px shows its last evals
            lo, hi = float(evals.min()) - 0.05, float(evals.max()) + 0.05
            for i, e in enumerate(evals):
                h = 1 + int(4 * (e - lo) / (hi - lo))
                x = 146 + i * bw
                img[y + 5 - h : y + 5, x : x + max(bw - 1, 1)] = (60, 90, 200)
    return img
