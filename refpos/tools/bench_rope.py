"""``refpos bench rope``: apply_rope cold and warm, the rotation alone, beside the floors and the native kernels.

For x of one shape (B, H, T, D), each dtype, layout and rotary width, these run in the same alternating rounds
(a slow phase of a shared machine falls on all of them alike):

=========================  =============================================================================
``floor_copy``             a copy of x into new memory (NumPy's, one thread)
``floor_copy_touched``     the same copy into memory written before (NumPy only); ``fresh_pages_s``, the
                           difference, is what the first write of a new output costs
``floor_tables``           the float64 tables alone, ``A·cos φ`` and ``A·sin φ`` of every angle cast to
                           x's dtype (what the readable form computes besides its products; one thread)
``rotation``               the fast form's span rotation alone (:mod:`refpos.rope.fast`, on CuPy
                           :mod:`refpos.rope.fast_gpu`), given the float64 tables, into a new output:
                           what a warm call does besides its checks
``apply_rope_cold``        :func:`refpos.apply_rope` at positions the table cache has not seen (it is emptied
                           before each call): the tables are computed, on every core
``apply_rope_warm``        :func:`refpos.apply_rope` at the positions of the call before: the tables come
                           from the cache (:mod:`refpos.rope.table_cache`)
``ggml_rope_ext``,         llama.cpp's ggml ``rope_ext`` and onnxruntime's ``RotaryEmbedding`` (given its
``ort_rotary``             float32 cache), when installed (:mod:`refpos.tools.bench_native`)
=========================  =============================================================================

and, on the CPU, the same functions' CPU time per call (``*_cpu_s``), which a busy neighbour disturbs far
less than wall time. The ratios the targets are stated in: ``rotation/floor_copy``,
``apply_rope_cold/floor_copy_tables``, ``apply_rope_warm/ort_rotary``, ``apply_rope_warm/ggml_rope_ext`` (best
rounds, and the same for median rounds and CPU time). transformers' ``apply_rotary_pos_emb`` is timed on its
own after them when torch is installed (its thread pool spins after a call). Nothing here is asserted by a test.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.backend import array_namespace, is_cupy_namespace
from refpos.tools.bench import Record, add_ratios, time_torch
from refpos.tools.measure import (
    copy_fn,
    copy_into_fn,
    load_average,
    peak_memory,
    round_times,
    to_torch,
    torch_device_for,
    torch_module,
    transformers_rope,
)

#: θ of every configuration timed (the native kernels are handed the same)
THETA = 10000.0
#: (numerator, denominator) of the ratios computed for each kind of round: best, median, CPU time
TARGET_RATIOS = (("rotation", "floor_copy"), ("apply_rope_cold", "floor_copy_tables"),
                 ("apply_rope_warm", "floor_copy_tables"), ("apply_rope_warm", "floor_copy"),
                 ("apply_rope_warm", "ort_rotary"), ("apply_rope_warm", "ggml_rope_ext"),
                 ("apply_rope_cold", "ort_rotary"), ("apply_rope_cold", "ggml_rope_ext"))


def bench_rope(xp: Any, dtypes: list[str], shape: tuple[int, ...], layouts: list[str],
               rotary_dims: list[int] | None = None, rope_rounds: int = 7) -> list[Record]:
    """One record per dtype, layout and rotary width (default: all of D, and half of it) on x of ``shape``."""
    from refpos.rope import RopeConfig

    records = []
    *_, t, head_dim = shape
    positions = xp.arange(t, dtype=xp.int64)
    for dtype_name in dtypes:
        x = xp.asarray(np.random.default_rng(0).standard_normal(shape).astype(dtype_name))
        for rotary_dim in rotary_dims or [head_dim, head_dim // 2]:
            for layout in layouts:
                rope = RopeConfig(rope_type="default", theta=THETA, head_dim=head_dim, rotary_dim=rotary_dim,
                                  layout=layout)
                records.append(_bench_one(xp, x, dtype_name, positions, rope, rope_rounds))
    return records


def _bench_one(xp: Any, x: Any, dtype_name: str, positions: Any, rope: Any, rope_rounds: int) -> Record:
    from refpos.rope import apply_rope
    from refpos.rope.table_cache import cache_for

    rec: Record = {"suite": "rope", "shape": list(x.shape), "dtype": dtype_name, "layout": rope.layout,
                   "rotary_dim": rope.rotary_dim, "backend": xp.__name__}
    cache = cache_for(xp)

    def cold() -> Any:
        cache.clear()  # positions never seen: the tables are computed
        return apply_rope(x, positions, rope)

    def warm() -> Any:
        return apply_rope(x, positions, rope)  # the positions of the call before: tables from the cache

    timed = {"floor_copy": copy_fn(x, xp), "floor_tables": tables_fn(positions, rope, x.dtype),
             **rotation_timer(x, positions, rope), "apply_rope_cold": cold, "apply_rope_warm": warm,
             **native_rope_timers(x, rope)}
    touched = copy_into_fn(x, xp)
    if touched is not None:
        timed["floor_copy_touched"] = touched
    rec["load_before"] = load_average()
    rounds = round_times(list(timed.values()), xp, repeat=rope_rounds)
    rec["load_after"] = load_average()
    rec["rounds"] = len(rounds[0])
    if "ggml_rope_ext" in timed or "ort_rotary" in timed:
        from refpos.parallel import num_threads

        rec["native_threads"] = num_threads()
    for name, times in zip(timed, rounds, strict=True):
        rec[f"{name}_s"], rec[f"{name}_median_s"] = min(times), float(np.median(times))
    kinds = ["_s", "_median_s"]
    if not is_cupy_namespace(xp):  # the same functions' CPU time: what a busy neighbour disturbs least
        for name, times in zip(timed, cpu_round_times(list(timed.values()), rope_rounds), strict=True):
            rec[f"{name}_cpu_s"] = min(times)
        kinds.append("_cpu_s")
    if touched is not None:
        rec["fresh_pages_s"] = rec["floor_copy_s"] - rec["floor_copy_touched_s"]
    for kind in kinds:
        rec[f"floor_copy_tables{kind}"] = rec[f"floor_copy{kind}"] + rec[f"floor_tables{kind}"]
    _time_transformers(rec, xp, x, rope, rope_rounds)
    rec["apply_rope_cold_peak_bytes"] = peak_memory(cold, xp)
    rec["apply_rope_warm_peak_bytes"] = peak_memory(warm, xp)
    rec["output_bytes"] = nbytes = math.prod(x.shape) * np.dtype(dtype_name).itemsize  # any backend's dtype
    for key in ("floor_copy_s", "rotation_s", "apply_rope_warm_s", "torch_hf_apply_s"):
        if key in rec:
            rec[f"{key[:-2]}_gbs"] = 2 * nbytes / rec[key] / 1e9  # read x, write the output
    for kind in kinds:
        for name, floor in TARGET_RATIOS:
            add_ratios(rec, f"{name}{kind}", (f"{floor}{kind}",))
    add_ratios(rec, "apply_rope_warm_s", ("torch_hf_apply_s",))
    return rec


def _time_transformers(rec: Record, xp: Any, x: Any, rope: Any, rope_rounds: int) -> None:
    """transformers' ``apply_rotary_pos_emb`` on the same x (whole-width half layout only), on its own."""
    torch, torch_device = torch_module(), torch_device_for(xp)
    if torch_device is None or rope.layout != "half" or rope.rotary_dim != x.shape[-1] or transformers_rope() is None:
        return
    apply_rotary_pos_emb = transformers_rope()
    tx = to_torch(x)
    t, head_dim = x.shape[-2:]
    inv_freq = torch.from_numpy(THETA ** (-np.arange(0, head_dim, 2) / head_dim))
    angles = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, D/2)
    emb = torch.cat([angles, angles], dim=-1).to(tx.dtype)[None].to(torch_device)  # (1, T, D)
    cos, sin = emb.cos(), emb.sin()
    rec["torch_device"] = torch_device
    # HF rotates q and k in one call: half of it is the cost of one tensor
    time_torch(rec, "torch_hf_apply_s", lambda: apply_rotary_pos_emb(tx, tx, cos, sin), torch, xp, rope_rounds)
    for key in ("torch_hf_apply_s", "torch_hf_apply_median_s"):
        if key in rec:
            rec[key] /= 2


def rotation_timer(x: Any, positions: Any, rope: Any) -> dict[str, Callable[[], Any]]:
    """``{"rotation": fn}``: the fast form's span rotation of x into a new output, given the float64 tables
    (computed once, here); ``{}`` where x has no fast form (array-api-strict runs the readable one)."""
    from refpos.rope.core import fast_span_rotation, rope_pair_slices, rope_pair_tables, rope_span
    from refpos.rope.scaling import rope_frequencies

    rotate_span = fast_span_rotation(x)
    if rotate_span is None:
        return {}
    xp = array_namespace(x)
    inv_freq, factor = rope_frequencies(rope, seq_len=int(xp.max(positions)) + 1, xp=xp)
    cos, sin = rope_pair_tables(positions, inv_freq, factor, rope)  # (T, m) float64
    pairs = rope_pair_slices(rope, *rope_span(rope))

    def rotation() -> Any:
        out = xp.empty(x.shape, dtype=x.dtype)
        rotate_span(x, cos, sin, out, pairs)
        return out

    return {"rotation": rotation}


def tables_fn(positions: Any, rope: Any, dtype: Any) -> Callable[[], Any]:
    """The table evaluation of the readable form alone: frequencies, ``A·cos φ``, ``A·sin φ``, cast to ``dtype``."""
    from refpos.rope.core import pair_cos_sin
    from refpos.rope.scaling import rope_frequencies

    xp = array_namespace(positions)

    def tables() -> Any:
        inv_freq, factor = rope_frequencies(rope, seq_len=int(xp.max(positions)) + 1, xp=xp)
        cos, sin = pair_cos_sin(positions, inv_freq, factor)  # (T, m) float64
        return xp.astype(cos, dtype), xp.astype(sin, dtype)

    return tables


def cpu_round_times(fns: list[Callable[[], Any]], repeat: int) -> list[list[float]]:
    """Each function's CPU time per call (``time.process_time``: every thread of this process, so a call on two
    threads counts both), in ``repeat`` alternating rounds after one warm-up call each. Another process on a
    shared machine moves it far less than it moves wall time, though not at all only when it leaves the
    caches and the memory bus alone."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, fn_times in zip(fns, times, strict=True):
            start = time.process_time()
            fn()
            fn_times.append(time.process_time() - start)
    return times


def native_rope_timers(x: Any, rope: Any) -> dict[str, Callable[[], Any]]:
    """ggml's ``rope_ext`` (its own float32 angles) and onnxruntime's ``RotaryEmbedding`` (given its float32
    cache) on the same x, positions 0 … T − 1, θ, rotary width and threads as apply_rope, for the alternating
    rounds, when installed (:mod:`refpos.tools.bench_native`; NumPy float32, the half and interleaved layouts,
    the rotated channels first). Their thread pools are made to sleep between calls (OpenMP's passive wait,
    onnxruntime without spinning), so that no spinning thread slows what runs next in a round."""
    from refpos.parallel import num_threads
    from refpos.tools.bench_native import ggml_rope_timer, ort_rope_timer

    if (not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 4 or rope.layout == "deinterleaved"
            or rope.placement != "first"):
        return {}
    threads, rotary = num_threads(), rope.rotary_dim
    timers = {"ggml_rope_ext": ggml_rope_timer(x, THETA, threads, neox=rope.layout == "half", n_dims=rotary),
              "ort_rotary": ort_rope_timer(x, THETA, threads, interleaved=rope.layout == "interleaved",
                                           rotary_dim=rotary)}
    return {name: timer for name, timer in timers.items() if timer is not None}
