r"""FIRE (Li et al. 2024): a learned function of the progressively normalised distance as a bias.

A small MLP :math:`f_\theta` reads the log-transformed distance, normalised by the query position:

.. math::
    b_{ij} = f_\theta\!\left(\frac{\psi(i - j)}{\psi(\max(i, |L|)) + \varepsilon}\right), \qquad
    \psi(x) = \log(|c\,x| + 1).

The bias ``(..., H, Tq, Tk)`` is added after the ``1/√d`` scale. FIRE is causal: future keys get the
mirrored distance as a placeholder and must be masked (``self_attention(..., causal=True)``).

See docs/other-encodings.md#fire.
"""

from __future__ import annotations

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.encodings.distance import relative_positions
from refpos.validation import as_positions, check_float, floating_array, same_libraries


def fire_features(
    q_positions: Array, k_positions: Array, *, c: float = 0.1, L: float = 512.0, eps: float = 1e-6
) -> Array:
    r"""FIRE's normalised, log-transformed distance (the MLP input), shape ``(..., Tq, Tk)``.

    Notes
    -----
    .. math::
        \phi_{ij} = \frac{\psi(i - j)}{\psi(\max(i, |L|)) + \varepsilon}, \qquad \psi(x) = \log(|c\,x| + 1)

    In ``[0, 1)`` on the causal triangle; the ``|·|`` mirrors future keys, which must be masked.
    """
    same_libraries(q_positions=q_positions, k_positions=k_positions)
    c = check_float("c", c)
    L = check_float("L", L)
    eps = check_float("eps", eps, minimum=0.0)
    rel = relative_positions(q_positions, k_positions)  # (..., Tq, Tk)
    xp = array_namespace(rel)
    dist = xp.astype(-rel, xp.float64)  # i - j
    q_float = xp.astype(as_positions(q_positions, name="q_positions", xp=xp), xp.float64)
    norm = xp.maximum(q_float, xp.full_like(q_float, abs(L)))[..., :, None]  # (..., Tq, 1)
    return xp.log(xp.abs(c * dist) + 1.0) / (xp.log(xp.abs(c * norm) + 1.0) + eps)


def fire_bias(
    q_positions: Array, k_positions: Array, w1: Array, b1: Array, w2: Array, b2: Array,
    *, c: float = 0.1, L: float = 512.0, eps: float = 1e-6,
) -> Array:
    r"""FIRE bias ``f_θ(φ_ij)`` with a one-hidden-layer ReLU MLP, shape ``(..., H, Tq, Tk)``.

    ``w1``, ``b1`` ``(width,)`` (the 1 → width layer), ``w2`` ``(H, width)``, ``b2`` ``(H,)``.

    Notes
    -----
    .. math::
        b_{hij} = \sum_w W^{(2)}_{hw}\, \operatorname{ReLU}\!\left(W^{(1)}_w \phi_{ij} + b^{(1)}_w\right)
                  + b^{(2)}_h
    """
    same_libraries(q_positions=q_positions, k_positions=k_positions, w1=w1, b1=b1, w2=w2, b2=b2)
    feat = fire_features(q_positions, k_positions, c=c, L=L, eps=eps)  # (..., Tq, Tk)
    xp = array_namespace(feat)
    w1, b1, w2, b2 = (floating_array(a, name=n, xp=xp) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")))
    width = w1.shape[0]
    if w1.ndim != 1 or tuple(b1.shape) != (width,) or w2.ndim != 2 or w2.shape[1] != width:
        raise ValueError(f"w1, b1 must be (width,) and w2 (H, width); got {tuple(w1.shape)}, {tuple(b1.shape)}, "
                         f"{tuple(w2.shape)}")
    if tuple(b2.shape) != (w2.shape[0],):
        raise ValueError(f"b2 must have shape (H,) = ({w2.shape[0]},), got {tuple(b2.shape)}")
    hidden = xp.maximum(feat[..., None] * w1 + b1, xp.zeros((), dtype=xp.float64))  # (..., Tq, Tk, width)
    out = xp.matmul(hidden, xp.matrix_transpose(w2)) + b2  # (..., Tq, Tk, H)
    return xp.moveaxis(out, -1, -3)  # (..., H, Tq, Tk)


class FIRE(Encoding):
    """FIRE as a pipeline encoding; use with ``causal=True``. Shift-invariant only while positions < L."""

    name = "fire"

    def __init__(self, w1: Array, b1: Array, w2: Array, b2: Array, *, c: float = 0.1, L: float = 512.0,
                 eps: float = 1e-6) -> None:
        self.w1, self.b1 = floating_array(w1, name="w1"), floating_array(b1, name="b1")
        self.w2, self.b2 = floating_array(w2, name="w2"), floating_array(b2, name="b2")
        self.c, self.L = check_float("c", c), check_float("L", L)
        self.eps = check_float("eps", eps, minimum=0.0)

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        if self.w2.shape[0] != n_heads:
            raise ValueError(f"w2 has {self.w2.shape[0]} heads but the layer has n_heads={n_heads}")
        return fire_bias(q_positions, k_positions, self.w1, self.b1, self.w2, self.b2, c=self.c, L=self.L,
                         eps=self.eps)

    def __repr__(self) -> str:
        return f"FIRE(width={self.w1.shape[0]}, heads={self.w2.shape[0]}, c={self.c}, L={self.L})"


