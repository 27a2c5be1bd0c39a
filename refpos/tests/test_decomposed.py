"""refpos.encodings.decomposed: the properties of decomposed relative positions, each shown failing on a wrong way.

Terms are sums of C O(1) products in float64 (atol 1e-12).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.decomposed import (
    add_decomposed_rel_pos,
    decomposed_rel_pos_index,
    decomposed_rel_pos_table,
    decomposed_rel_pos_terms,
)

ATOL = 1e-12
sides = st.integers(1, 24)


def _index(q, k, **options):
    return to_numpy(decomposed_rel_pos_index(q, k, xp=np, **options))


def _ratio_missing(q, k):
    """The coordinates unscaled: ``i − j + k − 1`` (the q/k ratio left out)."""
    return np.arange(q)[:, None] - np.arange(k)[None, :] + (k - 1)


def _absolute(q, k):
    """A row per (query, key) pair that is not a function of their offset."""
    return np.arange(q)[:, None] + np.arange(k)[None, :]


def colocated_pairs_read_the_zero_offset_row(index, q, k):
    """A query and a key over the same place of the image (``i/q = j/k``) read the row of offset zero,
    ``⌊(k − 1)·max(q/k, 1)⌋``."""
    centre = ((k - 1) * max(q, k)) // k
    pairs = [(i, j) for i in range(q) for j in range(k) if i * k == j * q]
    return all(int(index[i, j]) == centre for i, j in pairs)


@given(q=sides, k=sides, arithmetic=st.sampled_from(["exact", "float32"]))
def test_colocated_query_and_key_read_the_zero_offset_row(q, k, arithmetic):
    """The coordinates are scaled to the longer grid; the index stays in ``[0, 2·max(q, k) − 1)``, monotone."""
    index = _index(q, k, index_arithmetic=arithmetic)
    if arithmetic == "exact":
        assert colocated_pairs_read_the_zero_offset_row(index, q, k)
    assert int(index[0, k - 1]) == 0 and index.max() <= 2 * max(q, k) - 2
    assert np.all(np.diff(index, axis=0) >= 0) and np.all(np.diff(index, axis=1) <= 0)


def test_colocation_fails_with_the_ratio_missing():
    assert colocated_pairs_read_the_zero_offset_row(_index(8, 4), 8, 4)
    assert not colocated_pairs_read_the_zero_offset_row(_ratio_missing(8, 4), 8, 4)


def depends_only_on_the_offset(index):
    """Equal offsets ``i − j`` read equal rows."""
    q, k = index.shape
    offsets = np.arange(q)[:, None] - np.arange(k)[None, :]
    return all(len(set(index[offsets == d].tolist())) == 1 for d in np.unique(offsets))


@given(n=sides, arithmetic=st.sampled_from(["exact", "float32"]))
def test_with_equal_grids_the_row_depends_only_on_the_offset(n, arithmetic):
    index = _index(n, n, index_arithmetic=arithmetic)
    assert depends_only_on_the_offset(index)
    np.testing.assert_array_equal(index, np.arange(n)[:, None] - np.arange(n)[None, :] + n - 1)


def test_offset_dependence_fails_on_an_absolute_row():
    assert not depends_only_on_the_offset(_absolute(5, 5))


@given(n=st.integers(1, 10), seed=st.integers(0, 2**16))
def test_the_term_is_shift_invariant_for_a_shared_query(n, seed):
    """With one query vector everywhere and tables of 2n − 1 rows, ``T[y, x, y', x']`` depends on
    ``(y − y', x − x')`` alone: the relative bias depends only on the offset."""
    rng = np.random.default_rng(seed)
    q = np.broadcast_to(rng.standard_normal(4), (n * n, 4))
    rel_h, rel_w = rng.standard_normal((2 * n - 1, 4)), rng.standard_normal((2 * n - 1, 4))
    terms = to_numpy(decomposed_rel_pos_terms(q, rel_h, rel_w, (n, n), (n, n)))
    if n > 1:
        np.testing.assert_allclose(terms[1:, 1:, 1:, 1:], terms[:-1, :-1, :-1, :-1], atol=ATOL)


@given(q=sides, k=sides)
def test_exact_and_float32_agree_for_equal_grids_and_stay_within_one_row(q, k):
    exact, rounded = _index(q, k), _index(q, k, index_arithmetic="float32")
    if q == k:
        np.testing.assert_array_equal(exact, rounded)
    assert np.all((exact - rounded >= 0) & (exact - rounded <= 1))  # float32 truncation can only fall below


@given(n=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_a_table_of_the_right_length_is_read_as_it_is(n, seed):
    table = np.random.default_rng(seed).standard_normal((2 * n - 1, 3))
    rows = to_numpy(decomposed_rel_pos_table(n, n, table))
    np.testing.assert_array_equal(rows, table[_index(n, n)])


def test_a_longer_table_is_resampled_not_cut():
    """27 rows (pretrained on 14 × 14 windows) read by a 7 × 7 grid: the rows come from the resampled 13-row table,
    not from the first 13 rows."""
    table = np.random.default_rng(0).standard_normal((27, 2))
    rows = to_numpy(decomposed_rel_pos_table(7, 7, table))
    assert not np.allclose(rows, table[_index(7, 7)], atol=1e-3)
    np.testing.assert_allclose(rows[0, 0], table[13], atol=ATOL)  # offset 0 reads the middle row in both


def test_add_decomposed_rel_pos_is_the_terms_added_in_raster_order():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 12, 4))  # batch, heads, 3 × 4 grid, channels
    attn = rng.standard_normal((2, 3, 12, 6))
    rel_h, rel_w = rng.standard_normal((5, 4)), rng.standard_normal((7, 4))
    out = to_numpy(add_decomposed_rel_pos(attn, q, rel_h, rel_w, (3, 4), (2, 3)))
    terms = to_numpy(decomposed_rel_pos_terms(q, rel_h, rel_w, (3, 4), (2, 3)))
    np.testing.assert_allclose(out, attn + terms.reshape(2, 3, 12, 6), atol=ATOL)
    h, w = to_numpy(decomposed_rel_pos_table(3, 2, rel_h)), to_numpy(decomposed_rel_pos_table(4, 3, rel_w))
    y, x, yk, xk = 2, 1, 1, 2
    expected = q[0, 0, y * 4 + x] @ (h[y, yk] + w[x, xk])
    np.testing.assert_allclose(terms[0, 0, y, x, yk, xk], expected, atol=ATOL)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: decomposed_rel_pos_index(0, 3), "q_size"),
    (lambda: decomposed_rel_pos_index(3, 3, index_arithmetic="float16"), "index_arithmetic"),
    (lambda: decomposed_rel_pos_table(3, 3, np.zeros(5)), "rel_pos"),
    (lambda: decomposed_rel_pos_terms(np.zeros((6, 2)), np.zeros((5, 2)), np.zeros((5, 2)), (2, 2), (2, 2)), "q"),
    (lambda: decomposed_rel_pos_terms(np.zeros((4, 2)), np.zeros((3, 3)), np.zeros((3, 2)), (2, 2), (2, 2)),
     "channels"),
    (lambda: decomposed_rel_pos_terms(np.zeros((4, 2)), np.zeros((3, 2)), np.zeros((3, 2)), 4, (2, 2)), "q_size"),
    (lambda: add_decomposed_rel_pos(np.zeros((4, 5)), np.zeros((4, 2)), np.zeros((3, 2)), np.zeros((3, 2)), (2, 2),
                                    (2, 2)), "attn"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


@pytest.mark.parametrize("arithmetic", ["exact", "float32"])
def test_the_terms_run_on_the_current_backend(xp, arithmetic):
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((2, 24, 3)), rng.standard_normal((9, 3)), rng.standard_normal((11, 3))]
    options = {"q_size": (6, 4), "k_size": (3, 8), "index_arithmetic": arithmetic}
    on_backend = to_numpy(decomposed_rel_pos_terms(*(xp.asarray(a) for a in arrays), **options))
    np.testing.assert_allclose(on_backend, to_numpy(decomposed_rel_pos_terms(*arrays, **options)), atol=ATOL)
