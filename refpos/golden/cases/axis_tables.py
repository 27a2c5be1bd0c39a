"""Golden cases of factorised tables read at per-patch indices (docs/axis-tables.md): ``axis_table_positions`` of
each variant.

* ``axis_tables/pix2struct-…``: a 4 × 6 grid numbered from 1 (row, column) and two padding patches of zeros (row 0
  of both tables);
* ``axis_tables/gemma4-…``: (x, y) ids of a 3 × 5 grid, a patch of one id −1 and a padding patch (−1, −1);
* ``axis_tables/gemma4-unified-…``: the same ids, each −1 adding nothing of its table.

Exact values: each entry is the sum of two float64 table values (or one, or none), taken by mpmath at
:data:`refpos.golden.exact.certify.DIGITS` digits. Tolerance: the value rule at the scale of the largest
``|a| + |b|``.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.axis_tables import AXIS_TABLE_VARIANTS, axis_table_positions
from refpos.golden.cases.common import In, call, rng_for, to_np
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_value
from refpos.golden.files.manifest import Case, Output


def _mp_positions(indices: np.ndarray, rows: np.ndarray, cols: np.ndarray, variant: str) -> np.ndarray:
    """Exact ``m_r·E_row[max(r, 0)] + m_c·E_col[max(c, 0)]`` per patch (docs/axis-tables.md#the-math)."""
    mp, record = cert.mp, AXIS_TABLE_VARIANTS[variant]
    out = np.empty((indices.shape[0], rows.shape[1]), dtype=object)
    for p, (first, second) in enumerate(indices.tolist()):
        r, c = (first, second) if record.first == "row" else (second, first)
        keep = {"none": (True, True), "patch": ((first, second) != (-1, -1),) * 2,
                "axis": (r != -1, c != -1)}[record.padding]
        for k in range(rows.shape[1]):
            terms = [mp.mpf(float(t[max(i, 0), k])) for t, i, kept in ((rows, r, keep[0]), (cols, c, keep[1]))
                     if kept]
            out[p, k] = mp.fsum(terms) if terms else mp.mpf(0)
    return out


def _indices(variant: str) -> np.ndarray:
    if variant == "pix2struct":
        r, c = np.meshgrid(np.arange(1, 5), np.arange(1, 7), indexing="ij")
        return np.concatenate([np.stack([r.ravel(), c.ravel()], axis=1), [[0, 0], [0, 0]]]).astype(np.int64)
    grid = [[x, y] for y in range(3) for x in range(5)]
    return np.array([*grid, [-1, 4], [3, -1], [-1, -1]], dtype=np.int64)


def axis_tables_cases() -> list[Case]:
    """Every factorised-table case."""
    cases = []
    for name, variant, length, width in [("pix2struct-p8-d6", "pix2struct", 8, 6), ("gemma4-p6-d4", "gemma4", 6, 4),
                                         ("gemma4-unified-p6-d4", "gemma4_unified", 6, 4)]:
        cid = f"axis_tables/{name}"
        rng = rng_for(cid)
        rows, cols = rng.standard_normal((length, width)), rng.standard_normal((length, width))
        indices = _indices(variant)
        out = to_np(axis_table_positions(indices, rows, cols, variant))
        scale = float(np.abs(rows).max() + np.abs(cols).max())
        record = AXIS_TABLE_VARIANTS[variant]
        cases.append(Case(
            cid, "axis_tables", "axis_table_positions",
            f"{variant}: {indices.shape[0]} patches' indices ({record.first} first, padding rule {record.padding}) "
            f"in a row and a column table of {length} × {width} (docs/axis-tables.md#the-math)",
            {"call": call("axis_table_positions", ["out"], In("indices"), In("row_table"), In("column_table"),
                          variant)},
            {"indices": indices, "row_table": rows, "column_table": cols},
            {"out": Output(out, tolerance_value(out, scale=scale),
                           lambda i=indices, a=rows, b=cols, v=variant, s=scale: (_mp_positions(i, a, b, v), s))}))
    return cases
