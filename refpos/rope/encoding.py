r"""``Rope``: RoPE (any variant) as a pipeline encoding, through the ``rotate`` and ``softmax_scale`` hooks.

.. code-block:: text

    q, k (B, H, T, D) ──apply_rope(·, positions, rope, seq_len=L)──> A·R_p q, A·R_p k
    logits = (A·R_p q)·(A·R_m k) · scale,   scale = D^-1/2 · [mscale(s, mscale_all_dim)² if softmax_mscale]

The attention factor ``A`` multiplies cos and sin of both q and k, so the rotary part of every logit is
multiplied by ``A²`` (pass-through channels are not). The DeepSeek MLA multiplier is separate and
multiplies every logit (docs/extrapolation.md#yarn).

Examples
--------
>>> import numpy as np, refpos
>>> rope = refpos.RopeConfig(head_dim=4)
>>> w = refpos.AttentionWeights.identity(4, xp=np)
>>> x = np.random.default_rng(0).standard_normal((3, 4))
>>> out, trace = refpos.self_attention(x, w, encoding=refpos.rope.Rope(rope), causal=True)
>>> sorted(k for k in trace if k.endswith("_rot"))
['K_rot', 'Q_rot']
"""

from __future__ import annotations

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.rope.config import RopeConfig
from refpos.rope.core import apply_rope, seq_len_of
from refpos.rope.scaling import check_rope_config, softmax_multiplier
from refpos.validation import as_positions, check_int


class Rope(Encoding):
    """Rotary position embedding of any ``rope_type`` as a :class:`refpos.Encoding`.

    Parameters
    ----------
    rope : RopeConfig
        ``head_dim`` must equal the attention head size.
    seq_len : int, optional
        Fixed ``L`` for ``dynamic`` / ``longrope``; ``None``: HF's ``max(positions) + 1`` of each call,
        over queries and keys together.

    Notes
    -----
    q and k are rotated by their own positions (``q_positions``, ``k_positions``) with one set of
    frequencies per call. ``softmax_scale(D)`` is ``D^{-1/2}``, times :func:`softmax_multiplier` when
    ``rope.softmax_mscale`` (DeepSeek-V2/V3 MLA).
    """

    name = "rope"

    def __init__(self, rope: RopeConfig, *, seq_len: int | None = None) -> None:
        self.rope = check_rope_config(rope)
        self.seq_len = None if seq_len is None else check_int("seq_len", seq_len, minimum=0)

    def _length(self, q_positions: Array, k_positions: Array) -> int | None:
        if self.seq_len is not None:
            return self.seq_len
        lengths = [n for n in (seq_len_of(q_positions), seq_len_of(k_positions)) if n is not None]
        return max(lengths) if lengths else None

    def rotate(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> tuple[Array, Array]:
        xp = array_namespace(q)
        q_positions = as_positions(q_positions, name="q_positions", xp=xp)
        k_positions = as_positions(k_positions, name="k_positions", xp=xp)
        for name, a in (("q", q), ("k", k)):
            if a.shape[-1] != self.rope.head_dim:
                raise ValueError(f"{name} has head size {a.shape[-1]}, the RopeConfig has head_dim="
                                 f"{self.rope.head_dim}")
        seq_len = self._length(q_positions, k_positions)
        return (apply_rope(q, q_positions, self.rope, seq_len=seq_len),
                apply_rope(k, k_positions, self.rope, seq_len=seq_len))

    def softmax_scale(self, head_dim: int) -> float:
        scale = head_dim**-0.5
        return scale * softmax_multiplier(self.rope) if self.rope.softmax_mscale else scale

    def __repr__(self) -> str:
        return f"Rope({self.rope!r}, seq_len={self.seq_len})"
