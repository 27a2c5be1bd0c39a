"""What the checks of integer buckets (T5, DeBERTa) share: the relative positions of a query and key grid, the
blockwise comparison, and the fit of the map offset → bucket a candidate used.

:func:`fit_buckets` reports the bucket every relative offset fell in (the map, as runs), where it differs from the
reference's, and the keys of the bucket function (direction, bucket count, distance, the sign of the offset) that
reproduce it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.check.shared import stream
from refpos.check.shared.arrays import Unusable, host, same_shape
from refpos.check.shared.request import Progress, Request
from refpos.check.shared.stream import ranges
from refpos.check.tables.common import as_rows, runs, sample, verdict
from refpos.golden.files.npy_file import open_npy


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


def relative_of(request: Request, *, query_minus_key: bool = False) -> Any:
    """The relative positions of a bucket check: ``--relative`` (read block by block), or the grid of
    ``--q-len × --k-len`` as a view of one line of ``Tq + Tk − 1`` values."""
    if request.option("relative"):
        return open_npy(request.option("relative"))
    q_len = request.need("q_len", "--relative REL.npy or --q-len")
    k_len = request.need("k_len", "--k-len")
    same_shape(request.candidate, (q_len, k_len), "--q-len × --k-len buckets")  # before building (Tq, Tk)
    return relative_grid(q_len, k_len, query_minus_key=query_minus_key)


def buckets_and_relative(candidate: Any, rel: Any, family: str) -> tuple[Any, Any]:
    """Integer buckets and integer relative positions of one shape, or :class:`Unusable`."""
    cand = host(candidate)
    if cand.dtype.kind not in "iu":
        raise Unusable(f"{family} buckets must be an integer array, got {cand.dtype}")
    rel = host(rel)
    if rel.dtype.kind not in "iu":
        raise Unusable(f"relative positions must be an integer array, got {rel.dtype}")
    same_shape(cand, rel.shape, "the relative positions")
    return cand, rel


def exact_int64(r: Any) -> np.ndarray:
    """Integer relative positions as int64, never wrapped around: a uint64 above 2**63 − 1 is a ValueError."""
    r = np.asarray(r)
    if r.dtype.kind == "u" and r.size and int(r.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"relative positions must be integers that int64 holds (< 2**63), got {int(r.max())}")
    return r.astype(np.int64)


def stream_buckets(family: str, cand: np.ndarray, rel: np.ndarray, buckets: Callable[[np.ndarray], np.ndarray],
                   diagnose: Callable[[np.ndarray, np.ndarray], list], progress: Progress,
                   identify: Callable[[np.ndarray, np.ndarray], dict] | None = None) -> dict[str, Any]:
    """Check integer buckets ``cand`` of the relative positions ``rel`` (same shape), block by block."""
    rows, rel_rows = as_rows(cand), as_rows(rel)  # (L, T, D) views
    n_lead, t, d = rows.shape
    rows_positions = np.broadcast_to(np.arange(t, dtype=np.int64), (n_lead, t))  # (L, T): the row index

    def reference_of(lead: slice, block: slice) -> tuple[np.ndarray, np.ndarray]:
        reference = buckets(exact_int64(rel_rows[lead, block])).astype(np.float64)  # exact < 2**53
        return reference, np.zeros_like(reference)  # buckets are integers: equal or wrong

    tally = stream.compare_rows(rows, rows_positions, reference_of, progress)
    result = verdict(family, "integer", tally, cand.shape, rows.shape)
    if tally.n_outside == 0:
        return result
    lead_index, token_index = sample(rows_positions, tally.worst_index, d)
    chosen = (np.asarray(rows[lead_index, token_index], dtype=np.int64),
              np.asarray(rel_rows[lead_index, token_index], dtype=np.int64))
    result["diagnosis"] = diagnose(*chosen)
    if identify is not None:
        result["bucket_map"] = identify(*chosen)  # the map offset → bucket and the keys that reproduce it
    if len(token_index) < n_lead * t:
        result["diagnosis_rows"] = len(token_index)
    return result


# ------------------------------------------------------------------------------------------------ fit
def bucket_map(candidate: np.ndarray, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct offsets ``(K,)``, the bucket each fell in ``(K,)`` (its smallest where it fell in several)
    and whether an offset fell in more than one bucket ``(K,)``."""
    offsets, inverse = np.unique(rel.reshape(-1), return_inverse=True)
    cand = candidate.reshape(-1).astype(np.int64)
    low = np.full(offsets.size, np.iinfo(np.int64).max)
    high = np.full(offsets.size, np.iinfo(np.int64).min)
    np.minimum.at(low, inverse, cand)
    np.maximum.at(high, inverse, cand)
    return offsets, low, low != high


def fit_buckets(candidate: np.ndarray, rel: np.ndarray, buckets: Callable[..., np.ndarray],
                config: dict[str, Any], choices: dict[str, list[Any]], sign_name: str) -> dict[str, Any]:
    """The map offset → bucket of a candidate, where it differs from the reference's, and the keys that
    reproduce it.

    ``buckets(offsets, **keys)`` is the family's bucket function; ``config`` its keys in the check; ``choices``
    the values tried for each key (with the config's); ``sign_name``: the offset's definition (``memory −
    query`` for T5), reported when the negated offsets reproduce the map instead.
    """
    offsets, got, ambiguous = bucket_map(candidate, rel)
    reference = buckets(offsets, **config)
    differ = np.flatnonzero((got != reference) | ambiguous)
    spans = []
    for first, last in runs(differ):  # runs of consecutive offsets with their buckets
        span = slice(first, last + 1)
        spans.append({"offsets": [int(offsets[first]), int(offsets[last])],
                      "buckets": sorted({int(b) for b in got[span]}),
                      "reference_buckets": sorted({int(b) for b in reference[span]})})
    result: dict[str, Any] = {"offsets": int(offsets.size), "differ": int(differ.size), "runs": spans,
                              "ambiguous": [int(o) for o in offsets[ambiguous]], "keys": None}
    if ambiguous.any():
        result["reason"] = "an offset fell in two buckets: the candidate is not a function of the offset"
        return result
    names = list(config)
    found = []
    for values in itertools.product(*(choices[k] for k in names)):
        keys = dict(zip(names, values, strict=True))
        for sign in (1, -1):
            try:
                mapped = buckets(sign * offsets, **keys)
            except (ValueError, TypeError):
                break
            if np.array_equal(mapped, got):
                changed = {k: [config[k], v] for k, v in keys.items() if v != config[k]}
                if sign < 0:
                    changed["sign"] = [sign_name, "negated"]
                found.append((len(changed), changed, keys, sign))
    if not found:
        result["reason"] = f"no value of {', '.join(names)} (or the offset's sign) reproduces the map"
        return result
    _, changed, keys, sign = min(found, key=lambda f: f[0])
    result.update(keys=keys, sign=sign_name if sign > 0 else f"−({sign_name})", changed=changed)
    return result


def bucket_lines(result: dict[str, Any], family: str) -> list[str]:
    """The fitted bucket map: the offsets in other buckets (runs) and the keys that reproduce the map."""
    found = result["bucket_map"]
    lines = [f"fit: {found['offsets']} distinct offsets, {found['differ']} in another bucket than the reference's"
             + (":" if found["runs"] else "")]
    for run in found["runs"][:8]:
        first, last = run["offsets"]
        where = f"{first}" if first == last else f"{first} … {last}"
        lines.append(f"  offsets {where}: buckets {ranges(run['buckets'])} (reference "
                     f"{ranges(run['reference_buckets'])})")
    if len(found["runs"]) > 8:
        lines.append(f"  … {len(found['runs']) - 8} more runs")
    if found.get("keys") is not None:
        changed = found.get("changed") or {}
        lines.append(f"fit: {family} buckets reproduce the map " + (
            "with " + ", ".join(f"{k} = {v[1]} (config {v[0]})" for k, v in changed.items()) if changed
            else "with the config's own keys"))
    elif found.get("reason"):
        lines.append(f"fit: {found['reason']}")
    return lines


__all__ = ["bucket_lines", "bucket_map", "buckets_and_relative", "exact_int64", "fit_buckets", "relative_grid",
           "relative_of", "stream_buckets"]
