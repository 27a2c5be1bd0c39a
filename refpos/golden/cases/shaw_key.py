r"""Golden cases of Shaw's key term over clipped frame distances (docs/relative.md#shaw-key-term):
``shaw_key_terms``.

* ``shaw_key/w2v-l5-r2-t9``: wav2vec2-BERT's form at a small size: the distance key minus query clipped
  asymmetrically to :math:`[-5, 2]` from row 5 of a table of 8 rows, 9 frames of 2 heads (every distance from −8
  to 8: the clip binds on both sides), one block;
* ``shaw_key/granite-c4-m5-t10``: Granite Speech's form: the distance query minus key clipped to ±4 from row 5 of
  a table of 11 rows (``2·5 + 1``), 10 frames in blocks of 4 (the last block partial, 2 frames), 2 heads.

Queries and table of 4 channels, so :math:`\sigma = 4^{-1/2} = 1/2` is exact. The output is the term at each
attended pair and 0 at the pairs of two blocks (:meth:`refpos.encodings.shaw_key_mistakes.ShawKeyInputs.output`,
what ``refpos check shaw_key`` compares).

Exact values: each term :math:`\sigma\,\sum_k q_{ik} E_{r_{ij} k}` summed by mpmath at
:data:`refpos.golden.exact.certify.DIGITS` digits, the rows :math:`r_{ij} = \operatorname{clip}(s(j - i), -L, R) + o`
counted in Python loops. Tolerance: the value rule at the scale of the largest :math:`\sigma\sum_k |q_{ik}|
|E_{r_{ij} k}|`.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.shaw_key import shaw_key_rows
from refpos.encodings.shaw_key_mistakes import ShawKeyInputs
from refpos.golden.cases.common import In, call, rng_for
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_value
from refpos.golden.files.manifest import Case, Output

#: the channels of every case: σ = 4^(−1/2) = 1/2, exact
WIDTH = 4


def _mp_terms(q: np.ndarray, table: np.ndarray, left: int, right: int, offset: int, sign: int,
              block: int | None) -> np.ndarray:
    """Exact ``σ·q_i·E[clip(s(j − i), −L, R) + o]`` at the pairs of one block, 0 at the others (module docstring)."""
    mp = cert.mp
    heads, length, width = q.shape
    sigma = mp.mpf(1) / mp.sqrt(width)
    out = np.empty((heads, length, length), dtype=object)
    for h in range(heads):
        for i in range(length):
            for j in range(length):
                if block is not None and i // block != j // block:
                    out[h, i, j] = mp.mpf(0)
                    continue
                row = min(max(sign * (j - i), -left), right) + offset
                out[h, i, j] = sigma * mp.fsum(mp.mpf(float(q[h, i, k])) * mp.mpf(float(table[row, k]))
                                               for k in range(width))
    return out


def shaw_key_cases() -> list[Case]:
    """Every Shaw key-term case."""
    cases = []
    for name, form, sign, (left, right, offset, rows), length, block in [
            ("w2v-l5-r2-t9", "wav2vec2-BERT's", "key_minus_query", (5, 2, 5, 8), 9, None),
            ("granite-c4-m5-t10", "Granite Speech's", "query_minus_key", (4, 4, 5, 11), 10, 4)]:
        cid = f"shaw_key/{name}"
        rng = rng_for(cid)
        q, table = rng.standard_normal((2, length, WIDTH)), rng.standard_normal((rows, WIDTH))
        inputs = ShawKeyInputs(q, table, left, right, offset, sign, block)
        out = inputs.output()
        rows_read = shaw_key_rows(length, left=left, right=right, offset=offset, sign=sign)
        scale = float(np.max(inputs.sigma * np.einsum("hid,ijd->hij", np.abs(q), np.abs(table[rows_read]))))
        blocks = "one block" if block is None else f"blocks of {block} frames (the last of {length % block})"
        cases.append(Case(
            cid, "shaw_key", "shaw_key_terms",
            f"{form} form: {sign.replace('_', ' ')} clipped to [-{left}, {right}] from row {offset} of a table of "
            f"{rows} rows and {WIDTH} channels, {length} frames of 2 heads, {blocks} (docs/relative.md#shaw-key-term)",
            {"call": call("shaw_key_terms", ["out"], In("q"), In("table"), left, right, offset, sign, block, None)},
            {"q": q, "table": table},
            {"out": Output(out, tolerance_value(out, scale=scale),
                           lambda q=q, t=table, a=(left, right, offset, sign, block), s=scale: (
                               _mp_terms(q, t, a[0], a[1], a[2], 1 if a[3] == "key_minus_query" else -1, a[4]),
                               s))}))
    return cases


__all__ = ["WIDTH", "shaw_key_cases"]
