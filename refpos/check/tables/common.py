r"""What the checks of the table encodings share: trying the catalogue's mutants, reading a candidate as rows, the
verdict of a streamed comparison, the sample the diagnosis reads, and the float32 diagnoses.

A bias ``(H, Tq, Tk)`` or a bucket table ``(Tq, Tk)`` at 32k positions is gigabytes. As for RoPE
(:mod:`refpos.check.shared.stream`), the candidate is read memory-mapped and compared block by block along its
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
are per block too: :func:`refpos.golden.exact.tolerance.value_tolerance` (ALiBi), 0 (buckets are integers),
:func:`refpos.golden.exact.tolerance.rope_tolerance` (sinusoid, growing with the position).

The diagnosis tries whole-table mutants (:func:`try_mutants`); it runs on a bounded part of the candidate, at
most :data:`SAMPLE_ELEMENTS` entries: the **last** query rows of an ALiBi bias (with queries aligned to the end of
the keys they are the bias of a shorter query block, and every ALiBi mistake of the catalogue changes every
row), and for bucket and sinusoid tables rows spread over the whole table, the smallest positions and the worst
row (:func:`refpos.check.shared.stream.sample_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.shared import stream
from refpos.check.shared.arrays import Unusable, default_dtype, same_shape, summary
from refpos.check.shared.catalogue import known
from refpos.golden.exact import tolerance as tol
from refpos.golden.exact.compare import compare

#: entries of the candidate the diagnosis of a table works on at most (2**22: 32 MiB per float64 copy)
SAMPLE_ELEMENTS = 2**22
#: one named mistake: ``{"id", "evidence", …}``
Match = dict[str, Any]


def as_np(x: Any) -> np.ndarray:
    """Any backend's array as a NumPy array."""
    return np.asarray(to_numpy(x))


def try_mutants(candidate: np.ndarray, atol: Any, mutants: list[tuple[str, str, Callable[[], np.ndarray]]],
                reference: np.ndarray) -> list[Match]:
    """The mutants ``(id, evidence, build)`` whose output the candidate equals within ``atol`` (a mutant that
    cannot be built for these arguments, or equals the reference, is skipped)."""
    found: list[Match] = []
    for mid, evidence, build in mutants:
        try:
            mutant = np.asarray(build())
        except (ValueError, TypeError):
            continue
        if mutant.shape != candidate.shape or np.array_equal(mutant, reference):
            continue
        fit = compare(candidate, mutant, atol=atol)
        if fit.ok:
            found.append({"id": known(mid), "max_abs_error": fit.max_abs_error,
                          "evidence": f"{evidence}; max |candidate − mutant| = {fit.max_abs_error:.3g}"})
    return found


def float32_values() -> Match:
    """The ``float32_values`` diagnosis: within the float32 tolerance, outside the float64 one."""
    return {"id": known("float32_values"), "evidence": (
        "outside the float64 tolerance but within the float32 one (rtol 1e-6): float32 arithmetic, e.g. "
        "BLOOM's slopes (declare --dtype float32 if that is intended)")}


def float32_angles() -> Match:
    """The ``float32_angles`` diagnosis of a sinusoid table."""
    return {"id": known("float32_angles"), "evidence": (
        "outside the float64 tolerance but within the float32 one: the table was computed in float32 "
        "(declare --dtype float32 if that is intended)")}


def as_rows(a: np.ndarray) -> np.ndarray:
    """``a`` as ``(L, T, D)`` rows (a view): ``(…, T, D)`` as :func:`refpos.check.shared.stream.as_rows`, ``(D,)``
    as ``(1, 1, D)``, a scalar as ``(1, 1, 1)``."""
    if a.ndim >= 2:
        return stream.as_rows(a)  # (L, T, D)
    return a.reshape(1, 1, -1) if a.ndim == 1 else a.reshape(1, 1, 1)  # (1, 1, D)


def verdict(target: str, dtype: str, tally: stream.Tally, shape: tuple[int, ...],
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


def sample(positions: np.ndarray, worst: tuple[int, ...], width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(leading, token)`` indices of at most :data:`SAMPLE_ELEMENTS` entries' rows of width ``width``."""
    return stream.sample_rows(positions, worst, limit=max(1, min(stream.SAMPLE_ROWS, SAMPLE_ELEMENTS // max(1, width))))


def runs(indices: np.ndarray) -> list[list[int]]:
    """Consecutive integers as ``[first, last]`` runs."""
    found: list[list[int]] = []
    for i in (int(v) for v in indices):
        if found and found[-1][1] == i - 1:
            found[-1][1] = i
        else:
            found.append([i, i])
    return found


def config_first(config: Any, others: list[Any]) -> list[Any]:
    """The config's value first, then the others (once each): the values a fit tries for one key."""
    return [config] + [v for v in dict.fromkeys(others) if v != config]


#: the keys of a table check's result that say what the candidate computed (its fit)
TABLE_FIT_KEYS = ("pairs", "fitted", "reference", "heads", "wrong_heads", "bucket_map")


def table_case_fit(checked: dict[str, Any], cand: np.ndarray, reference: np.ndarray, entry: dict[str, Any],
                   dtype: str, sinusoid_layout: str | None) -> dict[str, Any]:
    """The diagnosis and the fit of a table check (ALiBi, T5, DeBERTa, sinusoid) for a golden case's result; a
    sinusoid's pairs judged under the case's tolerance (its ``(sin, cos)`` channels in ``sinusoid_layout``)."""
    out = {"diagnosis": checked["diagnosis"], **{k: checked[k] for k in TABLE_FIT_KEYS if k in checked}}
    if sinusoid_layout is not None and "pairs" in out:
        from refpos.pairs import pair_channels

        error, ratio = stream.per_channel(cand, reference, entry, dtype)
        _, _, sin_ch, cos_ch = pair_channels(sinusoid_layout, cand.shape[-1])
        out["pairs"] = [{**p, "max_error": max(float(error[sin_ch[k]]), float(error[cos_ch[k]])),
                         "ok": bool(max(float(ratio[sin_ch[k]]), float(ratio[cos_ch[k]])) <= 1.0)}
                        for k, p in enumerate(out["pairs"])]
    return out


def direct(target: str, candidate: Any, reference: np.ndarray, dtype: str) -> dict[str, Any]:
    """The candidate against a reference of position-independent values (a layer's own slopes or bias, a learned
    table's rows), within the dtype's value tolerance; no diagnosis."""
    cand = np.asarray(candidate)
    if cand.dtype.kind != "f":
        raise Unusable(f"candidate must be a floating array, got {cand.dtype}")
    same_shape(cand, reference.shape, f"the layer's {target} reference")
    dtype = tol.check_dtype(dtype or default_dtype(cand))
    return {"target": target, "dtype": dtype, **summary(cand.astype(np.float64), reference,
                                                         np.asarray(tol.value_tolerance(dtype, reference))),
            "diagnosis": []}


def layer_rows(request: Any) -> np.ndarray:
    """The rows of an absolute table (sinusoid, learned) the ``--config`` layer reads at the position ids passed to
    the model, ``--positions``: ``p + offset``, or the ids themselves where the family reads them as rows
    (RoBERTa's ``row_ids``; :meth:`refpos.models.kinds.absolute.AbsoluteLayer.rows`)."""
    positions = request.array("positions", "--positions P.npy")
    if positions.dtype.kind not in "iu":
        raise Unusable(f"positions must be an integer array, got {positions.dtype}")
    try:
        return request.layer.rows(positions)
    except ValueError as exc:
        raise Unusable(str(exc)) from None


__all__ = [
    "SAMPLE_ELEMENTS",
    "TABLE_FIT_KEYS",
    "Match",
    "as_np",
    "as_rows",
    "config_first",
    "direct",
    "float32_angles",
    "float32_values",
    "layer_rows",
    "runs",
    "sample",
    "table_case_fit",
    "try_mutants",
    "verdict",
]
