r"""DeBERTa's two disentangled terms: content-to-position ``q_i·K_r[idx_ij]`` and position-to-content
``k_j·Q_r[idx_ij]`` (:mod:`refpos.encodings.deberta` builds the index and the logits; docs/deberta.md).

Both read row ``idx_ij`` of a per-head table ``(H, 2k, d)`` of projected relative embeddings. ``form="gather"``
scores every row and picks (transformers' way, memory ``T·2k`` per head); ``"direct"`` gathers a row per pair.
"""

from __future__ import annotations

from typing import Any

from refpos.backend import array_namespace
from refpos.validation import check_choice, floating_array, same_libraries

Array = Any

#: how a term is computed: ``gather`` scores every row then picks (the anchor's way), ``direct`` per pair
DEBERTA_FORMS = ("gather", "direct")


def _index_per_head(index: Array) -> Array:
    """``(Tq, Tk)`` stays; ``(B, Tq, Tk)`` becomes ``(B, 1, Tq, Tk)``: one index for every head."""
    return index[:, None, ...] if index.ndim == 3 else index


def _rows(table: Array, index: Array) -> Array:
    """``table[:, index]`` for a per-head table ``(H, 2k, d)``: ``(H, Tq, Tk, d)`` or ``(B, H, Tq, Tk, d)``."""
    xp = array_namespace(table)
    rows = xp.take(table, xp.reshape(index, (-1,)), axis=1)  # (H, N, d)
    rows = xp.reshape(rows, (table.shape[0], *index.shape, table.shape[2]))  # (H, ..., Tq, Tk, d)
    return xp.moveaxis(rows, 0, -4) if index.ndim == 3 else rows


def _pick(scores: Array, index: Array) -> Array:
    """``out[..., a, b] = scores[..., a, index[..., a, b]]``, the leading axes of both broadcast together."""
    xp = array_namespace(scores)
    a, b = tuple(scores.shape[:-1]), tuple(index.shape[:-1])
    a, b = (1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b  # left-padded to one length
    lead = tuple(max(x, y) for x, y in zip(a, b, strict=True))
    scores = xp.broadcast_to(scores, (*lead, scores.shape[-1]))
    return xp.take_along_axis(scores, xp.broadcast_to(index, (*lead, index.shape[-1])), axis=-1)


def _check_terms(name: str, x: Array, table: Array, index: Array, form: str) -> None:
    check_choice("form", form, DEBERTA_FORMS)
    if table.ndim != 3 or table.shape[0] != x.shape[-3] or table.shape[2] != x.shape[-1]:
        raise ValueError(f"{name} must have shape (H, 2k, d) = ({x.shape[-3]}, 2k, {x.shape[-1]}), "
                         f"got {tuple(table.shape)}")
    xp = array_namespace(index)
    if index.ndim not in (2, 3) or not xp.isdtype(index.dtype, "integral"):
        raise ValueError(f"index must be an integer array (Tq, Tk) or (B, Tq, Tk), got shape {tuple(index.shape)}")
    if index.size and (bool(xp.any(index < 0)) or bool(xp.any(index >= table.shape[1]))):
        raise ValueError(f"index must lie in [0, {table.shape[1]}) (the rows of {name})")


def _term(name: str, x: Array, table: Array, index: Array, form: str, *, of_keys: bool) -> Array:
    """``x_i · table[idx_ij]`` (queries, c2p) or ``x_j · table[idx_ij]`` (``of_keys``: keys, p2c)."""
    same_libraries(**{"k" if of_keys else "q": x, name: table, "index": index})
    x, table = floating_array(x, name="k" if of_keys else "q"), floating_array(table, name=name)
    _check_terms(name, x, table, index, form)
    xp = array_namespace(x)
    if form == "direct":
        rows = _rows(table, index)  # (..., H, Tq, Tk, d): the row of each pair
        return xp.sum((x[..., None, :, :] if of_keys else x[..., :, None, :]) * rows, axis=-1)
    scores = xp.matmul(x, xp.matrix_transpose(table))  # (..., H, T, 2k): x_t · table[r] for every row r
    if not of_keys:
        return _pick(scores, _index_per_head(index))  # (..., H, Tq, Tk)
    picked = _pick(scores, xp.matrix_transpose(_index_per_head(index)))  # (..., H, Tk, Tq): row idx_ij of key j
    return xp.matrix_transpose(picked)  # (..., H, Tq, Tk)


def deberta_c2p_terms(q: Array, pos_key: Array, index: Array, *, form: str = "gather") -> Array:
    r"""Content-to-position term ``q_i · K_r[idx_ij]`` (unscaled), ``(..., H, Tq, Tk)``.

    ``q`` ``(..., H, Tq, d)``, ``pos_key`` ``(H, 2k, d)`` (:func:`deberta_position_projection`), ``index``
    from :func:`deberta_relative_index`. ``form="gather"`` multiplies q by all ``2k`` rows and picks
    (memory ``Tq·2k`` per head); ``"direct"`` gathers a row per pair (``Tq·Tk·d``).

    Notes
    -----
    .. math:: \mathrm{c2p}_{ij} = q_i \cdot K_r[\mathrm{idx}_{ij}]
    """
    return _term("pos_key", q, pos_key, index, form, of_keys=False)


def deberta_p2c_terms(k: Array, pos_query: Array, index: Array, *, form: str = "gather") -> Array:
    r"""Position-to-content term ``k_j · Q_r[idx_ij]`` (unscaled), ``(..., H, Tq, Tk)``.

    The same row ``idx_ij`` as the c2p term (δ = query − key in both). The anchor scores every key against
    every row, ``K Q_rᵀ`` ``(Tk, 2k)``, picks for key ``j`` and query ``i`` the row of the transposed
    index, ``idx_ij``, and transposes back; ``form="gather"`` does the same, ``"direct"`` gathers a row per pair.

    Notes
    -----
    .. math:: \mathrm{p2c}_{ij} = k_j \cdot Q_r[\mathrm{idx}_{ij}]
    """
    return _term("pos_query", k, pos_query, index, form, of_keys=True)
