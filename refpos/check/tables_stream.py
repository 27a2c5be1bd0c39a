r"""Blockwise ``refpos check`` of ALiBi biases, T5/DeBERTa buckets, sinusoid tables: bounded memory at any size.

A bias ``(H, Tq, Tk)`` or a bucket table ``(Tq, Tk)`` at 32k positions is gigabytes. As for RoPE
(:mod:`refpos.check.stream`), the candidate is read memory-mapped and compared block by block along its
rows (query rows; table positions), each block with its own reference and its own tolerance:

=========  ====================  ======================================================  =================
family     rows ``(L, T, D)``    reference of a block                                    position of a row
=========  ====================  ======================================================  =================
alibi      ``(H, Tq, Tk)``       :func:`refpos.encodings.alibi_bias_from_positions` on   ``Tk − Tq + i``
                                 its heads' slopes and its queries (the same products)
t5         ``(…, Tq, Tk)``       :func:`refpos.encodings.t5_bucket` of its relative      the row ``i``
                                 positions
deberta    ``(…, Tq, Tk)``       :func:`refpos.encodings.deberta_log_buckets` of its     the row ``i``
                                 ``δ``
sinusoid   ``(…, T, dim)``       :func:`refpos.encodings.sinusoidal.sinusoidal` of its   its position
                                 positions
=========  ====================  ======================================================  =================

Each entry of a block is the same number the whole-array reference holds (every formula here is
elementwise), so the blockwise verdict is the whole-array one; the tests compare both. The tolerances
are per block too: :func:`refpos.golden.tolerance.value_tolerance` (ALiBi), 0 (buckets are integers),
:func:`refpos.golden.tolerance.rope_tolerance` (sinusoid, growing with the position).

The diagnosis (:mod:`refpos.check.tables`) tries whole-table mutants; it runs on a bounded part of the
candidate, at most :data:`SAMPLE_ELEMENTS` entries: the **last** query rows of an ALiBi bias (with
queries aligned to the end of the keys they are the bias of a shorter query block, and every ALiBi
mistake of the catalogue changes every row), and for bucket and sinusoid tables rows spread over the whole
table, the smallest positions and the worst row (:func:`refpos.check.stream.sample_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check import stream
from refpos.check.catalogue import known
from refpos.check.fit_tables import fit_alibi, fit_deberta, fit_sinusoid, fit_t5
from refpos.check.problem import np_ns
from refpos.check.tables import diagnose_alibi, diagnose_deberta, diagnose_sinusoid, diagnose_t5
from refpos.golden import tolerance as tol

#: entries of the candidate the diagnosis of a table works on at most (2**22: 32 MiB per float64 copy)
SAMPLE_ELEMENTS = 2**22

Progress = Callable[[int, int], None] | None


def float32_values() -> dict[str, Any]:
    """The ``float32_values`` diagnosis: within the float32 tolerance, outside the float64 one."""
    return {"id": known("float32_values"), "evidence": (
        "outside the float64 tolerance but within the float32 one (rtol 1e-6): float32 arithmetic, e.g. "
        "BLOOM's slopes (declare --dtype float32 if that is intended)")}


def float32_angles() -> dict[str, Any]:
    """The ``float32_angles`` diagnosis of a sinusoid table."""
    return {"id": known("float32_angles"), "evidence": (
        "outside the float64 tolerance but within the float32 one: the table was computed in float32 "
        "(declare --dtype float32 if that is intended)")}


def relative_grid(q_len: int, k_len: int, *, query_minus_key: bool = False) -> np.ndarray:
    """``rel[i, j] = j − (k_len − q_len + i)`` ``(q_len, k_len)`` without the memory of the grid
    (``query_minus_key``: its negative, DeBERTa's ``δ = query − key``).

    Queries are aligned to the end of the keys (as :func:`refpos.encodings.alibi_bias`). Every row is the row
    above shifted by one, so the grid is a read-only strided view of one line of ``q_len + k_len − 1``
    values ``line[t] = t − (k_len − 1)``: ``rel[i, j] = line[j + q_len − 1 − i]``.
    """
    if q_len <= 0 or k_len <= 0:
        return np.zeros((max(q_len, 0), max(k_len, 0)), dtype=np.int64)
    line = np.arange(q_len + k_len - 1, dtype=np.int64) - (k_len - 1)  # (q_len + k_len − 1,)
    line = -line if query_minus_key else line
    start = line[q_len - 1:]  # rel[0, 0] = line[q_len − 1]
    step = line.itemsize
    return np.lib.stride_tricks.as_strided(start, shape=(q_len, k_len), strides=(-step, step), writeable=False)


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` as ``(L, T, D)`` rows (a view): ``(…, T, D)`` as :func:`refpos.check.stream.as_rows`, ``(D,)`` as
    ``(1, 1, D)``, a scalar as ``(1, 1, 1)``."""
    if a.ndim >= 2:
        return stream.as_rows(a)  # (L, T, D)
    return a.reshape(1, 1, -1) if a.ndim == 1 else a.reshape(1, 1, 1)  # (1, 1, D)


def _verdict(target: str, dtype: str, tally: stream.Tally, shape: tuple[int, ...],
             rows_shape: tuple[int, ...]) -> dict[str, Any]:
    """The result of a streamed comparison: the tally's summary, with the worst index in the candidate's own
    ``shape``, and the error profile; ``diagnosis`` is already ``[]`` when nothing is outside tolerance."""
    summary = tally.summary()
    if tally.worst_index:
        flat = np.ravel_multi_index(tally.worst_index, rows_shape)
        summary["worst_index"] = [int(i) for i in np.unravel_index(flat, shape)] if shape else []
    result = {"target": target, "dtype": dtype, **summary, "error_profile": tally.profile()}
    if tally.n_outside == 0:
        result["diagnosis"] = []
    return result


# ------------------------------------------------------------------------------------------ ALiBi
def stream_alibi(raw: np.ndarray, n: int, form: str, dtype: str, head_dim: int | None,
                 progress: Progress) -> dict[str, Any]:
    """Check an ALiBi bias ``raw`` ``(n, Tq, Tk)`` (validated shape, ``Tq <= Tk``), block by block."""
    import refpos

    _, q_len, k_len = raw.shape
    slopes = np.asarray(to_numpy(refpos.encodings.alibi_slopes(n, xp=np_ns())))  # (n,)
    q_positions = np.arange(k_len - q_len, k_len, dtype=np.int64)  # (Tq,): aligned to the end of the keys
    k_positions = np.arange(k_len, dtype=np.int64)  # (Tk,)
    rows_positions = np.broadcast_to(q_positions, (n, q_len))  # (L = n, T = Tq): the query of each row

    def reference_of(lead: slice, rows: slice, rule: str = dtype) -> tuple[np.ndarray, np.ndarray]:
        bias = refpos.encodings.alibi_bias_from_positions(np_ns().asarray(slopes[lead]),
                                                          np_ns().asarray(q_positions[rows]),
                                                          np_ns().asarray(k_positions), form=form)
        reference = np.asarray(to_numpy(bias))  # (k, rows, Tk)
        return reference, np.asarray(tol.value_tolerance(rule, reference))

    tally = stream.compare_rows(raw, rows_positions, reference_of, progress)
    result = _verdict("alibi", dtype, tally, raw.shape, raw.shape)
    if tally.n_outside == 0:
        return result
    last = max(1, min(q_len, SAMPLE_ELEMENTS // max(1, n * k_len)))  # the last query rows
    cand = np.asarray(raw[:, q_len - last:, :], dtype=np.float64)  # (n, last, Tk)
    reference = np.asarray(to_numpy(refpos.encodings.alibi_bias(n, last, k_len, form=form, xp=np_ns())))
    atol = np.asarray(tol.value_tolerance(dtype, reference))
    result["diagnosis"] = [*tally.non_finite(), *diagnose_alibi(cand, n, q_len=last, k_len=k_len, form=form,
                                                                atol=atol, head_dim=head_dim)]
    result.update(fit_alibi(cand, slopes, np.asarray(tol.value_tolerance(dtype, slopes)),
                            q_positions=q_positions[q_len - last:], k_positions=k_positions))
    if dtype == "float64" and stream.compare_rows(raw, rows_positions, partial(reference_of, rule="float32")
                                                  ).n_outside == 0:  # a second pass, under the float32 tolerance
        result["diagnosis"].insert(0, float32_values())
    if last < q_len:
        result["diagnosis_rows"] = last
    return result


# ------------------------------------------------------------------------------------- T5, DeBERTa
def exact_int64(r: Any) -> np.ndarray:
    """Integer relative positions as int64, never wrapped around: a uint64 above 2**63 − 1 is a ValueError."""
    r = np.asarray(r)
    if r.dtype.kind == "u" and r.size and int(r.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"relative positions must be integers that int64 holds (< 2**63), got {int(r.max())}")
    return r.astype(np.int64)


def _stream_buckets(family: str, cand: np.ndarray, rel: np.ndarray, buckets: Callable[[np.ndarray], np.ndarray],
                    diagnose: Callable[[np.ndarray, np.ndarray], list], progress: Progress,
                    identify: Callable[[np.ndarray, np.ndarray], dict] | None = None) -> dict[str, Any]:
    """Check integer buckets ``cand`` of the relative positions ``rel`` (same shape), block by block."""
    rows, rel_rows = _rows(cand), _rows(rel)  # (L, T, D) views
    n_lead, t, d = rows.shape
    rows_positions = np.broadcast_to(np.arange(t, dtype=np.int64), (n_lead, t))  # (L, T): the row index

    def reference_of(lead: slice, block: slice) -> tuple[np.ndarray, np.ndarray]:
        reference = buckets(exact_int64(rel_rows[lead, block])).astype(np.float64)  # exact < 2**53
        return reference, np.zeros_like(reference)  # buckets are integers: equal or wrong

    tally = stream.compare_rows(rows, rows_positions, reference_of, progress)
    result = _verdict(family, "integer", tally, cand.shape, rows.shape)
    if tally.n_outside == 0:
        return result
    lead_index, token_index = _sample(rows_positions, tally.worst_index, d)
    sample = (np.asarray(rows[lead_index, token_index], dtype=np.int64),
              np.asarray(rel_rows[lead_index, token_index], dtype=np.int64))
    result["diagnosis"] = diagnose(*sample)
    if identify is not None:
        result["bucket_map"] = identify(*sample)  # the map offset → bucket and the keys that reproduce it
    if len(token_index) < n_lead * t:
        result["diagnosis_rows"] = len(token_index)
    return result


def stream_t5(cand: np.ndarray, rel: np.ndarray, bidirectional: bool, num_buckets: int, max_distance: int,
              progress: Progress) -> dict[str, Any]:
    """Check integer T5 buckets ``cand`` of the relative positions ``rel`` (memory − query), block by block."""
    import refpos

    def buckets(r: np.ndarray) -> np.ndarray:
        return np.asarray(to_numpy(refpos.encodings.t5_bucket(np_ns().asarray(r), bidirectional=bidirectional,
                                                              num_buckets=num_buckets, max_distance=max_distance)))

    keys = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    return _stream_buckets("t5", cand, rel, buckets, partial(diagnose_t5, **keys), progress, partial(fit_t5, **keys))


def stream_deberta(cand: np.ndarray, rel: np.ndarray, position_buckets: int, max_relative_positions: int,
                   progress: Progress) -> dict[str, Any]:
    """Check integer DeBERTa log buckets ``cand`` of ``rel`` (query − key), block by block."""
    import refpos

    def buckets(r: np.ndarray) -> np.ndarray:
        return np.asarray(to_numpy(refpos.encodings.deberta_log_buckets(np_ns().asarray(r), position_buckets,
                                                                        max_relative_positions)))

    keys = {"position_buckets": position_buckets, "max_relative_positions": max_relative_positions}
    return _stream_buckets("deberta", cand, rel, buckets, partial(diagnose_deberta, **keys), progress,
                           partial(fit_deberta, **keys))


# --------------------------------------------------------------------------------------- sinusoid
def stream_sinusoid(raw: np.ndarray, positions: np.ndarray, dim: int, base: float, layout: str, spacing: str,
                    dtype: str, progress: Progress) -> dict[str, Any]:
    """Check a sinusoid table ``raw`` ``(*positions.shape, dim)`` (validated shape), block by block."""
    import refpos

    rows = _rows(raw)  # (L, T, dim)
    rows_positions = positions.reshape(rows.shape[:-1])  # (L, T)
    freqs = np.asarray(to_numpy(refpos.encodings.sinusoidal_frequencies(dim, base=base, spacing=spacing, xp=np_ns())))

    def table(at: np.ndarray) -> np.ndarray:
        return np.asarray(to_numpy(refpos.encodings.sinusoidal.sinusoidal(np_ns().asarray(at), dim, base=base,
                                                                          layout=layout, spacing=spacing)))

    def reference_of(lead: slice, block: slice, rule: str = dtype) -> tuple[np.ndarray, np.ndarray]:
        at = rows_positions[lead, block]  # (k, rows)
        reference = table(at)  # (k, rows, dim)
        return reference, np.asarray(tol.rope_tolerance(rule, at, freqs, reference=reference))

    tally = stream.compare_rows(rows, rows_positions, reference_of, progress)
    result = _verdict("sinusoid", dtype, tally, raw.shape, rows.shape)
    if tally.n_outside == 0:
        return result
    lead_index, token_index = _sample(rows_positions, tally.worst_index, dim)
    at = rows_positions[lead_index, token_index]  # (N,)
    cand = np.asarray(rows[lead_index, token_index], dtype=np.float64)  # (N, dim)
    atol = np.asarray(tol.rope_tolerance(dtype, at, freqs, reference=table(at)))
    result["diagnosis"] = [*tally.non_finite(), *diagnose_sinusoid(cand, at, dim=dim, base=base, layout=layout,
                                                                   spacing=spacing, atol=atol)]
    result.update(fit_sinusoid(cand, at, dim=dim, base=base, layout=layout, spacing=spacing, dtype=dtype,
                               channel_error=tally.channel_error, channel_ratio=tally.channel_ratio))
    if dtype == "float64" and stream.compare_rows(rows, rows_positions, partial(reference_of, rule="float32")
                                                  ).n_outside == 0:  # a second pass, under the float32 tolerance
        result["diagnosis"].insert(0, float32_angles())
    if len(token_index) < rows_positions.size:
        result["diagnosis_rows"] = len(token_index)
    return result


def _sample(positions: np.ndarray, worst: tuple[int, ...], width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(leading, token)`` indices of at most :data:`SAMPLE_ELEMENTS` entries' rows of width ``width``."""
    return stream.sample_rows(positions, worst, limit=max(1, min(stream.SAMPLE_ROWS, SAMPLE_ELEMENTS // max(1, width))))
