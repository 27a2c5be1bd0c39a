"""The worked example: 我 愛 你 through one attention head with a distance bias.

The example comes from the story in the lecture on positional encodings that refpos grew from; it is
written out on docs/relative.md#the-worked-example. Three tokens, d = 4, identity projections, the
inferred P, the distance bias ``B[i, j] = -|i - j|`` added **before** the ``1/√d`` scale (the story's
order). The story prints hand-rounded numbers; :func:`explain_text` says where they differ from the exact
ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import Array, get_xp, to_numpy
from refpos.encoding import Encoding
from refpos.encodings.distance import DistanceBias
from refpos.encodings.learned import LearnedAbsolute
from refpos.pipeline.layer import AttentionWeights, self_attention
from refpos.validation import check_bool

TOKENS = ("我", "愛", "你")
#: the story's word vectors
STORY_X = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
#: the story's position matrix, inferred as (X + P) - X from the rows of Q it prints (not the sinusoid table)
STORY_P = [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]]
#: the story's printed (hand-rounded) attention rows and outputs, for the comparison in ``explain``
STORY_PRINTED_A = [[0.51, 0.31, 0.18], [0.27, 0.46, 0.27], [0.10, 0.16, 0.74]]
STORY_PRINTED_OUT = [[1.00, 1.18, 0.82, 1.00], [1.00, 1.27, 0.73, 1.00], [1.00, 1.74, 0.26, 1.00]]


def worked_example(*, with_bias: bool = True, xp: Any = None) -> dict[str, Array]:
    """The full trace of the worked example (float64), by the names of :func:`refpos.self_attention`.

    Examples
    --------
    >>> import numpy as np
    >>> t = worked_example()
    >>> np.round(np.asarray(t["A"][0, ...]), 2).tolist()
    [[0.51, 0.31, 0.19], [0.27, 0.45, 0.27], [0.1, 0.16, 0.74]]
    """
    with_bias = check_bool("with_bias", with_bias)
    xp = get_xp(xp)
    x = xp.asarray(STORY_X, dtype=xp.float64)
    table = xp.asarray(STORY_P, dtype=xp.float64)

    class _Seed(Encoding):
        name = "seed"
        bias_scaled = True

        def __init__(self) -> None:
            self.table = LearnedAbsolute(table)
            self.distance = DistanceBias(1.0, before_scale=True)

        def embed(self, positions: Array, d_model: int, xp: Any) -> Array:
            return self.table.embed(positions, d_model, xp)

        def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array | None:
            return self.distance.bias(q_positions, k_positions, n_heads) if with_bias else None

    _, trace = self_attention(x, AttentionWeights.identity(4, xp=xp), encoding=_Seed())
    return trace


def _fmt(a: Array, digits: int = 2) -> list[str]:
    rows = np.atleast_2d(to_numpy(a)) + 0.0  # + 0.0 turns -0.0 into 0.0
    width = max(len(f"{v:.{digits}f}") for v in rows.ravel())
    return ["[" + ", ".join(f"{v:{width}.{digits}f}" for v in row) + "]" for row in rows]


def _block(title: str, a: Array, digits: int = 2, note: str = "") -> str:
    lines = _fmt(a, digits)
    pad = " " * (len(title) + 3)
    out = [f"{title} = " + lines[0]] + [pad + line for line in lines[1:]]
    if note:
        out[0] += "   " + note
    return "\n".join(out)


def explain_text() -> str:
    """The worked example, step by step, as ``refpos explain`` prints it."""
    t = {name: to_numpy(a) for name, a in worked_example().items()}
    t0 = {name: to_numpy(a) for name, a in worked_example(with_bias=False).items()}
    a, out = t["A"][0], t["out"]
    exact_sinusoid_row1 = np.array([np.sin(1.0), np.cos(1.0), np.sin(0.01), np.cos(0.01)])
    s = []
    s.append("Worked example: 我 愛 你 through one attention head (d = 4, W_Q = W_K = W_V = I)")
    s.append("The story: a lecture on positional encodings works this sentence by hand, once without and once")
    s.append("with a distance penalty; here is each step exact, and at the end where its rounding differs.")
    s.append("Values are float64, printed correctly rounded to 2 decimals.\n")
    s.append("Step 1. Word vectors X and position vectors P, added:")
    s.append(_block("X", t["X"], 0, "rows: " + " ".join(TOKENS)))
    s.append(_block("P", t["P"], 0, "(the story's P, inferred; see the note at the end)"))
    s.append(_block("X+P", t["X+P"], 0))
    s.append("  我 and 愛 both become [1, 1, 1, 1]: this P erased the difference between the two words.\n")
    s.append("Step 2. Identity projections: Q = K = V = X+P.")
    s.append(_block("Q", t["Q"][0], 0) + "\n")
    s.append("Step 3. Scores S = Q·Kᵀ:")
    s.append(_block("S", t["S"][0], 0) + "\n")
    s.append("Step 4. Distance bias B[i, j] = -|i - j|, added before the scale (the story's order):")
    s.append(_block("B", t["B"][0], 0))
    s.append(_block("S+B", t["S+B"][0], 0) + "\n")
    s.append("Step 5. Scale by 1/√d = 1/2 (the bias's effective strength is therefore -|i - j|/2):")
    s.append(_block("(S+B)/2", t["scaled"][0], 1) + "\n")
    s.append("Step 6. Softmax of each row:")
    s.append(_block("A", a, 2))
    s.append("  exact: " + "; ".join(" ".join(f"{v:.6f}" for v in row) for row in a) + "\n")
    s.append("Step 7. Output A·V:")
    s.append(_block("out", out, 2))
    s.append("  exact: " + "; ".join(" ".join(f"{v:.6f}" for v in row) for row in out) + "\n")
    s.append("Step 8. The same without the bias:")
    s.append(_block("S/2", t0["scaled"][0], 0))
    s.append(_block("A", t0["A"][0], 2))
    s.append(_block("out", t0["out"], 2))
    s.append("  Without the bias, 我 spreads its attention evenly (1/3 each); with it, 我 keeps "
             f"{a[0, 0]:.2f} on itself and only {a[0, 2]:.2f} on the far word 你.\n")
    s.append("Where the story's hand rounding differs from the exact values:")
    s.append(f"  A[0, 2]: the story prints {STORY_PRINTED_A[0][2]:.2f}, exact {a[0, 2]:.4f} -> {a[0, 2]:.2f}")
    s.append(f"  A[1, 1]: the story prints {STORY_PRINTED_A[1][1]:.2f}, exact {a[1, 1]:.4f} -> {a[1, 1]:.2f}")
    s.append(f"  out[0]:  the story prints {STORY_PRINTED_OUT[0][1]:.2f} / {STORY_PRINTED_OUT[0][2]:.2f}, "
             f"exact {out[0, 1]:.4f} / {out[0, 2]:.4f} -> {out[0, 1]:.2f} / {out[0, 2]:.2f}")
    s.append("  (the story rounded so that its printed rows sum to 1.00; correctly rounded they sum to "
             f"{sum(round(v, 2) for v in a[0]):.2f} and {sum(round(v, 2) for v in a[1]):.2f})\n")
    s.append("Note: the story calls P a sinusoidal encoding, but it is not the sinusoidal table. For d = 4")
    s.append("the interleaved sinusoid's row 1 is " + ", ".join(f"{v:.4f}" for v in exact_sinusoid_row1)
             + ",")
    s.append("not [1, 0, 1, 0]; and the story's rows 0 and 2 are equal, so its P cannot tell position 0")
    s.append("from position 2. (refpos.encodings.sinusoidal.sinusoidal gives the real table.)")
    return "\n".join(s)
