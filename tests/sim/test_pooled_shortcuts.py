"""The pooled engine's construction-time shortcuts change nothing.

Three are taken when a config allows them: no per-job speeds when every pool has
speed 1 for every job type (work then advances with the clock, and x / 1.0 == x),
the cluster's free GPUs for the largest free pool when there is one pool, and every
job's pool order worked out before the first arrival under the base class's placement
rule.  Each episode runs as built and with the three undone (per-job speeds of 1.0,
the max over the pools, orders asked at a job's first placement); events, metrics and
pool hours must agree to the bit.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sim_episodes import play

from evalstop_gym import SimConfig
from evalstop_gym.sim.pooled import PooledSimulator

SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")
#: Unit-speed clusters of one and of two pools, and mixed speeds (one shortcut at most).
POOLS = ({"gpu": 64}, {"a100": 48}, {"gpu": 32, "a100": 32}, {"a100": 32, "h100": 32})


def _episode(cfg: SimConfig, seed: int, stop_seed: int, shortcuts: bool):
    sim = PooledSimulator(cfg, seed, record_events=True)
    if not shortcuts:
        n = sim.n_jobs
        sim._rates = [1.0] * n
        sim._one_pool = False
        sim._order = [None] * n
    return (*play(sim, stop_seed), sim.pool_gpu_hours)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    stop_seed=st.integers(0, 3),
    scheduler=st.sampled_from(SCHEDULERS),
    pools=st.sampled_from(POOLS),
    placement=st.sampled_from(("first-fit", "fastest")),
    calibration=st.sampled_from(("paper", "hard")),
    costs=st.sampled_from(("free", "realistic")),
    load=st.sampled_from((0.5, 1.2, 2.5)),
)
def test_pooled_shortcuts_change_no_bit(
    seed, stop_seed, scheduler, pools, placement, calibration, costs, load
) -> None:
    cfg = SimConfig(
        scheduler=scheduler,
        pools=pools,
        placement=placement,
        calibration=calibration,
        costs=costs,
        n_jobs=40,
        load=load,
    )
    fast = _episode(cfg, seed, stop_seed, shortcuts=True)
    assert repr(fast) == repr(_episode(cfg, seed, stop_seed, shortcuts=False))


def test_unit_speed_clusters_keep_no_per_job_speeds() -> None:
    """The shortcuts are taken where they apply, and only there."""
    one = PooledSimulator(SimConfig(pools={"gpu": 64}), 0)
    assert one._rates is None and one._one_pool and None not in one._order
    mixed = PooledSimulator(SimConfig(pools={"a100": 32, "h100": 32}), 0)
    assert mixed._rates is not None and not mixed._one_pool
