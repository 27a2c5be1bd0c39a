r"""Sandwich (Chi et al. 2023): the dot product of two sinusoidal position vectors as a bias.

With the sinusoidal vectors :math:`p_t` of :mod:`refpos.encodings.sinusoidal` (dimension :math:`d`),
:math:`p_i \cdot p_j = \sum_{k=1}^{d/2} \cos\big(\omega_k (j - i)\big)` depends only on :math:`j - i`
and decays with it on average. Sandwich shifts it to 0 on the diagonal and gives head :math:`h` of
:math:`H` its own slope, as ALiBi does:

.. math::
    b_{hij} = \frac{p_i \cdot p_j - d/2}{8h/H}.

It is added after the ``1/√d`` scale; the causal form reads future keys at distance 0.

See docs/other-encodings.md#sandwich.
"""

from __future__ import annotations

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.encodings.distance import relative_positions
from refpos.validation import check_bool, check_int, check_width, same_libraries


def sandwich_bias(
    q_positions: Array, k_positions: Array, head_dim: int, n_heads: int, *, causal: bool = True
) -> Array:
    r"""Sandwich bias: the sinusoid dot product, shifted to 0 on the diagonal, shape ``(..., H, Tq, Tk)``.

    ``head_dim`` must be even (NeMo's ``arange(1, d/2 + 1)`` is ambiguous for odd ``d``). ``causal``
    applies the anchor's ``tril`` to the relative positions first (future keys read distance 0).

    Notes
    -----
    .. math::
        \text{raw}_{ij} = \sum_{k=1}^{d/2} \cos\!\left(\frac{j - i}{10000^{2k/d}}\right), \qquad
        b_{hij} = \frac{\text{raw}_{ij} - d/2}{8h/H}, \quad h = 1, \dots, H
    """
    same_libraries(q_positions=q_positions, k_positions=k_positions)
    head_dim = check_width("head_dim", head_dim, what="float64 frequencies")
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    n_heads = check_width("n_heads", n_heads, what="float64 slopes")
    check_bool("causal", causal)
    rel = relative_positions(q_positions, k_positions)  # (..., Tq, Tk)
    xp = array_namespace(rel)
    if causal:
        rel = xp.minimum(rel, xp.zeros_like(rel))  # tril(j - i) on the causal triangle
    k = xp.arange(1, head_dim // 2 + 1, dtype=xp.float64)  # (d/2,) from 1, as the anchor
    omega = 10000.0 ** (-2.0 * k / head_dim)
    raw = xp.sum(xp.cos(xp.astype(rel, xp.float64)[..., None] * omega), axis=-1)  # (..., Tq, Tk)
    h = xp.arange(1, n_heads + 1, dtype=xp.float64)[:, None, None]  # (H, 1, 1)
    return (raw[..., None, :, :] - head_dim / 2) / (h * 8.0 / n_heads)


class Sandwich(Encoding):
    """Sandwich as a pipeline encoding; ``head_dim`` is the model's head width (the bias hook lacks it)."""

    name = "sandwich"

    def __init__(self, head_dim: int, *, causal: bool = True) -> None:
        self.head_dim = check_int("head_dim", head_dim, minimum=1)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even, got {head_dim}")
        check_bool("causal", causal)
        self.causal = causal

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        return sandwich_bias(q_positions, k_positions, self.head_dim, n_heads, causal=self.causal)

    def __repr__(self) -> str:
        return f"Sandwich(head_dim={self.head_dim}, causal={self.causal})"
