"""The table cache (refpos.rope.table_cache) never serves a stale or changed table and holds what its cap allows.

* Correct: a key holds the exact bytes of everything the tables are computed from, so changing any one byte
  of the positions, of ω or of A (or their shapes, dtypes, the M-RoPE sections) gives the tables of the new
  inputs, bit for bit; x's dtype, layout and placement, which the tables do not depend on, change nothing.
* Bounded: the bytes held (tables and keys) never exceed ``REFPOS_TABLE_CACHE`` MiB; the least recently used
  entries leave first; ``0`` turns it off.
* Unchangeable: NumPy tables are read-only views; what ``rope_cos_sin`` returns is the caller's own.
* Safe on refpos's threads and per backend.
"""

from __future__ import annotations

import importlib
import struct
import threading
import warnings

import array_api_strict
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos import parallel
from refpos.backend import to_numpy

table_cache = importlib.import_module("refpos.rope.table_cache")
core = importlib.import_module("refpos.rope.core")

ROPE = refpos.RopeConfig(head_dim=16)
MROPE = refpos.RopeConfig(head_dim=16, mrope_section=(2, 3, 3))


@pytest.fixture(autouse=True)
def empty_caches():
    """Each test starts from empty caches and leaves none of its tables behind."""
    table_cache.clear_caches()
    yield
    table_cache.clear_caches()


def _inputs(seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 100_000, size=(2, 6)), 10000.0 ** (-np.arange(8) / 8), 1.0 + rng.random()


def _uncached(positions, inv_freq, factor, rope=ROPE) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():  # a mutated ω may be inf or NaN: cos(inf) is NaN, with a RuntimeWarning
        warnings.simplefilter("ignore", RuntimeWarning)
        return core.rope_pair_tables(positions, inv_freq, factor, rope)


def _cached(positions, inv_freq, factor, rope=ROPE) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return table_cache.cached_pair_tables(core.rope_pair_tables, positions, inv_freq, factor, rope)


def _same_bits(got: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> bool:
    """Equal shapes and bytes (-0.0 is not 0.0 and NaN payloads count, as in the key)."""
    return all(a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
               for a, b in zip(got, expected, strict=True))


def _mutated(array: np.ndarray, index: int, value: int) -> np.ndarray:
    raw = bytearray(np.ascontiguousarray(array).tobytes())
    raw[index % len(raw)] = value
    return np.frombuffer(bytes(raw), dtype=array.dtype).reshape(array.shape).copy()


# ------------------------------------------------------------------------------------------- correct
@given(seed=st.integers(0, 2**32 - 1), part=st.sampled_from(["positions", "inv_freq", "factor"]),
       index=st.integers(0, 2**16), value=st.integers(0, 255))
def test_one_byte_changed_in_any_key_part_never_serves_the_old_table(seed, part, index, value):
    """The original inputs are cached first; then one byte of the positions, of ω or of A's float64 is set to
    another value: the cache gives the new inputs' tables (as computed without it), and the old ones still
    give the old tables."""
    table_cache.clear_caches()
    positions, inv_freq, factor = _inputs(seed)
    original = _cached(positions, inv_freq, factor)
    if part == "positions":
        positions = _mutated(positions, index, value)
    elif part == "inv_freq":
        inv_freq = _mutated(inv_freq, index, value)
    else:
        raw = bytearray(struct.pack("<d", factor))
        raw[index % 8] = value
        factor = struct.unpack("<d", bytes(raw))[0]
    assert _same_bits(_cached(positions, inv_freq, factor), _uncached(positions, inv_freq, factor))
    assert _same_bits(_cached(*_inputs(seed)), original)


def test_shape_dtype_and_sections_are_part_of_the_key():
    """The same bytes under another shape or dtype, and the same positions under other M-RoPE sections, are
    other tables."""
    positions, inv_freq, factor = _inputs(1)
    _cached(positions, inv_freq, factor)
    for other in (positions.reshape(3, 4), positions.reshape(12), positions.astype(np.int32)):
        assert _same_bits(_cached(other, inv_freq, factor), _uncached(other, inv_freq, factor))
    assert _same_bits(_cached(positions, inv_freq.astype(np.float32), factor),
                      _uncached(positions, inv_freq.astype(np.float32), factor))
    axes = np.stack([positions[0], positions[1], positions[0]])  # (3, T)
    _cached(axes, inv_freq, factor, MROPE)
    other = refpos.RopeConfig(head_dim=16, mrope_section=(4, 2, 2))
    assert _same_bits(_cached(axes, inv_freq, factor, other), _uncached(axes, inv_freq, factor, other))
    assert len(table_cache.cache_for(np)) == 7


def test_a_changed_table_function_is_not_hidden_by_the_cache_key():
    """The key is the inputs, not the code: the test of every path changing the table code turns the cache
    off (refpos/tests/test_fast_forms.py); here, that a warm entry is served without computing again."""
    positions, inv_freq, factor = _inputs(2)
    calls = []
    original = core.rope_pair_tables
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(core, "rope_pair_tables", lambda *a, **k: calls.append(1) or original(*a, **k))
        first = _cached(positions, inv_freq, factor)
        second = _cached(positions.copy(), inv_freq.copy(), float(factor))  # equal bytes, other objects
    assert len(calls) == 1
    assert _same_bits(first, second)


@given(seed=st.integers(0, 2**32 - 1), layout=st.sampled_from(["half", "interleaved", "deinterleaved"]),
       placement=st.sampled_from(["first", "last"]), rotary=st.sampled_from([4, 8]),
       dtypes=st.permutations(["float32", "float64"]))
def test_x_dtype_layout_and_placement_share_tables_and_give_the_readable_bits(seed, layout, placement, rotary,
                                                                              dtypes):
    """The tables depend on positions, ω and A only: apply_rope on one x after another (other dtype, layout,
    placement, warm cache) gives the readable form's bits each time."""
    rng = np.random.default_rng(seed)
    positions = rng.integers(0, 50_000, size=5)
    rope = refpos.RopeConfig(head_dim=8, rotary_dim=rotary, placement=placement, layout=layout)
    for dtype in dtypes:
        x = rng.standard_normal((2, 3, 5, 8)).astype(dtype)
        for _ in range(2):  # cold or warm, then warm
            fast = refpos.apply_rope(x, positions, rope)
            readable = refpos.apply_rope(array_api_strict.asarray(x), array_api_strict.asarray(positions), rope)
            np.testing.assert_array_equal(fast, to_numpy(readable))
            assert fast.dtype == x.dtype


# ------------------------------------------------------------------------------------------- bounded
def test_the_bytes_held_stay_under_the_cap_and_the_oldest_leave_first(monkeypatch):
    """A 1 MiB cap filled with 50 tables of 64 KiB each (and their keys): never more than 1 MiB held, the
    bytes counted are the entries', the last used are kept, and a table larger than the cap is not kept."""
    monkeypatch.setenv("REFPOS_TABLE_CACHE", "1")
    cap = 2**20
    inv_freq = 10000.0 ** (-np.arange(8) / 8)
    cache = table_cache.cache_for(np)
    calls = []
    original = core.rope_pair_tables
    monkeypatch.setattr(core, "rope_pair_tables", lambda *a, **k: calls.append(1) or original(*a, **k))

    def tables(positions: np.ndarray) -> None:
        table_cache.cached_pair_tables(core.rope_pair_tables, positions, inv_freq, 1.0, ROPE)

    held = []
    for start in range(50):
        tables(np.arange(start, start + 512))  # tables 2 × 512 × 8 float64 = 64 KiB, key 4 KiB
        held.append(cache.held_bytes)
        assert cache.held_bytes <= cap
    entry = 2 * 512 * 8 * 8 + 512 * 8 + 8 * 8 + 8 + 512  # tables; the bytes of the positions, ω, A; the allowance
    assert len(cache) == cap // entry and cache.held_bytes == len(cache) * entry
    assert max(held) <= cap < 50 * entry
    calls.clear()
    tables(np.arange(49, 49 + 512))  # the last stored: kept
    assert calls == []
    tables(np.arange(0, 512))  # the first stored: gone
    assert calls == [1]
    before = cache.held_bytes
    tables(np.arange(2**16))  # 8 MiB of tables: not kept
    assert cache.held_bytes == before and len(cache) == cap // entry


def test_zero_turns_the_cache_off_and_a_bad_value_is_named(monkeypatch):
    positions, inv_freq, factor = _inputs(3)
    monkeypatch.setenv("REFPOS_TABLE_CACHE", "0")
    refpos.apply_rope(np.ones((6, 16)), positions[0], ROPE, frequencies=(inv_freq, factor))
    refpos.rope_cos_sin(positions, ROPE)
    assert len(table_cache.cache_for(np)) == 0
    for bad in ("-1", "1.5", "lots"):
        monkeypatch.setenv("REFPOS_TABLE_CACHE", bad)
        with pytest.raises(ValueError, match="REFPOS_TABLE_CACHE must be a non-negative integer"):
            refpos.rope_cos_sin(positions, ROPE)
    monkeypatch.delenv("REFPOS_TABLE_CACHE")
    assert table_cache.cache_cap() == table_cache.DEFAULT_CAP_MIB * 2**20


# ------------------------------------------------------------------------------------------- unchangeable
def test_a_caller_cannot_change_a_cached_table():
    """The cache's NumPy tables are read-only views (not even made writeable again); rope_cos_sin returns the
    caller's own arrays: writing into them changes nothing the next caller gets."""
    positions, inv_freq, factor = _inputs(4)
    cos, sin = table_cache.cached_pair_tables(core.rope_pair_tables, positions, inv_freq, factor, ROPE)
    for table in (cos, sin):
        with pytest.raises(ValueError, match="read-only"):
            table[0, 0] = 0.0
        with pytest.raises(ValueError):
            table.setflags(write=True)
    expected = refpos.rope_cos_sin(positions, ROPE)
    got_cos, got_sin = refpos.rope_cos_sin(positions, ROPE)  # warm: laid out from the cached tables
    got_cos[...], got_sin[...] = 7.0, 7.0
    np.testing.assert_array_equal(refpos.rope_cos_sin(positions, ROPE)[0], expected[0])
    x = np.random.default_rng(4).standard_normal((2, 6, 16))
    y = refpos.apply_rope(x, positions, ROPE)
    y[...] = 0.0
    np.testing.assert_array_equal(refpos.apply_rope(x, positions, ROPE), refpos.apply_rope(
        array_api_strict.asarray(x), array_api_strict.asarray(positions), ROPE))


# ------------------------------------------------------------------------------------------- threads, backends
def test_threads_sharing_a_small_cache_always_get_their_own_tables(monkeypatch):
    """Eight Python threads and refpos's own threads (tables computed in blocks) call with 12 sets of
    positions through a cache that holds a few of them: every result is its inputs' tables, and the bytes
    held match the entries left."""
    monkeypatch.setenv("REFPOS_TABLE_CACHE", "1")
    monkeypatch.setenv("REFPOS_THREADS", "2")
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)  # tables on refpos's threads even at this size
    monkeypatch.setattr(table_cache, "_BLOCK_VALUES", 1024)  # and in several blocks
    inv_freq = 10000.0 ** (-np.arange(8) / 8)
    sets = [np.arange(k, k + 2048) * (k + 1) for k in range(12)]  # 256 KiB of tables each
    expected = [core.rope_pair_tables(p, inv_freq, 1.0, ROPE) for p in sets]
    errors = []

    def worker(seed: int) -> None:
        order = np.random.default_rng(seed).integers(0, len(sets), 30)
        for k in order:
            if not _same_bits(_cached(sets[k], inv_freq, 1.0), expected[k]):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    parallel.run_blocks([lambda s=seed: worker(s) for seed in range(8, 12)], numpy=True, work=1)
    assert errors == []
    cache = table_cache.cache_for(np)
    assert 0 < len(cache) <= 3 and cache.held_bytes <= 2**20
    assert cache.held_bytes == len(cache) * (2 * 2048 * 8 * 8 + 2048 * 8 + 8 * 8 + 8 + 512)


def test_each_backend_has_its_own_tables():
    """The same positions on NumPy and on array-api-strict: each backend computes and keeps its own tables,
    in its own arrays."""
    positions, _, _ = _inputs(5)
    on_numpy = refpos.rope_cos_sin(positions, ROPE)
    on_strict = refpos.rope_cos_sin(array_api_strict.asarray(positions), ROPE)
    assert isinstance(on_numpy[0], np.ndarray) and not isinstance(on_strict[0], np.ndarray)
    np.testing.assert_array_equal(to_numpy(on_strict[0]), on_numpy[0])
    assert len(table_cache.cache_for(np)) == 1 and len(table_cache.cache_for(array_api_strict)) == 1
    assert table_cache.cache_for(np) is not table_cache.cache_for(array_api_strict)


def test_check_computes_the_tables_of_each_block_of_positions_once(monkeypatch):
    """refpos check compares block by block: the heads of one block of positions share its tables (computed
    once per block of positions, not once per head)."""
    from refpos.check.rope.run import check_rope
    from refpos.check.shared import stream

    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", 64 * 16)  # blocks of 64 positions of one head
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 256, 16))  # 8 heads, 256 positions: 4 blocks of positions per head
    candidate = refpos.apply_rope(x, np.arange(256), ROPE).astype(np.float32)
    calls = []
    original = core.rope_pair_tables
    monkeypatch.setattr(core, "rope_pair_tables", lambda *a, **k: calls.append(1) or original(*a, **k))
    result = check_rope(candidate, x, np.arange(256), ROPE)
    assert result["ok"]
    assert len(calls) == 4  # one per block of positions; 32 without the cache


def test_the_command_line_names_a_bad_cache_size_in_one_line(monkeypatch, capsys):
    from refpos.cli import main

    monkeypatch.setenv("REFPOS_TABLE_CACHE", "lots")
    with refpos.use_backend("numpy"):  # the cache serves NumPy's fast forms: another backend never reads it
        assert main(["bench", "rope", "--shape", "1", "1", "8", "8", "--dtypes", "float32", "--layouts", "half"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "REFPOS_TABLE_CACHE must be a non-negative integer" in err
