r"""NumPy emulations of the forms of :mod:`refpos.golden.exact.forms`: correct RoPE computed the way real code does.

Each function performs the computation of one form for real in float32 and float16 arithmetic (NumPy's
``float32``/``float16``; a float16 product of float16 operands is exact in float32 and rounded once, as
hardware does) and emulates bfloat16 by rounding float32 values to 8 significant bits, to nearest even
(:func:`round_to`). ``refpos/tests/test_tolerance_forms.py`` compares them with the float64 reference to
prove every bound of :data:`refpos.golden.exact.forms.FORMS`; the numbers it measures are quoted in
docs/conventions.md#tolerances.

Examples
--------
>>> import numpy as np
>>> p = np.array([0, 1, 1 << 20])
>>> a = angles_float32("running_product", p, 1e4, 128)
>>> a.shape, a.dtype, float(a[2, 0])
((3, 64), dtype('float32'), 1048576.0)
>>> float(round_to(np.array([1.00390625]), "bfloat16")[0])   # 1 + 2⁻⁸: a tie, to even
1.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.golden.exact.ulp import check_dtype

F32 = np.float32


def round_to(values: Any, dtype: str) -> np.ndarray:
    """``values`` rounded to ``dtype`` (to nearest, ties to even), returned as float32 (float64 for float64).

    float16 and float32 by NumPy's casts; bfloat16 by keeping the upper 16 bits of the float32 pattern after
    adding ``0x7FFF`` plus the lowest kept bit (round to nearest even).
    """
    dtype = check_dtype(dtype)
    if dtype == "float64":
        return np.asarray(values, dtype=np.float64)
    as32 = np.asarray(values, dtype=F32)
    if dtype == "float32":
        return as32
    if dtype == "float16":
        return as32.astype(np.float16).astype(F32)
    bits = as32.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(F32)


def angles_float32(form: str, positions: Any, theta: float, rotary_dim: int,
                   freq_factors: Any = None) -> np.ndarray:
    r"""float32 angles ``(T, m)`` of the angle form ``form``, for base ``θ`` and ``rotary_dim = 2m``.

    * ``pow``: :math:`\omega_j = 1/\theta^{2j/d}` with a float32 exponent, then ``p·ω_j`` (transformers);
    * ``exp_log``: :math:`\omega_j = \exp(-(2j/d)\ln\theta)` in float32, then ``p·ω_j``;
    * ``running_product``: :math:`\theta_0 = p`, :math:`\theta_{j+1} = \theta_j\,s`, :math:`s = \theta^{-2/d}`
      in float32 (ggml).

    ``freq_factors`` ``(m,)``: each pair's angle divided by its float32 factor afterwards (llama.cpp's
    llama3 and LongRoPE; ggml's ``freq_factors``).
    """
    p = np.asarray(positions, dtype=F32)[:, None]  # (T, 1); exact below 2^24
    m = rotary_dim // 2
    exponent = np.arange(0, rotary_dim, 2, dtype=F32) / F32(rotary_dim)  # 2j/d, rounded to float32
    if form == "pow":
        angles = p * (F32(1.0) / np.power(F32(theta), exponent))
    elif form == "exp_log":
        angles = p * np.exp(-exponent * np.log(F32(theta)))
    elif form == "running_product":
        scale = np.power(F32(theta), F32(-2.0) / F32(rotary_dim))  # s = θ^(−2/d): powf of a rounded exponent
        angles = np.empty((p.shape[0], m), dtype=F32)
        current = p[:, 0].copy()
        for j in range(m):  # θ_j = θ_{j-1}·s, one float32 rounding each
            angles[:, j] = current
            current = current * scale
    else:
        raise ValueError(f"form must be 'pow', 'exp_log' or 'running_product', got {form!r}")
    if freq_factors is not None:
        angles = angles / np.asarray(freq_factors, dtype=F32)
    return angles.astype(F32)


def rotate_half(x: Any, angles: np.ndarray, dtype: str, storage: str, attention_factor: float = 1.0) -> np.ndarray:
    r"""Half-layout RoPE of ``x`` ``(T, 2m)`` with float32 ``angles`` ``(T, m)``, stored as the storage form says;
    the result in float64 (its values are the dtype's).

    * ``float32_rotation``: ``x`` cast to float32, cos/sin, ``×A`` and the rotation in float32;
    * ``fused_float32``: ``x`` stored in ``dtype``, the rotation in float32, the output stored in ``dtype``;
    * ``input_in_dtype``: ``x`` stored in ``dtype``, float32 tables, each product and the sum rounded to ``dtype``;
    * ``tables_in_dtype``: as ``input_in_dtype`` with ``A·cos`` and ``A·sin`` stored in ``dtype`` first.

    .. math:: u' = u\,c - v\,s, \qquad v' = v\,c + u\,s
    """
    m = angles.shape[-1]
    cos = np.cos(angles) * F32(attention_factor)  # float32 tables (×A rounds once)
    sin = np.sin(angles) * F32(attention_factor)
    if storage == "float32_rotation":
        x32 = np.asarray(x, dtype=F32)
        u, v = x32[:, :m], x32[:, m:]
        return np.concatenate([u * cos - v * sin, v * cos + u * sin], axis=-1).astype(np.float64)
    stored = round_to(x, dtype)  # the input as the dtype holds it
    u, v = stored[:, :m], stored[:, m:]
    if storage == "fused_float32":
        out = np.concatenate([u * cos - v * sin, v * cos + u * sin], axis=-1)  # float32 arithmetic
        return round_to(out, dtype).astype(np.float64)
    if storage == "tables_in_dtype":
        cos, sin = round_to(cos, dtype), round_to(sin, dtype)
    elif storage != "input_in_dtype":
        raise ValueError(f"storage must be a storage form of refpos.golden.exact.forms, got {storage!r}")

    def r(a: np.ndarray) -> np.ndarray:
        return round_to(a, dtype)  # one rounding to the dtype (a float32 product of two stored values is exact)

    return np.concatenate([r(r(u * cos) - r(v * sin)), r(r(v * cos) + r(u * sin))], axis=-1).astype(np.float64)


def rotate_half_exact(x: Any, positions: Any, inv_freq: Any, attention_factor: float = 1.0) -> np.ndarray:
    """The float64 reference of :func:`rotate_half`: ``x`` ``(T, 2m)`` at ``positions`` with ``inv_freq`` ``(m,)``."""
    x = np.asarray(x, dtype=np.float64)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    m = angles.shape[-1]
    c, s = attention_factor * np.cos(angles), attention_factor * np.sin(angles)
    u, v = x[:, :m], x[:, m:]
    return np.concatenate([u * c - v * s, v * c + u * s], axis=-1)
