"""torch's resampling rules evaluated tap by tap in any number type: exact rationals for the golden certificates,
float64 for the spec suite's oracles, float32 for a correct float32 port.

Written from the rules of docs/grid.md#resampling and docs/decomposed.md#the-math, independently of
:mod:`refpos.encodings.resample` (which builds whole weight matrices in the array API): every quantity here is
a scalar of the number type ``f`` (``fractions.Fraction``, ``np.float64`` or ``np.float32``) — the step, the
source coordinate, the weights (the antialias window as torch bounds it, ``[⌊c − support + ½⌋,
⌊c + support + ½⌋)``) and the sums. Used by refpos/golden/cases/grid.py (``Fraction``: the certificates),
spec_tests/test_grid.py (``np.float64``: the oracles) and refpos/tests/test_grid_mistakes.py (``np.float32``: a
correct port). Nearest takes its index in float32 in every type, as torch does.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

Taps = list[list[tuple[int, Any]]]


def _cubic(x: Any, a: float, f: type) -> Any:
    x = abs(f(x))
    if x < 1:
        return f(((a + 2) * x - (a + 3)) * x * x + 1)
    if x < 2:
        return f(((a * x - 5 * a) * x + 8 * a) * x - 4 * a)
    return f(0)


def _step(n_in: int, n_out: int, align_corners: bool, scale_factor: float | None, f: type) -> Any:
    if align_corners:
        return f(n_in - 1) / f(n_out - 1) if n_out > 1 else f(0)
    return f(1) / f(scale_factor) if scale_factor is not None else f(n_in) / f(n_out)


def _antialias_taps(n_in: int, n_out: int, r: Any, width: int, f: type) -> Taps:
    support = f(width / 2) * r if r >= 1 else f(width / 2)
    inverse = f(1) / r if r >= 1 else f(1)
    rows = []
    for i in range(n_out):
        centre = r * f(i + 0.5)
        low, high = max(int(centre - support + f(0.5)), 0), min(int(centre + support + f(0.5)), n_in)
        t = [(f(j) - centre + f(0.5)) * inverse for j in range(low, high)]
        w = [max(f(0), f(1) - abs(x)) if width == 2 else _cubic(x, -0.5, f) for x in t]
        total = f(sum(w, f(0)))
        rows.append([(j, f(v / total)) for j, v in zip(range(low, high), w, strict=True)])
    return rows


def axis_taps(n_in: int, n_out: int, *, mode: str, align_corners: bool = False, antialias: bool = False,
              scale_factor: float | None = None, padding: str = "border", f: type = np.float64) -> Taps:
    """For each output row, its ``(source row, weight)`` taps."""
    one = [[(i, f(1))] for i in range(n_out)]
    if mode == "nearest":
        if n_out == n_in:
            return one
        if n_out == 2 * n_in:
            return [[(i // 2, f(1))] for i in range(n_out)]
        step = np.float32(1.0 / scale_factor) if scale_factor is not None else np.float32(n_in) / np.float32(n_out)
        return [[(min(math.floor(np.float32(i) * step), n_in - 1), f(1))] for i in range(n_out)]
    r = _step(n_in, n_out, align_corners, scale_factor, f)
    if antialias:
        return one if n_in == n_out else _antialias_taps(n_in, n_out, r, 2 if mode == "bilinear" else 4, f)
    if mode != "bicubic" and n_in == n_out:  # the linear modes copy an unchanged axis
        return one
    rows = []
    for i in range(n_out):
        s = r * f(i) if align_corners else r * f(i + 0.5) - f(0.5)
        if mode != "bicubic" and padding == "border":
            s = max(s, f(0))
        left = math.floor(s)
        if padding == "border":
            left = min(left, n_in - 1)
        lam = min(max(f(s - left), f(0)), f(1))
        if mode == "bicubic":
            taps = [(left + o, _cubic(d, -0.75, f)) for o, d in zip((-1, 0, 1, 2), (lam + 1, lam, 1 - lam, 2 - lam),
                                                                      strict=True)]
        else:
            right = left + 1 if padding == "zeros" or left < n_in - 1 else left
            taps = [(left, f(1) - lam), (right, lam)]
        if padding == "zeros":
            taps = [(j, w) for j, w in taps if 0 <= j < n_in]
        rows.append([(min(max(j, 0), n_in - 1), w) for j, w in taps])
    return rows


def as_type(x: np.ndarray, f: type) -> np.ndarray:
    """``x`` with every entry of the number type ``f`` (an object array of exact rationals for ``Fraction``)."""
    if f is Fraction:
        return np.vectorize(lambda v: v if isinstance(v, Fraction) else Fraction(float(v)), otypes=[object])(x)
    return np.asarray(x).astype(f)


def apply_taps(x: np.ndarray, taps: Taps, axis: int, f: type = np.float64) -> np.ndarray:
    """Resample ``axis`` of ``x`` (cast to ``f``) with the taps, summing in ``f``."""
    x = np.moveaxis(as_type(x, f), axis, 0)
    out = np.zeros((len(taps), *x.shape[1:]), dtype=object if f is Fraction else f)
    if f is Fraction:
        out[...] = Fraction(0)
    for i, row in enumerate(taps):
        for j, w in row:
            out[i] += w * x[j]
    return np.moveaxis(out, 0, axis)


def resample_table(table: np.ndarray, grid: tuple[int, int], way: dict, prefix_tokens: int = 0,
                   suffix_tokens: int = 0, f: type = np.float64) -> np.ndarray:
    """A square position table resampled the ``way`` of the contract (its keys; absent ones at their defaults)."""
    table = as_type(table, f)
    n = table.shape[0] - prefix_tokens - suffix_tokens
    side = math.isqrt(n)
    target = tuple(grid[::-1]) if way.get("axes", "hw") == "wh" else tuple(grid)
    if way.get("read", "resample") == "square_crop":  # resampled to the longer side's square, cropped below
        size, target = target, (max(target),) * 2
    options = {"mode": way["mode"], "align_corners": way.get("align_corners", False),
               "antialias": way.get("antialias", False), "padding": way.get("padding", "border"), "f": f}
    offset = way.get("scale_factor_offset")
    factors = (None, None) if offset is None else tuple((g + offset) / side for g in target)
    patches = table[prefix_tokens:prefix_tokens + n].reshape(side, side, -1)
    if way.get("read", "resample") == "tile":  # the table repeated and cut: rows gathered, i mod M
        patches = patches[[i % side for i in range(target[0])]][:, [j % side for j in range(target[1])]]
    else:
        for axis in (0, 1):
            patches = apply_taps(patches, axis_taps(side, target[axis], scale_factor=factors[axis], **options), axis,
                                 f)
    if way.get("read", "resample") == "square_crop":
        patches, target = patches[:size[0], :size[1]], size
    flat = patches.reshape(target[0] * target[1], -1)
    if not way.get("keep_extra", True):
        return flat
    return np.concatenate([table[:prefix_tokens], flat, table[table.shape[0] - suffix_tokens:]])


def decomposed_row(i: int, j: int, q: int, k: int) -> int:
    """``⌊i·max(k/q, 1) − j·max(q/k, 1) + (k − 1)·max(q/k, 1)⌋`` in exact rationals."""
    a, b = max(Fraction(k, q), Fraction(1)), max(Fraction(q, k), Fraction(1))
    return math.floor(i * a - j * b + (k - 1) * b)


def decomposed_terms(q: np.ndarray, rel_pos_h: np.ndarray, rel_pos_w: np.ndarray, q_size: tuple[int, int],
                     k_size: tuple[int, int], f: type = np.float64) -> np.ndarray:
    """``q_yx·R_h[y, y'] + q_yx·R_w[x, x']`` ``(..., q_h·q_w, k_h·k_w)``, loops in the number type ``f``."""
    tables = []
    for table, n_q, n_k in ((rel_pos_h, q_size[0], k_size[0]), (rel_pos_w, q_size[1], k_size[1])):
        taps = axis_taps(table.shape[0], 2 * max(n_q, n_k) - 1, mode="linear", f=f)
        resized = apply_taps(table, taps, 0, f)
        tables.append(np.array([[resized[decomposed_row(i, j, n_q, n_k)] for j in range(n_k)] for i in range(n_q)]))
    (qh, qw), (kh, kw) = q_size, k_size
    q = as_type(q, f)
    out = np.zeros((*q.shape[:-2], qh * qw, kh * kw), dtype=object if f is Fraction else f)
    for y in range(qh):
        for x in range(qw):
            query = q[..., y * qw + x, :]
            for yk in range(kh):
                for xk in range(kw):
                    out[..., y * qw + x, yk * kw + xk] = (query * tables[0][y, yk]).sum(-1) + \
                        (query * tables[1][x, xk]).sum(-1)
    return out
