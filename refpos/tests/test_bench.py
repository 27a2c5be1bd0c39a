"""``refpos bench`` on tiny sizes: every record holds its time, its floor and the ratios derived from them.

Nothing here asserts a speed (timed tests are flaky and prove nothing about correctness); these tests check
that the numbers a note quotes are computed from what was measured, and that the command runs on every
backend.
"""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from refpos.backend import is_cupy_namespace, is_numpy_namespace
from refpos.cli import bench as cli_bench
from refpos.cli import main
from refpos.tools import bench, bench_rope, measure


def _has_torch_beside(xp) -> bool:
    return measure.torch_device_for(xp) is not None


def test_floors_report_rates_from_their_times(xp):
    (rec,) = bench.bench_floors(xp, ["float32"], copy_mib=1, matmul_n=64)
    assert rec["matmul_n"] == 64 and rec["dtype"] == "float32"
    assert rec["copy_gbs"] == pytest.approx(2 * 2**20 / rec["copy_s"] / 1e9)  # read + write
    assert rec["matmul_tflops"] == pytest.approx(2 * 64**3 / rec["matmul_s"] / 1e12)


def test_rope_record_puts_apply_rope_beside_the_copy_floor(xp):
    records = bench_rope.bench_rope(xp, ["float32", "float64"], (1, 2, 8, 16), ["half", "interleaved"])
    assert [(r["dtype"], r["rotary_dim"], r["layout"]) for r in records] == [
        (dtype, rotary, layout) for dtype in ("float32", "float64") for rotary in (16, 8)
        for layout in ("half", "interleaved")]  # whole and partial rotary by default
    on_numpy = is_numpy_namespace(xp)  # the copy into touched memory and CPU times are measured on the CPU
    fast = on_numpy or is_cupy_namespace(xp)  # array-api-strict runs the readable form: no rotation alone
    for rec in records:
        assert rec["output_bytes"] == 2 * 8 * 16 * np.dtype(rec["dtype"]).itemsize
        kinds = ["_s", "_median_s"] + (["_cpu_s"] if not is_cupy_namespace(xp) else [])
        for kind in kinds:
            floors = rec[f"floor_copy{kind}"] + rec[f"floor_tables{kind}"]
            assert rec[f"floor_copy_tables{kind}"] == pytest.approx(floors)
            ratio = kind[:-2]  # "", "_median", "_cpu"
            assert rec[f"apply_rope_cold{ratio}/floor_copy_tables{ratio}"] == pytest.approx(
                rec[f"apply_rope_cold{kind}"] / rec[f"floor_copy_tables{kind}"])
            assert rec[f"apply_rope_warm{ratio}/floor_copy_tables{ratio}"] == pytest.approx(
                rec[f"apply_rope_warm{kind}"] / rec[f"floor_copy_tables{kind}"])
            assert (f"rotation{ratio}/floor_copy{ratio}" in rec) == fast
            if fast:
                assert rec[f"rotation{ratio}/floor_copy{ratio}"] == pytest.approx(
                    rec[f"rotation{kind}"] / rec[f"floor_copy{kind}"])
        assert ("fresh_pages_s" in rec) == on_numpy
        if on_numpy:
            assert rec["fresh_pages_s"] == pytest.approx(rec["floor_copy_s"] - rec["floor_copy_touched_s"])
        assert rec["rounds"] >= 7
        for name in ("apply_rope_cold", "apply_rope_warm", "floor_copy"):
            assert rec[f"{name}_median_s"] >= rec[f"{name}_s"]  # the median of the rounds, the best of them
        assert rec["load_before"] is None or rec["load_before"] >= 0
        assert rec["apply_rope_warm_gbs"] == pytest.approx(2 * rec["output_bytes"] / rec["apply_rope_warm_s"] / 1e9)
        for name in ("ort_rotary", "ggml_rope_ext"):  # beside the native kernels, when they are installed
            if f"{name}_s" in rec:
                assert rec[f"apply_rope_warm/{name}"] == pytest.approx(rec["apply_rope_warm_s"] / rec[f"{name}_s"])
        with_torch = (_has_torch_beside(xp) and rec["layout"] == "half" and rec["rotary_dim"] == 16
                      and measure.transformers_rope() is not None)
        assert ("torch_hf_apply_s" in rec) == with_torch
        if with_torch:
            assert rec["apply_rope_warm/torch_hf_apply"] == pytest.approx(
                rec["apply_rope_warm_s"] / rec["torch_hf_apply_s"])


def test_rope_cold_calls_compute_the_tables_and_warm_calls_do_not(monkeypatch):
    """The bench's cold call finds the table cache empty and computes the tables; its warm call finds them."""
    core = importlib.import_module("refpos.rope.core")
    computed = []
    original = core.rope_pair_tables
    monkeypatch.setattr(core, "rope_pair_tables", lambda *a, **k: computed.append(1) or original(*a, **k))
    (rec,) = bench_rope.bench_rope(np, ["float64"], (1, 2, 8, 16), ["half"], rotary_dims=[16], rope_rounds=7)
    cold_calls = (1 + rec["rounds"]) + (1 + 7) + 1  # timed rounds and warm-up, CPU-time rounds and warm-up, peak
    assert len(computed) == 1 + cold_calls  # the rotation's tables once, every cold call once, no warm call


@pytest.mark.parametrize("causal", [False, True])
def test_attention_record_puts_both_forms_beside_the_matmuls(xp, causal):
    (rec,) = bench.bench_attention(xp, [16], ["float32"], heads=2, head_dim=8, chunk_size=8, causal=causal,
                                   full_limit_gib=1.0)
    assert rec["causal"] is causal and rec["T"] == 16
    for key in ("attention", "chunked"):
        assert rec[f"{key}/floor_matmuls"] == pytest.approx(rec[f"{key}_s"] / rec["floor_matmuls_s"])
        assert rec[f"{key}_tflops"] == pytest.approx(4.0 * 2 * 16 * 16 * 8 / rec[f"{key}_s"] / 1e12)
        assert rec[f"{key}_peak_bytes"] is None or rec[f"{key}_peak_bytes"] >= 0
    assert ("torch_sdpa_s" in rec or "torch_sdpa_error" in rec) == _has_torch_beside(xp)


def test_attention_skips_the_floor_whose_probabilities_would_not_fit(xp):
    (rec,) = bench.bench_attention(xp, [16], ["float32"], heads=1, head_dim=4, chunk_size=8, causal=False,
                                   full_limit_gib=0.0)
    assert "floor_matmuls_s" not in rec and "attention/floor_matmuls" not in rec
    assert rec["attention_s"] > 0


def test_cli_json_names_the_machine_and_the_backend(capsys):
    assert main(["bench", "floors", "--dtypes", "float64", "--backend", "array_api_strict", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["meta"]["backend"] == "array_api_strict" and report["meta"]["cores"] >= 1
    (rec,) = report["records"]
    assert rec["dtype"] == "float64" and rec["copy_gbs"] > 0
    assert "torch_hf_apply_s" not in rec  # no torch beside array-api-strict


def test_table_formats_units_by_suffix():
    line = cli_bench.format_record({"suite": "rope", "backend": "numpy", "apply_rope_s": 0.0125,
                                    "output_bytes": 3 * 2**20,
                                 "apply_rope_gbs": 12.34, "apply_rope/floor_copy": 1.5, "layout": "half"})
    assert line == ("[rope] apply_rope_s=12.50ms output=3.0 MiB apply_rope_gbs=12.3 apply_rope/floor_copy=1.50x"
                    " layout=half")
    assert cli_bench.format_record({"suite": "rope", "load_before": 4.987, "load_after": None}) == (
        "[rope] load_before=4.99 load_after=None")  # a load average, not a ratio


def test_peak_memory_counts_what_one_call_allocates(xp):
    """8 MiB of float64 ones: at least its bytes, and not a multiple of them (NumPy and array-api-strict:
    tracemalloc; CuPy: the bytes live in its memory pool)."""
    nbytes = 2**20 * 8
    peak = measure.peak_memory(lambda: xp.ones(2**20, dtype=xp.float64), xp)
    assert nbytes <= peak < 2 * nbytes


def test_best_time_is_the_fastest_run_after_a_warm_up(monkeypatch):
    """A fake clock: the warm-up (the fastest call here) is not counted; the best timed run is returned."""
    durations = iter([0.03125, 0.125, 0.0625, 0.5])  # binary fractions: the clock's differences are exact
    clock = {"t": 0.0}

    def fn() -> None:
        clock["t"] += next(durations, 1.0)

    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock["t"])
    assert measure.best_time(fn, repeat=3, min_total=0.0) == 0.0625


def test_best_times_alternate_and_return_each_functions_fastest_run(monkeypatch):
    """Two functions under a fake clock: calls alternate (f, g, f, g, …) after one warm-up each, and each
    gets the best of its own runs, so a slow phase falls on both alike."""
    clock = {"t": 0.0}
    calls = []
    durations = {"f": iter([0.03125, 0.5, 0.125, 0.25]), "g": iter([0.015625, 0.0625, 1.0, 0.25])}

    def timed(name):
        def fn() -> None:
            calls.append(name)
            clock["t"] += next(durations[name])
        return fn

    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock["t"])
    assert measure.best_times([timed("f"), timed("g")], repeat=3, min_total=0.0) == [0.125, 0.0625]
    assert calls == ["f", "g", "f", "g", "f", "g", "f", "g"]


def test_round_times_keep_every_round_in_order(monkeypatch):
    """The rounds behind the best time and the median: each function's own runs, warm-up excluded."""
    clock = {"t": 0.0}
    durations = {"f": iter([0.03125, 0.5, 0.125, 0.25]), "g": iter([0.015625, 0.0625, 1.0, 0.25])}

    def timed(name):
        def fn() -> None:
            clock["t"] += next(durations[name])
        return fn

    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock["t"])
    assert measure.round_times([timed("f"), timed("g")], repeat=3, min_total=0.0) == [[0.5, 0.125, 0.25],
                                                                                     [0.0625, 1.0, 0.25]]


def test_check_peak_counts_what_is_allocated_and_not_the_pages_of_a_memory_map(tmp_path):
    """``bench check``'s peak is anonymous memory: a 32 MiB array held for 50 ms counts, reading a 32 MiB
    memory-mapped file does not (its pages are file-backed; VmRSS would count them and fail here)."""
    import time

    from refpos.tools.bench_check import peak_rss_anon, rss_anon

    if rss_anon() is None:
        pytest.skip("no /proc/self/status here")

    def hold() -> float:
        a = np.ones(2**22)  # 32 MiB, every page written
        time.sleep(0.05)  # several 10 ms samples while it is held
        return float(a[-1])

    path = tmp_path / "a.npy"
    np.save(path, np.ones(2**22))
    mapped = np.load(path, mmap_mode="r")
    _, held = peak_rss_anon(hold)
    _, read = peak_rss_anon(lambda: float(mapped.sum()))
    assert held >= 30 * 2**20
    assert read < 8 * 2**20


@pytest.mark.parametrize("dims", [["65"], ["7"], ["130"]])
def test_rope_rotary_dims_must_be_even_and_within_the_head(dims, capsys):
    assert main(["bench", "rope", "--shape", "1", "1", "8", "64", "--rotary-dims", *dims]) == 2
    err = capsys.readouterr().err
    assert "--rotary-dims" in err and "must be even and at most D = 64" in err
