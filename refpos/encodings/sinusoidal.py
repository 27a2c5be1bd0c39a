r"""Absolute position encodings, added to the input embeddings: learned tables and sinusoids.

See docs/sinusoidal.md#the-math (sinusoidal, Vaswani et al. 2017 §3.5) and docs/learned.md#the-math (learned
tables).

Layouts of the ``dim/2`` (sin, cos) pairs (docs/conventions.md):

* ``"interleaved"`` — channels ``(2k, 2k+1)`` hold ``(sin ω_k p, cos ω_k p)``: the paper, HF DistilBERT/XLM.
* ``"concat"`` — channels ``(k, k + dim/2)``: tensor2tensor, fairseq, Transformer-XL, HF Marian/M2M100.

Frequency spacings:

* ``"paper"`` — ``ω_k = base^(-2k/dim)``;
* ``"tensor2tensor"`` — ``ω_k = exp(-k·ln(base) / max(dim/2 - 1, 1))`` (also fairseq), so the lowest
  frequency is exactly ``1/base``.

Odd ``dim`` is rejected: the anchors disagree on it (tensor2tensor and fairseq append a zero column,
Marian writes ⌈d/2⌉ sine and ⌊d/2⌋ cosine columns), so a caller who needs one of them pads explicitly.
"""

from __future__ import annotations

import math
from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.encoding import Encoding
from refpos.pairs import SINUSOID_LAYOUTS, layout_permutation, place_pairs
from refpos.validation import (
    MAX_EXACT_POSITION,
    MAX_WIDTH,
    as_positions,
    check_choice,
    check_float,
    check_int,
    check_memory,
    check_size,
    element_count,
)

#: where sin and cos of frequency k go (the pairings of :mod:`refpos.pairs`)
LAYOUTS = SINUSOID_LAYOUTS
SPACINGS = ("paper", "tensor2tensor")


# ----------------------------------------------------------------------------------------------------
# sinusoids
# ----------------------------------------------------------------------------------------------------
def _check_dim(dim: object) -> int:
    dim = check_size("dim", dim, maximum=MAX_WIDTH, bytes_each=8, what="float64 per position")
    if dim % 2:
        raise ValueError(f"dim must be even (dim/2 sin-cos pairs), got {dim}")
    return dim


def sinusoidal_frequencies(
    dim: int, *, base: float = 10000.0, spacing: str = "paper", xp: Any = None
) -> Array:
    r"""The ``dim/2`` angular frequencies ``ω_k`` of the sinusoid, shape ``(dim/2,)``.

    Notes
    -----
    .. math::
        \omega_k^{\text{paper}} = \text{base}^{-2k/d}, \qquad
        \omega_k^{\text{t2t}} = \exp\!\left(-k \,\frac{\ln \text{base}}{\max(d/2 - 1,\, 1)}\right),
        \qquad k = 0, \dots, d/2 - 1

    Examples
    --------
    >>> sinusoidal_frequencies(8).tolist()
    [1.0, 0.1, 0.01, 0.001]
    """
    xp = get_xp(xp)
    dim = _check_dim(dim)
    base = check_float("base", base, positive=True)
    if base <= 1.0:
        raise ValueError(f"base must be > 1, got {base}")
    check_choice("spacing", spacing, SPACINGS)
    half = dim // 2
    k = xp.arange(half, dtype=xp.float64)  # (d/2,)
    if spacing == "paper":
        return base ** (-2.0 * k / dim)
    return xp.exp(-k * (math.log(base) / max(half - 1, 1)))


def sinusoidal(
    positions: Array,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    spacing: str = "paper",
    offset: int = 0,
    padding_row: int | None = None,
    xp: Any = None,
) -> Array:
    r"""The sinusoidal position table ``P``, shape ``(*positions.shape, dim)``.

    Parameters
    ----------
    positions : int or int array
        Non-negative token positions (any shape).
    dim : int
        Even embedding width (odd ``dim`` is rejected, see the module docstring).
    base : float
        ``10000`` in the paper.
    layout : {"interleaved", "concat"}
    spacing : {"paper", "tensor2tensor"}
    offset : int
        Added to every position first (fairseq/M2M100 start at ``padding_idx + 1``).
    padding_row : int, optional
        A row of the table that holds zeros: fairseq's tables (M2M100, XGLM, Kosmos-2) zero the padding token's
        row, ``P_{padding\_row} = 0``, which a padding token (and an id passed equal to it) reads.
    xp : namespace, optional
        Where a list of positions is created; arrays keep their own namespace.

    Notes
    -----
    .. math::
        P_{p,\,2k} = \sin(p\,\omega_k), \qquad P_{p,\,2k+1} = \cos(p\,\omega_k) \quad\text{(interleaved)}

    concatenated: :math:`P_{p,k} = \sin(p\,\omega_k)`, :math:`P_{p,k+d/2} = \cos(p\,\omega_k)`.
    The angle is ``positions · ω`` elementwise in float64.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(sinusoidal([1], 4)[0], 10).tolist()
    [0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004]
    >>> sinusoidal([0], 4, layout="concat")[0].tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    dim = _check_dim(dim)
    check_choice("layout", layout, LAYOUTS)
    offset = check_int("offset", offset)
    count = element_count(positions)  # before as_positions reads them: 2**40 of them take long to read
    check_memory("the sinusoid table and its angles, float64", 2 * count * dim * 8, f"{count} positions of dim {dim}")
    positions = as_positions(positions, xp=xp, allow_negative=offset > 0)
    ns = array_namespace(positions)
    shifted = positions + offset
    if shifted.size and bool(ns.any(shifted < 0)):
        raise ValueError(f"positions + offset must be >= 0, got a minimum of {int(ns.min(shifted))}")
    omega = sinusoidal_frequencies(dim, base=base, spacing=spacing, xp=ns)  # (d/2,)
    angles = ns.astype(shifted, ns.float64)[..., None] * omega  # (..., d/2)
    table = place_pairs(ns.sin(angles), ns.cos(angles), layout)  # (..., d): (sin, cos) as pair k
    if padding_row is None:
        return table
    return ns.where((shifted == check_int("padding_row", padding_row))[..., None], 0.0, table)


def interleaved_to_concat_permutation(dim: int, *, xp: Any = None) -> Array:
    """Channel indices ``perm`` with ``concat == interleaved[..., perm]``: ``[0, 2, 4, …, 1, 3, 5, …]``.

    Deprecated alias: this is the permutation of :func:`refpos.rope.interleaved_to_half_permutation` (the
    sinusoid's ``concat`` places pairs as RoPE's ``half`` does); new code can write
    ``refpos.layout_permutation(dim, "interleaved", "concat")``.
    """
    return layout_permutation(_check_dim(dim), "interleaved", "concat", xp=xp)


def sinusoidal_shift_matrix(r: int, dim: int, *, base: float = 10000.0, layout: str = "interleaved",
                            spacing: str = "paper", xp: Any = None) -> Array:
    r"""The matrix ``M_r`` that moves a sinusoid ``r`` positions on: ``P[p + r] = M_r · P[p]``, ``(dim, dim)``.

    Sign convention: column vectors, so for a table of rows ``P[p + r] = P[p] @ M_r.T``. Each frequency
    contributes the block below with **+sin in the upper-right corner**; in (sin, cos) coordinates it
    turns clockwise by ``ω_k·r`` (the usual counter-clockwise rotation by ``+ω_k·r`` acting on
    (cos, sin)). ``r`` may be negative; ``M_{-r} = M_rᵀ``, ``M_r M_s = M_{r+s}``, ``M_0 = I``.

    Notes
    -----
    .. math::
        \begin{pmatrix}\sin\omega(p+r)\\ \cos\omega(p+r)\end{pmatrix}
        = \begin{pmatrix}\cos\omega r & \sin\omega r\\ -\sin\omega r & \cos\omega r\end{pmatrix}
          \begin{pmatrix}\sin\omega p\\ \cos\omega p\end{pmatrix}

    Concatenated layout: :math:`M_r = \begin{pmatrix} C & S \\ -S & C\end{pmatrix}`,
    :math:`C = \operatorname{diag}\cos(\omega r)`, :math:`S = \operatorname{diag}\sin(\omega r)`;
    the interleaved matrix is the same one with rows and columns permuted.

    Examples
    --------
    >>> import numpy as np
    >>> m = sinusoidal_shift_matrix(3, 4)
    >>> bool(np.allclose(m @ sinusoidal([5], 4)[0], sinusoidal([8], 4)[0], rtol=1e-13, atol=1e-15))
    True
    """
    xp = get_xp(xp)
    dim = _check_dim(dim)
    r = check_int("r", r, minimum=-MAX_EXACT_POSITION, maximum=MAX_EXACT_POSITION)  # the angles ω·r are exact
    check_choice("layout", layout, LAYOUTS)
    check_memory("the shift matrix (dim, dim) and its blocks, float64", 6 * dim * dim * 8, f"dim={dim}")
    omega = sinusoidal_frequencies(dim, base=base, spacing=spacing, xp=xp)  # (d/2,)
    half = dim // 2
    angle = float(r) * omega  # (d/2,)
    eye = xp.eye(half, dtype=xp.float64)
    c, s = eye * xp.cos(angle), eye * xp.sin(angle)  # diagonal (d/2, d/2)
    top = xp.concat([c, s], axis=1)  # (d/2, d)
    bottom = xp.concat([-s, c], axis=1)  # (d/2, d)
    m_concat = xp.concat([top, bottom], axis=0)  # (d, d)
    if layout == "concat":
        return m_concat
    # interleaved channel 2k is concat channel k, 2k+1 is k + d/2
    to_concat = layout_permutation(dim, "concat", "interleaved", xp=xp)  # (d,)
    return xp.take(xp.take(m_concat, to_concat, axis=0), to_concat, axis=1)  # (d, d)


class Sinusoidal(Encoding):
    """The fixed sinusoid added to the input embeddings (its width is the model's ``d_model``).

    The pipeline adds ``P`` to ``x`` as given; the paper's ``√d_model`` factor on the token embedding
    belongs to whoever builds ``x``.
    """

    name = "sinusoidal"

    def __init__(
        self,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        spacing: str = "paper",
        offset: int = 0,
        padding_row: int | None = None,
    ) -> None:
        self.base = check_float("base", base, positive=True)
        self.layout = check_choice("layout", layout, LAYOUTS)
        self.spacing = check_choice("spacing", spacing, SPACINGS)
        self.offset = check_int("offset", offset)
        self.padding_row = None if padding_row is None else check_int("padding_row", padding_row)

    def embed(self, positions: Array, d_model: int, xp: Any) -> Array:
        return sinusoidal(positions, d_model, base=self.base, layout=self.layout, spacing=self.spacing,
                          offset=self.offset, padding_row=self.padding_row, xp=xp)

    def __repr__(self) -> str:
        zeroed = "" if self.padding_row is None else f", padding_row={self.padding_row}"
        return (f"Sinusoidal(base={self.base}, layout={self.layout!r}, spacing={self.spacing!r}, "
                f"offset={self.offset}{zeroed})")
