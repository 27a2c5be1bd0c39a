r"""ALiBi: attention with linear biases (Press, Smith, Lewis 2022).

See docs/alibi.md#the-math, docs/alibi.md#where-the-anchors-differ and docs/diagnosis.md. Each head ``h``
adds ``-m_h · distance`` to its logits, **after** the softmax scale (official fairseq code, BLOOM, MPT).
Falcon adds it before the scale (effective slope ``m/√d``): ``ALiBi(before_scale=True)``.

Bias forms, with ``i`` the query and ``j`` the key position:

======================  ========================  ===================================================
form                    ``bias[h, i, j]``          used by
======================  ========================  ===================================================
``"causal"``            ``-m_h (i - j)``           the paper; positive on future keys: mask them
``"symmetric"``         ``-m_h |i - j|``           bidirectional use
``"key_index"``         ``+m_h · j``               fairseq official, BLOOM: equal to ``"causal"``
                                                   under a causal mask only (rows differ by a constant)
======================  ========================  ===================================================
"""

from __future__ import annotations

import math
from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.encoding import Encoding
from refpos.encodings.distance import relative_positions
from refpos.validation import (
    MAX_WIDTH,
    as_positions,
    check_bool,
    check_choice,
    check_int,
    check_memory,
    check_size,
    same_library,
)

FORMS = ("causal", "symmetric", "key_index")


def _geometric_slopes(count: int) -> list[float]:
    r"""The power-of-two sequence of the official code: ``start · start^h``, ``start = 2^(-2^-(log2(c) - 3))``.

    ``start = 2^(-8/c)``; the terms are formed by the same float operations as the published
    recurrence (not the closed form ``2^(-8(h+1)/c)``, which differs by up to a few ulps).
    """
    start = 2.0 ** (-(2.0 ** -(math.log2(count) - 3)))
    return [start * start**h for h in range(count)]


def _slopes_list(n_heads: int) -> list[float]:
    if n_heads & (n_heads - 1) == 0:
        return _geometric_slopes(n_heads)
    closest = 1 << (n_heads.bit_length() - 1)  # the largest power of two below n_heads
    return _geometric_slopes(closest) + _slopes_list(2 * closest)[0::2][: n_heads - closest]


def alibi_slopes(n_heads: int, *, xp: Any = None) -> Array:
    r"""The ALiBi head slopes ``m_h``, shape ``(n_heads,)``, bit-exact to the published recurrence.

    Notes
    -----
    A power of two ``n``: :math:`m_h = 2^{-8h/n}`, ``h = 1 … n``. Otherwise, with ``c`` the largest power
    of two below ``n``: the ``c`` slopes of :math:`2^{-8h/c}`, then the even-indexed entries of the
    ``2c`` sequence, :math:`2^{-8(2t+1)/(2c)}` for ``t < n - c``, **appended, not sorted**:

    .. math:: m = \left(2^{-8/c}, \dots, 2^{-8}\right) \,\Vert\, \left(2^{-4/c}, 2^{-12/c}, \dots\right)

    Examples
    --------
    >>> [float(s) for s in alibi_slopes(3)]
    [0.0625, 0.00390625, 0.25]
    """
    xp = get_xp(xp)
    n_heads = check_size("n_heads", n_heads, maximum=MAX_WIDTH, bytes_each=8, what="float64 slopes")
    return xp.asarray(_slopes_list(n_heads), dtype=xp.float64)


def alibi_bias_from_positions(
    slopes: Array, q_positions: Array, k_positions: Array, *, form: str = "causal"
) -> Array:
    r"""The ALiBi bias for given positions, shape ``(..., H, Tq, Tk)`` (positions ``(Tq,)`` or ``(B, Tq)``).

    Notes
    -----
    .. math::
        b^{\text{causal}}_{hij} = -m_h (i - j), \qquad b^{\text{symmetric}}_{hij} = -m_h |i - j|,
        \qquad b^{\text{key\_index}}_{hij} = m_h\, j
    """
    check_choice("form", form, FORMS)
    xp = array_namespace(slopes)
    same_library("q_positions", q_positions, xp)
    same_library("k_positions", k_positions, xp)
    q_count = math.prod(q_positions.shape) if hasattr(q_positions, "shape") else len(q_positions)
    k_count = k_positions.shape[-1] if hasattr(k_positions, "shape") and k_positions.shape else 1
    check_memory("the ALiBi bias (..., H, Tq, Tk) and its distances, float64", (slopes.shape[0] + 2) * q_count
                 * k_count * 8, f"{slopes.shape[0]} heads, {q_count} queries and {k_count} keys")
    m = slopes[:, None, None]  # (H, 1, 1)
    rel = relative_positions(q_positions, k_positions)  # (..., Tq, Tk), k - q
    dist = xp.astype(-rel, xp.float64)[..., None, :, :]  # (..., 1, Tq, Tk), i - j
    if form == "causal":
        return -m * dist
    if form == "symmetric":
        return -m * xp.abs(dist)
    key = xp.astype(as_positions(k_positions, name="k_positions", xp=xp), xp.float64)
    key = key[..., None, None, :]  # (..., 1, 1, Tk)
    return m * xp.broadcast_to(key, dist.shape)


def alibi_bias(n_heads: int, q_len: int, k_len: int, *, form: str = "causal", xp: Any = None) -> Array:
    r"""The ALiBi bias ``(n_heads, q_len, k_len)``; queries are aligned to the **end** of the keys.

    Query ``i`` sits at position ``k_len - q_len + i`` (a cached decode step), key ``j`` at ``j``.
    Nothing is masked here: the ``"causal"`` and ``"key_index"`` forms need a causal mask on top.

    Examples
    --------
    >>> alibi_bias(1, 3, 3)[0].tolist()
    [[-0.0, 0.00390625, 0.0078125], [-0.00390625, -0.0, 0.00390625], [-0.0078125, -0.00390625, -0.0]]
    """
    xp = get_xp(xp)
    n_heads = check_size("n_heads", n_heads, maximum=MAX_WIDTH, bytes_each=8, what="float64 slopes")
    q_len = check_int("q_len", q_len, minimum=0)
    k_len = check_int("k_len", k_len, minimum=0)
    check_choice("form", form, FORMS)
    if q_len > k_len:
        raise ValueError(f"q_len must be <= k_len (queries aligned to the end of the keys), got "
                         f"q_len={q_len}, k_len={k_len}")
    check_memory("the ALiBi bias (n_heads, q_len, k_len) and its distances, float64",
                 (n_heads + 2) * q_len * k_len * 8, f"n_heads={n_heads}, q_len={q_len}, k_len={k_len}")
    q_positions = xp.arange(k_len - q_len, k_len, dtype=xp.int64)
    k_positions = xp.arange(k_len, dtype=xp.int64)
    return alibi_bias_from_positions(alibi_slopes(n_heads, xp=xp), q_positions, k_positions, form=form)


class ALiBi(Encoding):
    """ALiBi as a pipeline encoding; the slopes follow the pipeline's number of query heads.

    ``form="causal"`` and ``"key_index"`` need ``self_attention(..., causal=True)``. ``before_scale=True``
    is Falcon's order (the bias inside the ``1/√d`` scale).
    """

    name = "alibi"

    def __init__(self, *, form: str = "causal", before_scale: bool = False) -> None:
        self.form = check_choice("form", form, FORMS)
        check_bool("before_scale", before_scale)
        self.bias_scaled = before_scale

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        xp = array_namespace(q_positions)
        slopes = alibi_slopes(n_heads, xp=xp)  # (H,)
        return alibi_bias_from_positions(slopes, q_positions, k_positions, form=self.form)

    def __repr__(self) -> str:
        return f"ALiBi(form={self.form!r}, before_scale={self.bias_scaled})"
