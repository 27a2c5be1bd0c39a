"""``refpos bench``: time and peak memory of the reference beside the machine's floors.

Every measured function is printed next to a *floor* measured in the same run — the two matmuls for
attention (q·kᵀ and p·v of the same shapes), a memory copy of the same bytes for elementwise work —
and, when torch is installed, next to what users would otherwise run on the same device (torch
``scaled_dot_product_attention``, transformers' ``apply_rotary_pos_emb``: on the CPU beside NumPy, on
CUDA beside CuPy), with the ratios; the rope suite (:mod:`refpos.tools.bench_rope`) also beside the native
kernels of llama.cpp's ggml and onnxruntime when they are installed (:mod:`refpos.tools.bench_native`). The
measuring itself is :mod:`refpos.tools.measure`.

Timings are the best of several runs (``time.perf_counter``). The copy floor and ``apply_rope`` run in
alternating rounds, so that a slow phase of a shared machine weighs on both; BLAS matmuls and torch run
on their own, as their thread pools keep spinning after a call and would slow what runs next. Peak
memory is the extra memory allocated during one call (``tracemalloc``, which NumPy reports to; CuPy: the
peak of the bytes live in its memory pool, counted by a memory hook).
Nothing here is asserted by a test: numbers go into notes, not into pass/fail.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from refpos.backend import is_cupy_namespace
from refpos.tools.measure import (
    best_time,
    copy_time,
    peak_memory,
    release_cached_memory,
    round_times,
    to_torch,
    torch_device_for,
    torch_module,
)

Record = dict[str, Any]
SUITES = ("floors", "attention", "rope", "pipeline", "golden", "check")


# ---------------------------------------------------------------------------------------- formatting
def format_bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


# ---------------------------------------------------------------------------------------- attention
def bench_attention(xp: Any, sizes: list[int], dtypes: list[str], heads: int, head_dim: int,
                    chunk_size: int, causal: bool, full_limit_gib: float) -> list[Record]:
    """attention and chunked_attention on (1, heads, T, head_dim) beside the two matmuls and torch SDPA."""
    from refpos.core.attention import attention
    from refpos.core.chunked import chunked_attention

    torch, torch_device = torch_module(), torch_device_for(xp)
    records: list[Record] = []
    for dtype_name in dtypes:
        for t in sizes:
            rng = np.random.default_rng(0)
            q, k, v = (xp.asarray(rng.standard_normal((1, heads, t, head_dim)).astype(dtype_name)) for _ in "qkv")
            rec: Record = {"suite": "attention", "T": t, "heads": heads, "head_dim": head_dim, "dtype": dtype_name,
                           "causal": causal, "chunk_size": chunk_size, "backend": xp.__name__}

            def full() -> Any:
                return attention(q, k, v, causal=causal)  # noqa: B023

            def chunked() -> Any:
                return chunked_attention(q, k, v, causal=causal, chunk_size=chunk_size)  # noqa: B023

            # one after the other, not in alternating rounds: BLAS's threads spin after a matmul and took
            # the cores from attention's blocks (attention took up to 1.25x longer when alternated)
            if _fits(heads, t, dtype_name, 1, full_limit_gib):
                kt = xp.matrix_transpose(k)
                probs = xp.asarray(np.full((1, heads, t, t), 1.0 / t, dtype=dtype_name))
                rec["floor_matmuls_s"] = best_time(lambda: (q @ kt, probs @ v), xp)  # noqa: B023
            rec["attention_s"] = best_time(full, xp)  # runs in query blocks: no T×T temporaries
            rec["attention_peak_bytes"] = peak_memory(full, xp)
            rec["chunked_s"] = best_time(chunked, xp, repeat=1)
            rec["chunked_peak_bytes"] = peak_memory(chunked, xp)
            if torch_device is not None:
                tq, tk, tv = (to_torch(a) for a in (q, k, v))
                sdpa = torch.nn.functional.scaled_dot_product_attention
                rec["torch_device"] = torch_device
                time_torch(rec, "torch_sdpa_s", lambda: sdpa(tq, tk, tv, is_causal=causal), torch, xp)  # noqa: B023
            add_ratios(rec, "attention_s", ("floor_matmuls_s", "torch_sdpa_s"))
            add_ratios(rec, "chunked_s", ("floor_matmuls_s", "torch_sdpa_s"))
            flops = 4.0 * heads * t * t * head_dim  # q·kᵀ and p·v, dense-equivalent
            for key in ("floor_matmuls_s", "attention_s", "chunked_s", "torch_sdpa_s"):
                if key in rec:
                    rec[f"{key[:-2]}_tflops"] = flops / rec[key] / 1e12
            records.append(rec)
    return records


def time_torch(rec: Record, name: str, fn: Callable[[], Any], torch: Any, xp: Any, rounds: int = 3) -> None:
    """``rec[name]``: torch's best time (and its median of ``rounds``), measured after refpos's (its OpenMP
    threads keep spinning after a call: in alternating rounds they slowed ``apply_rope`` from 2.0–2.3× the
    copy to 2.5–2.6× on the 2-core VM). On a GPU, CuPy's cached memory is released first, as the two
    libraries' pools would otherwise hold the device's memory together. A call that fails (e.g. out of
    memory: torch's float64 SDPA on CUDA keeps the T×T scores) is recorded as ``<name>_error``."""
    release_cached_memory(xp)
    try:
        with torch.inference_mode():
            times = round_times([fn], xp, repeat=rounds)[0]
        rec[name], rec[f"{name[:-2]}_median_s"] = min(times), float(np.median(times))
    except RuntimeError as exc:
        rec[f"{name[:-2]}_error"] = str(exc).splitlines()[0][:120]
    release_cached_memory(xp)


def _fits(heads: int, t: int, dtype_name: str, n_arrays: int, limit_gib: float) -> bool:
    """Whether ``n_arrays`` (heads, T, T) arrays fit in the memory budget for full attention."""
    return n_arrays * heads * t * t * np.dtype(dtype_name).itemsize <= limit_gib * 2**30


def add_ratios(rec: Record, key: str, against: tuple[str, ...]) -> None:
    """``rec["<key>/<other>"] = rec[key] / rec[other]`` for each of ``against`` that was measured (``*_s`` names
    without their suffix)."""
    for other in against:
        if key in rec and other in rec and rec[other] > 0:
            rec[f"{key[:-2]}/{other[:-2]}"] = rec[key] / rec[other]


# ---------------------------------------------------------------------------------------- floors
def bench_floors(xp: Any, dtypes: list[str], copy_mib: int = 512, matmul_n: int | None = None) -> list[Record]:
    """The device's own rates: copy bandwidth (GB/s, read + write) and square-matmul TFLOP/s (n = 2048 on
    the CPU, 8192 on a GPU, which a 2048 matmul leaves mostly idle)."""
    if matmul_n is None:
        matmul_n = 8192 if is_cupy_namespace(xp) else 2048
    records = []
    for dtype_name in dtypes:
        itemsize = np.dtype(dtype_name).itemsize
        n = copy_mib * 2**20 // itemsize
        src = xp.asarray(np.ones(n, dtype=dtype_name))
        copy_s = copy_time(src, xp)
        a = xp.asarray(np.random.default_rng(0).standard_normal((matmul_n, matmul_n)).astype(dtype_name))
        matmul_s = best_time(lambda: a @ a, xp)  # noqa: B023
        records.append({
            "suite": "floors", "dtype": dtype_name, "backend": xp.__name__,
            "copy_s": copy_s, "copy_gbs": 2 * n * itemsize / copy_s / 1e9,
            "matmul_n": matmul_n, "matmul_s": matmul_s, "matmul_tflops": 2 * matmul_n**3 / matmul_s / 1e12,
        })
    return records


# ---------------------------------------------------------------------------------------- golden
def bench_golden(golden_dir: str | None) -> list[Record]:
    """``refpos golden generate`` into a temporary directory (it should stay within 60 s)."""
    import tempfile

    from refpos.golden.generate import generate

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        entries = generate(Path(golden_dir or tmp))
        elapsed = time.perf_counter() - start
    return [{"suite": "golden", "generate_s": elapsed, "cases": len(entries)}]


# ---------------------------------------------------------------------------------------- pipeline
def bench_pipeline(xp: Any, sizes: list[int], dtypes: list[str]) -> list[Record]:
    """One self-attention layer (d_model 512, 8 heads, 2 kv heads) with the distance bias."""
    from refpos.encodings.distance import DistanceBias
    from refpos.pipeline.layer import AttentionWeights, self_attention

    records = []
    for dtype_name in dtypes:
        for t in sizes:
            rng = np.random.default_rng(0)

            def arr(*shape: int, rng: Any = rng, dtype_name: str = dtype_name) -> Any:
                return xp.asarray((rng.standard_normal(shape) / math.sqrt(shape[0])).astype(dtype_name))

            w = AttentionWeights(arr(512, 512), arr(512, 128), arr(512, 128), arr(512, 512), n_heads=8, n_kv_heads=2)
            x = arr(t, 512)
            enc = DistanceBias(0.1, before_scale=False)
            rec: Record = {"suite": "pipeline", "T": t, "dtype": dtype_name, "backend": xp.__name__}
            rec["pipeline_s"] = best_time(lambda: self_attention(x, w, encoding=enc, causal=True), xp)  # noqa: B023
            records.append(rec)
    return records
