"""A ``concurrent.futures`` executor over spawned worker processes that says when a worker dies.

The survey's observations run in separate processes: each imports torch and transformers, holds one model at a
time and may be killed by the kernel when a model takes more memory than the machine has. ``multiprocessing.Pool``
never answers a task whose worker was killed (the caller waits for ever) and ``ProcessPoolExecutor`` breaks the
whole pool (every later task fails). Here each worker runs one task at a time, the parent knows which, and:

* a worker that ends while running a task (killed by a signal, or exiting) fails **that task's** future with
  :class:`WorkerLost`, naming the exit code or signal; the worker is replaced and the other tasks go on;
* a worker is replaced after ``tasks_per_worker`` tasks (a process keeps every modeling module it imported);
* an exception raised by the task itself is that task's exception, as with any executor.

A worker process runs :func:`_serve`: it receives ``(function, args, kwargs)`` on its end of a pipe, sends back
``(True, result)`` or ``(False, exception)``, and stops on ``None``. Functions and arguments travel as pickles
between this package's own processes, as in every ``multiprocessing`` executor; no file is unpickled.
"""

from __future__ import annotations

import collections
import multiprocessing
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any


class WorkerLost(RuntimeError):
    """A worker process ended while running a task (the kernel's out-of-memory killer sends ``SIGKILL``)."""


def lost_worker(exc: BaseException) -> bool:
    """Whether ``exc`` says a task's process was lost rather than that the task failed: :class:`WorkerLost`, or
    dask.distributed's ``KilledWorker`` (named, not imported: distributed is needed only on a cluster)."""
    return isinstance(exc, WorkerLost) or type(exc).__name__ == "KilledWorker"


def completed(futures: dict[Future, str], lost: list[str], echo: bool = True) -> Iterator[Any]:
    """The results of ``futures`` (each named by its value) as they complete; a task whose process was lost
    (:func:`lost_worker`) is added to ``lost`` by name and skipped, and the others go on. Any other exception is
    raised: the task's own errors are the caller's to see."""
    for future in as_completed(futures):
        try:
            yield future.result()
        except Exception as exc:
            if not lost_worker(exc):
                raise
            lost.append(futures[future])
            if echo:
                print(f"{futures[future]}: not observed: {exc}", flush=True)


def exit_words(exitcode: int | None) -> str:
    """A process's exit code in words: ``"signal 9 (SIGKILL)"`` for a negative one, ``"exit code 3"`` otherwise."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"signal {-exitcode} ({signal.Signals(-exitcode).name})"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def _serve(conn: Connection, initializer: Any) -> None:
    """A worker's loop: run each ``(function, args, kwargs)`` received, send ``(ok, value)`` back, stop on ``None``."""
    if initializer is not None:
        initializer()
    while True:
        job = conn.recv()
        if job is None:
            return
        function, args, kwargs = job
        try:
            reply: tuple[bool, Any] = (True, function(*args, **kwargs))
        except BaseException as exc:  # the task's own error goes back to its future
            reply = (False, exc)
        try:
            conn.send(reply)
        except Exception as exc:  # a result or an exception that does not pickle
            conn.send((False, RuntimeError(f"the task's {'result' if reply[0] else 'error'} could not be sent "
                                           f"back: {type(exc).__name__}: {exc}")))


@dataclass
class _Worker:
    """One worker process, its end of the pipe, the task it runs (``None`` when idle) and how many it ran."""

    process: Any
    conn: Connection
    task: tuple[Future, str] | None = None
    done: int = 0


@dataclass
class _Queued:
    future: Future
    function: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        shown = ", ".join([repr(a)[:80] for a in self.args] + [f"{k}={v!r}"[:80] for k, v in self.kwargs.items()])
        return f"{getattr(self.function, '__name__', self.function)}({shown})"


class PoolExecutor(Executor):
    """``jobs`` spawned worker processes, each running one task at a time and replaced after ``tasks_per_worker``
    tasks or when it dies (module docstring); ``initializer`` runs once in each worker before its first task.

    See Also
    --------
    survey.stored.executor_for : this executor, or a dask.distributed cluster's.
    """

    def __init__(self, jobs: int, tasks_per_worker: int = 50, initializer: Any = None) -> None:
        if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
            raise ValueError(f"jobs must be a positive int, got {jobs!r}")
        if not isinstance(tasks_per_worker, int) or isinstance(tasks_per_worker, bool) or tasks_per_worker < 1:
            raise ValueError(f"tasks_per_worker must be a positive int, got {tasks_per_worker!r}")
        self.jobs, self.tasks_per_worker, self.initializer = jobs, tasks_per_worker, initializer
        self._context = multiprocessing.get_context("spawn")
        self._queue: collections.deque[_Queued] = collections.deque()
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._wake_reader, self._wake_writer = multiprocessing.Pipe(duplex=False)
        self._closed = False
        self._thread = threading.Thread(target=self._dispatch, name="survey-workers", daemon=True)
        self._thread.start()

    # -- the caller's side -------------------------------------------------------------------------------------

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit a task after shutdown")
            self._queue.append(_Queued(future, fn, args, kwargs))
        self._wake()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft().future.cancel()
        self._wake()
        if wait:
            self._thread.join()

    def _wake(self) -> None:
        self._wake_writer.send_bytes(b".")

    # -- the dispatcher thread ---------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Hand queued tasks to idle workers (starting workers as needed), collect replies, notice deaths; when
        shut down and nothing is queued or running, stop the workers."""
        while True:
            with self._lock:
                self._assign()
                finished = self._closed and not self._queue and all(w.task is None for w in self._workers)
            if finished:
                break
            waited = [self._wake_reader] + [w.conn for w in self._workers] + [w.process.sentinel for w in self._workers]
            ready = wait(waited, timeout=5.0)
            if self._wake_reader in ready:
                while self._wake_reader.poll():
                    self._wake_reader.recv_bytes()
            for worker in list(self._workers):
                if worker.conn in ready or worker.process.sentinel in ready:
                    self._collect(worker)
        for worker in self._workers:
            self._stop(worker)
        self._workers.clear()

    def _assign(self) -> None:
        while self._queue:
            idle = next((w for w in self._workers if w.task is None), None)
            if idle is None and len(self._workers) < self.jobs:
                idle = self._start()
            if idle is None:
                return
            queued = self._queue.popleft()
            if not queued.future.set_running_or_notify_cancel():
                continue
            idle.task = (queued.future, queued.label())
            idle.conn.send((queued.function, queued.args, queued.kwargs))

    def _start(self) -> _Worker:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(theirs, self.initializer), daemon=True)
        process.start()
        theirs.close()
        worker = _Worker(process, ours)
        self._workers.append(worker)
        return worker

    def _collect(self, worker: _Worker) -> None:
        """A reply, or the worker's end: the task's future answered either way."""
        reply = None
        try:
            if worker.conn.poll():
                reply = worker.conn.recv()
        except (EOFError, OSError):  # the pipe closed: the process is ending
            worker.process.join(timeout=5)
        if reply is not None and worker.task is not None:
            future, _ = worker.task
            worker.task, worker.done = None, worker.done + 1
            ok, value = reply
            future.set_result(value) if ok else future.set_exception(value)
            if worker.done >= self.tasks_per_worker:
                self._retire(worker)
            return
        if not worker.process.is_alive():
            worker.process.join()
            if worker.task is not None:
                future, label = worker.task
                future.set_exception(WorkerLost(f"the worker process (pid {worker.process.pid}) ended with "
                                                f"{exit_words(worker.process.exitcode)} while running {label}"))
            self._workers.remove(worker)
            worker.conn.close()

    def _retire(self, worker: _Worker) -> None:
        self._stop(worker)
        self._workers.remove(worker)

    @staticmethod
    def _stop(worker: _Worker) -> None:
        try:
            worker.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        worker.process.join(timeout=30)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


__all__ = ["PoolExecutor", "WorkerLost", "completed", "exit_words", "lost_worker"]
