"""PNG figures of the reproduce report.

Figures are :class:`matplotlib.figure.Figure` objects saved directly (no
``pyplot``), so importing or using this module never switches the backend of a
matplotlib a notebook or script already set up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from evalstop_gym.fileio import atomic_savefig

from .cells import EVALSTOP, NOSTOP, SCRIPTED, PolicySpec
from .summary import find, policies_of, sweep_values

#: Plot colour of each policy kind.
COLORS = {
    "NoStop": "#777777",
    "EvalStop": "#1f77b4",
    "StopAtProgress": "#d62728",
    "LossPlateau": "#2ca02c",
}


def _series(summary: list[dict[str, Any]], exp: str, policy: PolicySpec, metric: str):
    rows = [s for s in summary if s["experiment"] == exp]
    x = [v for v in sweep_values(rows) if find(summary, exp, policy, v)]
    found = [find(summary, exp, policy, v) for v in x]
    y = np.array([s[metric] for s in found], dtype=float)
    e = np.nan_to_num(np.array([s[f"{metric}_ci95"] for s in found], dtype=float))
    return x, y, e


def _save(fig: Figure, path: Path) -> Path:
    return atomic_savefig(fig, path, dpi=110)


def _legend_below(fig: Figure, axes: Any, ncols: int = 4) -> None:
    """One legend for every labelled artist of ``axes``, under the panels, never over the data.

    A label repeated across panels (the same series in each) appears once.
    """
    handles: dict[str, Any] = {}
    for ax in np.ravel(axes):
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncols=min(ncols, len(handles)),
            fontsize=8,
            frameon=False,
        )


def plot_sweep(summary: list[dict[str, Any]], exp: str, xlabel: str, path: Path) -> Path:
    """Precision, recall and FPR of every policy against ``exp``'s swept variable."""
    fig = Figure(figsize=(13, 3.8), constrained_layout=True)
    axes = fig.subplots(1, 3)
    pols = policies_of([s for s in summary if s["experiment"] == exp])
    for ax, metric in zip(axes, ("precision", "recall", "fpr")):
        for p in pols:
            x, y, e = _series(summary, exp, p, metric)
            ax.errorbar(
                x,
                100 * y,
                yerr=100 * e,
                marker="o",
                capsize=3,
                label=p.label,
                color=COLORS.get(p.kind),
            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{metric} (%)" if metric != "fpr" else "FPR (%)")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    _legend_below(fig, axes[:1], ncols=6)
    fig.suptitle(f"{exp}: detection quality against {xlabel} (mean ± 95 % CI)")
    return _save(fig, path)


def plot_schedulers(summary: list[dict[str, Any]], path: Path) -> Path:
    """EvalStop's ΔJCT and Δwaste over each base scheduler (E2)."""
    names = sweep_values([s for s in summary if s["experiment"] == "E2"])
    rows = [s for v in names if (s := find(summary, "E2", EVALSTOP, v))]
    names = [s["value"] for s in rows]
    fig = Figure(figsize=(7, 4.4), constrained_layout=True)
    ax = fig.subplots()
    x = np.arange(len(rows))
    for off, (metric, label, color) in enumerate(
        (
            ("d_jct_pct", "ΔJCT (all jobs)", "#1f77b4"),
            ("d_jct_completed_pct", "ΔJCT (jobs not stopped)", "#9ecae1"),
            ("d_waste_pct", "Δwaste", "#ff7f0e"),
        )
    ):
        y = [s[metric] for s in rows]
        e = np.nan_to_num([s[f"{metric}_ci95"] for s in rows])
        ax.bar(x + (off - 1) * 0.27, y, 0.27, yerr=e, capsize=3, label=label, color=color)
    ax.axhspan(-25.2, -8.9, color="grey", alpha=0.15, label="paper's ΔJCT range")
    ax.set_xticks(x, names)
    ax.set_ylabel("change vs NoStop (%)")
    ax.axhline(0, color="black", lw=0.8)
    ax.grid(alpha=0.3, axis="y")
    ax.set_axisbelow(True)
    _legend_below(fig, ax, ncols=2)
    ax.set_title("E2: EvalStop over each base scheduler (mean ± 95 % CI)")
    return _save(fig, path)


def _errorbars(ax, x, rows, metric: str, scale: float = 1.0, **style: Any) -> None:
    """Plot ``scale * rows[metric]`` against ``x`` with its 95 % CI (a missing CI: no bar)."""
    ax.errorbar(
        x,
        [scale * s[metric] for s in rows],
        yerr=np.nan_to_num([scale * s[f"{metric}_ci95"] for s in rows]),
        capsize=3,
        **style,
    )


def plot_k(summary: list[dict[str, Any]], path: Path) -> Path:
    """E5: detection and waste against the decline threshold k."""
    rows = [s for s in summary if s["experiment"] == "E5" and s["policy_kind"] == EVALSTOP.kind]
    rows.sort(key=lambda s: s["policy_params"]["k"])
    k = [s["policy_params"]["k"] for s in rows]
    fig = Figure(figsize=(11, 4.3), constrained_layout=True)
    a1, a2 = fig.subplots(1, 2)
    for metric, label, color in (
        ("precision", "precision", "#1f77b4"),
        ("recall", "recall", "#2ca02c"),
        ("fpr", "FPR", "#d62728"),
    ):
        _errorbars(a1, k, rows, metric, 100, marker="o", label=label, color=color)
    a1.set_xlabel("k (consecutive declines)")
    a1.set_ylabel("precision, recall, FPR (%)")
    a1.set_ylim(-3, 103)
    a1.grid(alpha=0.3)
    delay, waste = "#9467bd", "#ff7f0e"
    _errorbars(
        a2, k, rows, "detection_delay_evals", marker="s", color=delay, label="detection delay"
    )
    a2.set_xlabel("k (consecutive declines)")
    a2.set_ylabel("detection delay (evals after the true peak)", color=delay)
    a2.tick_params(axis="y", colors=delay)
    a2.grid(alpha=0.3)
    a3 = a2.twinx()
    _errorbars(a3, k, rows, "d_waste_pct", marker="^", color=waste, label="Δwaste vs NoStop")
    a3.set_ylabel("Δwaste vs NoStop (%)", color=waste)
    a3.tick_params(axis="y", colors=waste)
    _legend_below(fig, (a1, a2, a3), ncols=5)
    fig.suptitle("E5: the k trade-off — early detection against false positives (mean ± 95 % CI)")
    return _save(fig, path)


def _stops(env: Any, policy: Any, seed: int) -> dict[int, int]:
    """Run one episode of ``policy``; the checkpoint at which it stopped each job it stopped."""
    obs, _ = env.reset(seed=seed)
    done = False
    fired: dict[int, int] = {}
    while not done:
        jid = env.sim.pending_job_id
        a = policy.act(obs)
        if a:
            fired[jid] = env.sim.jobs[jid].ckpt_done
        obs, _, done, _, _ = env.step(a)
    return fired


def plot_example_curves(env_kwargs: dict[str, Any], seed: int, path: Path) -> Path:
    """Observed and true eval curves of a few hacking and healthy RLHF runs, with each stopper's stop."""
    from evalstop_gym.envs import EvalStopEnv

    env = EvalStopEnv(**env_kwargs)
    stops = [
        (spec, _stops(env, spec.build(), seed)) for spec in SCRIPTED if spec.kind != NOSTOP.kind
    ]
    sim = env.sim
    b, c = sim.batch, sim.curves
    rl = np.flatnonzero(b.job_type == 2)
    hack = [int(j) for j in rl if b.hacking[j]][:3]
    healthy = [int(j) for j in rl if not b.hacking[j]][:3]
    fig = Figure(figsize=(13, 6.5), constrained_layout=True)
    axes = fig.subplots(2, 3, sharex=True)
    markers = {"EvalStop": "v", "StopAtProgress": "x", "LossPlateau": "s"}
    for row, jobs, title in ((0, hack, "hacking"), (1, healthy, "healthy")):
        for col in range(3):
            ax = axes[row, col]
            if col >= len(jobs):
                ax.axis("off")
                continue
            j = jobs[col]
            p = c.progress
            ax.plot(p, c.true_eval[j], color="black", lw=1.2, label="true eval")
            ax.plot(p, c.obs_eval[j], "o", ms=3, color="#555555", label="observed eval")
            if np.isfinite(c.peak_progress[j]) and c.peak_progress[j] < 1:
                ax.axvline(c.peak_progress[j], color="grey", ls=":", label="true peak")
            for spec, fired in stops:
                if j in fired:
                    i = fired[j]
                    ax.plot(
                        p[i - 1],
                        c.obs_eval[j][i - 1],
                        markers.get(spec.kind, "o"),
                        ms=10,
                        mfc="none",
                        mew=2,
                        color=COLORS.get(spec.kind),
                        label=f"{spec.label} stops",
                    )
            ax.set_title(f"{title} RLHF job {j}")
            ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("eval score")
    for ax in axes[1]:
        ax.set_xlabel("declared progress (fraction of the run)")
    _legend_below(fig, axes, ncols=6)
    fig.suptitle(
        f"Example eval curves (one episode, seed {seed}) and where each stopper fired;"
        " each panel has its own eval scale"
    )
    return _save(fig, path)


def make_plots(out: Path, summary: list[dict[str, Any]], env_kwargs: dict[str, Any]) -> list[Path]:
    """Every figure the summary has data for, written into ``out``; their paths."""
    exps = {s["experiment"] for s in summary}
    paths = []
    if "E3" in exps:
        paths.append(plot_sweep(summary, "E3", "eval noise σ", out / "e3_noise.png"))
    if "E4" in exps:
        paths.append(plot_sweep(summary, "E4", "hack fraction", out / "e4_hack_fraction.png"))
    if "E2" in exps:
        paths.append(plot_schedulers(summary, out / "e2_schedulers.png"))
    if "E5" in exps:
        paths.append(plot_k(summary, out / "e5_k.png"))
    paths.append(plot_example_curves(env_kwargs, 0, out / "example_curves.png"))
    return paths


def plot_stop_positions(
    positions: dict[str, tuple[np.ndarray, np.ndarray]], path: Path, title: str = ""
) -> Path:
    """Where each stopper ends runs: one row per stopper, two panels; to ``path``.

    ``positions[name] = (hack_offsets, healthy_progress)``: for every hacking run,
    its end progress minus its true-peak progress (0 = at the peak, < 0 before
    it, > 0 the share of the run wasted after it); for every healthy run its end
    progress (1 = left alone).  An exploit like "stop everything at 0.6" shows
    as healthy runs piled at 0.6.  The share of healthy runs stopped is printed
    beside each row.
    """
    names = list(positions)
    fig = Figure(figsize=(10, 0.45 * len(names) + 1.6), constrained_layout=True)
    hack_ax, healthy_ax = fig.subplots(1, 2, sharey=True)
    ys = np.arange(len(names))
    hack = [np.asarray(positions[n][0], dtype=float) for n in names]
    healthy = [np.asarray(positions[n][1], dtype=float) for n in names]
    _strips(hack_ax, hack, ys, "#d62728")
    _strips(healthy_ax, healthy, ys, "#1f77b4")
    hack_ax.axvline(0.0, color="black", lw=1)
    hack_ax.set_yticks(ys, names, fontsize=8)
    hack_ax.invert_yaxis()
    hack_ax.set_xlabel("hacking runs: end progress − true-peak progress")
    healthy_ax.set_xlabel("healthy runs: end progress (1 = not stopped)")
    healthy_ax.set_xlim(0.0, 1.12)
    for y, h in zip(ys, healthy):
        stopped = float(np.mean(h < 1.0)) if len(h) else float("nan")
        healthy_ax.annotate(f"{100 * stopped:.0f}% stopped", (1.01, y), fontsize=7, va="center")
    for ax in (hack_ax, healthy_ax):
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title or "Where each stopper ends runs")
    return _save(fig, path)


def _strips(ax: Any, data: list[np.ndarray], ys: np.ndarray, color: str) -> None:
    """A jittered strip of points per row with its median marked."""
    rng = np.random.default_rng(0)  # fixed jitter: the same data give the same image
    for y, x in zip(ys, data):
        if not len(x):
            continue
        ax.scatter(x, y + rng.uniform(-0.3, 0.3, len(x)), s=4, alpha=0.35, color=color, lw=0)
        ax.plot([np.median(x)] * 2, [y - 0.38, y + 0.38], color="black", lw=1.5)


def plot_learning_curves(
    curves: dict[str, list[tuple[int, float, float]]],
    path: Path,
    refs: dict[str, float] | None = None,
) -> Path:
    """Plot evaluation return against timesteps per model, with reference lines; to ``path``.

    ``curves`` maps a model's name to its :attr:`baselines.training.TrainResult.learning_curve`.
    """
    fig = Figure(figsize=(8, 4.8), constrained_layout=True)
    ax = fig.subplots()
    banded = False
    for name, curve in curves.items():
        if not curve:
            continue
        t, m, s = (np.array(x) for x in zip(*curve))
        (line,) = ax.plot(t, m, marker="o", ms=3, label=name)
        ax.fill_between(t, m - s, m + s, alpha=0.12, color=line.get_color(), lw=0)
        banded = True
    dashes = ("--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 3)))
    for (name, v), dash in zip((refs or {}).items(), dashes * len(refs or {})):
        if v is not None and np.isfinite(v):
            ax.axhline(v, ls=dash, lw=1.2, color="#444444", label=f"{name} (reference)")
    if banded:  # an empty artist, so that the legend says what the shading is
        ax.fill_between([], [], color="grey", alpha=0.3, lw=0, label="±1 s.d. over eval episodes")
    ax.set_xlabel("training timesteps")
    ax.set_ylabel("evaluation return (utility per episode)")
    ax.grid(alpha=0.3)
    _legend_below(fig, ax, ncols=2)
    ax.set_title("Learned stoppers: mean return at each periodic evaluation", fontsize=11)
    return _save(fig, path)
