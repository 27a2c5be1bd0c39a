"""``refpos check rope``: the candidate against ``apply_rope(x, positions, rope)`` of the config's layer, block by
block, with the catalogue's diagnosis and the fit of what it computed (docs/diagnosis.md).

.. code-block:: text

    refpos check rope --config CONFIG.json --input X.npy --positions P.npy --candidate Y.npy
                      [--seq-len L] [--layer-type T] [--dtype float32] [--strict] [--json]

Exit status: 0 within tolerance, 1 outside (with the diagnosis), 2 unusable input (one line on stderr:
a truncated, corrupt or pickled .npy, wrong shapes or dtypes, a config that does not resolve). ``--json`` prints
``{"ok": …, "diagnosis": [{"id", "evidence", …}], …}``.

``--dtype`` is the dtype the candidate *computed* in; default: the candidate file's dtype (float32 /
float16), else float64. A correct float32 implementation passes as float32; the same output declared
float64 fails and is diagnosed ``float32_angles``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.rope.diagnosis import diagnose_rope
from refpos.check.rope.fit_names import merge as merge_names
from refpos.check.rope.identify import identify_rope
from refpos.check.rope.mrope import TokenKinds, diagnose_mrope, mrope_problem, token_kinds_text
from refpos.check.rope.problem import rope_problem, rotated_tolerance
from refpos.check.shared import stream
from refpos.check.shared.arrays import (
    Unusable,
    default_dtype,
    float_kind,
    host,
    integer_positions,
    np_ns,
    same_shape,
)
from refpos.check.shared.request import Request
from refpos.check.shared.stream import SAMPLE_ROWS, sample_rows
from refpos.golden.exact import tolerance as tol
from refpos.rope.core import check_seq_len_covers


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


def check_rope(candidate: Any, x: Any, positions: Any, rope: Any, *, seq_len: int | None = None,
               dtype: str | None = None, progress: Callable[[int, int], None] | None = None,
               diagnose: bool = False) -> dict[str, Any]:
    """Compare ``candidate`` with ``apply_rope(x, positions, rope, seq_len)`` and diagnose a mismatch.

    ``dtype``: what the candidate computed in (default: its own dtype if float32/float16, else float64).
    ``candidate`` and ``x`` may be files opened for block reads (:func:`refpos.golden.files.npy_file.open_npy`, as
    ``refpos check`` opens them) or memory maps: they are read and compared block by block along the positions
    (:mod:`refpos.check.shared.stream`), so the
    extra memory stays bounded; the diagnosis runs on a sample of the rows (:func:`sample_rows`).
    ``progress(done, total)``: called after each block (elements compared so far). ``diagnose``: diagnose
    even when the comparison passes (a golden case's own tolerance may fail it, :mod:`refpos.check.rope.golden_rope`).
    """
    raw = float_kind(host(candidate), "candidate")
    dtype = tol.check_dtype(dtype or default_dtype(raw))
    x = float_kind(host(x), "input x")
    if x.ndim < 2 or x.shape[-1] != rope.head_dim:
        raise Unusable(f"input x must be (..., T, head_dim={rope.head_dim}), got shape {tuple(x.shape)}")
    positions = integer_positions(positions)
    try:
        check_seq_len_covers(rope, seq_len, int(positions.max()) + 1 if positions.size else None, xp=np_ns())
    except ValueError as exc:
        raise Unusable(f"--seq-len: {exc}") from None
    if rope.mrope_section is not None:  # positions (3, ..., T), the M-RoPE catalogue (refpos.check.rope.mrope)
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

    Each block is the M-RoPE problem of its rows (:func:`refpos.check.rope.mrope.mrope_problem` at the whole
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


def run(request: Request) -> dict[str, Any]:
    """``refpos check rope``: the RoPE of the ``--config`` layer (``--strict``: refused when the config asks for
    something refpos does not model), the input ``--input`` read block by block, the ``--positions``."""
    if request.layer is None:
        raise Unusable("refpos check rope needs --config CONFIG.json")
    rope = request.layer.rope
    if request.option("strict") and rope.not_modelled:
        raise Unusable(f"--strict: not modelled: {sorted(rope.not_modelled)}")
    x = request.array("input", "--input X.npy", blocks=True)
    positions = request.array("positions", "--positions P.npy")
    result = check_rope(request.candidate, x, positions, rope, seq_len=request.option("seq_len"),
                        dtype=request.dtype, progress=request.progress)
    return {**result, "not_modelled": dict(rope.not_modelled)}


__all__ = ["check_rope", "rope_positions_for", "run"]
