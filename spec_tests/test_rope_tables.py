"""Spec: RoPE with the tables given — kernels that take cos/sin caches as inputs (``apply_rope_tables``).

ONNX's ``RotaryEmbedding``, onnxruntime's contrib op and ``GroupQueryAttention(do_rotary)``, every
``cos_sin_cache`` kernel compute no angle: they rotate with the rows of tables they are handed. The suite
tests them on that and nothing else (a library that builds its tables is tested through ``apply_rope``):

* pair ``j`` of a token at position ``p`` is turned by row ``p`` of the tables, ``u' = u·C − v·S``,
  ``v' = v·C + u·S``, in the layout's channels (docs/conventions.md#pair-layouts), pass-through channels
  unchanged; with M-RoPE sections pair ``j`` reads row ``p_{a(j)}`` (docs/mrope.md#the-math);
* a position is a row: ``(B, T)`` positions with ``x`` ``(B, H, T, D)`` pick rows per batch row; a cache of
  ``max(p) + 1`` rows is enough; a negative position or one past the last row is a ``ValueError`` (never
  the last row again, never counted from the end);
* the scaling keys of the rope dict change nothing: the rule is the tables'.

The tables here are arbitrary rotations scaled by a factor ``A`` (any rule's tables have that form), so no
test credits the kernel with a rule it does not compute (spec_tests/matrix.py counts these tests in the
"rotation (tables given)" column only). Tolerance: the rotation's own rounding in the declared dtype
(``assert_close`` kind ``"phase"`` at position 0: no angle is computed), scaled by ``A·‖pair‖``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rope_oracle import rotate_with_rows, rotated_width
from rope_support import layout_perm
from support import IMPL_NAME, assert_close, declared_list, require, supported_subset

from refpos.testing.declarations import DECLARATIONS


@st.composite
def geometries(draw, *, partial: bool = True) -> dict:
    """A rope dict's geometry (head_dim, rotary_dim, placement, layout) within the declared layouts and
    placements; the rule is ``default`` (the tables carry the rule)."""
    layouts = supported_subset("rope_layouts", ("half", "interleaved", "deinterleaved"))
    placements = supported_subset("rope_placements", ("first", "last"))
    if not layouts:
        pytest.skip("the adapter declares no layout (INFO['rope_layouts'])")
    head_dim = draw(st.sampled_from([4, 6, 8, 16, 32]))
    rope = {"rope_type": "default", "rope_theta": 1e4, "head_dim": head_dim, "layout": draw(st.sampled_from(layouts))}
    if partial and placements and draw(st.booleans()):
        rope["rotary_dim"] = 2 * draw(st.integers(1, head_dim // 2))
        rope["placement"] = draw(st.sampled_from(placements))
    return rope


@st.composite
def tables_for(draw, rope: dict, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(cos, sin, A)``: ``A·cos``, ``A·sin`` of arbitrary angles, ``max(positions) + 1 + extra`` rows."""
    rows = int(positions.max()) + 1 + draw(st.sampled_from([0, 0, 1, 7]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    angles = rng.uniform(-np.pi, np.pi, (rows, rotated_width(rope) // 2))
    a = draw(st.sampled_from([1.0, 0.5, 1.1386, 2.0]))
    return a * np.cos(angles), a * np.sin(angles), a


def _assert_rotation(got, expected, x, a, impl, what):
    size = max(a, 1.0) * 2 * float(np.abs(x).max())  # |u'| ≤ A·(|u| + |v|)
    assert_close(got, expected, impl, "phase", positions=np.zeros(expected.shape[:-1], dtype=np.int64),
                 magnitude=size, what=what)


@given(geometries(), st.lists(st.integers(0, 300), min_size=1, max_size=6), st.data())
def test_given_tables_turn_each_pair_by_the_row_of_its_position(impl, rope, positions, data):
    rotate = require(impl, "apply_rope_tables")
    pos = np.array(positions)
    cos, sin, a = data.draw(tables_for(rope, pos))
    x = np.random.default_rng(len(positions)).standard_normal((2, len(pos), rope["head_dim"]))
    got = rotate(x, pos, cos, sin, rope)
    _assert_rotation(got, rotate_with_rows(x, cos[pos], sin[pos], rope), x, a, impl, "rotation with given tables")


@given(geometries(partial=False), st.integers(0, 50), st.data())
def test_given_tables_rows_follow_the_positions_of_each_batch_row(impl, rope, offset, data):
    """Positions ``(B, T)`` with ``x`` ``(B, H, T, D)``: batch row b reads the rows of ``positions[b]``, in any
    order, repeated or not (left-padded batches, packed sequences)."""
    rotate = require(impl, "apply_rope_tables")
    pos = np.array([[offset + 3, offset, offset + 1, offset + 1], [0, 1, 2, offset + 7]])
    cos, sin, a = data.draw(tables_for(rope, pos))
    x = np.random.default_rng(offset).standard_normal((2, 3, 4, rope["head_dim"]))
    got = rotate(x, pos, cos, sin, rope)
    expected = rotate_with_rows(x, cos[pos][:, None], sin[pos][:, None], rope)  # (B, 1, T, m) rows per batch row
    _assert_rotation(got, expected, x, a, impl, "rows of each batch row")


#: the keys of a scaling rule, valid on any geometry of :func:`geometries`
RULE_KEYS = {"linear": {"factor": 4.0},
             "yarn": {"factor": 4.0, "original_max_position_embeddings": 64},
             "llama3": {"factor": 4.0, "original_max_position_embeddings": 64, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0}}


@given(geometries(), st.sampled_from(sorted(RULE_KEYS)), st.data())
def test_given_tables_ignore_the_scaling_rule(impl, rope, rule, data):
    """The rule is the tables': the same tables give the same rotation whatever the dict's scaling keys say."""
    rotate = require(impl, "apply_rope_tables")
    pos = np.arange(5)
    cos, sin, a = data.draw(tables_for(rope, pos))
    scaled = {**rope, "rope_type": rule, **RULE_KEYS[rule]}
    x = np.random.default_rng(1).standard_normal((5, rope["head_dim"]))
    _assert_rotation(rotate(x, pos, cos, sin, scaled), rotate_with_rows(x, cos[pos], sin[pos], rope), x, a, impl,
                     f"given tables under a {rule} dict")


@pytest.mark.parametrize(("positions", "error"), [
    pytest.param([0, -1], ValueError, id="negative-row-ValueError"),
    pytest.param([0, 4], ValueError, id="one-past-the-last-row-ValueError"),
    pytest.param([0.0, 1.0], TypeError, id="float-positions-TypeError"),
])
def test_given_tables_refuse_positions_outside_the_rows(impl, positions, error):
    """A 4-row table: a position is a row index, so −1 is not the last row and 4 is not row 3 again."""
    rotate = require(impl, "apply_rope_tables")
    rope = {"rope_type": "default", "rope_theta": 1e4, "head_dim": 4,
            "layout": supported_subset("rope_layouts", ("half", "interleaved", "deinterleaved"))[0]}
    cos, sin = np.ones((4, 2)), np.zeros((4, 2))
    with pytest.raises(error):
        rotate(np.ones((2, 4)), np.array(positions), cos, sin, rope)


def _declared_mrope_assignments() -> list[bool]:
    """``mrope_interleaved`` values of the M-RoPE assignments the adapter declares (``INFO["mrope"]``); a skip,
    before anything is drawn, when it declares none."""
    variants = declared_list("mrope")
    variants = DECLARATIONS["mrope"].default_values if variants is None else variants
    assignments = [v == "interleaved" for v in ("contiguous", "interleaved") if v in variants]
    if not assignments:
        pytest.skip(f"{IMPL_NAME} declares INFO['mrope'] = {list(variants)}: no M-RoPE assignment to test")
    return assignments


@given(st.integers(0, 40), st.data())
def test_given_tables_with_mrope_sections_read_each_axis_row(impl, base, data):
    """M-RoPE: positions ``(3, T)``; pair j reads row ``p_{a(j)}`` of the one table (docs/mrope.md#the-math),
    here sections [4, 2, 2] (contiguous bands or the round-robin of Qwen3-VL, as the adapter declares)."""
    rotate = require(impl, "apply_rope_tables")
    interleaved = data.draw(st.sampled_from(_declared_mrope_assignments()))
    rope = {"rope_type": "default", "rope_theta": 1e6, "head_dim": 16, "layout": "half", "mrope_section": [4, 2, 2],
            "mrope_interleaved": interleaved}
    pos = base + np.array([[0, 1, 2, 2], [0, 1, 2, 3], [0, 1, 4, 5]])
    cos, sin, a = data.draw(tables_for(rope, pos))
    axes = np.array([j % 3 if j % 3 and j < 3 * [4, 2, 2][j % 3] else 0 for j in range(8)]) if interleaved else \
        np.array([0, 0, 0, 0, 1, 1, 2, 2])
    rows = pos[axes].T  # (T, m): the row pair j of token t reads
    cols = np.arange(8)
    x = np.random.default_rng(base).standard_normal((4, 16))
    _assert_rotation(rotate(x, pos, cos, sin, rope), rotate_with_rows(x, cos[rows, cols], sin[rows, cols], rope), x,
                     a, impl, "M-RoPE rows per axis")


def test_half_and_interleaved_tables_kernels_are_conjugate(impl):
    """The same tables in two layouts: ``apply_half(P·x) = P·apply_interleaved(x)`` (the fixed permutation of
    docs/rope.md#how-checkpoints-are-converted); needs both layouts."""
    rotate = require(impl, "apply_rope_tables")
    both = supported_subset("rope_layouts", ("half", "interleaved"))
    if len(both) < 2:
        pytest.skip("needs the half and interleaved layouts (INFO['rope_layouts'])")
    rng = np.random.default_rng(3)
    angles = rng.uniform(-np.pi, np.pi, (6, 4))
    cos, sin = np.cos(angles), np.sin(angles)
    x, pos, perm = rng.standard_normal((3, 8)), np.array([5, 0, 2]), layout_perm(8)
    rope = {"rope_type": "default", "rope_theta": 1e4, "head_dim": 8}
    half = rotate(x[:, perm], pos, cos, sin, {**rope, "layout": "half"})
    inter = rotate(x, pos, cos, sin, {**rope, "layout": "interleaved"})
    _assert_rotation(half, inter[:, perm], x, 1.0, impl, "apply_half(P x) vs P apply_interleaved(x)")
