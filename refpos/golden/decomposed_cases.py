"""Golden cases of decomposed relative positions (docs/decomposed.md).

``decomposed/<name>``: :func:`refpos.encodings.decomposed.add_decomposed_rel_pos` of seeded logits, queries
(2 heads, 6 channels) and tables: equal 4 × 5 grids with tables of their own length (no resampling), equal 6 × 6
grids with SAM's 27-row tables of 14-patch windows (resampled down), and 6 × 4 queries against 3 × 8 keys (the
coordinates scaled to the longer grid, both tables resampled). The output is the logits with the terms added;
the terms alone are a second output (the logits given as zeros give them too).

Exact values: the rows read at exact rational indices from the tables resampled in rationals, and the sums
taken exactly from the float64 inputs (:func:`refpos.golden.grid_exact.decomposed_terms` with ``Fraction``).
Tolerance: the value rule at the largest term plus
:func:`refpos.encodings.decomposed.decomposed_error_bound` of each dtype.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from refpos.encodings.decomposed import add_decomposed_rel_pos, decomposed_error_bound
from refpos.golden import certify as cert
from refpos.golden.cases import In, as_xp, call, rng_for, to_np
from refpos.golden.entries import round_up, tolerance_value
from refpos.golden.grid_exact import as_type, decomposed_terms
from refpos.golden.manifest import Case, Output
from refpos.golden.ulp import MANTISSA

#: (name, q_size, k_size, rows of rel_pos_h, rows of rel_pos_w)
SHAPES = [("equal-grids", (4, 5), (4, 5), 7, 9), ("sam-window-resampled", (6, 6), (6, 6), 27, 27),
          ("query-key-ratio", (6, 4), (3, 8), 9, 11)]


def _mp(values: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda v: cert.mp.mpf(v.numerator) / v.denominator, otypes=[object])(values)


def decomposed_cases() -> list[Case]:
    """Every decomposed-relative-position case."""
    cases = []
    for name, q_size, k_size, rows_h, rows_w in SHAPES:
        cid = f"decomposed/{name}"
        rng = rng_for(cid)
        n_q, n_k = q_size[0] * q_size[1], k_size[0] * k_size[1]
        inputs = {"attn": rng.standard_normal((2, n_q, n_k)), "q": rng.standard_normal((2, n_q, 6)),
                  "rel_pos_h": rng.standard_normal((rows_h, 6)), "rel_pos_w": rng.standard_normal((rows_w, 6))}
        arrays = [as_xp(inputs[k]) for k in ("attn", "q", "rel_pos_h", "rel_pos_w")]
        logits = to_np(add_decomposed_rel_pos(*arrays, q_size, k_size))
        terms = to_np(add_decomposed_rel_pos(as_xp(np.zeros((2, n_q, n_k))), *arrays[1:], q_size, k_size))
        tolerances = {}
        for output, reference in (("logits", logits), ("terms", terms)):
            entry = tolerance_value(reference, scale=float(np.abs(reference).max()))
            for dtype, spec in entry.items():
                if isinstance(spec, dict):
                    bound = decomposed_error_bound(inputs["q"], inputs["rel_pos_h"], inputs["rel_pos_w"], q_size,
                                                   k_size, unit_roundoff=2.0 ** -(MANTISSA[dtype] + 1))
                    spec["atol"] = round_up(spec["atol"] + bound)
            tolerances[output] = entry

        def exact(inputs=inputs, q_size=q_size, k_size=k_size, with_attn=True):
            values = decomposed_terms(inputs["q"], inputs["rel_pos_h"], inputs["rel_pos_w"], q_size, k_size,
                                      f=Fraction)
            if with_attn:
                values = values + as_type(inputs["attn"], Fraction)
            return _mp(values), float(np.abs(values.astype(float)).max())

        cases.append(Case(
            cid, "decomposed", "add_decomposed_rel_pos",
            f"decomposed relative positions, queries {q_size} against keys {k_size}, tables of {rows_h} and {rows_w} "
            "rows (docs/decomposed.md#the-math)",
            {"call": call("add_decomposed_rel_pos", ["logits"], In("attn"), In("q"), In("rel_pos_h"), In("rel_pos_w"),
                          list(q_size), list(k_size))},
            inputs,
            {"logits": Output(logits, tolerances["logits"], exact),
             "terms": Output(terms, tolerances["terms"], lambda e=exact: e(with_attn=False))},
            primary="logits"))
    return cases
