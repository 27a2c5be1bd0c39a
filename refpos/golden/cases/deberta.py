"""Golden cases of DeBERTa's relative positions (docs/deberta.md): log buckets and disentangled logits.

* ``deberta/buckets-<position_buckets>-<max_relative_positions>``: :func:`refpos.encodings.deberta_log_buckets` of
  ``δ = query − key`` over a range of relative positions (256/512 is DeBERTa-v3's config), integers;
* ``deberta/logits-…``: :func:`refpos.encodings.deberta_attention_logits` of seeded q, k and projected position
  tables, with the index and the unscaled c2p and p2c terms as further outputs: a bucketed case (the
  v2/v3 rule, the log range inside the sequence) and one without buckets (DeBERTa-v1's clipping).

Exact values: mpmath at :data:`refpos.golden.exact.certify.DIGITS` digits — the ceiling of the logarithm ratio
(an integer ratio within rounding of the 30 digits is taken as that integer), and the logits summed from
the float64 inputs as exact numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import refpos
from refpos.encodings import deberta_c2p_terms, deberta_p2c_terms, deberta_relative_index
from refpos.golden.cases.common import In, as_xp, call, rng_for, to_np
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_integer, tolerance_value
from refpos.golden.files.manifest import Case, Output


def mp_bucket(delta: int, position_buckets: int, m: int) -> int:
    """DeBERTa's log bucket of ``δ`` at :data:`~refpos.golden.exact.certify.DIGITS` digits
    (docs/deberta.md#the-math)."""
    mp = cert.mp
    mid = position_buckets // 2
    if abs(delta) <= mid:
        return delta
    x = mp.log(mp.mpf(abs(delta)) / mid) / mp.log(mp.mpf(m - 1) / mid) * (mid - 1)
    nearest = mp.nint(x)
    if abs(x - nearest) < mp.mpf(10) ** (5 - cert.DIGITS):  # an exact integer (|δ| = m − 1: the ratio is 1)
        x = nearest
    return (1 if delta > 0 else -1) * (mid + int(mp.ceil(x)))


def bucket_cases() -> list[Case]:
    cases = []
    for position_buckets, m, reach in [(256, 512, 520), (8, 64, 80), (3, 9, 30)]:
        far = np.array([2 * m, 4 * m, 100 * m], dtype=np.int64)  # beyond m − 1 the buckets keep growing
        rel = np.concatenate([-far[::-1], np.arange(-reach, reach + 1, dtype=np.int64), far])
        buckets = to_np(refpos.encodings.deberta_log_buckets(as_xp(rel), position_buckets, m))
        cases.append(Case(
            f"deberta/buckets-{position_buckets}-{m}", "deberta", "deberta_log_buckets",
            f"DeBERTa log buckets of δ = query − key, {position_buckets} buckets, max_relative_positions {m}, "
            f"δ in ±{reach} and far ({', '.join(str(int(v)) for v in far)}) (docs/deberta.md#the-math)",
            {"call": call("deberta_log_buckets", ["buckets"], In("rel"), position_buckets, m)},
            {"rel": rel},
            {"buckets": Output(buckets.astype(np.int64), tolerance_integer(),
                               lambda r=rel, b=position_buckets, m=m: ([mp_bucket(int(v), b, m) for v in r], 0.0))}))
    return cases


def _scaled(a: np.ndarray) -> dict:
    """The value rule at the array's largest magnitude (logits and terms of O(1) inputs)."""
    return tolerance_value(a, scale=float(np.abs(a).max()))


def _mp_logits(q: np.ndarray, k: np.ndarray, pos_key: np.ndarray | None, pos_query: np.ndarray | None,
               index: np.ndarray, terms: list[str]) -> tuple[Any, float]:
    """The logits summed at 30 digits from the float64 inputs, at the (integer) index; the scale of the ulps
    is the largest logit (an entry near 0 is a cancelling sum of terms of that size)."""
    mp = cert.mp
    h, t, d = q.shape
    exact = np.empty((h, t, t), dtype=object)
    scale = mp.sqrt(mp.mpf(d * (1 + len(terms))))
    for head, i, j in np.ndindex(exact.shape):
        r = int(index[i, j])
        total = mp.fsum(mp.mpf(float(a)) * mp.mpf(float(b)) for a, b in zip(q[head, i], k[head, j], strict=True))
        if "c2p" in terms:
            total += mp.fsum(mp.mpf(float(a)) * mp.mpf(float(b)) for a, b in zip(q[head, i], pos_key[head, r],
                                                                                  strict=True))
        if "p2c" in terms:
            total += mp.fsum(mp.mpf(float(a)) * mp.mpf(float(b)) for a, b in zip(k[head, j], pos_query[head, r],
                                                                                  strict=True))
        exact[head, i, j] = total / scale
    return exact, float(max(abs(v) for v in exact.flat))  # ulps of the largest logit: the sums cancel


def logits_cases() -> list[Case]:
    cases = []
    h, d = 2, 8
    for name, position_buckets, m, t, terms in [("v2-buckets-8-20", 8, 20, 24, ["p2c", "c2p"]),
                                                ("v1-clip-6", -1, 6, 16, ["c2p", "p2c"])]:
        cid = f"deberta/logits-{name}"
        rng = rng_for(cid)
        span = position_buckets if position_buckets > 0 else m
        q, k = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d))
        pos_key, pos_query = rng.standard_normal((h, 2 * span, d)), rng.standard_normal((h, 2 * span, d))
        positions = np.arange(t, dtype=np.int64)
        settings = {"position_buckets": position_buckets, "max_relative_positions": m}
        xpos = as_xp(positions)
        logits = to_np(refpos.encodings.deberta_attention_logits(as_xp(q), as_xp(k), as_xp(pos_key), as_xp(pos_query),
                                                                 xpos, xpos, pos_att_type=terms, **settings))
        index = to_np(deberta_relative_index(xpos, xpos, **settings)).astype(np.int64)
        c2p = to_np(deberta_c2p_terms(as_xp(q), as_xp(pos_key), as_xp(index)))
        p2c = to_np(deberta_p2c_terms(as_xp(k), as_xp(pos_query), as_xp(index)))
        rule = "log buckets" if position_buckets > 0 else "no buckets, δ clipped to [−m, m − 1]"
        cases.append(Case(
            cid, "deberta", "deberta_attention_logits",
            f"DeBERTa logits (q·k + c2p + p2c)/√(3d), {rule}, position_buckets {position_buckets}, "
            f"max_relative_positions {m}, {t} tokens; the row index and the unscaled terms (docs/deberta.md#the-math)",
            {"call": call("deberta_attention_logits", ["logits"], In("q"), In("k"), In("pos_key"), In("pos_query"),
                          position_buckets, m, terms, In("positions"))},
            {"q": q, "k": k, "pos_key": pos_key, "pos_query": pos_query, "positions": positions},
            {"logits": Output(logits, _scaled(logits), lambda q=q, k=k, a=pos_key, b=pos_query, i=index, tr=terms:
                              _mp_logits(q, k, a, b, i, tr)),
             "index": Output(index, tolerance_integer(),
                             lambda p=positions, s=settings, span=span: (
                                 [[min(max(_bucket_or_delta(int(a - b), s) + span, 0), 2 * span - 1) for b in p]
                                  for a in p], 0.0)),
             "c2p": Output(c2p, _scaled(c2p)), "p2c": Output(p2c, _scaled(p2c))},
            primary="logits"))
    return cases


def _bucket_or_delta(delta: int, settings: dict[str, int]) -> int:
    if settings["position_buckets"] > 0:
        return mp_bucket(delta, settings["position_buckets"], settings["max_relative_positions"])
    return delta


def deberta_cases() -> list[Case]:
    """Every DeBERTa case."""
    return bucket_cases() + logits_cases()
