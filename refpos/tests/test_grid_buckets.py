"""refpos.encodings.grid_buckets: the rows a NaViT-style tower reads, as properties of the math (each shown failing
on a wrong reading), its batches, its ties, and bad input refused by name. The rows are gathered: every
comparison is exact."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.grid import resample_position_table
from refpos.encodings.grid_buckets import (
    bucket_rows,
    bucket_ties,
    bucketed_position_ids,
    bucketed_positions_packed,
    bucketed_positions_padded,
    position_id_choices,
    read_buckets,
)
from refpos.encodings.grid_variants import GRID_VARIANTS

sides, counts = st.integers(1, 40), st.integers(1, 90)


def by_definition(n: int, m: int) -> list[int]:
    """``#{k ∈ 1 … M−1 : k/M ≤ i/n}`` in rationals: torch.bucketize(right=True) of i/n against 1/M, 2/M, …"""
    return [sum(Fraction(k, m) <= Fraction(i, n) for k in range(1, m)) for i in range(n)]


def centred(n: int, m: int) -> list[int]:
    """A wrong reading: the row under each patch's centre."""
    return [min(m - 1, math.floor((i + 0.5) * m / n)) for i in range(n)]


@given(n=counts, m=sides)
def test_rows_are_the_buckets_of_the_fractions(n, m):
    assert bucket_rows(n, m) == by_definition(n, m)


def test_the_definition_catches_a_centred_reading():
    assert any(centred(n, m) != by_definition(n, m) for n in range(1, 12) for m in range(1, 12))


@given(m=sides, seed=st.integers(0, 2**16))
def test_the_native_grid_reads_the_table_unchanged(m, seed):
    table = np.random.default_rng(seed).standard_normal((m * m, 3))
    np.testing.assert_array_equal(to_numpy(bucketed_positions_packed(table, [(m, m)])), table)


@given(m=st.integers(1, 8), r=st.integers(1, 4))
def test_an_r_times_finer_grid_repeats_each_row_r_times(m, r):
    assert bucket_rows(r * m, m) == [i // r for i in range(r * m)]
    wrong = bucket_rows(r * m, m, at_ties="below")  # a port whose ties read below: the property fails
    assert r == 1 or m == 1 or wrong != [i // r for i in range(r * m)]


@given(n=counts, m=sides)
def test_ties_are_where_the_row_below_differs(n, m):
    exact, below = bucket_rows(n, m), bucket_rows(n, m, at_ties="below")
    assert [a != b for a, b in zip(exact, below, strict=True)] == bucket_ties(n, m)
    assert all(a - b in (0, 1) for a, b in zip(exact, below, strict=True))


@given(h=st.integers(1, 9), w=st.integers(1, 9), m=st.integers(1, 7))
def test_choices_hold_the_exact_row_first_and_each_axis_on_its_own(h, w, m):
    exact = bucketed_position_ids((h, w), (m, m))
    choices = position_id_choices((h, w), (m, m))
    assert [c[0] for c in choices] == exact
    ties = [a + b for a in bucket_ties(h, m) for b in bucket_ties(w, m)]
    assert [len(c) for c in choices] == [2 ** t for t in ties]


def test_read_buckets_is_the_gather_of_the_ids():
    grid = np.random.default_rng(1).standard_normal((4, 6, 2))
    out = to_numpy(read_buckets(grid, (3, 10)))
    ids = bucketed_position_ids((3, 10), (4, 6))
    np.testing.assert_array_equal(out.reshape(-1, 2), grid.reshape(-1, 2)[ids])


def test_padded_batch_reads_each_image_in_its_corner_and_row_0_elsewhere():
    table = np.random.default_rng(2).standard_normal((25, 3))
    out = to_numpy(bucketed_positions_padded(table, [(5, 5), (3, 4)], (5, 5)))
    np.testing.assert_array_equal(out[0], table)
    frame = out[1].reshape(5, 5, 3)
    single = to_numpy(bucketed_positions_packed(table, [(3, 4)])).reshape(3, 4, 3)
    np.testing.assert_array_equal(frame[:3, :4], single)
    assert (frame[3:] == table[0]).all() and (frame[:, 4:] == table[0]).all()


def test_packed_batch_is_the_images_one_after_another():
    table = np.random.default_rng(3).standard_normal((16, 2))
    both = to_numpy(bucketed_positions_packed(table, [(2, 3), (5, 4)]))
    parts = [to_numpy(bucketed_positions_packed(table, [size])) for size in ((2, 3), (5, 4))]
    np.testing.assert_array_equal(both, np.concatenate(parts))


@pytest.mark.parametrize("name", ["buckets_padded", "buckets_packed"])
def test_the_records_read_buckets_through_resample_position_table(name):
    table = np.random.default_rng(4).standard_normal((36, 2))
    out = to_numpy(GRID_VARIANTS[name].resample(table, (4, 9)))
    np.testing.assert_array_equal(out, table[bucketed_position_ids((4, 9), (6, 6))])


def test_bad_input_is_refused_by_name():
    table = np.zeros((16, 2))
    with pytest.raises(ValueError, match="read 'buckets'"):
        resample_position_table(table, (3, 3), mode="bicubic", read="buckets")
    with pytest.raises(ValueError, match="read"):
        resample_position_table(table, (3, 3), mode="nearest", read="gather")
    with pytest.raises(ValueError, match="at_ties"):
        bucket_rows(3, 3, at_ties="above")
    with pytest.raises(ValueError, match="table"):
        bucketed_positions_packed(np.zeros((15, 2)), [(3, 3)])
    with pytest.raises(TypeError, match=r"sizes\[0\]"):
        bucketed_positions_packed(table, [3])
    with pytest.raises(ValueError, match="frame"):
        bucketed_positions_padded(table, [(5, 2)], (4, 4))
    with pytest.raises(ValueError, match="n"):
        bucket_rows(0, 3)
