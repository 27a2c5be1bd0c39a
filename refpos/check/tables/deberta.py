"""``refpos check deberta``: DeBERTa's integer log buckets of relative positions (query − key) against the
reference, exactly, the catalogue's DeBERTa mistakes (docs/diagnosis.md#the-catalogue-alibi-t5-deberta-sinusoid)
and the keys that reproduce the candidate's map.

.. code-block:: text

    refpos check deberta --candidate B.npy (--relative REL.npy | --q-len Q --k-len K)
                         --position-buckets 256 --max-relative-positions 512
    refpos check deberta --config CONFIG.json --candidate B.npy --relative REL.npy
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.check.shared.arrays import Unusable, np_ns
from refpos.check.shared.request import Progress, Request
from refpos.check.tables.buckets import buckets_and_relative, fit_buckets, relative_of, stream_buckets
from refpos.check.tables.common import Match, as_np, config_first, try_mutants
from refpos.encodings.deberta import deberta_log_buckets


def _log_buckets(r: np.ndarray, position_buckets: int, max_relative_positions: int) -> np.ndarray:
    return as_np(deberta_log_buckets(np_ns().asarray(r), position_buckets, max_relative_positions))


def diagnose_deberta(candidate: np.ndarray, rel: np.ndarray, *, position_buckets: int,
                     max_relative_positions: int) -> list[Match]:
    """DeBERTa catalogue for integer log buckets of ``rel`` (query − key)."""
    def bucket(r: np.ndarray) -> np.ndarray:
        return _log_buckets(r, position_buckets, max_relative_positions)

    reference = bucket(rel)
    mutants = [
        ("deberta_relative_sign", "equals the buckets of key − query instead of query − key (the reference negated: "
         "the log bucket is odd)", lambda: bucket(-rel)),
        ("deberta_bucket_rounding", "equals the buckets with the log part truncated (T5's rule) instead of rounded "
         "up: every bucket beyond position_buckets // 2 one closer to zero",
         lambda: truncated_deberta_buckets(rel, position_buckets, max_relative_positions)),
    ]
    return try_mutants(candidate, 0.0, mutants, reference)


def truncated_deberta_buckets(rel: np.ndarray, position_buckets: int, m: int) -> np.ndarray:
    """DeBERTa's log buckets of ``rel`` with the log part truncated instead of rounded up (the mistake
    ``deberta_bucket_rounding``; ``m`` is max_relative_positions, both already validated)."""
    mid = position_buckets // 2
    far = np.maximum(np.abs(rel), mid).astype(np.float64)
    log_part = np.trunc(np.log(far / mid) / np.log(np.full_like(far, (m - 1) / mid)) * (mid - 1)).astype(np.int64)
    return np.where(np.abs(rel) <= mid, rel, np.sign(rel) * (mid + log_part))


def fit_deberta(candidate: np.ndarray, rel: np.ndarray, *, position_buckets: int, max_relative_positions: int
                ) -> dict[str, Any]:
    """:func:`~refpos.check.tables.buckets.fit_buckets` for DeBERTa's log buckets (offsets query − key)."""
    def buckets(offsets: np.ndarray, **keys: Any) -> np.ndarray:
        return _log_buckets(offsets, keys["position_buckets"], keys["max_relative_positions"])

    config = {"position_buckets": position_buckets, "max_relative_positions": max_relative_positions}
    choices = {"position_buckets": config_first(position_buckets, [2**k for k in range(3, 10)]),
               "max_relative_positions": config_first(max_relative_positions, [2**k for k in range(5, 12)])}
    return fit_buckets(candidate, rel, buckets, config, choices, "query − key")


def check_deberta(candidate: Any, rel: Any, *, position_buckets: int, max_relative_positions: int,
                  progress: Progress = None) -> dict[str, Any]:
    """Compare DeBERTa log buckets of ``rel`` (query − key) with the reference: integers, exact; as
    :func:`~refpos.check.tables.t5.check_t5`, block by block (``rel`` may be a strided view,
    ``relative_grid(q_len, k_len, query_minus_key=True)``)."""
    cand, rel = buckets_and_relative(candidate, rel, "DeBERTa")
    deberta_log_buckets(np.zeros(1, dtype=np.int64), position_buckets, max_relative_positions)  # the arguments
    keys = {"position_buckets": position_buckets, "max_relative_positions": max_relative_positions}
    return stream_buckets("deberta", cand, rel, partial(_log_buckets, **keys), partial(diagnose_deberta, **keys),
                          progress, partial(fit_deberta, **keys))


def run(request: Request) -> dict[str, Any]:
    """``refpos check deberta``: the relative positions (``--relative`` or ``--q-len``/``--k-len``, δ = query −
    key), ``--position-buckets`` and ``--max-relative-positions``, or the ``--config`` layer's."""
    layer = request.layer
    if layer is not None:
        if layer.position_buckets <= 0:
            raise Unusable(f"--config {request.option('config')}: {layer.stack} layer {layer.index} has no log "
                           f"buckets (position_buckets={layer.position_buckets}): nothing for refpos check deberta "
                           "to check")
        rel = request.array("relative", "--relative REL.npy (query − key)")
        return {**check_deberta(request.candidate, rel, position_buckets=layer.position_buckets,
                                max_relative_positions=layer.params()["relative_range"], progress=request.progress),
                **request.where()}
    rel = relative_of(request, query_minus_key=True)  # δ = query − key
    return check_deberta(request.candidate, rel, position_buckets=request.need("position_buckets",
                                                                               "--position-buckets"),
                         max_relative_positions=request.need("max_relative_positions", "--max-relative-positions"),
                         progress=request.progress)


def golden(case: dict[str, Any], args: list[Any], inputs: dict[str, np.ndarray], candidate: np.ndarray,
           dtype: str) -> dict[str, Any]:
    """The check of a golden case of ``deberta_log_buckets(rel, position_buckets, max_relative_positions)``."""
    return check_deberta(candidate, inputs["rel"], position_buckets=int(args[1]), max_relative_positions=int(args[2]))


__all__ = ["check_deberta", "diagnose_deberta", "fit_deberta", "golden", "run", "truncated_deberta_buckets"]
