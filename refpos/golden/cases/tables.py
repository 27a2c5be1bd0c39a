"""Golden cases of the text tables: sinusoids (``sinusoid/…``), ALiBi slopes and biases (``alibi/…``) and T5's
buckets and bias (``t5/…``), each with its exact values (mpmath, :mod:`refpos.golden.exact.certify`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import refpos
from refpos.encodings import sinusoidal_frequencies
from refpos.encodings.alibi import FORMS as ALIBI_FORMS
from refpos.golden.cases.common import In, as_xp, call, rng_for, to_np
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_integer, tolerance_rope, tolerance_value
from refpos.golden.files.manifest import Case, Output


def mp_sinusoid(positions: np.ndarray, dim: int, base: float, layout: str, spacing: str) -> Any:
    mp = cert.mp
    half = dim // 2
    if spacing == "paper":
        omega = [mp.mpf(base) ** (-mp.mpf(2 * k) / dim) for k in range(half)]
    else:  # tensor2tensor / fairseq
        omega = [mp.exp(-k * mp.log(mp.mpf(base)) / max(half - 1, 1)) for k in range(half)]
    out = np.empty((positions.size, dim), dtype=object)
    for t, p in enumerate(positions):
        for k, w in enumerate(omega):
            c, s = mp.cos_sin(mp.mpf(int(p)) * w)
            sin_col, cos_col = (2 * k, 2 * k + 1) if layout == "interleaved" else (k, k + half)
            out[t, sin_col], out[t, cos_col] = s, c
    return out


def sinusoid_cases() -> list[Case]:
    positions = np.array([0, 1, 2, 3, 7, 8, 255, 256, 257, 2047, 2048, 2049, 65535, 65536], dtype=np.int64)
    cases = []
    for dim, layout, spacing in [(4, "interleaved", "paper"), (4, "concat", "paper"),
                                 (8, "concat", "tensor2tensor"), (128, "interleaved", "paper"),
                                 (128, "concat", "tensor2tensor")]:
        cid = f"sinusoid/{layout}-{spacing}-d{dim}"
        table = to_np(refpos.encodings.sinusoidal.sinusoidal(as_xp(positions), dim, base=10000.0, layout=layout,
                                                             spacing=spacing))
        freqs = to_np(sinusoidal_frequencies(dim, base=10000.0, spacing=spacing))
        tolerance = tolerance_rope(positions, freqs, np.ones(positions.size))
        cases.append(Case(
            cid, "sinusoid", "sinusoidal",
            f"sinusoidal table, d = {dim}, {layout} layout, {spacing} spacing (docs/sinusoidal.md#the-math)",
            {"call": call("sinusoidal", ["table"], In("positions"), dim, 10000.0, layout, spacing)},
            {"positions": positions},
            {"table": Output(table, tolerance, lambda p=positions, d=dim, lo=layout, sp=spacing:
                             (mp_sinusoid(p, d, 10000.0, lo, sp), 1.0))}))
    return cases


# ---------------------------------------------------------------------------------------- ALiBi
def mp_slopes(n: int) -> list[Any]:
    mp = cert.mp
    c = 1 << (n.bit_length() - 1)
    first = [mp.mpf(2) ** (-mp.mpf(8 * h) / c) for h in range(1, c + 1)]
    extra = [mp.mpf(2) ** (-mp.mpf(8 * (2 * t + 1)) / (2 * c)) for t in range(n - c)]
    return first + extra


def alibi_cases() -> list[Case]:
    cases = []
    for n in (1, 3, 6, 8, 12, 32, 112):
        slopes = to_np(refpos.encodings.alibi_slopes(n))
        cases.append(Case(
            f"alibi/slopes-n{n}", "alibi", "alibi_slopes",
            f"ALiBi slopes for {n} heads (official recurrence, docs/alibi.md#the-math)",
            {"call": call("alibi_slopes", ["slopes"], n)}, {},
            {"slopes": Output(slopes, tolerance_value(slopes), lambda n=n: (mp_slopes(n), 0.0))}))
    n, q_len, k_len = 12, 4, 9
    for form in ALIBI_FORMS:
        bias = to_np(refpos.encodings.alibi_bias(n, q_len, k_len, form=form))

        def exact(form: str = form) -> tuple[Any, float]:
            slopes = mp_slopes(n)
            out = np.empty((n, q_len, k_len), dtype=object)
            for h, i, j in np.ndindex(out.shape):
                qpos = k_len - q_len + i
                dist = {"causal": -(qpos - j), "symmetric": -abs(qpos - j), "key_index": j}[form]
                out[h, i, j] = slopes[h] * dist
            return out, 0.0

        cases.append(Case(
            f"alibi/bias-{form}-n{n}-q{q_len}-k{k_len}", "alibi", "alibi_bias",
            f"ALiBi bias, {form} form, queries aligned to the end of the keys (docs/alibi.md#the-math)",
            {"call": call("alibi_bias", ["bias"], n, q_len, k_len, form)}, {},
            {"bias": Output(bias, tolerance_value(bias), exact)}))
    return cases


# ------------------------------------------------------------------------------------------- T5
def mp_bucket(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    mp = cert.mp
    nb, out = num_buckets, 0
    if bidirectional:
        nb //= 2
        out += nb if rel > 0 else 0
        n = abs(rel)
    else:
        n = -min(rel, 0)
    exact = nb // 2
    if n < exact:
        return out + n
    log_part = mp.log(mp.mpf(n) / exact) / mp.log(mp.mpf(max_distance) / exact) * (nb - exact)
    nearest = mp.nint(log_part)
    if abs(log_part - nearest) < mp.mpf(10) ** (5 - cert.DIGITS):  # an exact integer (n = 16, 32, 64, …)
        log_part = nearest
    return out + min(exact + int(mp.floor(log_part)), nb - 1)


def t5_cases() -> list[Case]:
    cases = []
    rel = np.arange(-300, 301, dtype=np.int64)
    for bidirectional, nb, md in [(True, 32, 128), (False, 32, 128), (True, 64, 256)]:
        buckets = to_np(refpos.encodings.t5_bucket(as_xp(rel), bidirectional=bidirectional, num_buckets=nb,
                                                   max_distance=md))
        kind = "bidirectional" if bidirectional else "causal"
        cases.append(Case(
            f"t5/bucket-{kind}-{nb}-{md}", "t5", "t5_bucket",
            f"T5 buckets of relative positions -300..300, {kind}, {nb} buckets, max_distance {md}"
            " (docs/relative.md#t5)",
            {"call": call("t5_bucket", ["buckets"], In("rel"), bidirectional, nb, md)},
            {"rel": rel},
            {"buckets": Output(buckets.astype(np.int64), tolerance_integer(),
                               lambda b=bidirectional, nb=nb, md=md:
                               ([mp_bucket(int(r), b, nb, md) for r in rel], 0.0))}))
    cid = "t5/bias-decoder-cached"
    table = rng_for(cid).standard_normal((32, 4))
    qpos, kpos = np.arange(5, 8, dtype=np.int64), np.arange(8, dtype=np.int64)
    bias = to_np(refpos.encodings.t5_bias(as_xp(table), as_xp(qpos), as_xp(kpos), bidirectional=False,
                                          max_distance=128))
    cases.append(Case(cid, "t5", "t5_bias", "T5 bias, causal, 3 new queries after a cache of 5"
                      " (docs/relative.md#t5)",
                      {"call": call("t5_bias", ["bias"], In("table"), In("q_positions"), In("k_positions"),
                                    False, 128)},
                      {"table": table, "q_positions": qpos, "k_positions": kpos},
                      {"bias": Output(bias, tolerance_value(bias))}))
    return cases


__all__ = ["alibi_cases", "mp_bucket", "mp_sinusoid", "mp_slopes", "sinusoid_cases", "t5_cases"]
