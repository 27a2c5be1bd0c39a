r"""KERPLE (Chi et al. 2022): a conditionally positive definite kernel of the distance as a bias.

Per head, with learned :math:`r_1, r_2 > 0` and the distance :math:`m = i - j \ge 0`:

.. math::
    b^{\log}_{ij} = -r_1 \log(1 + r_2\, m), \qquad b^{\text{power}}_{ij} = -r_1\, m^{r_2}.

The bias ``(..., H, Tq, Tk)`` is added after the ``1/√d`` scale. KERPLE is causal: future keys get the
placeholder 0 and must be masked (``self_attention(..., causal=True)``).

See docs/other-encodings.md#kerple.
"""

from __future__ import annotations

from typing import Any

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.encodings.distance import relative_positions
from refpos.validation import check_choice, check_float, floating_array, same_libraries

KERPLE_KINDS = ("log", "power")


def _per_head(name: str, value: Array, xp: Any) -> Array:
    value = floating_array(value, name=name, xp=xp)
    if value.ndim != 1:
        raise ValueError(f"{name} must be a vector (n_heads,), got shape {tuple(value.shape)}")
    if not bool(xp.all(xp.isfinite(value))):
        raise ValueError(f"{name} must be finite")
    return value


def kerple_bias(
    r1: Array, r2: Array, q_positions: Array, k_positions: Array, *, kind: str = "log", eps: float = 0.01
) -> Array:
    r"""KERPLE's conditionally positive definite kernel bias, shape ``(..., H, Tq, Tk)``.

    ``r1``, ``r2`` ``(H,)`` are the learnable per-head scalars. As the anchor does on every forward, both
    are clamped to ``>= eps`` (0.01) and, for the power kernel, ``r2`` to ``<= 2``: this is part of the
    method, not an input repair. Distances are ``n = max(i - j, 0)`` (the code's ``tril(i − j)``).

    Notes
    -----
    .. math::
        b^{\log}_{hij} = -r_{1,h} \log(1 + r_{2,h}\, n_{ij}), \qquad
        b^{\text{power}}_{hij} = -r_{1,h}\, n_{ij}^{\,r_{2,h}}, \qquad n_{ij} = \max(i - j,\, 0)

    With ``kind="power"`` and ``r2 = 1`` this is causal ALiBi with slopes ``r1``.
    """
    same_libraries(r1=r1, r2=r2, q_positions=q_positions, k_positions=k_positions)
    check_choice("kind", kind, KERPLE_KINDS)
    eps = check_float("eps", eps, positive=True)
    rel = relative_positions(q_positions, k_positions)  # (..., Tq, Tk)
    xp = array_namespace(rel)
    r1, r2 = _per_head("r1", r1, xp), _per_head("r2", r2, xp)
    if r1.shape != r2.shape:
        raise ValueError(f"r1 and r2 must have the same shape (n_heads,), got {tuple(r1.shape)}, {tuple(r2.shape)}")
    n = xp.astype(xp.maximum(-rel, xp.zeros_like(rel)), xp.float64)[..., None, :, :]  # (..., 1, Tq, Tk)
    a = xp.maximum(r1, xp.full_like(r1, eps))[:, None, None]  # (H, 1, 1)
    b = xp.maximum(r2, xp.full_like(r2, eps))[:, None, None]  # (H, 1, 1)
    if kind == "log":
        return -a * xp.log1p(b * n)
    return -a * xp.pow(n, xp.minimum(b, xp.full_like(b, 2.0)))


class KERPLE(Encoding):
    """KERPLE (log or power kernel) as a pipeline encoding; use with ``causal=True``."""

    name = "kerple"

    def __init__(self, r1: Array, r2: Array, *, kind: str = "log", eps: float = 0.01) -> None:
        self.r1 = floating_array(r1, name="r1")
        self.r2 = floating_array(r2, name="r2")
        self.kind = check_choice("kind", kind, KERPLE_KINDS)
        self.eps = check_float("eps", eps, positive=True)

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        if self.r1.shape[0] != n_heads:
            raise ValueError(f"r1 has {self.r1.shape[0]} heads but the layer has n_heads={n_heads}")
        return kerple_bias(self.r1, self.r2, q_positions, k_positions, kind=self.kind, eps=self.eps)

    def __repr__(self) -> str:
        return f"KERPLE(kind={self.kind!r}, heads={self.r1.shape[0]}, eps={self.eps})"


