"""``refpos check t5``: T5's integer buckets of relative positions (memory − query) against the reference, exactly,
the catalogue's T5 mistakes (docs/diagnosis.md#the-catalogue-alibi-t5-deberta-sinusoid) and the keys of the bucket
function that reproduce the candidate's map.

.. code-block:: text

    refpos check t5 --candidate B.npy (--relative REL.npy | --q-len Q --k-len K) [--causal]
                    [--num-buckets 32] [--max-distance 128]
    refpos check t5 --config CONFIG.json --candidate B.npy --relative REL.npy
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.shared.arrays import np_ns
from refpos.check.shared.request import Progress, Request
from refpos.check.tables.buckets import buckets_and_relative, fit_buckets, relative_of, stream_buckets
from refpos.check.tables.common import Match, as_np, config_first, try_mutants


def _t5_bucket(r: np.ndarray, **keys: Any) -> np.ndarray:
    import refpos

    return as_np(refpos.encodings.t5_bucket(np_ns().asarray(r), **keys))


def diagnose_t5(candidate: np.ndarray, rel: np.ndarray, *, bidirectional: bool, num_buckets: int,
                max_distance: int) -> list[Match]:
    """T5 catalogue for integer buckets of relative positions ``rel`` (memory − query)."""
    def bucket(r: np.ndarray, bidi: bool) -> np.ndarray:
        return _t5_bucket(r, bidirectional=bidi, num_buckets=num_buckets, max_distance=max_distance)

    reference = bucket(rel, bidirectional)
    mutants = [
        ("t5_sign_flip", "equals the buckets of query − memory instead of memory − query (bidirectional: the "
         "transpose; causal: every past key in bucket 0)", lambda: bucket(-rel, bidirectional)),
        ("t5_direction", f"equals the {'causal' if bidirectional else 'bidirectional'} buckets: the "
         f"{'encoder' if bidirectional else 'decoder'} was run with bidirectional={not bidirectional} (equal up "
         "to distance 7, different from 8 on)", lambda: bucket(rel, not bidirectional)),
        ("t5_rounding", "equals the buckets with the log part rounded instead of truncated",
         lambda: _t5_rounded(rel, bidirectional, num_buckets, max_distance)),
    ]
    return try_mutants(candidate, 0.0, mutants, reference)


def _t5_rounded(rel: np.ndarray, bidirectional: bool, num_buckets: int, max_distance: int) -> np.ndarray:
    nb, out = num_buckets, np.zeros_like(rel)
    if bidirectional:
        nb //= 2
        out = out + (rel > 0) * nb
        n = np.abs(rel)
    else:
        n = -np.minimum(rel, 0)
    exact = nb // 2
    log_part = np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact) * (nb - exact)
    return out + np.where(n < exact, n, np.minimum(exact + np.round(log_part).astype(np.int64), nb - 1))


def fit_t5(candidate: np.ndarray, rel: np.ndarray, *, bidirectional: bool, num_buckets: int, max_distance: int
           ) -> dict[str, Any]:
    """:func:`~refpos.check.tables.buckets.fit_buckets` for T5: direction, bucket count and maximal distance
    (offsets memory − query)."""
    def buckets(offsets: np.ndarray, **keys: Any) -> np.ndarray:
        return np.asarray(to_numpy(_t5_bucket(offsets, **keys)))

    config = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    top = int(candidate.max()) + 1 if candidate.size else num_buckets
    choices = {"bidirectional": [bidirectional, not bidirectional],
               "num_buckets": config_first(num_buckets, [8, 16, 32, 64, 128, 256, top, 2 * top]),
               "max_distance": config_first(max_distance, [2**k for k in range(4, 14)])}
    return fit_buckets(candidate, rel, buckets, config, choices, "memory − query")


def check_t5(candidate: Any, rel: Any, *, bidirectional: bool = True, num_buckets: int = 32,
             max_distance: int = 128, progress: Progress = None) -> dict[str, Any]:
    """Compare T5 buckets of ``rel`` (memory − query) with the reference: integers, exact.

    ``candidate`` and ``rel`` may be memory-mapped (or ``rel`` a strided view,
    :func:`refpos.check.tables.buckets.relative_grid`): they are compared block by block along the
    query rows; the diagnosis runs on a sample of the rows.
    """
    cand, rel = buckets_and_relative(candidate, rel, "T5")
    keys = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    return stream_buckets("t5", cand, rel, partial(_t5_bucket, **keys), partial(diagnose_t5, **keys), progress,
                          partial(fit_t5, **keys))


def run(request: Request) -> dict[str, Any]:
    """``refpos check t5``: the relative positions (``--relative`` or ``--q-len``/``--k-len``), the direction
    (``--causal``), ``--num-buckets``, ``--max-distance``; with ``--config`` those of the layer's stack."""
    layer = request.layer
    if layer is not None:
        rel = request.array("relative", "--relative REL.npy (memory − query)")
        return {**check_t5(request.candidate, rel, bidirectional=layer.bidirectional, num_buckets=layer.num_buckets,
                           max_distance=layer.max_distance, progress=request.progress), **request.where()}
    return check_t5(request.candidate, relative_of(request), bidirectional=not request.option("causal"),
                    num_buckets=request.option("num_buckets", 32), max_distance=request.option("max_distance", 128),
                    progress=request.progress)


def golden(case: dict[str, Any], args: list[Any], inputs: dict[str, np.ndarray], candidate: np.ndarray,
           dtype: str) -> dict[str, Any]:
    """The check of a golden case of ``t5_bucket(rel, bidirectional, num_buckets, max_distance)``."""
    return check_t5(candidate, inputs["rel"], bidirectional=bool(args[1]), num_buckets=int(args[2]),
                    max_distance=int(args[3]))


__all__ = ["check_t5", "diagnose_t5", "fit_t5", "golden", "run"]
