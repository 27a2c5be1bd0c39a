"""``refpos check`` block by block: the same answer as one comparison of the whole arrays, on memory maps,
with the error against the position in bins.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refpos
from refpos import parallel
from refpos.check.rope import run as check_run
from refpos.check.rope.run import check_rope
from refpos.check.shared import stream
from refpos.check.shared.stream import sample_rows
from refpos.golden.exact.compare import compare


def _whole(candidate, reference, atol):
    return compare(candidate, reference, atol=atol, equal_nan=True).summary()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lead=st.integers(1, 4), t=st.integers(1, 9), d=st.integers(1, 5),
       block=st.integers(1, 40), specials=st.integers(0, 6), zero_atol=st.booleans())
def test_blockwise_tally_equals_one_comparison(seed, lead, t, d, block, specials, zero_atol):
    """Any block size: ok, the errors, the worst index and the count outside equal the one comparison's
    (equal NaNs agree, one NaN fails, an exact match with atol 0 passes, a NaN tolerance never passes)."""
    rng = np.random.default_rng(seed)
    reference = rng.standard_normal((lead, t, d))
    candidate = reference + rng.standard_normal(reference.shape) * 10.0 ** rng.integers(-12, -1, reference.shape)
    atol = np.full(reference.shape, 1e-6)
    for _ in range(specials):
        i = tuple(int(rng.integers(0, n)) for n in reference.shape)
        kind = rng.integers(0, 5)
        if kind == 0:
            candidate[i] = reference[i] = np.nan
        elif kind == 1:
            candidate[i] = np.nan
        elif kind == 2:
            candidate[i] = reference[i] = np.inf
        elif kind == 3:
            candidate[i] = -np.inf
        else:
            atol[i] = np.nan
    if zero_atol:
        atol[..., 0] = 0.0
        candidate[..., 0] = reference[..., 0]
    positions = np.broadcast_to(np.arange(t), (lead, t))

    def reference_of(leading, rows):
        return reference[leading, rows], atol[leading, rows]

    with pytest.MonkeyPatch.context() as monkeypatch:  # blocks on 3 threads, merged in any order
        monkeypatch.setenv("REFPOS_THREADS", "3")
        monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)
        tally = stream.compare_rows(candidate, positions, reference_of, block_elements=block)
    got, want = tally.summary(), _whole(candidate, reference, atol)
    assert got["ok"] == want["ok"] and got["n_outside"] == want["n_outside"] and got["n"] == want["n"]
    assert got["max_abs_error"] == want["max_abs_error"] and got["max_ratio"] == want["max_ratio"]
    assert got["worst_index"] == want["worst_index"]


def test_the_tally_fails_on_a_comparison_that_drops_nans(monkeypatch):
    """Meta: an error that lets a lone NaN pass (NaN compared as 0) is caught by the equality above."""
    def lenient(candidate, reference):
        return np.nan_to_num(np.abs(candidate - reference), nan=0.0)

    monkeypatch.setattr(stream, "block_error", lenient)
    reference = np.zeros((1, 2, 2))
    candidate = reference.copy()
    candidate[0, 1, 1] = np.nan
    atol = np.full(reference.shape, 1e-6)
    tally = stream.compare_rows(candidate, np.zeros((1, 2), dtype=np.int64), lambda a, b: (reference[a, b], atol[a, b]))
    assert tally.summary()["ok"] != _whole(candidate, reference, atol)["ok"]


def _llama():
    return refpos.RopeConfig(head_dim=16, theta=500000.0)


def test_memory_mapped_inputs_give_the_same_result_as_arrays_in_memory(tmp_path, monkeypatch):
    rope = _llama()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 700, 16)).astype(np.float32)
    positions = np.arange(700) * 13
    y = np.asarray(refpos.apply_rope(x, positions, rope))
    y[1, 0, 650, 3] += 1e-2  # one wrong entry
    paths = {}
    for name, array in (("x", x), ("y", y)):
        paths[name] = tmp_path / f"{name}.npy"
        mapped = np.lib.format.open_memmap(paths[name], mode="w+", dtype=array.dtype, shape=array.shape)
        mapped[...] = array
        mapped.flush()
    x_map, y_map = (np.load(paths[n], mmap_mode="r", allow_pickle=False) for n in ("x", "y"))
    whole = check_rope(y, x, positions, rope)
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", 16 * 100)  # 100 rows per block: 7 blocks per leading index
    blocks = []
    streamed = check_rope(y_map, x_map, positions, rope, progress=lambda done, total: blocks.append((done, total)))
    for key in ("ok", "max_abs_error", "max_ratio", "worst_index", "n_outside", "n", "error_profile"):
        assert streamed[key] == whole[key], key
    assert streamed["worst_index"] == [1, 0, 650, 3]
    assert len(blocks) == 6 * 7 and blocks[-1] == (y.size, y.size)


def test_the_error_profile_shows_where_the_error_starts():
    """A scaling bug's shape: right below 8192, wrong from 8192 on (one bin per power of two)."""
    rope = _llama()
    positions = np.arange(0, 20000, 7)
    x = np.random.default_rng(1).standard_normal((positions.size, 16))
    y = np.asarray(refpos.apply_rope(x, positions, rope))
    late = positions >= 8192
    y[late] = np.asarray(refpos.apply_rope(x[late], positions[late] + 1, rope))
    result = check_rope(y, x, positions, rope)
    profile = result["error_profile"]
    assert not result["ok"]
    assert profile["first_bad_position"] == int(positions[late][0])
    assert profile["fine_below"] == 8192
    bins = {b["from"]: b for b in profile["bins"]}
    assert bins[4096]["rows_outside"] == 0 and bins[8192]["rows_outside"] == bins[8192]["rows"]
    assert "fine below position 8192" in next(d for d in result["diagnosis"] if d["id"] == "error_profile")["evidence"]
    assert check_rope(np.asarray(refpos.apply_rope(x, positions, rope)), x, positions, rope)["error_profile"][
        "first_bad_position"] is None


def test_a_large_check_diagnoses_on_a_sample_that_holds_the_smallest_positions(monkeypatch):
    monkeypatch.setattr(check_run, "SAMPLE_ROWS", 200)
    rope = _llama()
    positions = np.arange(1000)
    x = np.random.default_rng(2).standard_normal((2, 1000, 16))
    y = np.asarray(refpos.apply_rope(x, np.maximum(positions - 1, 0), rope))  # positions p − 1
    result = check_rope(y, x, positions, rope)
    assert result["diagnosis_rows"] <= 200 + 1
    assert "position_offset" in [d["id"] for d in result["diagnosis"]]
    lead, token = sample_rows(np.broadcast_to(positions, (2, 1000)), (1, 999), limit=200)
    assert {0, 1} <= set(token.tolist()) and (1, 999) in set(zip(lead.tolist(), token.tolist(), strict=True))


def test_non_finite_entries_are_counted_across_blocks(monkeypatch):
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", 16 * 10)
    rope = _llama()
    positions = np.arange(100)
    x = np.random.default_rng(3).standard_normal((100, 16))
    y = np.asarray(refpos.apply_rope(x, positions, rope))
    y[[5, 55, 95], 0] = [np.nan, np.inf, np.nan]
    result = check_rope(y, x, positions, rope)
    entry = next(d for d in result["diagnosis"] if d["id"] == "non_finite")
    assert entry["evidence"].startswith("3 of 1600 values") and "first at position 5" in entry["evidence"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_streaming_tolerance_is_the_per_element_rule(dtype):
    """The blocks use refpos.golden.exact.tolerance.rope_tolerance with each element's pair size: a candidate
    just inside it passes, just outside fails."""
    rope = _llama()
    positions = np.array([0, 1, 1000, 100000])
    x = np.random.default_rng(4).standard_normal((4, 16))
    y = np.asarray(refpos.apply_rope(x, positions, rope))
    from refpos.check.rope.problem import pair_magnitude
    from refpos.golden.exact import tolerance as tol
    from refpos.rope.forms import pair_channels

    w, a = refpos.rope_frequencies(rope, seq_len=100001, xp="numpy")
    atol = np.asarray(tol.rope_tolerance(dtype, positions, np.asarray(w), reference=y,
                                         magnitude=pair_magnitude(x, pair_channels(rope), float(a))))
    inside, outside = y + 0.5 * atol, y.copy()
    outside[3, 2] += 1.5 * atol[3, 2]
    assert check_rope(inside, x, positions, rope, dtype=dtype)["ok"]
    assert not check_rope(outside, x, positions, rope, dtype=dtype)["ok"]


@pytest.mark.parametrize(("layout", "placement", "rotary"), [("half", "first", 16), ("interleaved", "last", 8),
                                                             ("deinterleaved", "last", 4), ("half", "first", 6)])
def test_pair_sizes_from_slices_equal_those_from_index_lists(layout, placement, rotary):
    """The blocks size the tolerance from channel slices (pass-through |x| outside the span only); the
    diagnosis from index lists: the same numbers."""
    from refpos.check.rope.problem import pair_magnitude
    from refpos.rope.core import rope_pair_slices, rope_span
    from refpos.rope.forms import pair_channels

    rope = refpos.RopeConfig(head_dim=16, rotary_dim=rotary, layout=layout, placement=placement)
    x = np.random.default_rng(5).standard_normal((3, 16))
    np.testing.assert_array_equal(pair_magnitude(x, rope_pair_slices(rope, *rope_span(rope)), 1.5),
                                  pair_magnitude(x, pair_channels(rope), 1.5))


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize(("layout", "placement", "rotary"), [("half", "first", 16), ("interleaved", "last", 8),
                                                             ("deinterleaved", "last", 4), ("half", "first", 6)])
@pytest.mark.parametrize("special", [None, np.inf, np.nan])
def test_tolerance_per_pair_is_the_per_element_rule(dtype, layout, placement, rotary, special):
    """The blocks compute the float32/float64 tolerance once per pair: the same bits as rope_tolerance on
    the per-element sizes (bfloat16 keeps the per-element rule, its ulp term depends on the output), an
    infinite or NaN input included (the general rule's NaN tolerance there)."""
    from refpos.check.rope.problem import pair_magnitude, rotated_tolerance
    from refpos.golden.exact import tolerance as tol
    from refpos.rope.core import rope_pair_slices, rope_span

    rope = refpos.RopeConfig(head_dim=16, rotary_dim=rotary, layout=layout, placement=placement)
    x = np.random.default_rng(6).standard_normal((2, 5, 16)) * np.logspace(-3, 3, 16)
    if special is not None:
        x[1, 2, 0] = x[0, 3, 15] = special
    positions = np.array([[0, 1, 7, 4096, 131071]] * 2)
    inv_freq, _ = refpos.rope_frequencies(rope, xp="numpy")
    with np.errstate(invalid="ignore"):
        y = np.asarray(refpos.apply_rope(x, positions, rope))
    channels = rope_pair_slices(rope, *rope_span(rope))
    with np.errstate(invalid="ignore"):  # 0·inf in the general rule's storage term: its NaN tolerance
        want = tol.rope_tolerance(dtype, positions, np.asarray(inv_freq), reference=y,
                                  magnitude=pair_magnitude(x, channels, 1.25))
        got = rotated_tolerance(dtype, positions, np.asarray(inv_freq), x, channels, 1.25, y)
    np.testing.assert_array_equal(got, want)


def test_memory_mapped_reading_is_as_strict_as_reading(tmp_path):
    """read_npy(mmap=True) checks the same header (pickles, Fortran order, truncation refused) and maps
    the data without reading them; the values equal read_npy's, big-endian files included."""
    from refpos.golden.files.npy import NpyError, npy_bytes, read_npy

    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    good = tmp_path / "a.npy"
    good.write_bytes(npy_bytes(a))
    mapped = read_npy(good, mmap=True)
    assert isinstance(mapped, np.memmap) and not mapped.flags.writeable
    np.testing.assert_array_equal(mapped, read_npy(good))
    big = tmp_path / "big.npy"
    np.save(big, a.astype(">f4"))
    np.testing.assert_array_equal(read_npy(big, mmap=True), a)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "f.npy", np.asfortranarray(np.ones((2, 3))))
    (tmp_path / "short.npy").write_bytes(npy_bytes(a)[:-5])
    for name, reason in (("obj.npy", "not accepted"), ("f.npy", "Fortran"), ("short.npy", "truncated")):
        with pytest.raises(NpyError, match=reason):
            read_npy(tmp_path / name, mmap=True)
