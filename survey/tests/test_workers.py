"""The survey's worker processes: a killed worker fails its own task by name and the others go on
(``multiprocessing.Pool`` waits for ever there); workers are replaced after their share of tasks; a task's own error
is its own. No torch needed."""

from __future__ import annotations

import os
import signal
from concurrent.futures import wait

import pytest

from survey import stored, workers


def _square(x: int) -> int:
    return x * x


def _pid(_: int) -> int:
    return os.getpid()


def _die(_: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


def _exit(code: int) -> int:
    os._exit(code)


def _raise(message: str) -> int:
    raise ValueError(message)


def test_results_come_back_in_their_futures() -> None:
    pool = workers.PoolExecutor(2)
    try:
        futures = [pool.submit(_square, i) for i in range(8)]
        assert [f.result(timeout=120) for f in futures] == [i * i for i in range(8)]
    finally:
        pool.shutdown()


def test_a_killed_worker_fails_its_own_task_and_the_rest_run() -> None:
    """The task whose process the kernel kills (SIGKILL, as the out-of-memory killer does) fails with
    :class:`WorkerLost` naming the signal; every other task, before and after it, is answered."""
    pool = workers.PoolExecutor(2)
    try:
        before = [pool.submit(_square, i) for i in range(3)]
        killed = pool.submit(_die, 0)
        exited = pool.submit(_exit, 3)
        after = [pool.submit(_square, i) for i in range(3, 7)]
        _, pending = wait([*before, killed, exited, *after], timeout=120)
        assert not pending, "a task was never answered: the pool waits for a dead worker"
        with pytest.raises(workers.WorkerLost, match=r"signal 9 \(SIGKILL\) while running _die\(0\)"):
            killed.result()
        with pytest.raises(workers.WorkerLost, match=r"exit code 3 while running _exit\(3\)"):
            exited.result()
        assert [f.result() for f in before + after] == [i * i for i in range(7)]
    finally:
        pool.shutdown()


def test_a_task_error_is_the_task_s_own() -> None:
    pool = workers.PoolExecutor(1)
    try:
        failing, next_one = pool.submit(_raise, "its own"), pool.submit(_square, 5)
        with pytest.raises(ValueError, match="its own"):
            failing.result(timeout=120)
        assert next_one.result(timeout=120) == 25
        assert not workers.lost_worker(ValueError("its own"))
    finally:
        pool.shutdown()


def test_workers_are_replaced_after_their_share_of_tasks() -> None:
    pool = workers.PoolExecutor(1, tasks_per_worker=2)
    try:
        pids = [pool.submit(_pid, i).result(timeout=120) for i in range(5)]
    finally:
        pool.shutdown()
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]


def test_completed_names_the_lost_and_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    pool = workers.PoolExecutor(2)
    try:
        futures = {pool.submit(_square, 2): "two", pool.submit(_die, 0): "killed", pool.submit(_square, 3): "three"}
        lost: list[str] = []
        assert sorted(workers.completed(futures, lost)) == [4, 9]
    finally:
        pool.shutdown()
    assert lost == ["killed"]
    assert "killed: not observed: the worker process" in capsys.readouterr().out


def test_bad_arguments_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="jobs"):
        workers.PoolExecutor(0)
    with pytest.raises(ValueError, match="tasks_per_worker"):
        workers.PoolExecutor(1, tasks_per_worker=0)
    pool = workers.PoolExecutor(1)
    pool.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(_square, 1)


def test_exit_words() -> None:
    assert workers.exit_words(-9) == "signal 9 (SIGKILL)"
    assert workers.exit_words(1) == "exit code 1"


def test_the_observation_run_uses_it() -> None:
    pool, closer = stored.executor_for(1)
    try:
        assert isinstance(pool, workers.PoolExecutor)
    finally:
        closer()


def _unpicklable(_: int):
    return lambda: None


def test_a_result_that_cannot_be_sent_back_is_the_task_s_error_and_the_worker_goes_on() -> None:
    pool = workers.PoolExecutor(1)
    try:
        with pytest.raises(RuntimeError, match="could not be sent back"):
            pool.submit(_unpicklable, 0).result(timeout=120)
        assert pool.submit(_square, 4).result(timeout=120) == 16
    finally:
        pool.shutdown()
