"""``refpos check alibi / t5 / sinusoid`` block by block: the whole-array verdict, on memory maps, and the
diagnosis on a bounded sample of a large table."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refpos import parallel
from refpos.check.shared import stream
from refpos.check.tables import common as tables_common
from refpos.check.tables.alibi import check_alibi, naive_slopes
from refpos.check.tables.buckets import relative_grid
from refpos.check.tables.sinusoid import check_sinusoid
from refpos.check.tables.t5 import check_t5
from refpos.encodings import alibi_bias, alibi_slopes, sinusoidal_frequencies, t5_bucket
from refpos.encodings.sinusoidal import sinusoidal
from refpos.golden.exact import tolerance as tol
from refpos.golden.exact.compare import compare
from refpos.golden.files.npy import npy_bytes, read_npy

KEYS = ("ok", "max_abs_error", "max_ratio", "worst_index", "n_outside", "n")


def _ids(result):
    return [d["id"] for d in result["diagnosis"]]


def _whole(candidate, reference, atol):
    """One comparison of the whole arrays: what the blocks must reproduce."""
    summary = compare(candidate, reference, atol=atol, equal_nan=True).summary()
    summary["worst_index"] = summary["worst_index"] or []
    return {key: summary[key] for key in KEYS}


def _perturb(a, rng, count):
    """``a`` with ``count`` entries moved far outside any tolerance (and one NaN)."""
    out = np.array(a, dtype=np.float64)
    for _ in range(count):
        out[tuple(int(rng.integers(0, n)) for n in out.shape)] += rng.choice([-1.0, 1.0]) * 10.0 ** rng.integers(-3, 1)
    return out


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few entries, on 3 threads: every table is cut in many blocks merged in any order."""
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", 7)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)
    monkeypatch.setenv("REFPOS_THREADS", "3")


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 1), (1, 5), (4, 4), (3, 9), (0, 3), (2, 0), (0, 0)])
def test_relative_grid_is_the_grid_without_its_memory(q_len, k_len):
    grid = relative_grid(q_len, k_len)
    want = np.arange(k_len)[None, :] - (k_len - q_len + np.arange(q_len))[:, None]  # (Tq, Tk)
    assert grid.shape == (q_len, k_len)
    np.testing.assert_array_equal(grid, want.reshape(q_len, k_len))
    if q_len and k_len:
        low, high = np.lib.array_utils.byte_bounds(grid)
        assert not grid.flags.writeable and high - low == (q_len + k_len - 1) * grid.itemsize  # one line


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5), q_len=st.integers(1, 6), extra=st.integers(0, 4),
       form=st.sampled_from(["causal", "symmetric", "key_index"]), wrong=st.integers(0, 3),
       dtype=st.sampled_from(["float32", "float64"]))
def test_blockwise_alibi_equals_one_comparison(seed, n, q_len, extra, form, wrong, dtype):
    rng = np.random.default_rng(seed)
    k_len = q_len + extra
    reference = np.asarray(alibi_bias(n, q_len, k_len, form=form, xp="numpy"))
    candidate = _perturb(reference, rng, wrong)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(stream, "BLOCK_ELEMENTS", int(rng.integers(1, 30)))
        monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)
        monkeypatch.setenv("REFPOS_THREADS", "3")
        got = check_alibi(candidate, n, q_len=q_len, k_len=k_len, form=form, dtype=dtype)
    assert {key: got[key] for key in KEYS} == _whole(candidate, reference,
                                                     np.asarray(tol.value_tolerance(dtype, reference)))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.sampled_from([(9,), (4, 7), (2, 3, 5), ()]),
       bidirectional=st.booleans(), wrong=st.integers(0, 3))
def test_blockwise_t5_equals_one_comparison(seed, shape, bidirectional, wrong):
    rng = np.random.default_rng(seed)
    rel = rng.integers(-300, 300, size=shape)
    reference = np.asarray(t5_bucket(rel, bidirectional=bidirectional))
    candidate = reference.copy()
    for _ in range(wrong if candidate.size else 0):
        candidate[tuple(int(rng.integers(0, n)) for n in shape)] += int(rng.integers(1, 5))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(stream, "BLOCK_ELEMENTS", int(rng.integers(1, 30)))
        got = check_t5(candidate, rel, bidirectional=bidirectional)
    assert {key: got[key] for key in KEYS} == _whole(candidate.astype(np.float64), reference.astype(np.float64),
                                                     np.zeros(reference.shape))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.sampled_from([(7,), (3, 5), (2, 2, 3)]), dim=st.sampled_from([2, 8]),
       layout=st.sampled_from(["interleaved", "concat"]), wrong=st.integers(0, 3),
       dtype=st.sampled_from(["float32", "float64"]))
def test_blockwise_sinusoid_equals_one_comparison(seed, shape, dim, layout, wrong, dtype):
    rng = np.random.default_rng(seed)
    positions = rng.integers(0, 100_000, size=shape)
    reference = np.asarray(sinusoidal(positions, dim, layout=layout))
    candidate = _perturb(reference, rng, wrong)
    freqs = np.asarray(sinusoidal_frequencies(dim, xp="numpy"))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(stream, "BLOCK_ELEMENTS", int(rng.integers(1, 30)))
        got = check_sinusoid(candidate, positions, dim=dim, layout=layout, dtype=dtype)
    want = _whole(candidate, reference, np.asarray(tol.rope_tolerance(dtype, positions, freqs, reference=reference)))
    assert {key: got[key] for key in KEYS} == want


def test_the_equality_tests_see_a_dropped_block(monkeypatch, small_blocks):
    """Meta: a blockwise check that skips its last block reports fewer entries and misses what is there."""
    reference = np.asarray(alibi_bias(3, 4, 6, xp="numpy"))
    candidate = reference.copy()
    candidate[-1, -1, -1] += 1.0  # wrong in the last block only
    whole = _whole(candidate, reference, np.asarray(tol.value_tolerance("float64", reference)))
    original = stream.run_blocks
    monkeypatch.setattr(stream, "run_blocks", lambda blocks, **kw: original(blocks[:-1], **kw))
    got = check_alibi(candidate, 3, q_len=4, k_len=6)
    assert {key: got[key] for key in KEYS} != whole
    assert got["ok"] and got["n"] < whole["n"]


def test_memory_mapped_tables_are_checked_in_blocks(tmp_path, monkeypatch, small_blocks):
    """The candidates stay memory maps (the check reads them block by block) and give the in-memory verdict."""
    reference = np.asarray(alibi_bias(4, 6, 8, xp="numpy")).astype(np.float32)
    (tmp_path / "bias.npy").write_bytes(npy_bytes(reference))
    mapped = read_npy(tmp_path / "bias.npy", mmap=True)
    assert isinstance(mapped, np.memmap)
    seen = []
    original = stream.block_error
    monkeypatch.setattr(stream, "block_error", lambda c, r: seen.append(c.size) or original(c, r))
    assert check_alibi(mapped, 4, q_len=6, k_len=8)["ok"]
    assert len(seen) > 1 and max(seen) < reference.size  # never the whole table at once
    rel = relative_grid(5, 9)
    buckets = np.asarray(t5_bucket(np.ascontiguousarray(rel)))
    (tmp_path / "buckets.npy").write_bytes(npy_bytes(buckets))
    assert check_t5(read_npy(tmp_path / "buckets.npy", mmap=True), rel)["ok"]


def test_a_large_wrong_table_is_diagnosed_on_a_sample(monkeypatch):
    """Past SAMPLE_ELEMENTS the diagnosis works on a part of the table and says how many rows."""
    monkeypatch.setattr(tables_common, "SAMPLE_ELEMENTS", 40)
    n, q_len, k_len = 6, 12, 12
    base = np.asarray(alibi_bias(1, q_len, k_len, xp="numpy"))[0] / float(alibi_slopes(1, xp="numpy")[0])
    closed_form = naive_slopes(n)[:, None, None] * base  # (n, Tq, Tk): the closed-form slopes
    result = check_alibi(closed_form, n, q_len=q_len, k_len=k_len)
    assert "alibi_closed_form_slopes" in _ids(result) and result["diagnosis_rows"] < q_len
    rel = relative_grid(40, 40)
    flipped = check_t5(np.asarray(t5_bucket(-np.ascontiguousarray(rel))), rel)
    assert "t5_sign_flip" in _ids(flipped) and flipped["diagnosis_rows"] < 40
    positions = np.arange(0, 4000, 7)
    concat = np.asarray(sinusoidal(positions, 16, layout="concat"))
    swapped = check_sinusoid(concat, positions, dim=16)
    assert "sinusoid_layout_swap" in _ids(swapped) and swapped["diagnosis_rows"] < positions.size
    float32 = check_sinusoid(np.asarray(sinusoidal(positions, 16)).astype(np.float32), positions, dim=16,
                             dtype="float64")
    assert _ids(float32)[0] == "float32_angles"


def test_the_error_profile_of_a_table(small_blocks):
    """Wrong from query 5 on: the profile says where the error starts."""
    reference = np.asarray(alibi_bias(2, 16, 16, xp="numpy"))
    candidate = reference.copy()
    candidate[:, 5:, :] *= 1.01
    profile = check_alibi(candidate, 2, q_len=16, k_len=16)["error_profile"]
    assert profile["first_bad_position"] == 5 and profile["fine_below"] == 4


def test_cli_checks_t5_from_lengths_and_memory_maps(tmp_path, capsys):
    from refpos.cli import main

    rel = relative_grid(6, 10)
    (tmp_path / "b.npy").write_bytes(npy_bytes(np.asarray(t5_bucket(-np.ascontiguousarray(rel)))))
    assert main(["check", "t5", "--candidate", str(tmp_path / "b.npy"), "--q-len", "6", "--k-len", "10",
                 "--json"]) == 1
    assert "t5_sign_flip" in _ids(json.loads(capsys.readouterr().out))
