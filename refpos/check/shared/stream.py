r"""Blockwise comparison for ``refpos check``: bounded memory whatever the size of the candidate.

A candidate of real activations is gigabytes (a layer's queries at 128k positions). ``refpos check``
reads its ``.npy`` files memory-mapped and compares them block by block along the positions: each
block of rows is read, cast to float64, its reference and tolerance computed and compared, and only
the running totals are kept (:class:`Tally`). The extra memory is a few block-sized temporaries,
whatever the size of the files.

The comparison of each block is the one comparison of :func:`refpos.golden.exact.compare.compare` with
``equal_nan=True`` (the tolerance from :mod:`refpos.golden.exact.tolerance`), elementwise: an entry passes when

.. math:: |y - r| \le \mathrm{atol}

with the error 0 where ``y == r`` (equal infinities) or both are NaN, infinite where one is NaN, and a
NaN tolerance never passing. It is written here in fewer passes over each block (the error once, the
ratio once, reductions per row) and tested equal to :func:`~refpos.golden.exact.compare.compare`.

The tally also keeps the error against the position in bins (:data:`BIN_EDGES`: 0, 1, 2–3, 4–7, …
powers of two): where the error starts and how it grows — the typical shape of a scaling bug is
"fine up to 8192, wrong after".
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np

from refpos.check.shared.catalogue import known
from refpos.parallel import run_blocks

#: elements of the candidate per block (2**17: 1 MiB per float64 temporary; a block holds about ten). Small
#: enough that a block's temporaries stay near the core's 2 MiB L2 cache between the passes over them (the
#: check's CPU time fell by a third from 2**20 to 2**17 blocks: docs/performance.md#measured-cache), large
#: enough that each block's few dozen NumPy calls cost little beside their work
BLOCK_ELEMENTS = 2**17

#: rows a diagnosis works on at most (every row of a smaller check): RoPE, M-RoPE and the tables alike
SAMPLE_ROWS = 4096

#: position bins of the error profile: [0, 1), [1, 2), [2, 4), [4, 8), … [2**53, 2**54): every position
#: refpos accepts (up to 2**53, where float64 still holds every integer) has its bin
BIN_EDGES = np.array([0] + [2**k for k in range(55)], dtype=np.int64)


def as_rows(a: np.ndarray) -> np.ndarray:
    """``a`` ``(..., T, D)`` as ``(L, T, D)`` rows (a view for C-contiguous and memory-mapped arrays)."""
    return a.reshape(math.prod(a.shape[:-2]), *a.shape[-2:])  # (L, T, D)


def row_blocks(n_lead: int, t: int, d: int, block_elements: int) -> Iterator[tuple[slice, slice]]:
    """``(leading, rows)`` slices covering ``(L, T, D)`` in blocks of about ``block_elements``, in order.

    Long rows: one leading index at a time, ``block_elements // D`` positions per block (contiguous in
    memory). Short ones: several leading indices, all positions.
    """
    rows = max(1, block_elements // max(1, d))
    if rows >= t:
        lead = max(1, rows // max(1, t))
        for l0 in range(0, n_lead, lead):
            yield slice(l0, min(l0 + lead, n_lead)), slice(0, t)
        return
    for l0 in range(n_lead):
        for t0 in range(0, t, rows):
            yield slice(l0, l0 + 1), slice(t0, min(t0 + rows, t))


def block_error(candidate: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``|y − r|`` in float64: 0 where equal (infinities) or both NaN, inf where only one is NaN."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf − inf: NaN, sorted out below
        err = np.subtract(candidate, reference)
    np.abs(err, out=err)
    if err.size and not np.isfinite(err.max()):  # a NaN or an infinity somewhere: apply the rules
        same = (candidate == reference) | (np.isnan(candidate) & np.isnan(reference))
        err[same] = 0.0
        err[np.isnan(err)] = np.inf
    return err


class Tally:
    """Running totals of a blockwise comparison: the summary of ``refpos check`` and the error profile.

    Feed it :meth:`add` once per block, in any order; :meth:`summary` and :meth:`profile` are the same
    as for one comparison of the whole arrays.
    """

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = tuple(shape)
        self.n = self.n_outside = 0
        self.max_abs_error = self.max_ratio = 0.0
        self.worst_index: tuple[int, ...] = ()
        bins = BIN_EDGES.size - 1
        self.bin_rows = np.zeros(bins, dtype=np.int64)
        self.bin_outside = np.zeros(bins, dtype=np.int64)  # rows with an entry outside
        self.bin_error = np.zeros(bins)
        self.bin_ratio = np.zeros(bins)
        self.first_bad_position: int | None = None
        self.error_at_zero: float | None = None
        self.n_non_finite = 0  # NaN or inf in the candidate where the reference is finite
        self.non_finite_position: int | None = None
        self.n_nan = 0  # NaN in the candidate where the reference is not NaN: the largest error is NaN
        self.channel_error = np.zeros(self.shape[-1] if self.shape else 0)  # per channel: the largest error
        self.channel_ratio = np.zeros(self.shape[-1] if self.shape else 0)  # and the largest ratio to atol

    def add(self, err: np.ndarray, atol: np.ndarray, positions: np.ndarray, origin: tuple[int, ...],
            lock: Any = None) -> None:
        """One block: errors and tolerances ``(k, rows, D)``, its positions ``(k, rows)``, and where it
        starts in the ``(L, T, D)`` view (``origin = (l0, t0)``). Blocks may come in any order and from
        several threads: the per-block work runs outside ``lock``, only the merge inside it."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.divide(err, atol)  # an entry is outside iff its ratio exceeds 1
        row_ratio = ratio.max(axis=-1)  # (k, rows); NaN where an entry has 0/0 or a NaN tolerance
        if np.isnan(row_ratio).any():  # 0/0: an exact match with nothing allowed passes; a NaN tolerance never
            nan = np.isnan(ratio)
            ratio[nan] = np.where((err[nan] == 0) & (atol[nan] == 0), 0.0, np.inf)
            row_ratio = ratio.max(axis=-1)
        row_err = err.max(axis=-1)  # (k, rows)
        row_bad = row_ratio > 1
        outside = int(np.count_nonzero(ratio[row_bad] > 1)) if row_bad.any() else 0
        worst: tuple[float, tuple[int, int, int]] | None = None
        if err.size:
            worst_row = np.unravel_index(int(np.argmax(row_ratio)), row_ratio.shape)
            channel = int(np.argmax(ratio[worst_row]))
            index = (origin[0] + int(worst_row[0]), origin[1] + int(worst_row[1]), channel)
            worst = (float(row_ratio[worst_row]), index)
        p = positions.reshape(-1)
        b = np.searchsorted(BIN_EDGES, p, side="right") - 1  # bin of each row
        first = int(p[row_bad.reshape(-1)].min()) if row_bad.any() else None
        zero = p == 0
        at_zero = float(row_err.reshape(-1)[zero].max()) if zero.any() else None
        channel_err = err.reshape(-1, err.shape[-1]).max(axis=0) if err.size else None  # (D,)
        channel_ratio = ratio.reshape(-1, ratio.shape[-1]).max(axis=0) if err.size else None
        with lock or contextlib.nullcontext():
            if channel_err is not None:
                np.maximum(self.channel_error, channel_err, out=self.channel_error)
                np.maximum(self.channel_ratio, channel_ratio, out=self.channel_ratio)
            self.n += err.size
            self.n_outside += outside
            if worst is not None:
                self.max_abs_error = max(self.max_abs_error, float(row_err.max()))
                # the first index of the largest ratio, whatever order the blocks come in
                if not self.worst_index or worst[0] > self.max_ratio or (
                        worst[0] == self.max_ratio and worst[1] < self.worst_index):
                    self.max_ratio, self.worst_index = worst
            np.add.at(self.bin_rows, b, 1)
            np.add.at(self.bin_outside, b, row_bad.reshape(-1).astype(np.int64))
            np.maximum.at(self.bin_error, b, row_err.reshape(-1))
            np.maximum.at(self.bin_ratio, b, row_ratio.reshape(-1))
            if first is not None:
                self.first_bad_position = first if self.first_bad_position is None else min(first,
                                                                                            self.first_bad_position)
            if at_zero is not None:
                self.error_at_zero = at_zero if self.error_at_zero is None else max(at_zero, self.error_at_zero)

    def add_non_finite(self, candidate: np.ndarray, reference: np.ndarray, positions: np.ndarray,
                       lock: Any = None) -> None:
        """Count the entries of one block that are NaN or infinite where the reference is finite."""
        bad = ~np.isfinite(candidate) & np.isfinite(reference)  # (k, rows, D)
        count = int(np.count_nonzero(bad))
        nan = np.isnan(candidate) & ~np.isnan(reference)
        n_nan = int(np.count_nonzero(nan))
        with lock or contextlib.nullcontext():
            self.n_nan += n_nan
            if n_nan:
                self.channel_error[nan.reshape(-1, nan.shape[-1]).any(axis=0)] = np.nan
            if not count:
                return
            self.n_non_finite += count
            first = int(positions[bad.any(axis=-1)].min())
            self.non_finite_position = first if self.non_finite_position is None else min(first,
                                                                                          self.non_finite_position)

    def non_finite(self) -> list[dict[str, Any]]:
        """The ``non_finite`` diagnosis (θ = 0, an overflow, uninitialised tables), or nothing."""
        if not self.n_non_finite:
            return []
        return [{"id": known("non_finite"), "evidence": f"{self.n_non_finite} of {self.n} values are NaN or infinite "
                 f"where the reference is finite (first at position {self.non_finite_position}): e.g. rope_theta = 0 "
                 "(powf(0, −x) = inf), an overflowing exponent, or an uninitialised table"}]

    def profile_entry(self) -> dict[str, Any]:
        """The ``error_profile`` diagnosis: :func:`profile_text` of :meth:`profile`, and where the error starts."""
        return {"id": known("error_profile"), "evidence": profile_text(self.profile()),
                "first_bad_position": self.first_bad_position, "error_at_zero": self.error_at_zero}

    def full_index(self) -> list[int]:
        """:attr:`worst_index` in the candidate's own shape."""
        if not self.worst_index:
            return []
        lead = np.unravel_index(self.worst_index[0], self.shape[:-2]) if len(self.shape) > 2 else ()
        return [*(int(i) for i in lead), *self.worst_index[1:]]

    def summary(self) -> dict[str, Any]:
        """``ok``, ``max_abs_error``, ``max_ratio``, ``n_nan`` (NaN where the reference is not), ``worst_index``,
        ``n_outside``, ``n``."""
        return {"ok": self.n_outside == 0, "max_abs_error": self.max_abs_error, "max_ratio": self.max_ratio,
                "n_nan": self.n_nan,
                "worst_index": self.full_index(), "n_outside": self.n_outside, "n": self.n}

    def profile(self) -> dict[str, Any]:
        """The error against the position: one entry per non-empty bin ``[from, to)``, and where it starts.

        ``fine_below``: the largest bin edge below which every row is within tolerance (``None`` when
        the first bin already fails); ``first_bad_position``: the smallest position with an entry outside.
        """
        bins = []
        fine_below: int | None = None
        failed = False
        for i in np.flatnonzero(self.bin_rows):
            if self.bin_outside[i] and not failed:
                failed = True
            if not failed:
                fine_below = int(BIN_EDGES[i + 1])
            bins.append({"from": int(BIN_EDGES[i]), "to": int(BIN_EDGES[i + 1]), "rows": int(self.bin_rows[i]),
                         "rows_outside": int(self.bin_outside[i]), "max_abs_error": float(self.bin_error[i]),
                         "max_ratio": float(self.bin_ratio[i])})
        return {"bins": bins, "first_bad_position": self.first_bad_position,
                "fine_below": fine_below if failed else None, "error_at_zero": self.error_at_zero}


def sample_rows(positions: np.ndarray, worst: tuple[int, ...] = (), limit: int = SAMPLE_ROWS
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(leading, token)`` indices of the rows a diagnosis compares, of positions ``(L, T)``.

    Every row when there are at most ``limit``; otherwise rows spread evenly over all of them, the rows
    of the smallest positions (64 of them, or a quarter of ``limit`` when that is less: position 0 and 1
    among them, where an offset or a frequency shows first) and the worst row of the comparison, in order.
    """
    n_lead, t = positions.shape
    total = n_lead * t
    if total <= limit:
        flat = np.arange(total)
    else:
        flat_positions = positions.reshape(-1)  # (L·T,)
        small = min(64, max(1, limit // 4))
        smallest = np.argpartition(flat_positions, small)[:small]
        spread = np.linspace(0, total - 1, max(1, limit - small - 1)).round().astype(np.int64)
        extra = [worst[0] * t + worst[1]] if len(worst) >= 2 else []
        flat = np.unique(np.concatenate([spread, smallest, np.asarray(extra, dtype=np.int64)]))
    return flat // t, flat % t


def per_channel(cand: np.ndarray, reference: np.ndarray, entry: dict[str, Any], dtype: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The largest error and the largest ratio to the case's tolerance of every channel (last axis)."""
    from refpos.golden.exact.entries import allowed_error

    err = block_error(cand.astype(np.float64), reference.astype(np.float64))
    allowed = np.broadcast_to(allowed_error(reference.astype(np.float64), entry, dtype), err.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((err == 0) & (allowed == 0), 0.0, err / allowed)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    error = np.where(np.isnan(cand) & ~np.isnan(reference), np.nan, err)
    flat = error.shape[-1] if error.ndim else 1
    return error.reshape(-1, flat).max(axis=0), ratio.reshape(-1, flat).max(axis=0)


def ranges(indices: list[int], dash: str = "–") -> str:
    """``[0, 1, 2, 5]`` as ``0–2, 5`` (``dash`` between the ends of a run)."""
    spans, start = [], indices[0]
    for prev, cur in zip(indices, [*indices[1:], None], strict=True):
        if cur is None or cur != prev + 1:
            spans.append(f"{start}" if start == prev else f"{start}{dash}{prev}")
            start = cur
    return ", ".join(spans)


def profile_text(profile: dict[str, Any]) -> str:
    """One line: where the error starts and the max error and ratio per position bin."""
    first = profile["first_bad_position"]
    head = "every position within tolerance" if first is None else (
        f"fine below position {profile['fine_below']}, wrong from {first} on" if profile["fine_below"] is not None
        else f"wrong from position {first} on")
    bins = "; ".join(f"[{b['from']}, {b['to']}): {b['max_abs_error']:.2g} ({b['max_ratio']:.2g}×)"
                     for b in profile["bins"])
    return f"{head}; max error (× tolerance) per position bin: {bins}"


def compare_rows(candidate: np.ndarray, positions: np.ndarray,
                 reference_of: Callable[[slice, slice], tuple[np.ndarray, np.ndarray]],
                 progress: Callable[[int, int], None] | None = None,
                 block_elements: int | None = None) -> Tally:
    """Compare ``candidate`` ``(..., T, D)`` block by block; ``reference_of(leading, rows)`` gives the
    float64 reference and the tolerance of one block of the ``(L, T, D)`` view.

    ``positions`` ``(L, T)``: the position of every row (for the profile). ``progress(done, total)`` is
    called after each block with the elements compared so far.
    """
    rows_view = as_rows(candidate)  # (L, T, D)
    n_lead, t, d = rows_view.shape
    tally = Tally(candidate.shape)
    total, done = rows_view.size, [0]
    lock = threading.Lock()

    def block(lead: slice, rows: slice) -> None:
        cand = np.asarray(rows_view[lead, rows], dtype=np.float64)  # (k, rows, D), read from the file here
        reference, atol = reference_of(lead, rows)
        err = block_error(cand, reference)
        if err.size and not np.isfinite(err.max()):
            tally.add_non_finite(cand, reference, positions[lead, rows], lock)
        tally.add(err, atol, positions[lead, rows], (lead.start, rows.start), lock)
        with lock:
            done[0] += cand.size
            if progress is not None:
                progress(done[0], total)

    # blocks on every core: each computes its reference serially in its own thread (parallel's nesting rule)
    run_blocks([partial(block, lead, rows) for lead, rows in row_blocks(n_lead, t, d, block_elements or
                                                                        BLOCK_ELEMENTS)],
               numpy=True, work=total)
    return tally
