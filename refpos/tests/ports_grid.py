"""A correct float32 port of position-grid resampling, written from torch's rules tap by tap (not from refpos):
the candidate :func:`refpos.encodings.grid_mistakes.identify_grid` must accept.

Every quantity is a float32 scalar: the step, the source coordinate, the weights (the antialias window as
torch bounds it, ``[⌊c − support + ½⌋, ⌊c + support + ½⌋)``), and the sums.
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32


def _cubic(x: float, a: float) -> np.float32:
    x = abs(F32(x))
    if x < 1:
        return F32(((a + 2) * x - (a + 3)) * x * x + 1)
    if x < 2:
        return F32(((a * x - 5 * a) * x + 8 * a) * x - 4 * a)
    return F32(0)


def _step(n_in: int, n_out: int, align_corners: bool, scale_factor: float | None) -> np.float32:
    if align_corners:
        return F32(n_in - 1) / F32(n_out - 1) if n_out > 1 else F32(0)
    return F32(1.0 / scale_factor) if scale_factor is not None else F32(n_in) / F32(n_out)


def axis_taps(n_in: int, n_out: int, *, mode: str, align_corners: bool = False, antialias: bool = False,
              scale_factor: float | None = None, padding: str = "border") -> list[list[tuple[int, np.float32]]]:
    """For each output row, its ``(source row, float32 weight)`` taps."""
    if mode == "nearest":
        if n_out == n_in:
            return [[(i, F32(1))] for i in range(n_out)]
        step = F32(1.0 / scale_factor) if scale_factor is not None else F32(n_in) / F32(n_out)
        return [[(min(math.floor(F32(i) * step), n_in - 1), F32(1))] for i in range(n_out)]
    r = _step(n_in, n_out, align_corners, scale_factor)
    if antialias:
        if n_in == n_out:
            return [[(i, F32(1))] for i in range(n_out)]
        width = 2 if mode == "bilinear" else 4
        support = F32(width / 2) * r if r >= 1 else F32(width / 2)
        inverse = F32(1) / r if r >= 1 else F32(1)
        rows = []
        for i in range(n_out):
            centre = r * F32(i + 0.5)
            low, high = max(int(centre - support + F32(0.5)), 0), min(int(centre + support + F32(0.5)), n_in)
            t = [(F32(j) - centre + F32(0.5)) * inverse for j in range(low, high)]
            w = [max(F32(0), F32(1) - abs(x)) if width == 2 else _cubic(x, -0.5) for x in t]
            total = F32(sum(w, F32(0)))
            rows.append([(j, F32(v / total)) for j, v in zip(range(low, high), w, strict=True)])
        return rows
    if mode in ("linear", "bilinear") and n_in == n_out:
        return [[(i, F32(1))] for i in range(n_out)]
    rows = []
    for i in range(n_out):
        s = r * F32(i) if align_corners else r * F32(i + 0.5) - F32(0.5)
        if mode != "bicubic" and padding == "border":
            s = max(s, F32(0))
        left = math.floor(s)
        if padding == "border":
            left = min(left, n_in - 1)
        lam = min(max(F32(s - left), F32(0)), F32(1))
        if mode == "bicubic":
            taps = [(left - 1, _cubic(lam + 1, -0.75)), (left, _cubic(lam, -0.75)), (left + 1, _cubic(1 - lam, -0.75)),
                    (left + 2, _cubic(2 - lam, -0.75))]
        else:
            right = left + 1 if padding == "zeros" or left < n_in - 1 else left
            taps = [(left, F32(1) - lam), (right, lam)]
        if padding == "zeros":
            taps = [(j, w) for j, w in taps if 0 <= j < n_in]
        rows.append([(min(max(j, 0), n_in - 1), w) for j, w in taps])
    return rows


def _apply(x: np.ndarray, taps: list[list[tuple[int, np.float32]]]) -> np.ndarray:
    """Resample axis 0 of the float32 ``x`` with the taps, summing in float32."""
    out = np.zeros((len(taps), *x.shape[1:]), dtype=F32)
    for i, row in enumerate(taps):
        for j, w in row:
            out[i] += w * x[j]
    return out


def float32_resample_table(table: np.ndarray, grid: tuple[int, int], variant, prefix_tokens: int = 0,
                           suffix_tokens: int = 0, source_grid: tuple[int, int] | None = None) -> np.ndarray:
    """``variant``'s resampled table (a :class:`~refpos.encodings.grid_variants.GridVariant`), all in float32."""
    table = table.astype(F32)
    n = table.shape[0] - prefix_tokens - suffix_tokens
    rows, cols = source_grid or (math.isqrt(n), math.isqrt(n))
    target = grid[::-1] if variant.axes == "wh" else grid
    patches = table[prefix_tokens:prefix_tokens + n].reshape(rows, cols, -1)
    options = {"mode": variant.mode, "align_corners": variant.align_corners, "antialias": variant.antialias,
               "padding": variant.padding}
    offset = variant.scale_factor_offset
    factors = (None, None) if offset is None else ((target[0] + offset) / rows, (target[1] + offset) / cols)
    patches = _apply(patches, axis_taps(rows, target[0], scale_factor=factors[0], **options))
    patches = _apply(patches.transpose(1, 0, 2), axis_taps(cols, target[1], scale_factor=factors[1], **options))
    flat = patches.transpose(1, 0, 2).reshape(target[0] * target[1], -1)
    if not variant.keep_extra:
        return flat
    return np.concatenate([table[:prefix_tokens], flat, table[table.shape[0] - suffix_tokens:]])
