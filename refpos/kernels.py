r"""Additive relative biases beyond the anchors: KERPLE (log, power), FIRE and Sandwich.

Shared spec: encodings.md §9 (KERPLE, Chi et al. 2022; chijames/KERPLE), §10 (FIRE, Li et al. 2024),
§12 (Sandwich, Chi et al. 2023; NVIDIA NeMo). Each returns a bias ``(..., H, Tq, Tk)`` added **after**
the ``1/√d`` scale. KERPLE and FIRE are causal methods: future keys get a placeholder value (KERPLE 0,
FIRE the mirrored distance) and must be masked (``self_attention(..., causal=True)``).
"""

from __future__ import annotations

from typing import Any

from refpos._checks import as_positions, check_choice, check_float, check_int, float64_array
from refpos.backend import array_namespace
from refpos.encoding import Encoding
from refpos.relative import relative_positions

Array = Any
KERPLE_KINDS = ("log", "power")


# ----------------------------------------------------------------------------------------------------
# KERPLE
# ----------------------------------------------------------------------------------------------------
def _per_head(name: str, value: Array, xp: Any) -> Array:
    value = float64_array(value, name=name, xp=xp)
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
        self.r1 = float64_array(r1, name="r1")
        self.r2 = float64_array(r2, name="r2")
        self.kind = check_choice("kind", kind, KERPLE_KINDS)
        self.eps = check_float("eps", eps, positive=True)

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        if self.r1.shape[0] != n_heads:
            raise ValueError(f"r1 has {self.r1.shape[0]} heads but the layer has n_heads={n_heads}")
        return kerple_bias(self.r1, self.r2, q_positions, k_positions, kind=self.kind, eps=self.eps)

    def __repr__(self) -> str:
        return f"KERPLE(kind={self.kind!r}, heads={self.r1.shape[0]}, eps={self.eps})"


# ----------------------------------------------------------------------------------------------------
# FIRE
# ----------------------------------------------------------------------------------------------------
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
    feat = fire_features(q_positions, k_positions, c=c, L=L, eps=eps)  # (..., Tq, Tk)
    xp = array_namespace(feat)
    w1, b1, w2, b2 = (float64_array(a, name=n, xp=xp) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")))
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
        self.w1, self.b1 = float64_array(w1, name="w1"), float64_array(b1, name="b1")
        self.w2, self.b2 = float64_array(w2, name="w2"), float64_array(b2, name="b2")
        self.c, self.L = check_float("c", c), check_float("L", L)
        self.eps = check_float("eps", eps, minimum=0.0)

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        if self.w2.shape[0] != n_heads:
            raise ValueError(f"w2 has {self.w2.shape[0]} heads but the layer has n_heads={n_heads}")
        return fire_bias(q_positions, k_positions, self.w1, self.b1, self.w2, self.b2, c=self.c, L=self.L,
                         eps=self.eps)

    def __repr__(self) -> str:
        return f"FIRE(width={self.w1.shape[0]}, heads={self.w2.shape[0]}, c={self.c}, L={self.L})"


# ----------------------------------------------------------------------------------------------------
# Sandwich
# ----------------------------------------------------------------------------------------------------
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
    head_dim = check_int("head_dim", head_dim, minimum=1)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    n_heads = check_int("n_heads", n_heads, minimum=1)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
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
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
        self.causal = causal

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        return sandwich_bias(q_positions, k_positions, self.head_dim, n_heads, causal=self.causal)

    def __repr__(self) -> str:
        return f"Sandwich(head_dim={self.head_dim}, causal={self.causal})"
