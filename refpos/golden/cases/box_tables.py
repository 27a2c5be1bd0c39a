r"""Golden cases of a document token's box positions (docs/box-tables.md): ``box_positions``.

* ``box_tables/r40-d5-t6``: LayoutLM's layout at a small size, four tables of 40 rows and 5 channels, six boxes
  whose corners, heights and widths all differ;
* ``box_tables/r16-d3-t2x3``: tables of 16, 12, 9 and 7 rows (x, y, height, width), boxes ``(2, 3, 4)``, a box of
  zero height and width and one reaching the last row of every table.

Exact values: each entry :math:`X[x_0] + Y[y_0] + X[x_1] + Y[y_1] + H[y_1 - y_0] + W[x_1 - x_0]`, the six rows
summed by mpmath at :data:`refpos.golden.exact.certify.DIGITS` digits. Tolerance: the value rule at the scale of
the largest sum of six rows' magnitudes.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.box_tables import box_positions
from refpos.golden.cases.common import In, call, rng_for
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_value
from refpos.golden.files.manifest import Case, Output


def _mp_positions(tables: dict[str, np.ndarray], bbox: np.ndarray) -> np.ndarray:
    """Exact ``X[x0] + Y[y0] + X[x1] + Y[y1] + H[y1 − y0] + W[x1 − x0]`` per token (docs/box-tables.md#the-math)."""
    mp = cert.mp
    boxes = bbox.reshape(-1, 4)
    width = tables["x"].shape[1]
    out = np.empty((len(boxes), width), dtype=object)
    for n, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
        rows = [tables["x"][x0], tables["y"][y0], tables["x"][x1], tables["y"][y1], tables["h"][y1 - y0],
                tables["w"][x1 - x0]]
        for k in range(width):
            out[n, k] = mp.fsum(mp.mpf(float(r[k])) for r in rows)
    return out.reshape(*bbox.shape[:-1], width)


def _boxes(rng: np.random.Generator, shape: tuple[int, ...], rows: dict[str, int]) -> np.ndarray:
    out = []
    for _ in range(int(np.prod(shape))):
        x0 = int(rng.integers(0, rows["x"]))
        x1 = int(rng.integers(x0, min(rows["x"], x0 + rows["w"])))
        y0 = int(rng.integers(0, rows["y"]))
        y1 = int(rng.integers(y0, min(rows["y"], y0 + rows["h"])))
        out.append([x0, y0, x1, y1])
    return np.asarray(out, dtype=np.int64).reshape(*shape, 4)


def box_tables_cases() -> list[Case]:
    """Every box-tables case."""
    cases = []
    for name, rows, width, shape in [("r40-d5-t6", dict.fromkeys("xyhw", 40), 5, (1, 6)),
                                     ("r16-d3-t2x3", {"x": 16, "y": 12, "h": 9, "w": 7}, 3, (2, 3))]:
        cid = f"box_tables/{name}"
        rng = rng_for(cid)
        tables = {t: rng.standard_normal((rows[t], width)) for t in "xyhw"}
        bbox = _boxes(rng, shape, rows)
        if name == "r16-d3-t2x3":
            bbox[0, 0] = [4, 5, 4, 5]  # zero height and width
            bbox[1, 2] = [rows["x"] - 1, rows["y"] - 1, rows["x"] - 1, rows["y"] - 1]  # the last corner rows
            bbox[1, 1] = [rows["x"] - rows["w"], rows["y"] - rows["h"], rows["x"] - 1, rows["y"] - 1]  # H, W last
        out = np.asarray(box_positions(tables["x"], tables["y"], tables["h"], tables["w"], bbox))
        scale = float(sum(2 * np.abs(tables[t]).max() if t in "xy" else np.abs(tables[t]).max() for t in "xyhw"))
        cases.append(Case(
            cid, "box_tables", "box_positions",
            f"tables of {rows['x']}, {rows['y']}, {rows['h']}, {rows['w']} rows (x, y, height, width) and {width} "
            f"channels, boxes {shape} (docs/box-tables.md#the-math)",
            {"call": call("box_positions", ["out"], In("x_table"), In("y_table"), In("h_table"), In("w_table"),
                          In("bbox"))},
            {"x_table": tables["x"], "y_table": tables["y"], "h_table": tables["h"], "w_table": tables["w"],
             "bbox": bbox},
            {"out": Output(out, tolerance_value(out, scale=scale),
                           lambda t=tables, b=bbox, s=scale: (_mp_positions(t, b), s))}))
    return cases
