"""The pooled engine's shortcuts (direct starts of arrivals, skipped passes) change nothing.

Each episode runs twice: as shipped, and with ``_lean_passes`` off (every arrival
queued and a full placing pass after it, a pass after every checkpoint whose key the
best waiting job beats); events, metrics and pool hours must agree to the bit.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sim_episodes import play

from evalstop_gym import SimConfig
from evalstop_gym.sim.pooled import PooledSimulator

SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")
POOLS = ({"gpu": 64}, {"a100": 32, "h100": 32}, {"v100": 16, "a100": 8, "h100": 8})


def _episode(cfg: SimConfig, seed: int, stop_seed: int, lean: bool):
    sim = PooledSimulator(cfg, seed, record_events=True)
    sim._lean_passes = lean
    return (*play(sim, stop_seed), sim.pool_gpu_hours)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    stop_seed=st.integers(0, 3),
    scheduler=st.sampled_from(SCHEDULERS),
    pools=st.sampled_from(POOLS),
    placement=st.sampled_from(("first-fit", "fastest")),
    calibration=st.sampled_from(("paper", "hard")),
    load=st.sampled_from((0.5, 1.2, 2.5)),
)
def test_lean_pooled_episodes_equal_plain_ones(
    seed, stop_seed, scheduler, pools, placement, calibration, load
) -> None:
    cfg = SimConfig(
        scheduler=scheduler,
        pools=pools,
        placement=placement,
        calibration=calibration,
        n_jobs=40,
        load=load,
    )
    fast = _episode(cfg, seed, stop_seed, lean=True)
    assert repr(fast) == repr(_episode(cfg, seed, stop_seed, lean=False))


class _CountingChecks(PooledSimulator):
    """Counts the preemption attempts the read-only check turned down, pool by pool."""

    declined = 0

    def _victims_suffice(self, wkey, need, running=None) -> bool:
        enough = super()._victims_suffice(wkey, need, running)
        self.declined += not enough
        return enough


def test_pooled_preemption_attempts_are_decided_before_popping() -> None:
    # A contended mixed cluster: the check turns attempts down, and the episode is the
    # one the plain pops give (which push every live entry of a failed attempt back).
    cfg = SimConfig(
        scheduler="srtf-est", pools={"a100": 32, "h100": 32}, placement="fastest", load=2.5
    )
    lean = _CountingChecks(cfg, 3, record_events=True)
    plain = _CountingChecks(cfg, 3, record_events=True)
    plain._lean_passes = False
    for sim in (lean, plain):
        while sim.next_decision() is not None:
            sim.decide(0)
    assert lean.declined > 0 and plain.declined == 0
    assert repr((lean.events, lean.metrics(), lean.pool_gpu_hours)) == repr(
        (plain.events, plain.metrics(), plain.pool_gpu_hours)
    )
