r"""Spec: Shaw's key term over clipped frame distances (docs/relative.md#shaw-key-term): ``shaw_key_terms``.

The oracle follows the formula with Python loops, independently of any implementation; each property is shown
failing on a tiny wrong implementation (``test_the_properties_catch_mutants``).

Tolerance (derived for a port computing at unit roundoff ``u`` of ``INFO["dtype"]``, as
:mod:`refpos.encodings.shaw_key_mistakes` derives it): the table rows and queries are exact; the scale is rounded
when stored and when multiplied, and the ``d`` products and ``d − 1`` sums of ``q_i·E_r`` round, so per attended
entry ``γ_{d+3}·σ·Σ_k |q_ik||E_rk|`` with ``γ_n = nu/(1 − nu)``; the pairs of two blocks are exactly 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.exact.ulp import MANTISSA
from refpos.testing.strategies_shaw_key import shaw_key_calls


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def oracle(q, table, left, right, offset, sign, block=None, scale=None, u=None):
    """``σ·q_i·E[clip(s·(j − i), −L, R) + o]`` at the pairs of one block, 0 at the others, in loops; with ``u``: the
    bound of a port computing at unit roundoff ``u`` (module docstring)."""
    q, table = np.asarray(q, dtype=np.float64), np.asarray(table, dtype=np.float64)
    heads, frames, width = q.shape
    s = 1 if sign == "key_minus_query" else -1
    sigma = width**-0.5 if scale is None else scale
    n = width + 3
    out = np.zeros((heads, frames, frames))
    for h in range(heads):
        for i in range(frames):
            for j in range(frames):
                if block is not None and i // block != j // block:
                    continue
                pairs = list(zip(q[h, i], table[min(max(s * (j - i), -left), right) + offset], strict=True))
                if u:
                    out[h, i, j] = n * u / (1 - n * u) * sigma * sum(abs(a * b) for a, b in pairs)
                else:
                    out[h, i, j] = sigma * sum(float(a * b) for a, b in pairs)
    return out


def matches(fn, call, u: float) -> None:
    got = np.asarray(fn(**call), dtype=np.float64)
    expected = oracle(**call)
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= oracle(**call, u=u)), f"largest error {np.abs(got - expected).max():.3g}"


def same_clipped_distance_same_term(fn, call, u: float) -> None:
    """Two keys of a query's block at the same clipped distance from it read the same row: equal terms (within both
    entries' bounds)."""
    got, bound = np.asarray(fn(**call), dtype=np.float64), oracle(**call, u=u)
    frames, block = got.shape[-1], call["block"]
    s = 1 if call["sign"] == "key_minus_query" else -1
    for i in range(frames):
        keys = [j for j in range(frames) if block is None or i // block == j // block]
        for j in keys:
            for k in keys:
                if min(max(s * (j - i), -call["left"]), call["right"]) == min(max(s * (k - i), -call["left"]),
                                                                                call["right"]):
                    assert np.all(np.abs(got[..., i, j] - got[..., i, k]) <= bound[..., i, j] + bound[..., i, k])


def zero_table_zero_terms(fn, call) -> None:
    """A table of zeros adds nothing: every term, attended or not, is exactly 0."""
    got = np.asarray(fn(**{**call, "table": np.zeros_like(call["table"])}), dtype=np.float64)
    assert np.array_equal(got, np.zeros_like(got))


def blocks_are_their_own_sequences(fn, call, u: float) -> None:
    """Inside a block the terms are those of the block's frames alone (the local distance is ``j − i``); between
    two blocks they are 0."""
    got, block = np.asarray(fn(**call), dtype=np.float64), call["block"]
    if block is None:
        return
    frames = got.shape[-1]
    for start in range(0, frames, block):
        part = slice(start, min(start + block, frames))
        alone = {**call, "q": np.asarray(call["q"])[..., part, :], "block": None}
        assert np.all(np.abs(got[..., part, part] - oracle(**alone)) <= oracle(**alone, u=u))
        outside = np.ones(frames, dtype=bool)
        outside[part] = False
        assert np.array_equal(got[..., part, outside], np.zeros_like(got[..., part, outside]))


@given(call=shaw_key_calls())
def test_the_terms_match_the_formula(impl, call):
    matches(require(impl, "shaw_key_terms"), call, unit(impl))


@given(call=shaw_key_calls())
def test_the_term_depends_only_on_the_clipped_distance(impl, call):
    same_clipped_distance_same_term(require(impl, "shaw_key_terms"), call, unit(impl))


@given(call=shaw_key_calls())
def test_a_zero_table_gives_zero_terms(impl, call):
    zero_table_zero_terms(require(impl, "shaw_key_terms"), call)


@given(call=shaw_key_calls())
def test_each_block_is_its_own_sequence(impl, call):
    blocks_are_their_own_sequences(require(impl, "shaw_key_terms"), call, unit(impl))


def one_hot_queries_read_each_head_s_column(fn, call) -> None:
    """Queries that are each head's unit vector at scale 1 give that head's column of the row a pair reads, exactly
    (one product by 1, the others by 0): a bias per head (docs/relative.md#a-per-head-bias-of-clipped-distances)."""
    heads, frames = np.shape(call["q"])[:2]
    table = np.asarray(call["table"])[:, :1].repeat(heads, axis=1) + np.arange(heads)  # column h: E[r, 0] + h
    one_hot = np.broadcast_to(np.eye(heads)[:, None, :], (heads, frames, heads))
    bias = {**call, "q": one_hot, "table": table, "scale": 1.0}
    got = np.asarray(fn(**bias), dtype=np.float64)
    assert np.array_equal(got, oracle(**bias))


@given(call=shaw_key_calls())
def test_one_hot_queries_at_scale_one_read_each_head_s_column(impl, call):
    one_hot_queries_read_each_head_s_column(require(impl, "shaw_key_terms"), call)


def refuses_rows_outside_the_table(fn) -> None:
    """A clip and offset reading a row the table does not hold (below row 0 or past its last): a ``ValueError``
    naming ``table``, nothing wrapped or clipped into it."""
    q, table = np.ones((1, 6, 2)), np.ones((5, 2))
    fn(q=q, table=table, left=2, right=2, offset=2, sign="key_minus_query")
    for left, right, offset in ((2, 2, 1), (2, 2, 3), (3, 2, 2)):
        with pytest.raises(ValueError, match="table"):
            fn(q=q, table=table, left=left, right=right, offset=offset, sign="key_minus_query")


def test_bad_input_names_the_parameter(impl):
    fn = require(impl, "shaw_key_terms")
    refuses_rows_outside_the_table(fn)
    good = {"q": np.ones((1, 6, 2)), "table": np.ones((5, 2)), "left": 2, "right": 2, "offset": 2,
            "sign": "key_minus_query"}
    for changed, name in (({"table": np.ones((5, 3))}, "table"), ({"sign": "distance"}, "sign"),
                          ({"left": -1}, "left"), ({"block": 0}, "block")):
        with pytest.raises(ValueError, match=name):
            fn(**{**good, **changed})


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: the other sign, the clip's two sides exchanged, no scale,
    every pair attended (formula, blocks); heads reading each other's columns (one-hot queries); a port clipping only
    below and wrapping past the clip above (clipped distance); one leaving the pairs of two blocks at −inf (zero
    table); ports that wrap a row outside the table (NumPy indexing) or clip it into the table instead of refusing
    it."""
    u = 2.0**-53
    rng = np.random.default_rng(0)
    call = {"q": rng.standard_normal((2, 10, 3)), "table": rng.standard_normal((9, 3)), "left": 4, "right": 2,
            "offset": 4, "sign": "key_minus_query", "block": 4}

    def other_sign(**c):
        return oracle(**{**c, "sign": "query_minus_key"})

    def clip_exchanged(**c):
        return oracle(**{**c, "left": c["right"], "right": c["left"]})

    def unscaled(**c):
        return oracle(**{**c, "scale": 1.0})

    def unblocked(**c):
        return oracle(**{**c, "block": None})

    def head_swapped(**c):  # each head reading the next head's column
        return np.roll(oracle(**c), 1, axis=0)

    for check in (lambda: matches(other_sign, call, u), lambda: matches(clip_exchanged, call, u),
                  lambda: matches(unscaled, call, u), lambda: matches(unblocked, call, u),
                  lambda: blocks_are_their_own_sequences(unblocked, call, u),
                  lambda: one_hot_queries_read_each_head_s_column(head_swapped, call)):
        with pytest.raises(AssertionError):
            check()
    matches(oracle, call, u)
    same_clipped_distance_same_term(oracle, call, u)
    zero_table_zero_terms(oracle, call)
    blocks_are_their_own_sequences(oracle, call, u)

    def wraps_above(**c):  # clipped below only; a distance past the clip above wraps around the table
        q, table = np.asarray(c["q"]), np.asarray(c["table"])
        t = np.arange(q.shape[-2])
        rows = (np.maximum(t[None, :] - t[:, None], -c["left"]) + c["offset"]) % len(table)
        return q.shape[-1] ** -0.5 * np.einsum("hid,ijd->hij", q, table[rows])

    with pytest.raises(AssertionError):
        same_clipped_distance_same_term(wraps_above, {**call, "block": None}, u)

    def masked(**c):  # the pairs of two blocks left at −inf, as an attention mask would hold them
        part = np.arange(np.shape(c["q"])[-2]) // c["block"]
        return np.where(part[:, None] == part[None, :], oracle(**c), -np.inf)

    with pytest.raises(AssertionError):
        zero_table_zero_terms(masked, call)

    def wraps(**c):  # NumPy reads row −1 as the last row and has no check past the top
        q, table = np.asarray(c["q"]), np.asarray(c["table"])
        t = np.arange(q.shape[-2])
        rows = np.clip(t[None, :] - t[:, None], -c["left"], c["right"]) + c["offset"]
        return np.einsum("hid,ijd->hij", q, table[rows % len(table)])

    def clips(**c):  # every row clipped into the table first
        q, table = np.asarray(c["q"]), np.asarray(c["table"])
        t = np.arange(q.shape[-2])
        rows = np.clip(np.clip(t[None, :] - t[:, None], -c["left"], c["right"]) + c["offset"], 0, len(table) - 1)
        return np.einsum("hid,ijd->hij", q, table[rows])

    for port in (wraps, clips):
        with pytest.raises(pytest.fail.Exception):
            refuses_rows_outside_the_table(port)
