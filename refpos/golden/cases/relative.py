"""Golden cases of the other relative and absolute encodings, one builder per case family: Shaw, Transformer-XL,
KERPLE, FIRE, xPos, Sandwich, CoPE, the worked example's distance bias and learned absolute rows.
"""

from __future__ import annotations

import numpy as np

import refpos
from refpos.encodings import distance_bias, shaw_key_terms, txl_position_table
from refpos.golden.cases.common import In, as_xp, call, rng_for, to_np
from refpos.golden.exact.entries import tolerance_rope, tolerance_value
from refpos.golden.files.manifest import Case, Output

#: the heads, tokens and head width of the small attention inputs
HEADS, LENGTH, WIDTH = 2, 6, 8


def _scaled(a: np.ndarray) -> dict:
    finite = a[np.isfinite(a)]
    return tolerance_value(a, scale=float(np.abs(finite).max()) if finite.size else 0.0)


def shaw_cases() -> list[Case]:
    """Shaw et al.'s self-attention with relative tables, k = 2 (``shaw/…``)."""
    cases: list[Case] = []
    h, t, d = HEADS, LENGTH, WIDTH
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
    return cases


def txl_cases() -> list[Case]:
    """Transformer-XL's logits with memory (``txl/…``)."""
    cases: list[Case] = []
    h, d = HEADS, WIDTH
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
    return cases


def kerple_cases() -> list[Case]:
    """KERPLE's log and power kernel biases (``kerple/…``)."""
    cases: list[Case] = []
    t = LENGTH
    pos = np.arange(t, dtype=np.int64)
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
    return cases


def fire_cases() -> list[Case]:
    """FIRE's MLP bias (``fire/…``)."""
    cases: list[Case] = []
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
    return cases


def xpos_cases() -> list[Case]:
    """xPos's rotated and scaled query and key (``xpos/…``)."""
    cases: list[Case] = []
    h, t, d = HEADS, LENGTH, WIDTH
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
    return cases


def sandwich_cases() -> list[Case]:
    """Sandwich's bias (``sandwich/…``)."""
    cases: list[Case] = []
    t = LENGTH
    pos = np.arange(t, dtype=np.int64)
    cid = "sandwich/bias-d8-h4"
    bias = to_np(refpos.encodings.sandwich_bias(as_xp(pos), as_xp(pos), 8, 4, causal=True))
    cases.append(Case(cid, "sandwich", "sandwich_bias", "Sandwich bias, head_dim 8, 4 heads, causal"
                      " (docs/other-encodings.md#sandwich)",
                      {"call": call("sandwich_bias", ["bias"], In("positions"), In("positions"), 8, 4, True)},
                      {"positions": pos}, {"bias": Output(bias, tolerance_value(bias, scale=4.0))}))
    return cases


def cope_cases() -> list[Case]:
    """CoPE's logits (``cope/…``)."""
    cases: list[Case] = []
    h, t, d = HEADS, LENGTH, WIDTH
    pos = np.arange(t, dtype=np.int64)
    cid = "cope/logits-npos4"
    rng = rng_for(cid)
    cq, ck, e = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d)), rng.standard_normal((d, 4))
    logits = to_np(refpos.encodings.cope_logits(as_xp(cq), as_xp(ck), as_xp(e), as_xp(pos), as_xp(pos)))
    cases.append(Case(cid, "cope", "cope_logits", "CoPE logits, 4 table positions, future keys -inf"
                      " (docs/other-encodings.md#cope)",
                      {"call": call("cope_logits", ["logits"], In("q"), In("k"), In("e"))},
                      {"q": cq, "k": ck, "e": e}, {"logits": Output(logits, _scaled(logits))}))
    return cases


def distance_cases() -> list[Case]:
    """The worked example's distance bias −|i − j| (``distance/…``)."""
    cases: list[Case] = []
    t = LENGTH
    pos = np.arange(t, dtype=np.int64)
    cid = "distance/seed-bias"
    bias = to_np(distance_bias(as_xp(pos), as_xp(pos), alpha=1.0))
    cases.append(Case(cid, "distance", None, "the worked example's distance bias -|i - j|"
                      " (docs/relative.md#the-distance-bias)",
                      {"reference": "refpos.encodings.distance_bias", "alpha": 1.0}, {"positions": pos},
                      {"bias": Output(bias, tolerance_value(bias))}))
    return cases


def learned_cases() -> list[Case]:
    """Learned absolute rows ``E[p]`` (``learned/…``)."""
    cases: list[Case] = []
    cid = "learned/lookup"
    table = rng_for(cid).standard_normal((10, 4))
    lpos = np.array([0, 3, 9, 2], dtype=np.int64)
    rows = to_np(refpos.encodings.learned_lookup(as_xp(table), as_xp(lpos)))
    cases.append(Case(cid, "learned", "learned_lookup", "learned absolute rows E[p] (docs/learned.md#the-math)",
                      {"call": call("learned_lookup", ["rows"], In("table"), In("positions"))},
                      {"table": table, "positions": lpos}, {"rows": Output(rows, tolerance_value(rows))}))

    return cases


__all__ = ["cope_cases", "distance_cases", "fire_cases", "kerple_cases", "learned_cases", "sandwich_cases",
           "shaw_cases", "txl_cases", "xpos_cases"]
