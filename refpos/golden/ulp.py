r"""The numbers of each dtype: its names, its precision, and the spacing of its numbers (the ulp).

Every tolerance of :mod:`refpos.golden.tolerance` and every comparison of :mod:`refpos.golden.compare` counts
in units of the last place of a dtype: :func:`ulp` is that unit, for float64, float32, bfloat16 and
float16 values held in float64 arrays on any backend.

>>> [float(u) for u in ulp([1.0, 1000.0], "float16")]
[0.0009765625, 0.5]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace, get_xp, is_numpy_namespace

DTYPES = ("float64", "float32", "bfloat16", "float16")
#: explicit mantissa bits (the ulp of 1 is 2**-MANTISSA) and smallest normal exponent
MANTISSA = {"float64": 52, "float32": 23, "bfloat16": 7, "float16": 10}
MIN_EXPONENT = {"float64": -1022, "float32": -126, "bfloat16": -126, "float16": -14}


def check_dtype(dtype: object) -> str:
    """Normalise a dtype name (``float64``, ``float32``, ``bfloat16``/``bf16``, ``float16``/``fp16``)."""
    if not isinstance(dtype, str):
        name = getattr(dtype, "name", None) or str(dtype)
    else:
        name = dtype
    aliases = {"f64": "float64", "fp64": "float64", "double": "float64", "f32": "float32",
               "fp32": "float32", "single": "float32", "bf16": "bfloat16", "f16": "float16",
               "fp16": "float16", "half": "float16"}
    name = aliases.get(name.lower(), name.lower()) if isinstance(name, str) else name
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return name


def as_float_array(x: Any, name: str, xp: Any = None) -> Array:
    """``x`` (an array or a number) as a float64 array of its backend; ``TypeError`` naming ``name`` otherwise."""
    try:
        if isinstance(x, (int, float, list, tuple)):
            xp = get_xp(xp)
            return xp.asarray(x, dtype=xp.float64)
        try:
            ns = array_namespace(x)
        except TypeError:
            raise TypeError(f"{name} must be an array or a number, got {type(x).__name__}") from None
        return ns.astype(x, ns.float64, copy=False)  # callers never write into it
    except OverflowError:  # a Python int beyond float64 (in a list, or an object array)
        raise ValueError(f"{name} holds an integer float64 cannot hold (|x| >= 2**1024)") from None


def ulp(values: Any, dtype: str) -> Array:
    r"""Spacing of ``dtype`` numbers at ``|values|``: :math:`2^{\max(\lfloor\log_2|v|\rfloor, e_{min}) - t}`.

    ``t`` is the number of explicit mantissa bits (52, 23, 7, 10); zero and subnormals get the
    subnormal spacing. bf16: 0.0078 at 1, 0.125 on [16, 32); fp16: 0.5 at 1000; fp32: 1.19e-7 at 1.

    >>> [float(u) for u in ulp([1.0, 3.0, 1721.0], "bfloat16")]
    [0.0078125, 0.015625, 8.0]
    """
    dtype = check_dtype(dtype)
    v = as_float_array(values, "values")
    xp = array_namespace(v)
    a = xp.abs(v)
    if is_numpy_namespace(xp):  # the same numbers from the exponent bits, in a third of the passes
        return _ulp_numpy(a, dtype)
    emin = float(MIN_EXPONENT[dtype])
    tiny = 2.0**emin
    finite = xp.isfinite(a)
    safe = xp.where((a >= tiny) & finite, a, xp.full_like(a, tiny))  # inf and NaN: any exponent in the table
    e = xp.floor(xp.log2(safe))
    # log2 may round across a power of two; correct the exponent with exact power-of-two comparisons
    powers = xp.asarray(_POWERS_OF_TWO)  # sent to the device once per call
    e = xp.where(_pow2(e, powers) > safe, e - 1.0, e)
    e = xp.where(_pow2(e + 1.0, powers) <= safe, e + 1.0, e)
    return xp.where(finite, _pow2(e - float(MANTISSA[dtype]), powers), a)  # the spacing at inf is inf; NaN stays


def _ulp_numpy(a: np.ndarray, dtype: str) -> np.ndarray:
    r"""NumPy fast form of :func:`ulp` for ``a = |values|``: the exponent read from the float64 bits.

    A normal float64 :math:`a = 1.f \cdot 2^{E - 1023}` stores ``E`` in bits 52–62, so
    :math:`\lfloor\log_2 a\rfloor = E - 1023` exactly, and :math:`2^{E - 1023 - t}` is the float64
    with exponent field ``E − t`` and a zero fraction: the masked bits minus ``t`` in the exponent
    field. Values below the smallest normal of ``dtype`` are raised to it first (they get its
    spacing); float64 spacings below the smallest normal float64 (``a < 2^{-970}``) come from
    ``ldexp``, which is exact. Equal to the readable form (tests).
    """
    t = MANTISSA[dtype]
    raised = np.maximum(a, 2.0 ** MIN_EXPONENT[dtype])  # NaN stays NaN
    field = raised.view(np.uint64) & np.uint64(0x7FF << 52)  # E in place, sign and fraction cleared
    small = a.size and float(np.fmin.reduce(raised, axis=None)) < 2.0 ** (t - 1022)  # E ≤ t: subnormal spacing
    if small:
        low = field <= np.uint64(t << 52)
        exponents = (field[low] >> np.uint64(52)).astype(np.int64)  # E of those entries
        field[low] = np.uint64((t + 1) << 52)  # a placeholder that does not wrap around
    field -= np.uint64(t << 52)  # exponent field E − t: the float64 2^(E − 1023 − t)
    spacing = field.view(np.float64)
    if small:
        spacing[low] = np.ldexp(1.0, exponents - 1023 - t)
    if a.size and not np.isfinite(a.max()):  # the spacing at inf is inf; NaN stays
        np.copyto(spacing, a, where=~np.isfinite(a))
    return spacing


#: 2**k for k = -1074 … 1024 (the last is inf), from NumPy's ldexp, which is exact
_POW2_LOW = -1074
with np.errstate(over="ignore"):
    _POWERS_OF_TWO = np.ldexp(1.0, np.arange(_POW2_LOW, 1025))


def _pow2(e: Array, powers: Array) -> Array:
    """``2**e`` for integer-valued float64 ``e`` in [-1074, 1024], exact on every backend.

    ``2.0 ** e`` would go through the backend's ``pow``, which a GPU need not round exactly (CuPy gave
    2**-52 one ulp low); the powers are looked up in ``powers``, :data:`_POWERS_OF_TWO` on e's backend.
    """
    xp = array_namespace(e)
    index = xp.reshape(xp.astype(e, xp.int64) - _POW2_LOW, (-1,))  # (n,)
    return xp.reshape(xp.take(powers, index), e.shape)
