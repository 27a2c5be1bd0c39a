"""Run independent blocks of work on the CPU's cores (NumPy only).

The reference computes long sequences block by block: rows of a RoPE rotation, (head, query-rows) tiles
of attention. The blocks write disjoint parts of one output and read nothing another block writes, so
running them on several threads gives the **same bits** as running them one after another with the same
BLAS settings (only a serial run's multithreaded BLAS may block a dot product differently: a few ulps;
the tests check both). NumPy releases the GIL inside its loops and matmuls, so the threads really run in parallel.

Five details make this pay off:

* **BLAS threads.** NumPy's matmul is multithreaded by itself. A matmul inside a block that also runs
  on every core would oversubscribe the machine (docs/performance.md#threads). While blocks run in
  parallel, BLAS is therefore held to one thread, through
  ``threadpoolctl``; where that package is missing, the blocks run one after another instead.
* **Nesting.** A block that itself asks for parallel blocks runs them in its own thread, serially, so a
  worker never waits for the pool it runs in.
* **Fork.** A child process forked from one that used the pool starts a pool of its own (the parent's
  threads do not exist in the child).
* **Context.** Each block runs in a copy of the caller's context, so the caller's ``np.errstate`` (a
  context variable in NumPy 2) holds in the pool's threads too.
* **Scratch memory.** :class:`ThreadScratch` lets each thread reuse its temporaries from one block to the
  next: fresh memory costs a page fault per 4 KiB page on first touch.

The number of threads is ``REFPOS_THREADS`` when set (``1`` turns this off), otherwise the number of
cores this process may use. Other backends run blocks in order: CuPy queues them on the GPU anyway, and
array-api-strict is the portability check, not a fast path.
"""

from __future__ import annotations

import contextvars
import functools
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from refpos.backend import is_cupy_namespace

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_region_lock = threading.Lock()  # one parallel region at a time owns the BLAS thread limit
_inside = threading.local()  # .worker is True in the pool's threads


def num_threads() -> int:
    """Threads for parallel blocks: ``REFPOS_THREADS``, or the cores this process may run on.

    Raises
    ------
    ValueError
        ``REFPOS_THREADS`` is set but is not a positive integer.
    """
    env = os.environ.get("REFPOS_THREADS", "").strip()
    if env:
        if not (env.isascii() and env.isdigit()) or int(env) < 1:  # ASCII digits: int() takes '١٢' too
            raise ValueError(f"REFPOS_THREADS must be a positive integer, got {env!r}")
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@functools.cache
def _blas_controller() -> Any | None:
    """threadpoolctl's view of the loaded BLAS libraries, or ``None`` without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return ThreadpoolController()


def _forget_threads_after_fork() -> None:
    """A forked child has none of its parent's threads: start from a fresh pool and a free lock."""
    global _pool, _pool_size, _region_lock
    _pool, _pool_size, _region_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads_after_fork)


def _executor(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    if _pool is None or _pool_size != size:
        if _pool is not None:
            _pool.shutdown(wait=True)
        _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="refpos",
                                   initializer=lambda: setattr(_inside, "worker", True))
        _pool_size = size
    return _pool


#: elements below which blocks run in order: handing them to threads (and holding BLAS to one thread)
#: costs more than such small work takes (docs/performance.md#threads)
MIN_PARALLEL_WORK = 2**17


#: how many times larger blocks are on a GPU than on the CPU. On the CPU a block is sized for the cache;
#: on a GPU each block costs a few kernel launches (~10 µs each) whatever its size, so blocks must be large
#: to keep the device busy, and its memory holds them easily (attention: 2**26 logits, 256 MiB of float32).
DEVICE_BLOCK_FACTOR = 64


def block_elements(cpu_elements: int, xp: Any) -> int:
    """Elements per block in namespace ``xp``: ``cpu_elements`` on the CPU, :data:`DEVICE_BLOCK_FACTOR`
    times that on a GPU (CuPy)."""
    return cpu_elements * DEVICE_BLOCK_FACTOR if is_cupy_namespace(xp) else cpu_elements


def threads_for(work: int) -> int:
    """Threads that :func:`run_blocks` would use for ``work`` elements of NumPy work."""
    return num_threads() if work >= MIN_PARALLEL_WORK else 1


def run_blocks(blocks: Sequence[Callable[[], None]], *, numpy: bool, work: int) -> None:
    """Call every block once; in parallel when ``numpy``, the work is large and threads are allowed.

    Parameters
    ----------
    blocks : sequence of callables without arguments
        Independent pieces of one computation: each writes its own part of the output.
    numpy : bool
        Whether the arrays are NumPy arrays (only then are threads used).
    work : int
        Elements the blocks process together (e.g. logits); below :data:`MIN_PARALLEL_WORK` the blocks
        run in order.

    Notes
    -----
    An exception raised in a block is raised here, after the other blocks have finished.
    """
    threads = threads_for(work)
    controller = _blas_controller() if numpy and threads > 1 and len(blocks) > 1 else None
    # in a worker, or while another caller's region runs: stay in this thread
    if controller is None or getattr(_inside, "worker", False) or not _region_lock.acquire(blocking=False):
        for block in blocks:
            block()
        return
    try:
        with controller.limit(limits=1, user_api="blas"):
            pool = _executor(threads)
            # taken in order by whichever thread is free, each in a copy of the caller's context (NumPy 2's
            # np.errstate lives there)
            futures = [pool.submit(contextvars.copy_context().run, block) for block in blocks]
            errors = [future.exception() for future in futures]
    finally:
        _region_lock.release()
    first = next((error for error in errors if error is not None), None)
    if first is not None:
        raise first


class ThreadScratch(threading.local):
    """Scratch arrays that each thread reuses across the blocks of one call (each thread sees its own).

    Fresh memory costs a page fault per 4 KiB page on first touch; blocks that allocate their
    temporaries anew each time pay that again and again (docs/performance.md#fast-forms). Create one per
    call: its arrays are released with it.
    """

    def take(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A C-contiguous array of ``shape`` (contents undefined), from memory this thread already holds."""
        size = math.prod(shape)
        held = self.__dict__.get(name)
        if held is None or held.size < size or held.dtype != dtype:
            held = self.__dict__[name] = np.empty(size, dtype=dtype)
        return held[:size].reshape(shape)
