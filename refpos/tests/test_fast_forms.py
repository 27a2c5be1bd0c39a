"""The NumPy fast forms give the readable forms' bits, on any number of threads.

* ``apply_rope`` on NumPy arrays runs :mod:`refpos.rope.fast` (whole rows, on threads); on
  array-api-strict it runs the readable pair-by-pair form. Same float64 angles, same casts, same
  products and sums: the outputs are **equal**, not close.
* ``softmax(..., overwrite=True)`` does the readable steps in the logits' memory: equal.
* ``attention`` runs (head, query-rows) blocks on threads, each with single-threaded BLAS. Only the
  matmul's internal blocking can differ from a serial run, so serial and threaded agree to a few ulps.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import threading
import time
import warnings

import array_api_strict
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos import parallel
from refpos.backend import to_numpy

fast = importlib.import_module("refpos.rope.fast")
core = importlib.import_module("refpos.rope.core")
attention_module = importlib.import_module("refpos.core.tiled")


@pytest.fixture
def threads(monkeypatch):
    """Set REFPOS_THREADS for one test."""
    def use(n: int) -> None:
        monkeypatch.setenv("REFPOS_THREADS", str(n))
    return use


# ----------------------------------------------------------------------------------------- RoPE
@given(seed=st.integers(0, 2**32 - 1), layout=st.sampled_from(["half", "interleaved", "deinterleaved"]),
       placement=st.sampled_from(["first", "last"]), rotary=st.sampled_from([2, 4, 8]), t=st.integers(1, 12),
       heads=st.integers(1, 5), batch_positions=st.booleans(), dtype=st.sampled_from(["float32", "float64"]),
       factor=st.sampled_from([1.0, 1.0 + 2.0**-20, 0.7]), slab_rows=st.integers(1, 5), n_threads=st.integers(1, 3),
       x_view=st.sampled_from(["contiguous", "strided channels", "broadcast heads"]), special=st.booleans())
def test_fast_rope_is_bit_identical_to_the_readable_form(seed, layout, placement, rotary, t, heads, batch_positions,
                                                         dtype, factor, slab_rows, n_threads, x_view, special):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("REFPOS_THREADS", str(n_threads))
        monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)  # threads even for these small arrays
        monkeypatch.setattr(fast, "SLAB_BYTES", slab_rows * 8 * np.dtype(dtype).itemsize)  # a few rows per block
        _check_fast_rope(seed, layout, placement, rotary, t, heads, batch_positions, dtype, factor, x_view, special)


def _check_fast_rope(seed, layout, placement, rotary, t, heads, batch_positions, dtype, factor, x_view="contiguous",
                     special=False):
    rng = np.random.default_rng(seed)
    rope = refpos.RopeConfig(head_dim=8, rotary_dim=rotary, placement=placement, layout=layout)
    x = rng.standard_normal((2, heads, t, 16)).astype(dtype)
    if special:  # inf·0 and -0 must come out as the readable form's do
        x.flat[rng.integers(0, x.size, 4)] = [np.inf, -np.inf, np.nan, -0.0]
    if x_view == "strided channels":  # channels not adjacent in memory: the halves cannot be swapped as items
        x = x[..., ::2]  # (2, heads, t, 8)
    elif x_view == "broadcast heads":  # every head reads the same memory (stride 0)
        x = np.broadcast_to(x[:, :1, :, :8], (2, heads, t, 8))
    else:
        x = np.ascontiguousarray(x[..., :8])  # (2, heads, t, 8)
    positions = rng.integers(0, 1_000_000, size=(2, t) if batch_positions else (t,))
    inv_freq = 10000.0 ** (-np.arange(rotary // 2) / max(1, rotary // 2))
    with warnings.catch_warnings():  # inf - inf is NaN, with NumPy's RuntimeWarning (in every thread)
        warnings.simplefilter("ignore", RuntimeWarning)
        fast_out = refpos.apply_rope(x, positions, rope, frequencies=(inv_freq, factor))
        readable = refpos.apply_rope(array_api_strict.asarray(x), array_api_strict.asarray(positions), rope,
                                     frequencies=(array_api_strict.asarray(inv_freq), factor))
    assert fast_out.dtype == x.dtype
    np.testing.assert_array_equal(fast_out, to_numpy(readable))


def _gpu_missing() -> str | None:
    """Why the CuPy fused form cannot be tested here (None: it can)."""
    try:
        refpos.backend.get_xp("cupy")
    except (ImportError, RuntimeError) as exc:
        return str(exc)
    return None


@pytest.mark.skipif(_gpu_missing() is not None, reason=f"needs CuPy and a GPU: {_gpu_missing()}")
@given(seed=st.integers(0, 2**32 - 1), layout=st.sampled_from(["half", "interleaved", "deinterleaved"]),
       placement=st.sampled_from(["first", "last"]), rotary=st.sampled_from([2, 4, 8]), t=st.integers(1, 12),
       heads=st.integers(1, 5), batch_positions=st.booleans(), dtype=st.sampled_from(["float32", "float64"]),
       factor=st.sampled_from([1.0, 1.0 + 2.0**-20, 0.7]))
def test_gpu_fused_rope_is_bit_identical_to_the_readable_form(seed, layout, placement, rotary, t, heads,
                                                              batch_positions, dtype, factor):
    """CuPy: the two fused kernels (round-to-nearest intrinsics, no FMA contraction) against the readable
    form's separate kernels on the same GPU: equal bits."""
    import cupy

    rng = np.random.default_rng(seed)
    rope = refpos.RopeConfig(head_dim=8, rotary_dim=rotary, placement=placement, layout=layout)
    x = cupy.asarray(rng.standard_normal((2, heads, t, 8)).astype(dtype))
    positions = cupy.asarray(rng.integers(0, 1_000_000, size=(2, t) if batch_positions else (t,)))
    frequencies = (cupy.asarray(10000.0 ** (-np.arange(rotary // 2) / max(1, rotary // 2))), factor)
    fused = refpos.apply_rope(x, positions, rope, frequencies=frequencies)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(core, "is_fast_gpu_input", lambda _: False)  # the readable form, on the GPU
        readable = refpos.apply_rope(x, positions, rope, frequencies=frequencies)
    assert fused.dtype == x.dtype
    np.testing.assert_array_equal(to_numpy(fused), to_numpy(readable))


def test_fused_gpu_form_is_only_for_cupy_float32_and_float64():
    from refpos.rope.fast_gpu import is_fast_gpu_input

    assert not is_fast_gpu_input(np.ones((2, 4)))
    assert not is_fast_gpu_input(array_api_strict.ones((2, 4)))
    if _gpu_missing() is None:
        import cupy

        assert is_fast_gpu_input(cupy.ones((2, 4), dtype=cupy.float32))
        assert is_fast_gpu_input(cupy.ones((2, 4), dtype=cupy.float64))
        assert not is_fast_gpu_input(cupy.ones((2, 4), dtype=cupy.float16))
        assert not is_fast_gpu_input(cupy.ones((0, 4), dtype=cupy.float32))


def test_fast_rope_gives_every_thread_rows_and_lays_out_each_table_once(monkeypatch):
    """Few rows: they are cut so that every thread works; each block lays out the tables of its rows."""
    monkeypatch.setenv("REFPOS_THREADS", "3")
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)
    rng = np.random.default_rng(1)
    rope = refpos.RopeConfig(head_dim=16)
    x = rng.standard_normal((2, 7, 7, 16))
    rows = []
    original = fast.signed_tables
    monkeypatch.setattr(fast, "signed_tables", lambda c, *a: rows.append(c.shape[-2]) or original(c, *a))
    out = refpos.apply_rope(x, np.arange(7), rope)
    assert sorted(rows) == [1, 3, 3]  # 7 rows in blocks of 3 for 3 threads, every row once
    rows.clear()
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", x.size + 1)  # too small for threads: one block
    np.testing.assert_array_equal(refpos.apply_rope(x, np.arange(7), rope), out)
    assert rows == [7]
    readable = refpos.apply_rope(array_api_strict.asarray(x), array_api_strict.asarray(np.arange(7)), rope)
    np.testing.assert_array_equal(out, to_numpy(readable))


def test_every_path_consumes_the_readable_tables(monkeypatch):
    """A change to the readable form's cos/sin tables reaches the NumPy fast form and the readable form
    alike (no switch needed): both give the changed bits. The table cache holds tables by their inputs, not
    by the code computing them: it is off while the code is changed."""
    rope = refpos.RopeConfig(head_dim=8)
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 8))
    positions = np.arange(5)
    before = refpos.apply_rope(x, positions, rope)
    original = core.pair_cos_sin
    monkeypatch.setattr(core, "pair_cos_sin", lambda p, w, a, **kw: original(p, w, 2 * a, **kw))  # A doubled
    monkeypatch.setenv("REFPOS_TABLE_CACHE", "0")
    fast_out = refpos.apply_rope(x, positions, rope)
    readable = refpos.apply_rope(array_api_strict.asarray(x), array_api_strict.asarray(positions), rope)
    np.testing.assert_array_equal(fast_out, to_numpy(readable))
    np.testing.assert_array_equal(fast_out, 2 * before)  # doubling is exact


def test_fast_rope_leaves_the_input_and_pass_through_channels_alone():
    rope = refpos.RopeConfig(head_dim=8, rotary_dim=4, placement="last")
    x = np.random.default_rng(2).standard_normal((3, 5, 8))
    before = x.copy()
    out = refpos.apply_rope(x, np.arange(5), rope)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(out[..., :4], x[..., :4])


# -------------------------------------------------------------------------------------- softmax
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 6), cols=st.integers(1, 6),
       masked=st.sampled_from(["none", "some", "dead rows"]), fully_masked=st.sampled_from(["zeros", "nan"]),
       special=st.sampled_from([None, np.nan, np.inf, -np.inf, 1e300]))
def test_softmax_overwrite_gives_the_same_bits(seed, rows, cols, masked, fully_masked, special):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((2, rows, cols)) * 30
    if special is not None:
        logits[0, 0, 0] = special
    mask = {"none": None, "some": rng.random((rows, cols)) < 0.7,
            "dead rows": np.repeat(rng.random((rows, 1)) < 0.5, cols, axis=1)}[masked]
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf in a row that holds +inf: NaN, as documented
        expected = refpos.core.softmax.softmax(logits, mask=mask, fully_masked=fully_masked)
        scratch = logits.copy()
        got = refpos.core.softmax.softmax(scratch, mask=mask, fully_masked=fully_masked, overwrite=True)
    np.testing.assert_array_equal(got, expected)


def test_softmax_overwrite_uses_the_logits_memory_and_is_checked():
    logits = np.array([[1.0, 2.0, 3.0]])
    assert np.shares_memory(refpos.core.softmax.softmax(logits, overwrite=True), logits)
    with pytest.raises(TypeError, match="overwrite must be a bool"):
        refpos.core.softmax.softmax(logits, overwrite=1)


# ------------------------------------------------------------------------------------ attention
@given(seed=st.integers(0, 2**32 - 1), t_q=st.integers(1, 9), extra=st.integers(0, 3), h_kv=st.integers(1, 3),
       n_rep=st.integers(1, 3), causal=st.booleans(), with_bias=st.booleans(), with_temperature=st.booleans(),
       n_threads=st.integers(2, 3))
def test_threaded_attention_equals_serial_attention(seed, t_q, extra, h_kv, n_rep, causal, with_bias,
                                                    with_temperature, n_threads):
    """Serial (REFPOS_THREADS=1, BLAS on its own threads) against tiles on threads (BLAS on one thread)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _check_threaded_attention(monkeypatch, seed, t_q, extra, h_kv, n_rep, causal, with_bias, with_temperature,
                                  n_threads)


def _check_threaded_attention(monkeypatch, seed, t_q, extra, h_kv, n_rep, causal, with_bias, with_temperature,
                              n_threads):
    rng = np.random.default_rng(seed)
    t_k, h_q = t_q + extra, h_kv * n_rep
    q = rng.standard_normal((2, h_q, t_q, 4))
    k, v = rng.standard_normal((2, h_kv, t_k, 4)), rng.standard_normal((2, h_kv, t_k, 3))
    kwargs = {"causal": causal,
              "bias": rng.standard_normal((h_q, t_q, t_k)) if with_bias else None,
              "temperature": rng.random((2, h_q, t_q)) + 0.5 if with_temperature else None,
              "mask": rng.random((t_q, t_k)) < 0.8}
    monkeypatch.setattr(attention_module, "_BLOCK_ELEMENTS", 2 * n_rep * t_k * 2)  # two query rows per tile
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)  # threads even for these small arrays
    monkeypatch.setenv("REFPOS_THREADS", "1")
    serial = refpos.attention(q, k, v, **kwargs)
    monkeypatch.setenv("REFPOS_THREADS", str(n_threads))
    threaded = refpos.attention(q, k, v, **kwargs)
    whole, _ = refpos.attention(q, k, v, return_weights=True, **kwargs)
    # the same float64 steps on the same rows; a matmul may sum its 4 (or Tk) products in another order
    np.testing.assert_allclose(threaded, serial, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(threaded, whole, rtol=1e-14, atol=1e-15)


@given(seed=st.integers(0, 2**32 - 1), t_q=st.integers(1, 9), extra=st.integers(0, 3), causal=st.booleans(),
       chunk=st.integers(1, 4))
def test_threaded_chunked_attention_equals_serial_and_attention(seed, t_q, extra, causal, chunk):
    """Query blocks on threads against the same blocks in order (only BLAS's blocking can differ) and against
    attention (the oracle; the online softmax regroups the sums: rtol 1e-13)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 4, t_q, 3))
    k, v = rng.standard_normal((2, 2, t_q + extra, 3)), rng.standard_normal((2, 2, t_q + extra, 5))
    bias = rng.standard_normal((4, t_q, t_q + extra))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)  # threads even for these small arrays
        monkeypatch.setenv("REFPOS_THREADS", "1")
        serial = refpos.core.chunked_attention(q, k, v, bias=bias, causal=causal, chunk_size=chunk)
        monkeypatch.setenv("REFPOS_THREADS", "3")
        threaded = refpos.core.chunked_attention(q, k, v, bias=bias, causal=causal, chunk_size=chunk)
    np.testing.assert_allclose(threaded, serial, rtol=1e-14, atol=1e-15)
    oracle, _ = refpos.attention(q, k, v, bias=bias, causal=causal, return_weights=True)
    np.testing.assert_allclose(threaded, oracle, rtol=1e-13, atol=1e-15)


# ------------------------------------------------------------------------------------- parallel
def test_run_blocks_runs_each_block_once_and_raises_the_first_error(threads):
    threads(2)
    seen = []
    lock = threading.Lock()

    def block(i):
        def run():
            with lock:
                seen.append(i)
            if i in (3, 5):
                raise ValueError(f"block {i}")
        return run

    with pytest.raises(ValueError, match="block 3"):
        parallel.run_blocks([block(i) for i in range(8)], numpy=True, work=parallel.MIN_PARALLEL_WORK)
    assert sorted(seen) == list(range(8))


def test_nested_regions_run_in_the_worker(threads):
    threads(2)
    inner_threads = []

    def outer():
        parallel.run_blocks([lambda: inner_threads.append(threading.current_thread().name)] * 3, numpy=True,
                            work=parallel.MIN_PARALLEL_WORK)

    # would deadlock if a worker waited for its own pool
    parallel.run_blocks([outer, outer], numpy=True, work=parallel.MIN_PARALLEL_WORK)
    assert len(inner_threads) == 6
    assert all(name.startswith("refpos") for name in inner_threads)


def test_blas_threads_are_restored_after_a_region(threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    threads(2)
    before = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    during = []

    def probe():
        during.extend(lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas")

    parallel.run_blocks([probe, lambda: None], numpy=True, work=parallel.MIN_PARALLEL_WORK)
    after = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    assert after == before
    assert during and all(n == 1 for n in during)


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_refpos_threads_must_be_a_positive_integer(monkeypatch, value):
    monkeypatch.setenv("REFPOS_THREADS", value)
    with pytest.raises(ValueError, match="REFPOS_THREADS must be a positive integer"):
        parallel.num_threads()


def _region_in_child(queue):
    out = []
    parallel.run_blocks([lambda: out.append(1)] * 4, numpy=True, work=parallel.MIN_PARALLEL_WORK)
    queue.put(len(out))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_pool_of_its_own(threads):
    """The parent's pool threads do not exist after fork: the child must not wait for them."""
    threads(2)
    # the parent's pool, both threads started (each block waits long enough for the other to start)
    parallel.run_blocks([lambda: time.sleep(0.2)] * 2, numpy=True, work=parallel.MIN_PARALLEL_WORK)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_region_in_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in run_blocks")
    assert queue.get(timeout=5) == 4


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.0.0",
                    reason="NumPy 1's errstate belongs to a thread, not to a context that can be copied")
def test_blocks_run_under_the_callers_errstate(threads):
    """A caller's np.errstate holds in the worker threads too (NumPy 2 keeps it in a context variable)."""
    threads(2)
    seen = []

    def block() -> None:
        time.sleep(0.01)  # long enough for both pool threads to take a block
        seen.append((threading.current_thread().name, np.geterr()["divide"]))

    with np.errstate(divide="ignore"):
        parallel.run_blocks([block] * 4, numpy=True, work=parallel.MIN_PARALLEL_WORK)
    assert {setting for _, setting in seen} == {"ignore"}
    assert all(name.startswith("refpos") for name, _ in seen)


def test_small_work_stays_in_the_calling_thread(threads):
    threads(2)
    names = []
    parallel.run_blocks([lambda: names.append(threading.current_thread().name)] * 4, numpy=True,
                        work=parallel.MIN_PARALLEL_WORK - 1)
    assert names == [threading.current_thread().name] * 4


def test_refpos_threads_is_read(monkeypatch):
    monkeypatch.setenv("REFPOS_THREADS", "3")
    assert parallel.num_threads() == 3
    monkeypatch.delenv("REFPOS_THREADS")
    assert parallel.num_threads() >= 1


def test_blocks_are_larger_only_on_a_gpu(xp):
    """A CPU block is cache-sized; a GPU block pays kernel launches instead, so it is DEVICE_BLOCK_FACTOR
    times larger there. NumPy and array-api-strict keep the CPU size."""
    on_gpu = refpos.backend.is_cupy_namespace(xp)
    assert parallel.DEVICE_BLOCK_FACTOR > 1
    assert parallel.block_elements(2**20, xp) == 2**20 * (parallel.DEVICE_BLOCK_FACTOR if on_gpu else 1)
    assert parallel.block_elements(2**20, np) == 2**20
    assert parallel.block_elements(2**20, array_api_strict) == 2**20
