r"""Golden cases of a tiled image's positions before the local encoder (docs/tiled-grid.md):
``tiled_input_positions`` at one aspect-ratio id.

* ``tiled_grid/t4-n5-d3-id2``: Llama 3.2 Vision's layout at a small size, 4 tiles of a class row and 4 patches,
  3 channels, 9 aspect-ratio ids, read at id 2, gates of either sign below 1;
* ``tiled_grid/t2-n3-d4-id4``: 2 tiles of 3 rows, 4 channels, 5 ids, read at the last id, a grid gate whose
  ``tanh`` is near 1 (the tile grids almost alone) and a negative pre-tile gate.

The post-tile table and gate are in the call (a port adding them before the local encoder is named by
``refpos check``); they add nothing to the output. Exact values: each entry
:math:`(1 - \tanh g)E_i + \tanh g\,G[a]_{t,i} + [i \ge 1]\tanh(g_{pre})A_{pre}[a]_t`, ``tanh`` and the sums taken
by mpmath at :data:`refpos.golden.exact.certify.DIGITS` digits. Tolerance: the value rule at the scale of the
largest ``|E| + |G| + |A_pre|``.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.tiled_grid import tiled_input_positions
from refpos.golden.cases.common import In, call, rng_for
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_value
from refpos.golden.files.manifest import Case, Output


def _mp_positions(grid: np.ndarray, tiles: np.ndarray, gate: float, pre: np.ndarray, pre_gate: float,
                  a: int, count: int) -> np.ndarray:
    """Exact ``(1 − tanh g)E_i + tanh g·G[a]_{t,i}`` plus ``tanh(g_pre)·A_pre[a]_t`` on the patches ``i ≥ 1``
    (docs/tiled-grid.md#the-math), ``G[a]`` read as ``(T, N, D)`` and ``A_pre[a]`` as ``(T, D)``."""
    mp = cert.mp
    t, t_pre = mp.tanh(mp.mpf(gate)), mp.tanh(mp.mpf(pre_gate))
    rows, width = grid.shape
    shaped, pre_rows = tiles[a].reshape(count, rows, width), pre[a].reshape(count, width)
    out = np.empty((count, rows, width), dtype=object)
    for tile in range(count):
        for i in range(rows):
            for k in range(width):
                terms = [(1 - t) * mp.mpf(float(grid[i, k])), t * mp.mpf(float(shaped[tile, i, k]))]
                if i >= 1:
                    terms.append(t_pre * mp.mpf(float(pre_rows[tile, k])))
                out[tile, i, k] = mp.fsum(terms)
    return out


def tiled_grid_cases() -> list[Case]:
    """Every tiled-grid case."""
    cases = []
    for name, count, rows, width, ids, a, gates in [("t4-n5-d3-id2", 4, 5, 3, 9, 2, (0.4, -0.3, 0.6)),
                                                     ("t2-n3-d4-id4", 2, 3, 4, 5, 4, (3.5, -0.8, 0.2))]:
        cid = f"tiled_grid/{name}"
        rng = rng_for(cid)
        grid, tiles = rng.standard_normal((rows, width)), rng.standard_normal((ids, count * rows * width))
        pre, post = rng.standard_normal((ids, count * width)), rng.standard_normal((ids, count * width))
        gate, pre_gate, post_gate = gates
        out = np.asarray(tiled_input_positions(grid, tiles, gate, pre, pre_gate, a, count))
        scale = float(np.abs(grid).max() + np.abs(tiles).max() + np.abs(pre).max())
        cases.append(Case(
            cid, "tiled_grid", "tiled_input_positions",
            f"{count} tiles of {rows} rows (the class row first) and {width} channels, {ids} aspect-ratio ids read "
            f"at id {a}, gates {gate}, {pre_gate} (pre-tile), {post_gate} (post-tile) (docs/tiled-grid.md#the-math)",
            {"call": call("tiled_input_positions", ["out"], In("embedding"), In("tile_table"), gate, In("pre_table"),
                          pre_gate, In("post_table"), post_gate, a, count)},
            {"embedding": grid, "tile_table": tiles, "pre_table": pre, "post_table": post},
            {"out": Output(out, tolerance_value(out, scale=scale),
                           lambda e=grid, g=tiles, p=pre, gs=gates, i=a, c=count, s=scale: (
                               _mp_positions(e, g, gs[0], p, gs[1], i, c), s))}))
    return cases
