"""Golden cases of relative position bias tables of windows (docs/bias-table.md): ``window_bias`` of each form.

* ``bias_table/swin-…``: Swin v1's bias of a seeded table, a square and a non-square window;
* ``bias_table/beit-…``: BEiT's bias with the CLS token, at the table's window and resampled to a larger and a
  smaller, non-square one;
* ``bias_table/swinv2-…``: Swin v2's continuous bias of a seeded MLP, in the window's units and in a pretrained
  window's.

Exact values: the gathers copy the table's float64 numbers (the row of each pair from the index formula in
Python integers); the bilinear weights are exact rationals (``(n_in/n_out)(i + ½) − ½``) and the sums are
taken by mpmath at :data:`refpos.golden.certify.DIGITS` digits; Swin v2's logarithms, MLP and sigmoid likewise.
Not wired into ``refpos golden generate``: :func:`bias_table_cases` returns the cases.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from refpos.encodings.bias_table import window_bias
from refpos.golden import certify as cert
from refpos.golden.cases import In, as_xp, call, rng_for, to_np
from refpos.golden.entries import tolerance_value
from refpos.golden.manifest import Case, Output


def _pairs(window: tuple[int, int]) -> list[tuple[int, int, int]]:
    """``(a, b, row)`` of every pair: the Swin row of the offset, query minus key."""
    wh, ww = window
    return [(a, b, (a // ww - b // ww + wh - 1) * (2 * ww - 1) + (a % ww - b % ww + ww - 1))
            for a in range(wh * ww) for b in range(wh * ww)]


def _gathered(rows: list[list[Any]], window: tuple[int, int], cls: bool) -> np.ndarray:
    """``(H, N, N)`` (BEiT ``(H, N + 1, N + 1)``, the CLS rows last in ``rows``) of exact row values."""
    n, r = window[0] * window[1], (2 * window[0] - 1) * (2 * window[1] - 1)
    shift = 1 if cls else 0
    out = np.empty((len(rows[0]), n + shift, n + shift), dtype=object)
    for a, b, row in _pairs(window):
        out[:, a + shift, b + shift] = rows[row]
    if cls:
        for h in range(out.shape[0]):
            out[h, 0, 1:], out[h, 1:, 0], out[h, 0, 0] = rows[r][h], rows[r + 1][h], rows[r + 2][h]
    return out


def _axis(n_in: int, n_out: int) -> list[tuple[int, int, Fraction]]:
    """Each output pixel's two input pixels and exact weight λ (half-pixel centres)."""
    out = []
    for i in range(n_out):
        s = max(Fraction(n_in, n_out) * (i + Fraction(1, 2)) - Fraction(1, 2), Fraction(0))
        j = min(int(s), n_in - 1)
        out.append((j, min(j + 1, n_in - 1), s - j))
    return out


def _mp_beit_rows(table: np.ndarray, side: int, window: tuple[int, int]) -> list[list[Any]]:
    mp = cert.mp
    if (side, side) == window:
        return [[mp.mpf(float(v)) for v in row] for row in table]
    n_in = 2 * side - 1
    image = table[:-3].reshape(n_in, n_in, -1)
    rows = []
    for r0, r1, lr in _axis(n_in, 2 * window[0] - 1):
        for c0, c1, lc in _axis(n_in, 2 * window[1] - 1):
            wr, wc = mp.mpf(lr.numerator) / lr.denominator, mp.mpf(lc.numerator) / lc.denominator
            rows.append([(1 - wr) * ((1 - wc) * mp.mpf(float(image[r0, c0, h])) + wc * mp.mpf(float(image[r0, c1, h])))
                         + wr * ((1 - wc) * mp.mpf(float(image[r1, c0, h])) + wc * mp.mpf(float(image[r1, c1, h])))
                         for h in range(table.shape[1])])
    return rows + [[mp.mpf(float(v)) for v in row] for row in table[-3:]]


def _mp_swinv2_rows(window: tuple[int, int], w1: np.ndarray, b1: np.ndarray, w2: np.ndarray,
                    pretrained: tuple[int, int] | None) -> list[list[Any]]:
    mp = cert.mp
    sides = pretrained or window
    rows = []
    for dh in range(-(window[0] - 1), window[0]):
        for dw in range(-(window[1] - 1), window[1]):
            c = []
            for delta, side in ((dh, sides[0]), (dw, sides[1])):
                x = mp.mpf(8 * delta) / (side - 1) if side > 1 else mp.mpf(0)
                c.append(mp.sign(x) * mp.log(1 + abs(x), 2) / 3)
            hidden = [max(c[0] * mp.mpf(float(w1[0, j])) + c[1] * mp.mpf(float(w1[1, j])) + mp.mpf(float(b1[j])), 0)
                      for j in range(w1.shape[1])]
            z = [mp.fsum(a * mp.mpf(float(w2[j, h])) for j, a in enumerate(hidden)) for h in range(w2.shape[1])]
            rows.append([16 / (1 + mp.exp(-v)) for v in z])
    return rows


def _case(cid: str, description: str, window: tuple[int, int], arrays: dict[str, np.ndarray],
          settings: dict[str, Any], exact: Any, scale: float) -> Case:
    form = settings["form"]
    bias = to_np(window_bias(form, window, table=as_xp(arrays["table"]) if "table" in arrays else None,
                             table_window=settings.get("table_window"),
                             mlp=tuple(as_xp(arrays[k]) for k in ("w1", "b1", "w2")) if "w1" in arrays else None,
                             pretrained_window=settings.get("pretrained_window")))
    args = [form, list(window), In("table") if "table" in arrays else None,
            None if settings.get("table_window") is None else list(settings["table_window"])]
    args += [In(k) if k in arrays else None for k in ("w1", "b1", "w2")]
    args.append(None if settings.get("pretrained_window") is None else list(settings["pretrained_window"]))
    return Case(cid, "bias_table", "window_bias", description + " (docs/bias-table.md#the-math)",
                {"call": call("window_bias", ["bias"], *args)}, arrays,
                {"bias": Output(bias, tolerance_value(bias, scale=scale), lambda: (exact(), scale))})


def bias_table_cases() -> list[Case]:
    """Every relative position bias table case."""
    cases = []
    for window in [(7, 7), (4, 6)]:
        cid = f"bias_table/swin-{window[0]}x{window[1]}"
        table = rng_for(cid).standard_normal(((2 * window[0] - 1) * (2 * window[1] - 1), 3))
        cases.append(_case(cid, f"Swin v1 bias of a {window[0]}×{window[1]} window, 3 heads", window,
                           {"table": table}, {"form": "swin"},
                           lambda t=table, w=window: _gathered([[cert.mp.mpf(float(v)) for v in r] for r in t], w,
                                                               False),
                           float(np.abs(table).max())))
    for window in [(5, 5), (7, 7), (4, 6)]:
        cid = f"bias_table/beit-5x5-at-{window[0]}x{window[1]}"
        table = rng_for(cid).standard_normal((81 + 3, 2))
        how = "at the table's window" if window == (5, 5) else "resampled bilinearly"
        cases.append(_case(cid, f"BEiT bias with CLS of a table for a 5×5 window, {how} at {window[0]}×{window[1]}",
                           window, {"table": table}, {"form": "beit", "table_window": (5, 5)},
                           lambda t=table, w=window: _gathered(_mp_beit_rows(t, 5, w), w, True),
                           float(np.abs(table).max())))
    for window, pretrained in [(8, None), (10, 6)]:
        cid = f"bias_table/swinv2-{window}x{window}" + (f"-pretrained-{pretrained}" if pretrained else "")
        rng = rng_for(cid)
        w1, b1, w2 = rng.standard_normal((2, 16)), rng.standard_normal(16), rng.standard_normal((16, 3)) / 4
        pre = None if pretrained is None else (pretrained, pretrained)
        # the size of the sums the bias is made of: |hidden_j| ≤ 1.06·Σ|w1_aj| + |b1_j| (|c| ≤ log2(9)/3), the second
        # layer's terms |w2_jh|·|hidden_j|, and 16σ's slope 4
        hidden = 1.06 * np.abs(w1).sum(axis=0) + np.abs(b1)
        scale = 16.0 + 4.0 * float((hidden @ np.abs(w2)).max())
        units = "the window's units" if pre is None else f"a {pretrained}×{pretrained} pretrained window's units"
        cases.append(_case(cid, f"Swin v2 continuous bias of a {window}×{window} window in {units}, an MLP of 16, "
                                "3 heads", (window, window), {"w1": w1, "b1": b1, "w2": w2},
                           {"form": "swinv2", "pretrained_window": pre},
                           lambda w=window, a=(w1, b1, w2), p=pre: _gathered(_mp_swinv2_rows((w, w), *a, p), (w, w),
                                                                             False),
                           scale))
    return cases
