r"""Golden cases of a document model's relative layout bias (docs/layout-bias.md): ``layout_bias``.

* ``layout_bias/b32-64-h2-t10``: LayoutLMv3's buckets (32 to 128, x and y 64 to 256), two heads of width 8, ten
  tokens at places 0 … 9 with seeded boxes on a 1000-wide page (exact, logarithmic and saturated x and y buckets);
* ``layout_bias/b16-8-h3-t6``: small tables (16 buckets to 20, x and y 8 to 30), three heads of width 5, six
  tokens at places 40 … 45, boxes spanning 0 … 80.

Exact values: each entry :math:`(R[b] + X[b_x] + Y[b_y]) / \sqrt{d}`, the buckets integers (T5's bidirectional
buckets, computed as refpos computes them), the three rows summed and divided by mpmath at
:data:`refpos.golden.exact.certify.DIGITS` digits. Tolerance: the value rule at the scale of the largest sum of
three rows' magnitudes over √d.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.layout_bias import layout_bias, layout_buckets
from refpos.golden.cases.common import In, Param, call, rng_for
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_value
from refpos.golden.files.manifest import Case, Output


def _mp_bias(tables: dict[str, np.ndarray], positions: np.ndarray, bbox: np.ndarray, distances: tuple[int, int],
             head_dim: int) -> np.ndarray:
    """Exact ``(R[b(Δp)] + X[b2(Δx0)] + Y[b2(Δy1)]) / √d`` per head and pair (docs/layout-bias.md#the-math)."""
    mp = cert.mp
    buckets = layout_buckets(positions, bbox, num_buckets=tables["1d"].shape[0], max_distance=distances[0],
                             num_2d_buckets=tables["x"].shape[0], max_2d_distance=distances[1])
    heads = tables["1d"].shape[1]
    shape = np.broadcast_shapes(*(b.shape for b in buckets.values()))
    flat = {k: np.broadcast_to(v, shape).reshape(-1) for k, v in buckets.items()}
    root = mp.sqrt(head_dim)
    out = np.empty((int(np.prod(shape)), heads), dtype=object)
    for n in range(out.shape[0]):
        for h in range(heads):
            out[n, h] = mp.fsum(mp.mpf(float(tables[k][flat[k][n], h])) for k in flat) / root
    return np.moveaxis(out.reshape(*shape, heads), -1, -3)


def layout_bias_cases() -> list[Case]:
    """Every layout-bias case."""
    cases = []
    for name, (buckets, buckets_2d), distances, heads, head_dim, places, page in [
            ("b32-64-h2-t10", (32, 64), (128, 256), 2, 8, np.arange(10), 1000),
            ("b16-8-h3-t6", (16, 8), (20, 30), 3, 5, np.arange(40, 46), 80)]:
        cid = f"layout_bias/{name}"
        rng = rng_for(cid)
        tables = {"1d": rng.standard_normal((buckets, heads)), "x": rng.standard_normal((buckets_2d, heads)),
                  "y": rng.standard_normal((buckets_2d, heads))}
        corners = np.sort(rng.integers(0, page + 1, (places.size, 2, 2)), axis=1)
        bbox = corners.reshape(1, places.size, 4).astype(np.int64)
        out = np.asarray(layout_bias(tables["1d"], tables["x"], tables["y"], places, bbox, max_distance=distances[0],
                                     max_2d_distance=distances[1], head_dim=head_dim))
        scale = float(sum(np.abs(t).max() for t in tables.values()) / np.sqrt(head_dim))
        cases.append(Case(
            cid, "layout_bias", "layout_bias",
            f"{buckets} buckets to {distances[0]}, x and y {buckets_2d} to {distances[1]}, {heads} heads of width "
            f"{head_dim}, places {places[0]} … {places[-1]} (docs/layout-bias.md#the-math)",
            {"call": call("layout_bias", ["out"], In("rel_table"), In("x_table"), In("y_table"), In("positions"),
                          In("bbox"), Param("head_dim"), Param("max_distance"), Param("max_2d_distance")),
             "max_distance": distances[0], "max_2d_distance": distances[1], "head_dim": head_dim},
            {"rel_table": tables["1d"], "x_table": tables["x"], "y_table": tables["y"], "positions": places,
             "bbox": bbox},
            {"out": Output(out, tolerance_value(out, scale=scale),
                           lambda t=tables, p=places, b=bbox, d=distances, hd=head_dim, s=scale:
                           (_mp_bias(t, p, b, d, hd), s))}))
    return cases
