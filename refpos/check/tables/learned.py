"""``refpos check learned --config``: the rows of a learned position table a layer reads, against the candidate
embedding rows, and the table rows the candidate read instead.

.. code-block:: text

    refpos check learned --config CONFIG.json --table T.npy --positions P.npy --candidate E.npy

The table is the checkpoint's (``--table``): the reference is its rows at ``p + offset`` (the layer's position
offset), compared within the dtype's value tolerance. A failing candidate's rows are matched to the table's
(:func:`fit_learned`): one offset ``row − expected`` explains a shift of the positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.check.shared.arrays import Unusable
from refpos.check.shared.request import Request
from refpos.check.tables.common import direct, layer_rows
from refpos.golden.exact import tolerance as tol


def fit_learned(candidate: np.ndarray, table: np.ndarray, rows: np.ndarray, atol: np.ndarray | float
                ) -> dict[str, Any]:
    """The table row each candidate row equals, and the offset ``row − expected`` when one offset explains them.

    ``candidate`` ``(N, D)``, ``table`` ``(L, D)``, ``rows`` ``(N,)``: the rows the reference reads.
    """
    cand = candidate.reshape(-1, candidate.shape[-1]).astype(np.float64)
    expected = rows.reshape(-1)
    matched = np.full(expected.size, -1)
    for i, row in enumerate(cand):
        close = np.flatnonzero(np.all(np.abs(table - row) <= atol, axis=-1))
        if close.size:
            matched[i] = close[np.argmin(np.abs(close - expected[i]))]
    offsets = np.unique(matched[matched >= 0] - expected[matched >= 0])
    result: dict[str, Any] = {"rows_matched": int((matched >= 0).sum()), "rows": int(expected.size)}
    if (matched < 0).any():
        result.update(row_offset=None, reason=f"{int((matched < 0).sum())} candidate rows equal no row of the table")
    elif offsets.size != 1:
        result.update(row_offset=None, reason=f"the rows read are offset by {', '.join(map(str, offsets[:5]))}: "
                      "no single offset")
    else:
        result["row_offset"] = int(offsets[0])
    return result


def learned_lines(found: dict[str, Any]) -> list[str]:
    """The table rows a learned candidate read."""
    offset = found.get("row_offset")
    if offset is not None:
        return [f"fit: every candidate row is the table row {offset:+d} from the one the layer reads (it reads p + "
                "its position offset)" if offset else "fit: every candidate row is the table row the layer reads"]
    return [f"fit: {found['rows_matched']} of {found['rows']} candidate rows equal a table row; {found['reason']}"]


def run(request: Request) -> dict[str, Any]:
    """``refpos check learned``: the ``--config`` layer's table rows at ``--positions`` (``p + offset``) from the
    trained table ``--table``."""
    layer = request.layer
    if layer is None:
        raise Unusable("refpos check learned needs --config CONFIG.json (the layer's table size and offset)")
    rows = layer_rows(request)
    table = request.array("table", "--table T.npy (the trained position table)")
    if table.ndim != 2 or (layer.table_size is not None and table.shape[0] != layer.table_size):
        raise Unusable(f"--table must be ({layer.table_size}, width) for this layer, got {tuple(table.shape)}")
    reference = np.asarray(table, dtype=np.float64)[rows]
    result = direct("learned", request.candidate, reference, request.dtype)
    if not result["ok"]:  # which rows the candidate read: the table row each of its rows equals
        result["rows_read"] = fit_learned(np.asarray(request.candidate, dtype=np.float64),
                                          np.asarray(table, dtype=np.float64), rows,
                                          np.asarray(tol.value_tolerance(result["dtype"], reference)).max())
    return {**result, **request.where()}


__all__ = ["fit_learned", "learned_lines", "run"]
