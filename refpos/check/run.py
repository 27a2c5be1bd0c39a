"""``refpos check``: compare a candidate output with the reference, within the dtype's tolerance, and name
the mistake when it is outside (the catalogue: docs/diagnosis.md).

.. code-block:: text

    refpos check rope --config CONFIG.json --input X.npy --positions P.npy --candidate Y.npy
                      [--seq-len L] [--layer-type T] [--dtype float32] [--json]
    refpos check alibi --heads N --candidate S.npy [--q-len Q --k-len K --form causal] [--head-dim D]
    refpos check t5 --candidate B.npy (--relative REL.npy | --q-len Q --k-len K) [--causal]
                    [--num-buckets 32] [--max-distance 128]
    refpos check deberta --candidate B.npy (--relative REL.npy | --q-len Q --k-len K)
                         --position-buckets 256 --max-relative-positions 512
    refpos check sinusoid --candidate P.npy --dim D (--positions P.npy | --length T)
                          [--base 1e4] [--layout interleaved] [--spacing paper]
    refpos check CASE_ID Y.npy [--output NAME] [--golden-dir DIR] [--dtype …]

Exit status: 0 within tolerance, 1 outside (with the diagnosis), 2 unusable input (one line on stderr:
a truncated, corrupt or pickled .npy, wrong shapes or dtypes, a manifest naming a missing file, a config
that does not resolve). ``--json`` prints ``{"ok": …, "diagnosis": [{"id", "evidence", …}], …}``.

``--dtype`` is the dtype the candidate *computed* in; default: the candidate file's dtype (float32 /
float16), else float64. A correct float32 implementation passes as float32; the same output declared
float64 fails and is diagnosed ``float32_angles``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check import stream, tables_stream
from refpos.check.catalogue import known
from refpos.check.diagnosis import diagnose_rope
from refpos.check.fit_names import merge as merge_names
from refpos.check.fit_tables import fit_alibi
from refpos.check.identify import identify_rope
from refpos.check.mrope import TokenKinds, diagnose_mrope, mrope_problem, token_kinds_text
from refpos.check.problem import np_ns, rope_problem, rotated_tolerance
from refpos.check.stream import SAMPLE_ROWS, sample_rows
from refpos.check.tables import diagnose_alibi
from refpos.golden import tolerance as tol
from refpos.golden.compare import compare
from refpos.golden.npy_file import NpyFile
from refpos.rope.core import check_seq_len_covers
from refpos.validation import as_positions


class Unusable(ValueError):
    """Input that cannot be checked (exit status 2)."""


def _host(a: Any) -> Any:
    """``a`` on the host: an :class:`~refpos.golden.npy_file.NpyFile` as it is (read block by block), any
    other array as a NumPy array (a memory map stays one)."""
    return a if isinstance(a, NpyFile) else np.asarray(to_numpy(a))


def _positions(a: Any) -> np.ndarray:
    """Integer positions as int64, checked as the API checks them (:func:`refpos.validation.as_positions`:
    >= 0, at most 2**53, uint64 values read exactly, never wrapped around); :class:`Unusable` otherwise."""
    a = np.asarray(_host(a))
    if a.dtype.kind not in "iu":
        raise Unusable(f"positions must be an integer array, got {a.dtype}")
    try:
        return np.asarray(as_positions(a, xp=np_ns()))
    except (ValueError, TypeError) as exc:
        raise Unusable(str(exc)) from None


def rope_positions_for(x_shape: tuple[int, ...], positions: np.ndarray, rope: Any) -> np.ndarray:
    """``positions`` checked against ``x``'s shape by the rule of :func:`refpos.apply_rope` (they end in x's T
    axis and broadcast to it without adding or enlarging an axis; ``(B, T)`` with ``(B, H, T, D)`` gets a head
    axis) and aligned as it aligns them; :class:`Unusable` naming both shapes otherwise."""
    from refpos.rope.core import align_positions, prepare_inputs

    stub = np.broadcast_to(np.float64(0.0), x_shape)  # x's shape, no memory
    try:
        stub, checked, _ = prepare_inputs(stub, positions, rope)
        return np.asarray(align_positions(checked, stub, rope))
    except (ValueError, TypeError) as exc:
        raise Unusable(f"positions {tuple(positions.shape)} do not fit x {tuple(x_shape)}: {exc}") from None


def same_shape(candidate: np.ndarray, shape: tuple[int, ...], what: str) -> None:
    """:class:`Unusable` naming both shapes when ``candidate`` is not of ``shape`` (what ``what`` needs)."""
    if tuple(candidate.shape) != tuple(shape):
        raise Unusable(f"the candidate has shape {tuple(candidate.shape)}, {what} needs {tuple(shape)}")


def default_dtype(candidate: np.ndarray) -> str:
    return candidate.dtype.name if candidate.dtype.name in ("float32", "float16") else "float64"


def _summary(candidate: np.ndarray, reference: np.ndarray, atol: np.ndarray) -> dict[str, Any]:
    """The JSON numbers of :func:`refpos.golden.compare.compare` (equal NaNs agree: a NaN policy)."""
    summary = compare(candidate, reference, atol=atol, equal_nan=True).summary()
    summary["worst_index"] = summary["worst_index"] or []
    return summary


def _float_kind(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` unchanged (a memory map stays one) when it holds floats; :class:`Unusable` otherwise."""
    if a.dtype.kind != "f":
        raise Unusable(f"{what} must be a floating array (float64, float32 or float16), got {a.dtype}")
    return a


def check_rope(candidate: Any, x: Any, positions: Any, rope: Any, *, seq_len: int | None = None,
               dtype: str | None = None, progress: Callable[[int, int], None] | None = None,
               diagnose: bool = False) -> dict[str, Any]:
    """Compare ``candidate`` with ``apply_rope(x, positions, rope, seq_len)`` and diagnose a mismatch.

    ``dtype``: what the candidate computed in (default: its own dtype if float32/float16, else float64).
    ``candidate`` and ``x`` may be files opened for block reads (:func:`refpos.golden.npy_file.open_npy`, as
    ``refpos check`` opens them) or memory maps: they are read and compared block by block along the positions
    (:mod:`refpos.check.stream`), so the
    extra memory stays bounded; the diagnosis runs on a sample of the rows (:func:`sample_rows`).
    ``progress(done, total)``: called after each block (elements compared so far). ``diagnose``: diagnose
    even when the comparison passes (a golden case's own tolerance may fail it, :mod:`refpos.check.golden_rope`).
    """
    raw = _float_kind(_host(candidate), "candidate")
    dtype = tol.check_dtype(dtype or default_dtype(raw))
    x = _float_kind(_host(x), "input x")
    if x.ndim < 2 or x.shape[-1] != rope.head_dim:
        raise Unusable(f"input x must be (..., T, head_dim={rope.head_dim}), got shape {tuple(x.shape)}")
    positions = _positions(positions)
    try:
        check_seq_len_covers(rope, seq_len, int(positions.max()) + 1 if positions.size else None, xp=np_ns())
    except ValueError as exc:
        raise Unusable(f"--seq-len: {exc}") from None
    if rope.mrope_section is not None:  # positions (3, ..., T), the M-RoPE catalogue (refpos.check.mrope)
        return _check_mrope(raw, x, positions, rope, seq_len, dtype, progress, diagnose)
    positions = np.broadcast_to(rope_positions_for(x.shape, positions, rope), x.shape[:-1])
    same_shape(raw, x.shape, "the input x")
    import refpos
    from refpos.rope.core import rope_pair_slices, rope_span

    length = int(positions.max()) + 1 if seq_len is None and positions.size else seq_len
    inv_freq, factor = refpos.rope_frequencies(rope, seq_len=length, xp=np_ns())
    inv_freq, factor = np.asarray(to_numpy(inv_freq)), float(factor)
    x_rows = stream.as_rows(x)  # (L, T, D)
    rows_positions = positions.reshape(x_rows.shape[:-1])  # (L, T)
    channels = rope_pair_slices(rope, *rope_span(rope))  # (u_in, v_in, u_out, v_out) as slices

    def reference_of(lead: slice, rows: slice) -> tuple[np.ndarray, np.ndarray]:
        block = np.asarray(x_rows[lead, rows], dtype=np.float64)  # (k, rows, D)
        at = rows_positions[lead, rows]  # (k, rows)
        reference = np.asarray(refpos.apply_rope(block, at, rope, frequencies=(inv_freq, factor)))
        return reference, rotated_tolerance(dtype, at, inv_freq, block, channels, factor, reference)

    tally = stream.compare_rows(raw, rows_positions, reference_of, progress)
    result = {"target": "rope", "dtype": dtype, "seq_len": length, "rope_type": rope.rope_type,
              **tally.summary(), "error_profile": tally.profile()}
    lead_index, token_index = sample_rows(rows_positions, tally.worst_index, limit=SAMPLE_ROWS)
    sample_x = np.asarray(x_rows[lead_index, token_index], dtype=np.float64)  # (N, D)
    sample_cand = np.asarray(stream.as_rows(raw)[lead_index, token_index], dtype=np.float64)  # (N, D)
    sample_positions = rows_positions[lead_index, token_index]  # (N,)
    result.update(identify_rope(rope, length, dtype, sample_x, sample_cand, sample_positions, token_index,
                                tally.channel_error, tally.channel_ratio))
    if result["ok"] and not diagnose:
        result["diagnosis"] = []
        return result
    pb = rope_problem(sample_x, sample_positions, rope, length, dtype, token_index=token_index,
                      min_position=int(positions.min()), max_position=int(positions.max()))
    result["diagnosis"] = merge_names([*tally.non_finite(), *diagnose_rope(pb, sample_cand),
                                       tally.profile_entry()], result["fitted"].get("names", []), result["fitted"])
    if len(token_index) < raw.size // raw.shape[-1]:
        result["diagnosis_rows"] = len(token_index)
    return result


def _check_mrope(raw: np.ndarray, x: np.ndarray, positions: np.ndarray, rope: Any, seq_len: int | None, dtype: str,
                 progress: Callable[[int, int], None] | None, diagnose: bool = False) -> dict[str, Any]:
    """:func:`check_rope` for M-RoPE positions ``(3, ..., T)`` (or ``(T,)``: t = h = w), block by block.

    Each block is the M-RoPE problem of its rows (:func:`refpos.check.mrope.mrope_problem` at the whole
    check's ``seq_len``: the same reference and tolerance as the whole problem's, row by row). The
    diagnosis runs on a window of at most :data:`SAMPLE_ROWS` consecutive tokens of one row of the
    leading axes, around the worst token (the token-index mutant counts from the window's first token).
    """
    from refpos.rope.core import align_positions
    from refpos.rope.mrope import axis_positions

    rope_positions_for(x.shape, positions, rope)  # the shape rule of apply_rope
    same_shape(raw, x.shape, "the input x")
    x_rows = stream.as_rows(x)  # (L, T, D)

    def block_problem(lead: slice, rows: slice) -> Any:
        return mrope_problem(np.asarray(x_rows[lead, rows], dtype=np.float64), axes_rows[:, lead, rows], rope, length,
                             dtype)

    try:
        axes = np.asarray(to_numpy(axis_positions(positions, xp=np_ns())))  # (3, ..., T)
        axes = align_positions(axes, x, rope)  # (3, B, 1, T) for (3, B, T) with x (B, H, T, D)
        axes = axes.reshape(3, *(1,) * (x.ndim - axes.ndim), *axes.shape[1:])  # (3, 1, …, T): x's token axes
        axes = np.broadcast_to(axes, (3, *x.shape[:-1]))  # (3, ..., T)
        axes_rows = axes.reshape(3, *x_rows.shape[:-1])  # (3, L, T)
        length = int(axes.max()) + 1 if seq_len is None and axes.size else seq_len
        if axes.size:
            block_problem(slice(0, 1), slice(0, 1))  # the config and seq_len, as apply_rope checks them
    except ValueError as exc:
        raise Unusable(f"positions {tuple(positions.shape)} do not fit x {tuple(x.shape)}: {exc}") from None
    per_token = axes_rows.max(axis=0)  # (L, T): the largest position a pair of the token reads
    kinds = TokenKinds(axes_rows)  # the error of text and vision tokens apart

    def reference_of(lead: slice, rows: slice) -> tuple[np.ndarray, np.ndarray]:
        pb = block_problem(lead, rows)
        kinds.add(lead, rows, np.asarray(stream.as_rows(raw)[lead, rows], dtype=np.float64), pb.reference, pb.atol)
        return pb.reference, pb.atol

    tally = stream.compare_rows(raw, per_token, reference_of, progress)
    result = {"target": "rope", "dtype": dtype, "seq_len": length, "rope_type": rope.rope_type, **tally.summary(),
              "error_profile": tally.profile()}
    (n_lead, t), (worst_lead, worst_token) = per_token.shape, (tally.worst_index or (0, 0))[:2]
    window = min(t, SAMPLE_ROWS)
    first = min(max(0, worst_token - window // 2), t - window)
    lead, rows = slice(worst_lead, worst_lead + 1), slice(first, first + window)
    sample = np.asarray(stream.as_rows(raw)[lead, rows], dtype=np.float64)  # (1, window, D)
    result.update(identify_rope(rope, length, dtype, np.asarray(x_rows[lead, rows], dtype=np.float64)[0], sample[0],
                                axes_rows[:, worst_lead, rows], np.arange(first, first + window),
                                tally.channel_error, tally.channel_ratio))
    result["error_profile"]["by_token_kind"] = kinds.profile()
    if result["ok"] and not diagnose:
        result["diagnosis"] = []
        return result
    profile = tally.profile_entry()
    profile["evidence"] += f"; {token_kinds_text(kinds.profile())}"
    result["diagnosis"] = merge_names([*tally.non_finite(), *diagnose_mrope(block_problem(lead, rows), sample, first),
                                       profile], result["fitted"].get("names", []), result["fitted"])
    if window < n_lead * t:
        result["diagnosis_rows"] = window
    return result


def non_finite(candidate: np.ndarray, reference: np.ndarray, positions: np.ndarray | None = None) -> list[dict]:
    """``non_finite``: NaN or infinity where the reference is finite (θ = 0, overflow, uninitialised tables)."""
    bad = ~np.isfinite(candidate) & np.isfinite(reference)
    if not bad.any():
        return []
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    at = ""
    if positions is not None:
        at = f" (first at position {int(np.broadcast_to(positions, candidate.shape[:-1])[where[:-1]])})"
    return [{"id": known("non_finite"), "evidence": f"{int(bad.sum())} of {bad.size} values are NaN or infinite "
             f"where the reference is finite{at}: e.g. rope_theta = 0 (powf(0, −x) = inf), an overflowing exponent, "
             "or an uninitialised table"}]


def check_alibi(candidate: Any, n: int, *, q_len: int | None = None, k_len: int | None = None,
                form: str = "causal", dtype: str | None = None, head_dim: int | None = None,
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Compare ALiBi slopes ``(n,)`` or a bias ``(n, q_len, k_len)`` with the reference.

    A bias may be memory-mapped: it is compared block by block along the query rows
    (:func:`refpos.check.tables_stream.stream_alibi`); the diagnosis runs on its last rows.
    """
    import refpos

    raw = _float_kind(_host(candidate), "candidate")
    dtype = tol.check_dtype(dtype or default_dtype(raw))
    if raw.ndim != 1:
        if q_len is None or k_len is None:
            raise Unusable("a bias candidate needs --q-len and --k-len")
        same_shape(raw, (n, q_len, k_len), "a bias (heads, q_len, k_len)")
        if q_len > k_len:
            raise Unusable(f"q_len must be <= k_len (queries aligned to the end of the keys), got q_len={q_len}, "
                           f"k_len={k_len}")
        return tables_stream.stream_alibi(raw, n, form, dtype, head_dim, progress)
    cand = np.asarray(raw, dtype=np.float64)
    same_shape(cand, (n,), f"slopes for --heads {n}")
    reference = np.asarray(to_numpy(refpos.encodings.alibi_slopes(n, xp=np_ns())))
    atol = np.asarray(tol.value_tolerance(dtype, reference))
    result = {"target": "alibi", "dtype": dtype, **_summary(cand, reference, atol)}
    result["diagnosis"] = [] if result["ok"] else [*non_finite(cand, reference), *diagnose_alibi(
        cand, n, atol=atol, head_dim=head_dim)]
    if not result["ok"]:
        result.update(fit_alibi(cand, reference, atol))
    if not result["ok"] and dtype == "float64" and _summary(cand, reference, np.asarray(
            tol.value_tolerance("float32", reference)))["ok"]:
        result["diagnosis"].insert(0, tables_stream.float32_values())
    return result


def check_t5(candidate: Any, rel: Any, *, bidirectional: bool = True, num_buckets: int = 32,
             max_distance: int = 128, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Compare T5 buckets of ``rel`` (memory − query) with the reference: integers, exact.

    ``candidate`` and ``rel`` may be memory-mapped (or ``rel`` a strided view,
    :func:`refpos.check.tables_stream.relative_grid`): they are compared block by block along the
    query rows; the diagnosis runs on a sample of the rows.
    """
    cand, rel = _buckets_and_relative(candidate, rel, "T5")
    return tables_stream.stream_t5(cand, rel, bidirectional, num_buckets, max_distance, progress)


def _buckets_and_relative(candidate: Any, rel: Any, family: str) -> tuple[Any, Any]:
    """Integer buckets and integer relative positions of one shape, or :class:`Unusable`."""
    cand = _host(candidate)
    if cand.dtype.kind not in "iu":
        raise Unusable(f"{family} buckets must be an integer array, got {cand.dtype}")
    rel = _host(rel)
    if rel.dtype.kind not in "iu":
        raise Unusable(f"relative positions must be an integer array, got {rel.dtype}")
    same_shape(cand, rel.shape, "the relative positions")
    return cand, rel


def check_deberta(candidate: Any, rel: Any, *, position_buckets: int, max_relative_positions: int,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Compare DeBERTa log buckets of ``rel`` (query − key) with the reference: integers, exact; as
    :func:`check_t5`, block by block (``rel`` may be a strided view,
    ``relative_grid(q_len, k_len, query_minus_key=True)``)."""
    from refpos.encodings.deberta import deberta_log_buckets

    cand, rel = _buckets_and_relative(candidate, rel, "DeBERTa")
    deberta_log_buckets(np.zeros(1, dtype=np.int64), position_buckets, max_relative_positions)  # the arguments
    return tables_stream.stream_deberta(cand, rel, position_buckets, max_relative_positions, progress)


def check_sinusoid(candidate: Any, positions: Any, *, dim: int, base: float = 10000.0, layout: str = "interleaved",
                   spacing: str = "paper", dtype: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Compare a sinusoidal table ``(*positions.shape, dim)`` with the reference (position-aware tolerance).

    The table may be memory-mapped: it is compared block by block along the positions
    (:func:`refpos.check.tables_stream.stream_sinusoid`); the diagnosis runs on a sample of the rows.
    """
    raw = _float_kind(_host(candidate), "candidate")
    dtype = tol.check_dtype(dtype or default_dtype(raw))
    positions = _positions(positions)
    same_shape(raw, (*positions.shape, dim), "a table (*positions.shape, dim)")
    return tables_stream.stream_sinusoid(raw, positions, dim, base, layout, spacing, dtype, progress)
