"""The one parallel-execution helper: serial, process pool and Ray give the same results."""

from __future__ import annotations

import os
import sys

import pytest

from evalstop_gym.parallel import (
    WORKER_ENV,
    Executor,
    kept_workers_cpu,
    parallel_map,
    ray_runtime_env,
)


def square(x: int) -> int:
    """A task: the square of ``x``."""
    return x * x


def worker_facts(_: int) -> dict[str, object]:
    """A task reporting what the worker looks like from inside."""
    return {
        "pid": os.getpid(),
        "env": {k: os.environ.get(k) for k in WORKER_ENV},
        "torch_threads": sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None,
    }


def burn(seconds: float) -> float:
    """A task that uses ``seconds`` of CPU; what it used."""
    import time

    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass
    return time.process_time() - t0


def fail_on_three(x: int) -> int:
    """A task that fails for one item."""
    if x == 3:
        raise ArithmeticError("three")
    return x


def test_serial_and_pool_give_the_same_results_in_input_order() -> None:
    items = list(range(23))
    serial = Executor(workers=1).map(square, items)
    pooled = Executor(workers=2).map(square, items)
    assert serial == pooled == [x * x for x in items]
    pairs = list(parallel_map(square, items, workers=2))
    assert sorted(pairs) == list(enumerate(serial))


def test_pool_workers_are_other_processes_with_the_worker_environment() -> None:
    before = {k: os.environ.get(k) for k in WORKER_ENV}
    facts = Executor(workers=2).map(worker_facts, range(4))
    assert all(f["pid"] != os.getpid() for f in facts)
    assert all(f["env"] == WORKER_ENV for f in facts)
    assert {k: os.environ.get(k) for k in WORKER_ENV} == before  # the parent is left as it was


def test_progress_is_called_once_per_result_after_it_is_taken() -> None:
    calls: list[int] = []
    for taken, _ in enumerate(Executor(workers=2).imap(square, range(7), progress=calls.append)):
        assert len(calls) == taken  # the callback follows the result, never precedes it
    assert calls == [1] * 7


def test_a_failing_task_raises_in_the_caller() -> None:
    for ex in (Executor(workers=1), Executor(workers=2)):
        with pytest.raises(ArithmeticError, match="three"):
            ex.map(fail_on_three, range(6))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="backend='slurm'"):
        Executor("slurm")
    with pytest.raises(ValueError, match="workers=0"):
        Executor(workers=0)
    with pytest.raises(ValueError, match="address"):
        Executor(address="127.0.0.1:6379")
    assert Executor(workers=1).map(square, []) == []


def test_ray_runtime_env_carries_the_worker_environment_and_the_source_tree() -> None:
    env = ray_runtime_env()
    assert WORKER_ENV.items() <= env["env_vars"].items()
    import evalstop_gym

    root = os.path.dirname(os.path.dirname(evalstop_gym.__file__))
    assert env["env_vars"]["PYTHONPATH"].split(os.pathsep)[0] == root
    remote = ray_runtime_env(remote=True)
    assert any(p.endswith("evalstop_gym") for p in remote["py_modules"])


@pytest.mark.slow
def test_ray_gives_the_same_results_with_the_worker_environment(monkeypatch) -> None:
    pytest.importorskip("ray")
    # Ray workers import tasks by module name: put this test module on their path.
    here = os.path.dirname(__file__)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    )
    ex = Executor("ray", workers=2)
    assert ex.map(square, range(9)) == [x * x for x in range(9)]
    facts = ex.map(worker_facts, range(2))
    assert all(f["env"] == WORKER_ENV for f in facts)


def test_beside_runs_tasks_in_a_process_of_their_own_or_here_at_once() -> None:
    with Executor(workers=2).beside() as apart:
        assert apart.separate
        futs = [apart.submit(worker_facts, 0), apart.submit(square, 5)]
        facts = futs[0].result()
        assert facts["pid"] != os.getpid() and facts["env"] == WORKER_ENV
        assert futs[1].result() == 25
    with Executor(workers=1).beside() as here:
        assert not here.separate
        fut = here.submit(worker_facts, 0)
        assert fut.done() and fut.result()["pid"] == os.getpid()  # ran at once, in line
        failed = here.submit(fail_on_three, 3)
        with pytest.raises(ArithmeticError, match="three"):
            failed.result()
    assert not Executor("ray", workers=2).beside().separate


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (not ended: neither reaped nor a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_a_kept_pool_serves_every_fan_out_of_its_block_and_ends_with_it() -> None:
    ex = Executor(workers=2)
    with ex.kept():
        first = {f["pid"] for f in ex.map(worker_facts, range(8))}
        again = ex.map(worker_facts, range(8))
        assert {f["pid"] for f in again} <= first  # the same workers, spawned once
        assert all(f["env"] == WORKER_ENV for f in again)
        with ex.kept():  # nested: the outer block's pool
            assert {f["pid"] for f in ex.map(worker_facts, range(8))} <= first
        assert Executor(workers=1).map(worker_facts, [0])[0]["pid"] == os.getpid()
    assert not any(_alive(pid) for pid in first)  # shut down and joined with the block
    # Each fan-out outside a block has its own workers.
    a, b = ({f["pid"] for f in ex.map(worker_facts, range(8))} for _ in range(2))
    assert not a & b


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_a_failed_fan_out_ends_the_kept_pool_and_the_next_one_starts_afresh() -> None:
    ex = Executor(workers=2)
    with ex.kept():
        first = {f["pid"] for f in ex.map(worker_facts, range(4))}
        with pytest.raises(ArithmeticError, match="three"):
            ex.map(fail_on_three, range(6))
        assert not any(_alive(pid) for pid in first)  # terminated as a fan-out's own pool
        after = {f["pid"] for f in ex.map(worker_facts, range(4))}
        assert after and not after & first
        assert ex.map(square, range(5)) == [0, 1, 4, 9, 16]
    assert not any(_alive(pid) for pid in after)
    with pytest.raises(ArithmeticError, match="three"), ex.kept():
        ex.map(square, range(3))
        raise ArithmeticError("three")  # the block itself fails: its pool ends too


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_a_kept_pool_whose_idle_worker_died_is_replaced() -> None:
    import signal
    import time

    ex = Executor(workers=2)
    with ex.kept():
        first = {f["pid"] for f in ex.map(worker_facts, range(8))}
        os.kill(min(first), signal.SIGKILL)  # e.g. the OOM killer, between two fan-outs
        deadline = time.monotonic() + 10
        while _alive(min(first)) and time.monotonic() < deadline:
            time.sleep(0.05)
        after = {f["pid"] for f in ex.map(worker_facts, range(8))}
        assert after and not after & first  # a fresh pool, not a broken one


def test_only_an_executor_of_the_kept_width_shares_its_pool() -> None:
    from evalstop_gym import parallel

    with Executor(workers=2).kept():
        kept = {f["pid"] for f in Executor(workers=2).map(worker_facts, range(8))}
        wider = {f["pid"] for f in Executor(workers=3).map(worker_facts, range(9))}
        again = {f["pid"] for f in Executor(workers=2).map(worker_facts, range(8))}
        pool = {p.pid for p in parallel._workers(parallel._kept.pool)}
    # Both width-2 fan-outs ran on the kept pool's workers (on one or both: on a busy
    # machine one worker may take every task, so the two need not see the same pids).
    assert kept and again and kept | again <= pool and len(pool) <= 2
    assert wider and not wider & pool  # its own pool: it runs no wider than it was asked to


KILLED_PARENT = """
import os, time
from evalstop_gym.parallel import Executor
import tests.experiments.test_parallel as t
ex = Executor(workers=2)
with ex.kept():
    pids = sorted({f["pid"] for f in ex.map(t.worker_facts, range(8))})
    print(" ".join(map(str, pids)), flush=True)
    time.sleep(120)  # a long serial stage, its workers idle
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_the_workers_of_a_killed_parent_end() -> None:
    """A parent killed outright (SIGKILL: no clean-up runs) leaves no idle worker behind."""
    import signal
    import subprocess
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_PARENT],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        workers = [int(pid) for pid in proc.stdout.readline().split()]
        assert workers and all(_alive(pid) for pid in workers)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in workers)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_the_kept_pools_cpu_counts_before_its_workers_are_joined() -> None:
    from evalstop_experiments.progress import cpu_seconds

    ex = Executor(workers=2)
    assert kept_workers_cpu() == 0.0
    start = cpu_seconds()
    with ex.kept():
        used = sum(ex.map(burn, [0.3, 0.3]))
        inside = cpu_seconds() - start
        assert kept_workers_cpu() >= used - 0.05  # the workers are alive, not yet joined
        assert inside >= used - 0.05
    after = cpu_seconds() - start  # joined: their CPU moved to RUSAGE_CHILDREN
    assert kept_workers_cpu() == 0.0
    assert inside - 0.05 <= after <= inside + 1.0  # counted once, not twice


def _process_group(pgid: int) -> list[str]:
    """Processes (pid and command) of process group ``pgid``, zombies included."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after it
        fields = stat.rpartition(")")[2].split()
        if int(fields[2]) == pgid:
            out.append(f"{entry} {stat.split(' ', 2)[1]} {fields[0]}")
    return out


FAN_OUT = """
import contextlib
import time
from evalstop_gym.parallel import Executor
import tests.experiments.test_parallel as t
with Executor(workers=2).kept() if {kept} else contextlib.nullcontext():
    assert Executor(workers=2).map(t.square, range(6)) == [x * x for x in range(6)]
    with Executor(workers=2).beside() as b:
        assert b.submit(t.square, 4).result() == 16
    if {fail}:
        start = time.monotonic()
        try:
            Executor(workers=2).map(t.sleep_or_fail, [1, 2, 3, 4])
        except ArithmeticError:
            pass
        # the task still sleeping was not waited for
        assert time.monotonic() - start < 30, time.monotonic() - start
        assert Executor(workers=2).map(t.square, range(3)) == [0, 1, 4]
"""


def sleep_or_fail(x: int) -> int:
    """A task that fails fast for one item and sleeps long for the others."""
    import time

    if x == 1:
        time.sleep(0.5)
        raise ArithmeticError("one")
    time.sleep(120)
    return x


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process groups from /proc")
@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("fail", [False, True])
def test_a_fan_out_leaves_no_process_behind(fail: bool, kept: bool) -> None:
    """A reproduce-like fan-out (pool, beside, a failing task; in a kept pool's block or
    not) exits with its group empty."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", FAN_OUT.format(fail=fail, kept=kept)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        start_new_session=True,  # its own process group: the group id is its pid
    )
    assert proc.wait(timeout=120) == 0
    assert _process_group(proc.pid) == []
