"""Spec: ALiBi slopes and bias forms (docs/alibi.md#the-math, docs/conventions.md#equivalences;
docs/alibi.md#where-the-anchors-differ, docs/diagnosis.md).

Slopes are compared **bit for bit** with the published recurrence (written out below from the spec) when
the adapter computes in float64: the closed form ``2^(-8(h+1)/c)`` differs from it by up to 38 ulps, and
that difference is what the test is for. A float32 adapter is held to rtol 1e-6 (docs/conventions.md#tolerances).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from derived import alibi_slope_rtol
from encoding_support import is_float64, softmax, tol
from hypothesis import given
from hypothesis import strategies as st
from support import assert_close, assert_within, cases, require


def recurrence_slopes(n: int) -> list[float]:
    """The official recurrence (ofirpress/attention_with_linear_biases), from docs/alibi.md#the-math."""

    def geometric(c: int) -> list[float]:
        r = 2.0 ** (-(2.0 ** -(math.log2(c) - 3)))
        return [r * r**h for h in range(c)]

    if n & (n - 1) == 0:
        return geometric(n)
    c = 1 << (n.bit_length() - 1)
    return geometric(c) + recurrence_slopes(2 * c)[0::2][: n - c]


def slope_powers(n: int) -> np.ndarray:
    """The power ``h`` of each of the ``n`` slopes: ``1 … c`` of ``2^(−8/c)``, then ``1, 3, 5 …`` of ``2^(−4/c)``."""
    c = 1 << (n.bit_length() - 1)
    return np.concatenate([np.arange(1, c + 1), 2 * np.arange(n - c) + 1]).astype(np.float64)


def assert_slopes_equal(impl, got: np.ndarray, expected, powers=None, what: str = "slopes") -> None:
    """float64: bit for bit; otherwise within the bound of a correct slope in the declared dtype
    (``derived.alibi_slope_rtol``: the base's rounding raised to the slope's power ``h``)."""
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape
    if is_float64(impl):
        np.testing.assert_array_equal(got, expected)
    else:
        powers = slope_powers(expected.size) if powers is None else powers
        assert_within(got, expected, rtol=0.0, atol=alibi_slope_rtol(impl, powers) * np.abs(expected), what=what)


# ----------------------------------------------------------------------------------------- slopes


@pytest.mark.parametrize(
    ("n", "exponents"),
    cases("n, exponents", [
        (1, [-8]),
        (3, [-4, -8, -2]),
        (6, [-2, -4, -6, -8, -1, -3]),
        (8, [-1, -2, -3, -4, -5, -6, -7, -8]),
        (12, [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]),
    ], shown="n"),
)
def test_slopes_spec_values(impl, n, exponents):
    """docs/alibi.md#the-math: appended, not sorted; n = 12 is not the naive 2^(-8h/12)."""
    slopes = require(impl, "alibi_slopes")
    got = slopes(n)
    assert_close(got, 2.0 ** np.array(exponents), impl, what="slopes")


@pytest.mark.parametrize("n", cases("n", range(1, 129)))
def test_slopes_bit_exact_to_the_recurrence(impl, n):
    slopes = require(impl, "alibi_slopes")
    assert_slopes_equal(impl, slopes(n), recurrence_slopes(n))


def assert_group(impl, got: np.ndarray, expected: np.ndarray, powers: np.ndarray, what: str) -> None:
    """A group of slopes against ``2^(exponent)``: float64 by the value rule, otherwise by the derived slope bound."""
    if is_float64(impl):
        assert_close(got, expected, impl, what=what)
    else:
        assert_slopes_equal(impl, got, expected, powers, what=what)


@given(n=st.integers(1, 256))
def test_slopes_structure(impl, n):
    """Positive; first group 2^(-8h/c) (c = largest power of two ≤ n); each group strictly decreasing."""
    slopes = require(impl, "alibi_slopes")
    m = slopes(n)
    c = 1 << (n.bit_length() - 1)
    assert np.all(m > 0)
    powers = slope_powers(n)
    assert_group(impl, m[:c], 2.0 ** (-8.0 * powers[:c] / c), powers[:c], "first group")
    assert np.all(np.diff(m[:c]) < 0) and np.all(np.diff(m[c:]) < 0)
    if n != c:
        assert_group(impl, m[c:], 2.0 ** (-4.0 * powers[c:] / c), powers[c:], "second group")
        assert not np.all(np.diff(m) < 0)  # not monotone overall


# ----------------------------------------------------------------------------------------- bias forms


def expected_bias(slopes: np.ndarray, q_len: int, k_len: int, form: str) -> np.ndarray:
    i = (k_len - q_len + np.arange(q_len))[:, None].astype(np.float64)
    j = np.arange(k_len)[None, :].astype(np.float64)
    m = slopes[:, None, None]
    if form == "causal":
        return -m * (i - j)
    if form == "symmetric":
        return -m * np.abs(i - j)
    return m * np.broadcast_to(j, (q_len, k_len))


@given(n=st.integers(1, 12), k_len=st.integers(1, 20), data=st.data(),
       form=st.sampled_from(["causal", "symmetric", "key_index"]))
def test_bias_forms(impl, n, k_len, data, form):
    """bias (H, q_len, k_len), queries aligned to the end of the keys."""
    slopes, bias = require(impl, "alibi_slopes", "alibi_bias")
    q_len = data.draw(st.integers(1, k_len))
    got = bias(n, q_len, k_len, form=form)
    assert got.shape == (n, q_len, k_len)
    assert_within(got, expected_bias(slopes(n), q_len, k_len, form), **tol(impl))


@given(n=st.integers(1, 8), t=st.integers(1, 16))
def test_causal_bias_is_zero_on_the_diagonal_and_negative_in_the_past(impl, n, t):
    bias = require(impl, "alibi_bias")
    b = bias(n, t, t, form="causal")
    assert np.all(np.diagonal(b, axis1=1, axis2=2) == 0)
    past = np.tril(np.ones((t, t), dtype=bool), -1)
    assert np.all(b[:, past] < 0)
    assert_within(bias(n, t, t, form="symmetric"), -np.abs(b), **tol(impl))


@given(n=st.integers(1, 8), k_len=st.integers(1, 16), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_causal_equals_key_index_under_a_causal_mask(impl, n, k_len, data, seed):
    """−m(i−j) = m·j − m·i: rows differ by a constant, so the probabilities agree (docs/alibi.md#the-math)."""
    bias = require(impl, "alibi_bias")
    q_len = data.draw(st.integers(1, k_len))
    scores = np.random.default_rng(seed).standard_normal((n, q_len, k_len))
    mask = np.arange(k_len)[None, :] <= (k_len - q_len + np.arange(q_len))[:, None]
    p_causal = softmax(scores + bias(n, q_len, k_len, form="causal"), mask)
    p_key = softmax(scores + bias(n, q_len, k_len, form="key_index"), mask)
    # float64: the row constant m·i (≤ 8·k_len) shifts the logits before exp, so the two softmaxes differ by
    # its rounding, ~k_len·2^-52 relative: rtol 1e-12, atol 1e-14 for probabilities near 0
    assert_within(p_causal, p_key, **tol(impl, rtol=1e-12, atol=1e-14))


def test_key_index_without_a_mask_is_not_symmetric(impl):
    """Without a causal mask the key-index form is wrong for bidirectional use (docs/diagnosis.md)."""
    bias = require(impl, "alibi_bias")
    scores = np.random.default_rng(0).standard_normal((4, 6, 6))
    p_sym = softmax(scores + bias(4, 6, 6, form="symmetric"))
    p_key = softmax(scores + bias(4, 6, 6, form="key_index"))
    assert np.abs(p_sym - p_key).max() > 1e-2


def test_decode_row_equals_the_last_row_of_the_full_bias(impl):
    """A cached decode step (q_len = 1) reads the last query row, not row 0 (docs/alibi.md#where-the-anchors-differ)."""
    bias = require(impl, "alibi_bias")
    for form in ("causal", "symmetric", "key_index"):
        np.testing.assert_array_equal(bias(8, 1, 9, form=form)[:, 0], bias(8, 9, 9, form=form)[:, -1])


def test_bad_input_names_the_parameter(impl):
    slopes, bias = require(impl, "alibi_slopes", "alibi_bias")
    with pytest.raises(ValueError, match="n_heads"):
        slopes(0)
    with pytest.raises(ValueError, match="n_heads"):
        bias(0, 2, 2)
    with pytest.raises(ValueError, match="form"):
        bias(2, 2, 2, form="mpt_typo")
