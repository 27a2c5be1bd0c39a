"""Measuring on any backend: best wall time, the copy floor, peak memory, and torch on the same device.

The helpers of ``refpos bench`` (:mod:`refpos.tools.bench`). A GPU runs asynchronously, so every timing waits
for the device (:func:`best_time` synchronises after each call); a GPU's floors and peaks are its own
(``cudaMemcpy``, the bytes live in CuPy's memory pool).
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from refpos.backend import is_cupy_namespace, is_numpy_namespace


def _sync(xp: Any) -> None:
    if is_cupy_namespace(xp):
        import cupy

        cupy.cuda.Device().synchronize()


def best_time(fn: Callable[[], Any], xp: Any = np, *, repeat: int = 3, min_total: float = 0.3) -> float:
    """Best wall time of ``fn()`` over ``repeat`` runs (more runs while the total stays under min_total)."""
    return best_times([fn], xp, repeat=repeat, min_total=min_total)[0]


def best_times(fns: Sequence[Callable[[], Any]], xp: Any = np, *, repeat: int = 3,
               min_total: float = 0.3) -> list[float]:
    """Best wall time of each function, timed in alternating rounds (:func:`round_times`)."""
    return [min(times) for times in round_times(fns, xp, repeat=repeat, min_total=min_total)]


def round_times(fns: Sequence[Callable[[], Any]], xp: Any = np, *, repeat: int = 3,
                min_total: float = 0.3) -> list[list[float]]:
    """Every round's wall time of each function, timed in alternating rounds ``f1, f2, …, f1, f2, …``.

    A shared machine has slow phases that last seconds; timing a floor, then the function, lets a phase
    fall on one of them and skews their ratio (on the 2-core VM, ``apply_rope`` over the copy read
    1.86×, 2.28× and 1.95× in three runs). In alternating rounds a phase falls on all of them alike.
    Each is warmed up once (allocator, caches, lazy imports); rounds go on until there are ``repeat``
    of them and they took ``min_total`` seconds per function (at most 50).
    """
    for fn in fns:
        fn()
        _sync(xp)
    times: list[list[float]] = [[] for _ in fns]
    rounds = 0
    while rounds < repeat or (sum(map(sum, times)) < min_total * len(fns) and rounds < 50):
        for fn, fn_times in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            _sync(xp)
            fn_times.append(time.perf_counter() - start)
        rounds += 1
    return times


def load_average() -> float | None:
    """The machine's load over the last minute (``os.getloadavg``; None where there is none): what else ran."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return None


def copy_fn(a: Any, xp: Any) -> Callable[[], Any]:
    """A copy of ``a`` into new memory: the floor of elementwise work on ``a``'s bytes (see :func:`copy_time`)."""
    if is_cupy_namespace(xp):
        dst = xp.empty_like(a)
        return lambda: dst.data.copy_from_device_async(a.data, a.nbytes)
    return lambda: xp.asarray(a, copy=True)


def copy_into_fn(a: Any, xp: Any) -> Callable[[], Any] | None:
    """A copy of ``a`` into memory written once before (NumPy only; ``None`` elsewhere).

    Its difference from :func:`copy_fn` is the cost of fresh memory: the kernel maps and zeroes every page
    of a new array on its first write (on the 2-core VM, 64 MiB: 21.9 ms into new memory, 7.7 ms into
    memory written before). Every function that returns a new array pays it, the copy floor included.
    """
    if not is_numpy_namespace(xp):
        return None
    dst = np.empty_like(a)
    dst.fill(0)  # every page touched once, now
    return lambda: np.copyto(dst, a)


def copy_time(a: Any, xp: Any) -> float:
    """Best time to copy ``a`` into new memory: the floor of elementwise work on ``a``'s bytes.

    On a GPU this is a device-to-device ``cudaMemcpy``, the device's own copy rate: on an H200 it moved
    4.09 TB/s (read + write) in float32 and float64, where CuPy's elementwise copy moved 1.64 TB/s in float32
    and 3.17 TB/s in float64."""
    return best_time(copy_fn(a, xp), xp)


def peak_memory(fn: Callable[[], Any], xp: Any = np) -> int | None:
    """Extra bytes allocated at the peak of one call of ``fn`` (None where it cannot be measured)."""
    if is_numpy_namespace(xp) or xp.__name__ == "array_api_strict":
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            fn()
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    if is_cupy_namespace(xp):
        return _cupy_live_peak(fn, xp)
    return None


def _cupy_live_peak(fn: Callable[[], Any], xp: Any) -> int:
    """Peak bytes live in CuPy's memory pool during ``fn()``: a memory hook counts each allocation from
    the pool and each return to it. (The pool's own size would also count its cached, fragmented blocks.)"""
    from cupy.cuda import memory_hook

    class LivePeak(memory_hook.MemoryHook):
        name = "refpos_live_peak"

        def __init__(self) -> None:
            self.live = self.peak = 0

        def malloc_postprocess(self, **kwargs: Any) -> None:
            self.live += kwargs["mem_size"]
            self.peak = max(self.peak, self.live)

        def free_postprocess(self, **kwargs: Any) -> None:
            self.live -= kwargs["mem_size"]

    _sync(xp)
    hook = LivePeak()
    with hook:
        fn()
        _sync(xp)
    return hook.peak


def torch_module() -> Any | None:
    """The ``torch`` module, or None where torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_device_for(xp: Any) -> str | None:
    """Where torch runs beside refpos: the CPU beside NumPy, CUDA beside CuPy; None without torch (or
    without torch's CUDA beside CuPy, or beside array-api-strict)."""
    torch = torch_module()
    if torch is None:
        return None
    if is_numpy_namespace(xp):
        return "cpu"
    if is_cupy_namespace(xp) and torch.cuda.is_available():
        return "cuda"
    return None


def transformers_rope() -> Callable[..., Any] | None:
    """transformers' ``apply_rotary_pos_emb`` (Llama), or None where transformers is not installed."""
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError:
        return None
    return apply_rotary_pos_emb


def release_cached_memory(xp: Any) -> None:
    """On a GPU, hand the memory CuPy's and torch's caching allocators hold back to the device, so that
    each library measured next can use all of it."""
    if not is_cupy_namespace(xp):
        return
    import cupy

    _sync(xp)
    cupy.get_default_memory_pool().free_all_blocks()
    torch = torch_module()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def to_torch(a: Any) -> Any:
    """The same memory as a torch tensor (DLPack: NumPy stays on the CPU, CuPy on its GPU)."""
    return torch_module().from_dlpack(a)
