"""Spec: sinusoidal and learned absolute encodings (docs/sinusoidal.md#the-math, docs/learned.md#the-math;
docs/sinusoidal.md#where-the-anchors-differ, docs/diagnosis.md).

Tolerances: exact test vectors are quoted to 10 significant digits (atol 1e-10). Shift-matrix and Gram
identities re-derive sin/cos from angles rounded independently, so their error grows with the position
(``angle_atol``: the phase rule of refpos.golden.exact.tolerance at the largest position, ~9e-16·p + 2e-13 in
float64).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from encoding_support import angle_atol
from hypothesis import given
from hypothesis import strategies as st
from support import (
    assert_close,
    assert_quoted,
    assert_within,
    cases,
    frequency_rtol,
    require,
    tolerance_array,
    unit_roundoff,
)

EVEN_DIMS = st.sampled_from([2, 4, 6, 8, 16, 64])

# ----------------------------------------------------------------------------------------- test vectors


@pytest.mark.parametrize(
    ("layout", "spacing", "expected"),
    cases("layout, spacing, expected", [
        ("interleaved", "paper", ["0.8414709848", "0.5403023059", "0.0099998333", "0.9999500004"]),
        ("concat", "paper", ["0.8414709848", "0.0099998333", "0.5403023059", "0.9999500004"]),
        ("concat", "tensor2tensor", ["0.8414709848", "9.9999999833e-05", "0.5403023059", "0.999999995"]),
    ], shown="layout, spacing"),
)
def test_d4_p1_vectors(impl, layout, spacing, expected):
    """docs/sinusoidal.md#the-math test vectors (d = 4, p = 1)."""
    sinusoidal = require(impl, "sinusoidal")
    row = sinusoidal(np.array([1]), 4, layout=layout, spacing=spacing)
    assert row.shape == (1, 4)
    assert_quoted(row[0], expected, impl, what=f"{layout}, {spacing}")  # quoted to 10 digits


@pytest.mark.parametrize(("layout", "expected"), cases("layout, expected", [
    ("interleaved", [0, 1] * 4), ("concat", [0] * 4 + [1] * 4)], shown="layout"))
def test_position_zero(impl, layout, expected):
    sinusoidal = require(impl, "sinusoidal")
    assert sinusoidal(np.array([0]), 8, layout=layout)[0].tolist() == expected


@pytest.mark.parametrize(
    ("spacing", "expected"),
    cases("spacing, expected", [("paper", [1.0, 0.1, 0.01, 0.001]),
                                ("tensor2tensor", [1.0, 0.046415888336127795, 0.0021544346900318843, 1e-4])],
          shown="spacing"),
)
def test_d8_frequencies(impl, spacing, expected):
    """The frequency probe: at p = 1 every ω ≤ 1 < π, so atan2(sin, cos) recovers ω exactly."""
    sinusoidal = require(impl, "sinusoidal")
    row = sinusoidal(np.array([1]), 8, layout="interleaved", spacing=spacing)[0]
    omega = np.arctan2(row[0::2], row[1::2])
    # ω_j of a correct form (support.assert_frequencies) and the pair (sin, cos) of the angle 1·ω_j, of radius 1,
    # within the phase rule τ each: atan2 moves by at most √2·τ; float64's atan2 adds a rounding (2u64·ω)
    tau = tolerance_array(impl, np.zeros((1, 1)), "phase", positions=np.array([1]), inv_freq=expected)
    phase = math.sqrt(2) * float(tau.max()) + 2 * 2.0**-53 * np.asarray(expected)
    assert_within(omega, expected, rtol=0.0, atol=phase + frequency_rtol(impl, expected) * np.asarray(expected))


def test_paper_and_t2t_share_only_the_first_pair(impl):
    """docs/diagnosis.md: spacing mix-up shows as an equal k = 0 pair and different others."""
    sinusoidal = require(impl, "sinusoidal")
    p = np.arange(1, 6)
    paper = sinusoidal(p, 8, layout="concat", spacing="paper")
    t2t = sinusoidal(p, 8, layout="concat", spacing="tensor2tensor")
    assert_within(paper[:, [0, 4]], t2t[:, [0, 4]], rtol=0.0, atol=2 * angle_atol(impl, 5, 1.0))  # ω_0 = 1 in both
    assert np.abs(paper - t2t).max() > 1e-2


def test_batched_positions_keep_their_shape(impl):
    sinusoidal = require(impl, "sinusoidal")
    p = np.array([[0, 1, 2], [5, 6, 7]])
    out = sinusoidal(p, 6)
    assert out.shape == (2, 3, 6)
    assert_within(out[1], sinusoidal(np.array([5, 6, 7]), 6), rtol=0.0, atol=2 * angle_atol(impl, 7, 1.0))


# ----------------------------------------------------------------------------------------- properties


@given(dim=EVEN_DIMS, positions=st.lists(st.integers(0, 5000), min_size=1, max_size=6),
       spacing=st.sampled_from(["paper", "tensor2tensor"]))
def test_layouts_are_a_fixed_channel_permutation(impl, dim, positions, spacing):
    """concat == interleaved[:, perm], perm = [0, 2, 4, …, 1, 3, 5, …] (exactly: same numbers moved)."""
    sinusoidal = require(impl, "sinusoidal")
    p = np.array(positions)
    perm = np.concatenate([np.arange(0, dim, 2), np.arange(1, dim, 2)])
    inter = sinusoidal(p, dim, layout="interleaved", spacing=spacing)
    concat = sinusoidal(p, dim, layout="concat", spacing=spacing)
    np.testing.assert_array_equal(concat, inter[:, perm])


LAYOUTS = st.sampled_from(["interleaved", "concat"])


@given(dim=EVEN_DIMS, p=st.integers(0, 2000), r=st.integers(-2000, 2000), layout=LAYOUTS)
def test_shift_matrix_moves_the_sinusoid(impl, dim, p, r, layout):
    """P[p + r] = M_r · P[p] (column vectors), negative r too; M_r is independent of p."""
    sinusoidal, shift = require(impl, "sinusoidal", "sinusoidal_shift_matrix")
    p = max(p, -r)  # keep p + r >= 0
    m = shift(r, dim, layout=layout)
    assert m.shape == (dim, dim)
    rows = sinusoidal(np.array([p, p + r]), dim, layout=layout)
    assert_within(m @ rows[0], rows[1], rtol=0, atol=angle_atol(impl, p + abs(r)))


@given(dim=EVEN_DIMS, r=st.integers(-5000, 5000), s=st.integers(-5000, 5000), layout=LAYOUTS)
def test_shift_matrices_form_an_orthogonal_group(impl, dim, r, s, layout):
    """M_r orthogonal, M_r M_s = M_{r+s}, M_{-r} = M_rᵀ, M_0 = I."""
    shift = require(impl, "sinusoidal_shift_matrix")
    m_r, m_s = shift(r, dim, layout=layout), shift(s, dim, layout=layout)
    atol = angle_atol(impl, abs(r) + abs(s))
    assert_within(m_r @ m_r.T, np.eye(dim), rtol=0, atol=atol)
    assert_within(m_r @ m_s, shift(r + s, dim, layout=layout), rtol=0, atol=atol)
    assert_within(shift(-r, dim, layout=layout), m_r.T, rtol=0, atol=atol)
    np.testing.assert_array_equal(shift(0, dim, layout=layout), np.eye(dim))


def test_shift_matrix_sign_convention(impl):
    """+sin in the upper-right corner of each (sin, cos) block (docs/sinusoidal.md#the-math)."""
    shift = require(impl, "sinusoidal_shift_matrix")
    m = shift(1, 2)  # entries cos(ω·1), ±sin(ω·1): the phase rule at r = 1
    assert_within(m, [[np.cos(1), np.sin(1)], [-np.sin(1), np.cos(1)]], rtol=0.0, atol=angle_atol(impl, 1, 1.0))
    m = shift(1, 4, layout="concat")
    c, s = np.cos([1.0, 0.01]), np.sin([1.0, 0.01])
    expected = np.block([[np.diag(c), np.diag(s)], [-np.diag(s), np.diag(c)]])
    assert_within(m, expected, rtol=0.0, atol=angle_atol(impl, 1, 1.0))


@given(dim=EVEN_DIMS, start=st.integers(0, 3000), length=st.integers(1, 12), layout=LAYOUTS,
       spacing=st.sampled_from(["paper", "tensor2tensor"]))
def test_gram_matrix_is_symmetric_toeplitz_with_diagonal_half_dim(impl, dim, start, length, layout, spacing):
    """P_i·P_j = Σ_k cos(ω_k (i − j)): depends on i − j only, even in its sign; ‖P_i‖² = d/2."""
    sinusoidal = require(impl, "sinusoidal")
    pos = start + np.arange(length)
    table = sinusoidal(pos, dim, layout=layout, spacing=spacing)
    gram = table @ table.T
    atol = angle_atol(impl, start + length) * dim
    assert_within(np.diag(gram), dim / 2, rtol=0, atol=atol)
    assert_within(gram, gram.T, rtol=0, atol=atol)
    for shift in range(1, length):
        diagonal = np.diag(gram, shift)
        assert_within(diagonal, diagonal[0], rtol=0, atol=atol)


def test_gram_closed_form_d2(impl):
    """d = 2: P_i·P_j = cos(i − j)."""
    sinusoidal = require(impl, "sinusoidal")
    pos = np.arange(6)
    table = sinusoidal(pos, 2)
    # two products of entries within the phase rule τ (size 1): 2·2τ, and the sum's rounding
    atol = 4 * angle_atol(impl, 5, 1.0) + 2 * unit_roundoff(impl)
    assert_within(table @ table.T, np.cos(np.subtract.outer(pos, pos)), rtol=0.0, atol=atol)


def test_absolute_encoding_changes_under_an_offset(impl):
    """An APE is not translation-invariant: shifted positions give different rows
    (docs/conventions.md#order-and-permutations)."""
    sinusoidal = require(impl, "sinusoidal")
    assert np.abs(sinusoidal(np.arange(4), 8) - sinusoidal(np.arange(4) + 3, 8)).max() > 0.1


def test_large_positions_match_the_formula(impl):
    """Probe positions of docs/conventions.md#probe-positions against the float64 formula sin(p·10000^(-2k/d))."""
    sinusoidal = require(impl, "sinusoidal")
    pos = np.array([0, 1, 255, 256, 257, 2047, 2048, 2049, 8191, 8192, 32768, 65536, 65537, 131071])
    dim = 16
    omega = 10000.0 ** (-2.0 * np.arange(dim // 2) / dim)
    ang = pos[:, None] * omega[None, :]
    expected = np.stack([np.sin(ang), np.cos(ang)], axis=-1).reshape(len(pos), dim)
    assert_close(sinusoidal(pos, dim), expected, impl, "phase", positions=pos, what="sinusoid rows")


# ----------------------------------------------------------------------------------------- learned


def test_learned_lookup_is_exact_and_bounded(impl):
    """N − 1 accepted, N and −1 rejected (NumPy would wrap −1 silently)."""
    lookup = require(impl, "learned_lookup")
    table = np.arange(24, dtype=np.float64).reshape(8, 3)
    assert_close(lookup(table, np.array([7, 0, 3])), table[[7, 0, 3]], impl, "stored", what="rows 7, 0, 3")
    for bad in (8, -1):
        with pytest.raises(ValueError, match="positions"):
            lookup(table, np.array([0, bad]))


@given(pad=st.integers(0, 4), length=st.integers(1, 4))
def test_learned_rows_follow_padding_aware_ids(impl, pad, length):
    """With ids counted over real tokens, a left-padded sequence reads the same rows
    (docs/conventions.md#shapes-and-positions)."""
    lookup = require(impl, "learned_lookup")
    table = np.random.default_rng(pad * 10 + length).standard_normal((16, 4))
    mask = np.array([0] * pad + [1] * length)
    ids = (np.cumsum(mask) - 1) * mask
    padded = lookup(table, ids)
    np.testing.assert_array_equal(padded[pad:], lookup(table, np.arange(length)))
