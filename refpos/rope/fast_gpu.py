r"""The CuPy fast form of :func:`refpos.apply_rope`: the readable formulas, one fused kernel each.

The readable form (:func:`refpos.rope.core.rotate_pairs`) writes

.. math:: u' = u\cos\varphi - v\sin\varphi,\qquad v' = v\cos\varphi + u\sin\varphi

as NumPy-style array expressions. On a GPU each product, each sum and the copy into the output is its
own kernel and its own pass over memory: eight passes. Here ``u'`` and ``v'`` are one elementwise kernel
each, reading ``u``, ``v``, ``cos φ``, ``sin φ`` once and writing straight into the output (the times
beside a copy and beside transformers: docs/performance.md#gpu).

**The same bits.** A CUDA compiler contracts ``a*b - c*d`` into fused multiply-adds, which round once
where the readable form rounds after every operation. The kernels therefore call the round-to-nearest
intrinsics (``__fmul_rn``, ``__fadd_rn``, ``__fsub_rn``; ``__dmul_rn``… in float64), which are never
contracted: each product, difference and sum is rounded exactly as the readable form's separate
kernels round it. The tests assert equality, not closeness. The readable form stays the reference and
runs for every other dtype and backend.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import array_api_compat

from refpos.backend import Array

#: dtypes with round-to-nearest intrinsics (float16 runs the readable form)
FAST_GPU_DTYPES = ("float32", "float64")

_PREAMBLE = r"""
__device__ float refpos_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ double refpos_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ float refpos_add(float a, float b) { return __fadd_rn(a, b); }
__device__ double refpos_add(double a, double b) { return __dadd_rn(a, b); }
__device__ float refpos_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ double refpos_sub(double a, double b) { return __dsub_rn(a, b); }
"""


@functools.cache
def _kernels() -> tuple[Any, Any]:
    """The two elementwise kernels ``u' = u c − v s`` and ``v' = v c + u s`` (compiled on first use)."""
    import cupy

    args = "T u, T v, T c, T s"
    first = cupy.ElementwiseKernel(args, "T y", "y = refpos_sub(refpos_mul(u, c), refpos_mul(v, s))",
                                   "refpos_rope_first", preamble=_PREAMBLE)
    second = cupy.ElementwiseKernel(args, "T y", "y = refpos_add(refpos_mul(v, c), refpos_mul(u, s))",
                                    "refpos_rope_second", preamble=_PREAMBLE)
    return first, second


def is_fast_gpu_input(x: Any) -> bool:
    """Whether the fused form applies: a non-empty CuPy array of float32 or float64."""
    return array_api_compat.is_cupy_array(x) and str(x.dtype) in FAST_GPU_DTYPES and math.prod(x.shape) > 0


def rotate_span(x: Array, cos: Array, sin: Array, out: Array, pairs: tuple[slice, slice, slice, slice]) -> None:
    """Write the rotated pairs of ``x`` into ``out`` (same bits as the readable form).

    Parameters
    ----------
    x : cupy array ``(..., T, D)``
    cos, sin : cupy arrays ``(..., T, m)`` float64
        The readable form's ``A·cos φ`` and ``A·sin φ`` (:func:`refpos.rope.core.rope_pair_tables`),
        broadcastable against ``x.shape[:-1]``; read, never written (they may be the cache's)
    out : cupy array ``(..., T, D)``, the broadcast shape: written whole (the channels outside the rotated
        span ``[u_in.start, v_in.stop)`` are x's)
    pairs : ``(u_in, v_in, u_out, v_out)`` channel slices (:func:`refpos.rope.core.rope_pair_slices`)
    """
    u_in, v_in, u_out, v_out = pairs
    start, stop = u_in.start, v_in.stop
    out[..., :start] = x[..., :start]  # pass-through channels (DeepSeek: the nope part first)
    out[..., stop:] = x[..., stop:]  # pass-through channels (GPT-NeoX, Phi: after the rotated span)
    cos, sin = cos.astype(x.dtype), sin.astype(x.dtype)  # the readable form's cast: the products run in x's dtype
    first, second = _kernels()
    u, v = x[..., u_in], x[..., v_in]  # (..., T, m) views, broadcast by the kernels
    first(u, v, cos, sin, out[..., u_out])  # writes through the (..., T, m) view of out
    second(u, v, cos, sin, out[..., v_out])
