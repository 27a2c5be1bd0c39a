"""Golden cases of every non-RoPE encoding family and of the worked example (我 愛 你).

Each builder returns :class:`refpos.golden.Case` objects computed by the reference on the current
backend (converted to NumPy for writing). Inputs come from ``numpy.random.default_rng(seed)`` with a
seed derived from the case id, so ``refpos golden generate`` is deterministic. A case's ``call`` (in
``parameters``) says how an adapter reproduces it: ``function(**array inputs, **args)`` returns the
outputs in order (:mod:`spec_tests.test_golden`).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np

import refpos
from refpos.backend import get_xp, to_numpy
from refpos.encodings import distance_bias, shaw_key_terms, sinusoidal_frequencies, txl_position_table
from refpos.encodings.alibi import FORMS as ALIBI_FORMS
from refpos.golden import certify as cert
from refpos.golden.entries import tolerance_integer, tolerance_rope, tolerance_value
from refpos.golden.manifest import Case, Output


def rng_for(case_id: str) -> np.random.Generator:
    """The deterministic random generator of a case (seeded by the crc32 of its id)."""
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def to_np(x: Any) -> np.ndarray:
    """``x`` (any backend) as a NumPy array: what the golden files store."""
    return np.asarray(to_numpy(x))


def as_xp(a: Any) -> Any:
    """``a`` as an array of the current backend: what a case hands to the function it calls."""
    return get_xp().asarray(np.asarray(a))


#: rows of a per-model case's probe positions (docs/conventions.md#probe-positions)
N_PROBES = 32


def slug(name: str) -> str:
    """A file-system-safe case name: ``meta-llama/Llama-3.1-8B`` → ``meta-llama--Llama-3.1-8B``."""
    s = name.replace("/", "--")
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")
    return s


def probe_positions(max_position: int, original: int | None, seed_name: str) -> np.ndarray:
    """The probe positions (docs/conventions.md#probe-positions) below ``max_position``, then 32 seeded rows."""
    orig = original or max_position
    wanted = [0, 1, 2, 3, 7, 8, 255, 256, 257, 2047, 2048, 2049, orig - 1, orig, orig + 1, 2 * orig,
              8191, 8192, 32767, 32768, 65536, 65537, 66047, 66048, 131071, max_position - 1]
    probes = sorted({p for p in wanted if 0 <= p < max_position})[: N_PROBES - 4]
    rng = rng_for("probe/" + seed_name)
    block = N_PROBES - len(probes)
    start = int(rng.integers(0, max(max_position - block, 1)))
    return np.array(probes + list(range(start, start + block)), dtype=np.int64)


class In(str):
    """Marks a positional call argument taken from the case's input array of that name."""


class Param(str):
    """Marks a positional call argument taken from the case's ``parameters`` entry of that name."""


def call(function: str, returns: list[str], *args: Any) -> dict[str, Any]:
    """The ``call`` entry: adapter ``function(*args)`` returns the outputs named ``returns`` (in order).

    Arguments are positional, in the order of the adapter contract; each is ``{"input": name}`` (an
    input array of the case), ``{"param": name}`` (an entry of the case's parameters, e.g. the ``rope``
    dict) or ``{"value": v}`` (a JSON value).
    """
    spec = [{"input": str(a)} if isinstance(a, In) else {"param": str(a)} if isinstance(a, Param)
            else {"value": a} for a in args]
    return {"function": function, "args": spec, "returns": returns}


# ------------------------------------------------------------------------------------ sinusoid
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


# ------------------------------------------------------------------------ other relative methods
def _scaled(a: np.ndarray) -> dict:
    finite = a[np.isfinite(a)]
    return tolerance_value(a, scale=float(np.abs(finite).max()) if finite.size else 0.0)


def relative_cases() -> list[Case]:
    """Shaw, Transformer-XL, KERPLE, FIRE, xPos, Sandwich, CoPE, the worked example's distance bias, learned APE."""
    cases = []
    h, t, d = 2, 6, 8
    pos = np.arange(t, dtype=np.int64)

    cid = "shaw/attention-k2"
    rng = rng_for(cid)
    q, k, v = (rng.standard_normal((h, t, d)) for _ in range(3))
    w_k, w_v = rng.standard_normal((5, d)), rng.standard_normal((5, d))
    qx, kx = as_xp(q), as_xp(k)
    enc = refpos.encodings.Shaw(as_xp(w_k), as_xp(w_v), 2)
    xp_pos = as_xp(pos)
    key = to_np(shaw_key_terms(qx, as_xp(w_k), xp_pos, xp_pos, 2))
    out = to_np(refpos.attention(qx, kx, as_xp(v), qk_terms=enc.qk_terms(qx, kx, xp_pos, xp_pos),
                               value_terms=enc.value_terms(xp_pos, xp_pos)))
    cases.append(Case(cid, "shaw", "shaw_attention",
                      "Shaw et al. self-attention, k = 2, shared tables; key term q·a^K (docs/relative.md#shaw)",
                      {"call": call("shaw_attention", ["out"], In("q"), In("k"), In("v"), In("w_k"), In("w_v"), 2,
                                    In("positions"), False)},
                      {"q": q, "k": k, "v": v, "w_k": w_k, "w_v": w_v, "positions": pos},
                      {"out": Output(out, _scaled(out)), "key_terms": Output(key, _scaled(key))}))

    cid = "txl/scores-mem3"
    rng = rng_for(cid)
    qlen, klen = 3, 6
    qh, kh = rng.standard_normal((h, qlen, d)), rng.standard_normal((h, klen, d))
    r_table = to_np(txl_position_table(klen, d))
    w_r = rng.standard_normal((d, h * d)) / np.sqrt(d)
    # an input is data: built with NumPy whatever the backend (a GPU's sin/cos may differ by an ulp)
    r_table_input = to_np(txl_position_table(klen, d, xp="numpy"))
    rk = np.transpose((r_table_input @ w_r).reshape(klen, h, d), (1, 0, 2))  # (H, klen, d)
    u, v = rng.standard_normal((h, d)), rng.standard_normal((h, d))
    scores = to_np(refpos.encodings.txl_scores(as_xp(qh), as_xp(kh), as_xp(rk), as_xp(u), as_xp(v)))
    cases.append(Case(cid, "txl", "txl_scores", "Transformer-XL logits, 3 memory tokens, future keys -inf"
                      " (docs/relative.md#transformer-xl)",
                      {"call": call("txl_scores", ["scores"], In("q"), In("k"), In("r_head_k"), In("u"), In("v"))},
                      {"q": qh, "k": kh, "r_head_k": rk, "u": u, "v": v},
                      {"scores": Output(scores, _scaled(scores)),
                       "position_table": Output(r_table, tolerance_value(r_table, scale=1.0))}))

    for kind in ("log", "power"):
        cid = f"kerple/{kind}"
        rng = rng_for(cid)
        r1, r2 = rng.uniform(0.0, 2.0, 4), rng.uniform(0.0, 1.0, 4)
        r1[0] = 0.001  # below the 0.01 clamp
        bias = to_np(refpos.encodings.kerple_bias(as_xp(r1), as_xp(r2), as_xp(pos), as_xp(pos), kind=kind))
        cases.append(Case(cid, "kerple", "kerple_bias", f"KERPLE {kind} kernel bias, 4 heads"
                          " (docs/other-encodings.md#kerple)",
                          {"call": call("kerple_bias", ["bias"], In("r1"), In("r2"), In("positions"),
                                        In("positions"), kind)},
                          {"r1": r1, "r2": r2, "positions": pos}, {"bias": Output(bias, _scaled(bias))}))

    cid = "fire/bias-L8"
    rng = rng_for(cid)
    w1, b1 = rng.standard_normal(16), rng.standard_normal(16)
    w2, b2 = rng.standard_normal((4, 16)), rng.standard_normal(4)
    fpos = np.arange(12, dtype=np.int64)
    bias = to_np(refpos.encodings.fire_bias(as_xp(fpos), as_xp(fpos), as_xp(w1), as_xp(b1), as_xp(w2), as_xp(b2),
                                            c=0.1, L=8.0))
    cases.append(Case(cid, "fire", "fire_bias", "FIRE bias, MLP width 16, 4 heads, L = 8"
                      " (docs/other-encodings.md#fire)",
                      {"call": call("fire_bias", ["bias"], In("positions"), In("positions"), In("w1"), In("b1"),
                                    In("w2"), In("b2"), 0.1, 8.0, 1e-6)},
                      {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "positions": fpos},
                      {"bias": Output(bias, _scaled(bias))}))

    cid = "xpos/query-key"
    rng = rng_for(cid)
    xq, xk = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d))
    xpos_pos = np.array([0, 1, 2, 100, 1000, 4000], dtype=np.int64)
    center = t // 2
    yq = to_np(refpos.encodings.xpos.xpos(as_xp(xq), as_xp(xpos_pos), is_query=True, center=center))
    yk = to_np(refpos.encodings.xpos.xpos(as_xp(xk), as_xp(xpos_pos), is_query=False, center=center))
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    cases.append(Case(cid, "xpos", "xpos", "xPos rotated and scaled query and key, γ = 512, centre T//2"
                      " (docs/other-encodings.md#xpos)",
                      {"call": call("xpos", ["q", "k"], In("q_in"), In("k_in"), In("positions"), In("positions"),
                                    10000.0, 512.0)},
                      {"q_in": xq, "k_in": xk, "positions": xpos_pos},
                      {"q": Output(yq, tolerance_rope(xpos_pos, w, 2 * np.abs(yq).max(axis=(0, 2)))),
                       "k": Output(yk, tolerance_rope(xpos_pos, w, 2 * np.abs(yk).max(axis=(0, 2))))}))

    cid = "sandwich/bias-d8-h4"
    bias = to_np(refpos.encodings.sandwich_bias(as_xp(pos), as_xp(pos), 8, 4, causal=True))
    cases.append(Case(cid, "sandwich", "sandwich_bias", "Sandwich bias, head_dim 8, 4 heads, causal"
                      " (docs/other-encodings.md#sandwich)",
                      {"call": call("sandwich_bias", ["bias"], In("positions"), In("positions"), 8, 4, True)},
                      {"positions": pos}, {"bias": Output(bias, tolerance_value(bias, scale=4.0))}))

    cid = "cope/logits-npos4"
    rng = rng_for(cid)
    cq, ck, e = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d)), rng.standard_normal((d, 4))
    logits = to_np(refpos.encodings.cope_logits(as_xp(cq), as_xp(ck), as_xp(e), as_xp(pos), as_xp(pos)))
    cases.append(Case(cid, "cope", "cope_logits", "CoPE logits, 4 table positions, future keys -inf"
                      " (docs/other-encodings.md#cope)",
                      {"call": call("cope_logits", ["logits"], In("q"), In("k"), In("e"))},
                      {"q": cq, "k": ck, "e": e}, {"logits": Output(logits, _scaled(logits))}))

    cid = "distance/seed-bias"
    bias = to_np(distance_bias(as_xp(pos), as_xp(pos), alpha=1.0))
    cases.append(Case(cid, "distance", None, "the worked example's distance bias -|i - j|"
                      " (docs/relative.md#the-distance-bias)",
                      {"reference": "refpos.encodings.distance_bias", "alpha": 1.0}, {"positions": pos},
                      {"bias": Output(bias, tolerance_value(bias))}))

    cid = "learned/lookup"
    table = rng_for(cid).standard_normal((10, 4))
    lpos = np.array([0, 3, 9, 2], dtype=np.int64)
    rows = to_np(refpos.encodings.learned_lookup(as_xp(table), as_xp(lpos)))
    cases.append(Case(cid, "learned", "learned_lookup", "learned absolute rows E[p] (docs/learned.md#the-math)",
                      {"call": call("learned_lookup", ["rows"], In("table"), In("positions"))},
                      {"table": table, "positions": lpos}, {"rows": Output(rows, tolerance_value(rows))}))
    return cases


def encoding_cases() -> list[Case]:
    """Every non-RoPE encoding family."""
    return sinusoid_cases() + alibi_cases() + t5_cases() + relative_cases()
