"""``refpos bench check``: wall time and peak memory of ``refpos check rope`` on files of real size.

For each size, a Llama-3.1 query tensor ``x`` of shape ``(H, 131072, 128)`` (H = 1 … 32: 64 MiB to 2 GiB
in float32) and a correct float32 candidate ``y = apply_rope(x)`` are written to ``.npy`` files, then
read memory-mapped, as ``refpos check`` reads them. Three things are timed on the same files in
alternating rounds (a slow phase of a shared machine falls on all of them alike):

* ``reading``: both files read block by block into float64, the blocks the check reads;
* ``reference``: :func:`refpos.apply_rope` on float64 blocks of :data:`REFERENCE_ELEMENTS` (the reference the
  check computes, in blocks as large as the fastest of the sizes measured, so that the check's own choice of
  a smaller block never makes the denominator slower);
* ``check``: :func:`refpos.check.rope.run.check_rope` on the memory maps (read, reference, tolerance, compare).

``check/(reference+reading)`` is the overhead of the comparison itself; the same ratio of CPU times
(``time.process_time``, every thread of the process) is printed too, which a busy neighbour disturbs less.
Each timed call starts with the table cache emptied (:mod:`refpos.rope.table_cache`), as a fresh ``refpos
check`` process does: the reference and the check both compute the tables of each block of positions once,
for its first head, and take them from the cache for the others. The peak memory is the largest anonymous
resident memory (``RssAnon`` in ``/proc/self/status``, sampled every 10 ms) above its value before the call:
the pages of the memory-mapped files are file-backed and do not count, every array
refpos allocates does. Nothing here is asserted by a test.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Record = dict[str, Any]

#: heads of (H, 131072, 128) float32 per size: 64 MiB, 256 MiB, 1 GiB, 2 GiB
DEFAULT_HEADS = (1, 4, 16, 32)
LENGTH, HEAD_DIM = 131072, 128
#: elements per block of the timed reference: 2**20 (8 MiB of float64), where apply_rope alone ran fastest of
#: 2**16 … 2**20 on the 2-vCPU VM (0.54–0.70 s CPU per 256 MiB against 0.84–0.88 s at 2**17)
REFERENCE_ELEMENTS = 2**20


def llama31_rope() -> Any:
    """The RoPE of Llama-3.1-8B (llama3 scaling, θ = 500000, head_dim 128)."""
    import refpos

    return refpos.rope_config_from_params({"rope_type": "llama3", "rope_theta": 500000.0, "head_dim": 128,
                                           "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 8192})


def rss_anon() -> int | None:
    """Anonymous resident bytes of this process (None where /proc is missing)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def peak_rss_anon(fn: Callable[[], Any], interval: float = 0.01) -> tuple[float, int | None]:
    """``(seconds, extra peak RssAnon bytes)`` of one call of ``fn``, sampled from a thread."""
    base = rss_anon()
    if base is None:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start, None
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_anon() or 0)
            done.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    try:
        fn()
    finally:
        elapsed = time.perf_counter() - start
        done.set()
        sampler.join()
    return elapsed, max(peak[0], rss_anon() or 0) - base


def write_inputs(directory: Path, heads: int, rope: Any, seed: int = 0) -> tuple[Path, Path, Path]:
    """``x.npy``, ``y.npy`` (a correct float32 candidate) and ``positions.npy``, written in chunks of heads."""
    from numpy.lib.format import open_memmap

    from refpos.golden.files.npy import write_npy
    from refpos.rope import apply_rope

    shape = (heads, LENGTH, HEAD_DIM)
    x_path, y_path, p_path = directory / "x.npy", directory / "y.npy", directory / "positions.npy"
    positions = np.arange(LENGTH, dtype=np.int64)
    write_npy(p_path, positions)
    x_map = open_memmap(x_path, mode="w+", dtype=np.float32, shape=shape)
    y_map = open_memmap(y_path, mode="w+", dtype=np.float32, shape=shape)
    rng = np.random.default_rng(seed)
    for h in range(heads):  # one head (64 MiB) at a time
        x_map[h] = rng.standard_normal((LENGTH, HEAD_DIM), dtype=np.float32)
        y_map[h] = np.asarray(apply_rope(x_map[h], positions, rope))  # float32 in, float32 computation
    x_map.flush()
    y_map.flush()
    del x_map, y_map
    return x_path, y_path, p_path


def _open(path: Path) -> Any:
    """The file as ``refpos check`` opens it (the strict reader's checked header, then block reads)."""
    from refpos.golden.files.npy_file import open_npy

    return open_npy(path)


def bench_check(heads: tuple[int, ...] = DEFAULT_HEADS, *, rounds: int = 2, directory: str | None = None,
                progress: Callable[[str], None] | None = None) -> list[Record]:
    """One record per size: seconds of reading, reference and check (best and worst of ``rounds``
    alternating rounds), the extra peak memory of the check, and the ratios. The files of each size are
    deleted before the next is written."""
    records = []
    for h in heads:
        root = Path(tempfile.mkdtemp(prefix="refpos-bench-check-", dir=directory))
        try:
            records.append(_bench_size(root, h, rounds, progress))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return records


def _bench_size(root: Path, heads: int, rounds: int, progress: Callable[[str], None] | None) -> Record:
    from refpos.check.rope.run import check_rope
    from refpos.check.shared import stream
    from refpos.rope import apply_rope, rope_frequencies
    from refpos.rope.table_cache import clear_caches

    rope = llama31_rope()
    inv_freq, factor = rope_frequencies(rope, seq_len=LENGTH, xp="numpy")
    x_path, y_path, _ = write_inputs(root, heads, rope)
    x, y = _open(x_path), _open(y_path)
    x_rows, y_rows = stream.as_rows(x), stream.as_rows(y)  # (L, T, D) views of the maps
    blocks = list(stream.row_blocks(*x_rows.shape, stream.BLOCK_ELEMENTS))
    positions = np.arange(LENGTH, dtype=np.int64)

    def reading() -> None:
        for lead, rows in blocks:
            np.asarray(x_rows[lead, rows], dtype=np.float64)
            np.asarray(y_rows[lead, rows], dtype=np.float64)

    # the reference alone: apply_rope on every block's positions, its x read from the file once (the time
    # does not depend on x's values), so that no reading is counted twice
    first = np.asarray(x_rows[:1, : REFERENCE_ELEMENTS // HEAD_DIM], dtype=np.float64)
    reference_blocks = list(stream.row_blocks(*x_rows.shape, REFERENCE_ELEMENTS))

    def reference() -> None:
        for _, rows in reference_blocks:
            apply_rope(first[:, : rows.stop - rows.start], positions[rows][None], rope, frequencies=(inv_freq, factor))

    outcome: dict[str, Any] = {}

    def check() -> None:
        outcome["result"] = check_rope(y, x, positions, rope)

    times: dict[str, list[float]] = {"reading": [], "reference": [], "check": []}
    cpu: dict[str, list[float]] = {name: [] for name in times}
    peaks: list[int] = []
    for _ in range(rounds):
        for name, fn in (("reading", reading), ("reference", reference), ("check", check)):
            clear_caches()  # as a fresh process: no table of an earlier call
            start = time.process_time()
            seconds, peak = peak_rss_anon(fn)
            cpu[name].append(time.process_time() - start)
            times[name].append(seconds)
            if name == "check" and peak is not None:
                peaks.append(peak)
            if progress is not None:
                progress(f"{heads} heads: {name} {seconds:.2f} s")
    nbytes = heads * LENGTH * HEAD_DIM * 4
    best = {name: min(t) for name, t in times.items()}
    rec: Record = {"suite": "check", "shape": [heads, LENGTH, HEAD_DIM], "dtype": "float32",
                   "candidate_bytes": nbytes, "ok": bool(outcome["result"]["ok"]),
                   **{f"{name}_s": best[name] for name in best},
                   **{f"{name}_worst_s": max(t) for name, t in times.items()},
                   **{f"{name}_cpu_s": min(t) for name, t in cpu.items()},
                   "check_peak_bytes": max(peaks) if peaks else None}
    rec["check/(reference+reading)"] = best["check"] / (best["reference"] + best["reading"])
    rec["check_cpu/(reference_cpu+reading_cpu)"] = rec["check_cpu_s"] / (rec["reference_cpu_s"] + rec["reading_cpu_s"])
    rec["check_peak/candidate"] = (rec["check_peak_bytes"] or 0) / nbytes
    return rec


def disk_free(directory: str | None = None) -> int:
    """Free bytes where the bench writes its files."""
    return shutil.disk_usage(directory or tempfile.gettempdir()).free


def needed_bytes(heads: tuple[int, ...]) -> int:
    """Bytes of the largest pair of files (they are deleted after each size)."""
    return 2 * max(heads) * LENGTH * HEAD_DIM * 4 + (1 << 20)


