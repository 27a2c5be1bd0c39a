r"""Shaw et al. (2018) relative representations, and the Music Transformer skewing.

Learned vectors :math:`a^K_{r}, a^V_{r}` for the clipped relative position
:math:`r = \operatorname{clip}(j - i, -k, k)` enter the logits and the values:

.. math::
    e_{ij} = \frac{q_i \cdot (k_j + a^K_{r})}{\sqrt{d}}, \qquad
    o_i = \sum_j p_{ij}\,(v_j + a^V_{r}).

Huang et al. (2018, Music Transformer) compute :math:`q_i \cdot a^K_{j-i}` for all pairs at once by
multiplying with the table of relative rows and *skewing* the result (:func:`skew`, :func:`unskew`).
Relative positions follow :func:`refpos.encodings.distance.relative_positions`.

See docs/relative.md#shaw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.encodings.distance import relative_positions
from refpos.validation import as_positions, check_choice, check_length, floating_array, same_libraries

SHAW_FORMS = ("direct", "skewed")


def shaw_index(q_positions: Array, k_positions: Array, max_relative_position: int) -> Array:
    r"""Row of the Shaw tables used by each (query, key) pair, ``(..., Tq, Tk)`` in ``[0, 2k]``.

    Notes
    -----
    .. math:: \text{idx}_{ij} = \operatorname{clip}(p^k_j - p^q_i,\, -k,\, k) + k
    """
    same_libraries(q_positions=q_positions, k_positions=k_positions)
    k = check_length("max_relative_position", max_relative_position)
    rel = relative_positions(q_positions, k_positions)  # (..., Tq, Tk)
    xp = array_namespace(rel)
    return xp.clip(rel, -k, k) + k


def skew(x: Array) -> Array:
    r"""Music Transformer skewing (unmasked form): ``(..., L, 2L-1) -> (..., L, L)``.

    Column ``c`` of the input holds relative position ``c - (L-1)``; the output is
    ``out[i, j] = x[i, j - i + L - 1]``, obtained by padding and reshaping (no gather, no ``L×L×d``).
    """
    xp = array_namespace(x)
    *lead, length, width = x.shape
    if width != 2 * length - 1:
        raise ValueError(f"skew needs shape (..., L, 2L-1), got {tuple(x.shape)}")
    x = xp.concat([x, xp.zeros((*lead, length, 1), dtype=x.dtype)], axis=-1)  # (..., L, 2L)
    x = xp.reshape(x, (*lead, 2 * length * length))  # (..., 2L²)
    x = xp.concat([x, xp.zeros((*lead, length - 1), dtype=x.dtype)], axis=-1)  # (..., (L+1)(2L-1))
    x = xp.reshape(x, (*lead, length + 1, 2 * length - 1))  # (..., L+1, 2L-1)
    return x[..., :length, length - 1 :]  # (..., L, L)


def unskew(y: Array) -> Array:
    r"""The inverse of :func:`skew`: ``(..., L, L) -> (..., L, 2L-1)``, ``x[i, c] = y[i, c + i - (L-1)]``.

    Entries whose key would fall outside ``[0, L)`` are 0. Used on the attention weights to sum them
    per relative position (the value side of Shaw's skewed form).
    """
    xp = array_namespace(y)
    *lead, length, length_k = y.shape
    if length != length_k:
        raise ValueError(f"unskew needs a square (..., L, L) array, got {tuple(y.shape)}")
    width = 2 * length - 1
    y = xp.concat([xp.zeros((*lead, length, length - 1), dtype=y.dtype), y], axis=-1)  # (..., L, 2L-1)
    y = xp.concat([y, xp.zeros((*lead, 1, width), dtype=y.dtype)], axis=-2)  # (..., L+1, 2L-1)
    y = xp.reshape(y, (*lead, (length + 1) * width))[..., : 2 * length * length]  # (..., 2L²)
    return xp.reshape(y, (*lead, length, 2 * length))[..., :width]  # (..., L, 2L-1)


def _check_consecutive(q_positions: Array, k_positions: Array, what: str) -> int:
    """The common length L of consecutive, equal query and key positions (the skewed forms need them)."""
    xp = array_namespace(q_positions)
    if tuple(q_positions.shape) != tuple(k_positions.shape) or bool(xp.any(q_positions != k_positions)):
        raise ValueError(f"{what} needs q_positions equal to k_positions (self-attention)")
    length = q_positions.shape[-1]
    if length > 1 and bool(xp.any(q_positions[..., 1:] - q_positions[..., :-1] != 1)):
        raise ValueError(f"{what} needs consecutive positions p0, p0+1, ...; use form='direct'")
    return length


def _table_rows(table: Array, index: Array) -> Array:
    """``table[index]`` for an integer array ``index`` of any shape: ``(*index.shape, d)``."""
    xp = array_namespace(table)
    rows = xp.take(table, xp.reshape(index, (-1,)), axis=0)  # (N, d)
    return xp.reshape(rows, (*index.shape, table.shape[1]))  # (*index.shape, d)


def _relative_rows(table: Array, length: int, k: int) -> Array:
    """Rows of ``table`` for the relative positions ``-(L-1) … L-1``, clipped to ``±k``: ``(2L-1, d)``."""
    xp = array_namespace(table)
    rel = xp.arange(-(length - 1), length, dtype=xp.int64)  # (2L-1,)
    return _table_rows(table, xp.clip(rel, -k, k) + k)


def _check_table(name: str, table: Array, k: int) -> Array:
    table = floating_array(table, name=name)
    if table.ndim != 2 or table.shape[0] != 2 * k + 1:
        raise ValueError(f"{name} must have shape (2·max_relative_position + 1, d) = ({2 * k + 1}, d), "
                         f"got {tuple(table.shape)}")
    return table


def _shaw_rows(name: str, table: Array, q_positions: Array, k_positions: Array, max_relative_position: int,
               form: str, xp: Any) -> Array:
    """The table rows a Shaw term multiplies, after validating every input.

    ``form="skewed"``: the ``2L-1`` rows of relative positions ``-(L-1) … L-1``, ``(2L-1, d)``.
    ``form="direct"``: ``a_ij = table[clip(j-i, k) + k]``, ``(Tq, Tk, d)`` or ``(B, 1, Tq, Tk, d)``.
    """
    k = check_length("max_relative_position", max_relative_position)
    table = _check_table(name, table, k)
    check_choice("form", form, SHAW_FORMS)
    q_positions = as_positions(q_positions, name="q_positions", xp=xp)
    k_positions = as_positions(k_positions, name="k_positions", xp=xp)
    if form == "skewed":
        return _relative_rows(table, _check_consecutive(q_positions, k_positions, "the skewed Shaw form"), k)
    rows = _table_rows(table, shaw_index(q_positions, k_positions, k))  # (..., Tq, Tk, d)
    return rows[:, None, ...] if rows.ndim == 4 else rows  # (B, 1, Tq, Tk, d): shared by the heads


def shaw_key_terms(
    q: Array, w_k: Array, q_positions: Array, k_positions: Array, max_relative_position: int,
    *, form: str = "direct",
) -> Array:
    r"""Shaw's key term ``q_i · a^K_ij`` (unscaled), shape ``(..., H, Tq, Tk)``.

    ``q`` is ``(..., H, Tq, d)``; ``w_k`` ``(2k+1, d)`` is shared by all heads (the paper).
    ``form="direct"`` gathers ``a^K`` (a ``Tq×Tk×d`` array); ``form="skewed"`` multiplies q by the
    ``2L-1`` relative rows and skews (:func:`skew`), needing consecutive self-attention positions.

    Notes
    -----
    .. math::
        a^K_{ij} = w^K_{\operatorname{clip}(j-i,\,k) + k}, \qquad
        e_{ij} = \frac{q_i\cdot(k_j + a^K_{ij})}{\sqrt{d}}
    """
    same_libraries(q=q, w_k=w_k, q_positions=q_positions, k_positions=k_positions)
    xp = array_namespace(q)
    rows = _shaw_rows("w_k", w_k, q_positions, k_positions, max_relative_position, form, xp)
    if form == "skewed":
        return skew(xp.matmul(q, xp.matrix_transpose(rows)))  # (..., H, L, 2L-1) -> (..., H, L, L)
    s = xp.matmul(q[..., :, None, :], xp.matrix_transpose(rows))  # (..., H, Tq, 1, Tk)
    return s[..., 0, :]  # (..., H, Tq, Tk)


def shaw_value_terms(
    weights: Array, w_v: Array, q_positions: Array, k_positions: Array, max_relative_position: int,
    *, form: str = "direct",
) -> Array:
    r"""Shaw's value term ``Σ_j α_ij a^V_ij``, shape ``(..., H, Tq, d)`` for weights ``(..., H, Tq, Tk)``.

    ``form="skewed"`` sums the weights per relative position with :func:`unskew` and multiplies by the
    ``2L-1`` relative rows (no ``Tq×Tk×d`` array).

    Notes
    -----
    .. math:: z_i = \sum_j \alpha_{ij}\,(v_j + a^V_{ij}), \qquad a^V_{ij} = w^V_{\operatorname{clip}(j-i,\,k)+k}
    """
    same_libraries(weights=weights, w_v=w_v, q_positions=q_positions, k_positions=k_positions)
    xp = array_namespace(weights)
    rows = _shaw_rows("w_v", w_v, q_positions, k_positions, max_relative_position, form, xp)
    if form == "skewed":
        return xp.matmul(unskew(weights), rows)  # (..., H, L, 2L-1) @ (2L-1, d)
    z = xp.matmul(weights[..., :, None, :], rows)  # (..., H, Tq, 1, d)
    return z[..., 0, :]  # (..., H, Tq, d)


class Shaw(Encoding):
    """Shaw et al. (2018) relative key and value tables with clipping distance ``k``.

    ``max_relative_position = 0`` is allowed (tensor2tensor rejects it): every pair then reads row 0,
    a per-row constant logit shift, so attention equals NoPE and the output gains ``w_v[0]``.
    ``w_v=None`` drops the value term.
    """

    name = "shaw"

    def __init__(self, w_k: Array, w_v: Array | None, max_relative_position: int, *, form: str = "direct") -> None:
        self.k = check_length("max_relative_position", max_relative_position)
        self.w_k = _check_table("w_k", w_k, self.k)
        self.w_v = None if w_v is None else _check_table("w_v", w_v, self.k)
        self.form = check_choice("form", form, SHAW_FORMS)

    def qk_terms(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> Array:
        return shaw_key_terms(q, self.w_k, q_positions, k_positions, self.k, form=self.form)

    def value_terms(self, q_positions: Array, k_positions: Array) -> Callable[[Array], Array] | None:
        if self.w_v is None:
            return None
        w_v, k, form = self.w_v, self.k, self.form
        return lambda weights: shaw_value_terms(weights, w_v, q_positions, k_positions, k, form=form)

    def __repr__(self) -> str:
        return f"Shaw(max_relative_position={self.k}, d={self.w_k.shape[1]}, form={self.form!r})"
