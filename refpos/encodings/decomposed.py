r"""Decomposed relative positions (MViTv2, SAM, ViTDet, SAM-HQ, SegGPT, GOT-OCR2, …) as functions of given tables.

A query patch at ``(y, x)`` of a ``q_h × q_w`` grid and a key patch at ``(y', x')`` of a ``k_h × k_w`` grid
get the logit term

.. math::
    \mathrm{rel}(y, x; y', x') = q_{yx}\cdot R_h[y, y'] \;+\; q_{yx}\cdot R_w[x, x'],

one table per axis. ``R_h[y, y']`` is a row of the learned table ``rel_pos_h`` ``(L_h, C)``: the row of the
relative offset, the coordinates scaled to the longer of the two grids,

.. math::
    \mathrm{idx}(i, j) = \Big\lfloor i\,\max\!\big(\tfrac{k}{q}, 1\big) - j\,\max\!\big(\tfrac{q}{k}, 1\big)
        + (k - 1)\max\!\big(\tfrac{q}{k}, 1\big) \Big\rfloor \in [0,\ 2\max(q, k) - 1),

read from the table resampled along its rows to ``2·max(q, k) − 1`` rows (1-D linear, ``align_corners``
False: :func:`refpos.encodings.resample.interpolate`) — the identity when it already has that many.
transformers computes these in ``SamVisionAttention.get_rel_pos`` / ``get_decomposed_rel_pos``
(models/sam/modeling_sam.py) and ``get_rel_pos`` / ``add_decomposed_relative_positions``
(models/vitdet/modeling_vitdet.py), after MViTv2 ("MViTv2: Improved Multiscale Vision Transformers for
Classification and Detection", Li et al. 2022 §3.1).

**The index in float32.** torch multiplies ``arange`` by the Python ratios in its default dtype, float32,
and truncates: where the exact value is an integer, the float32 one can fall just below it and read the
row before (for ``q ≠ k`` only; 746 of the 9801 pairs ``q, k ≤ 99``). ``index_arithmetic="float32"``
reproduces those roundings; ``"exact"`` is the formula above in integers. With ``q = k`` (every
self-attention layer of these models) both are ``i − j + k − 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace, get_xp, to_numpy
from refpos.encodings.resample import interpolate
from refpos.encodings.resample_bounds import resample_error_bound
from refpos.validation import check_choice, check_int, floating_array

#: how the row index is computed: in integers, or as torch does in float32
INDEX_ARITHMETIC = ("exact", "float32")
#: the transformers 5.25 model types that compute decomposed relative positions, and the attention class (or the
#: module, for ViTDet's module functions) holding ``get_rel_pos``; SAM and its copies always resample the table
#: (to the same length: a copy), SegGPT too, ViTDet only when the length differs: the same rows either way
DECOMPOSED_MODEL_TYPES = {
    "sam": "SamVisionAttention", "sam_hq": "SamHQVisionAttention", "got_ocr2": "GotOcr2VisionAttention",
    "pp_formulanet": "PPFormulaNetVisionAttention", "slanext": "SLANeXtVisionAttention",
    "deepseek_ocr2": "DeepseekOcr2SamVisionAttention", "unlimited_ocr": "UnlimitedOcrSamVisionAttention",
    "seggpt": "SegGptAttention", "vitdet": "modeling_vitdet",
}


def decomposed_rel_pos_index(q_size: int, k_size: int, *, index_arithmetic: str = "exact", xp: Any = None) -> Array:
    r"""The row ``idx(i, j)`` of the resampled table that query ``i`` and key ``j`` of one axis read, int64 ``(q, k)``.

    Notes
    -----
    In integers (``index_arithmetic="exact"``):

    .. math::
        \mathrm{idx}(i, j) = \begin{cases} i + \lfloor (k - 1 - j)\,q / k \rfloor & q \ge k \\
        \lfloor i\,k / q \rfloor + k - 1 - j & q < k \end{cases}

    Examples
    --------
    >>> import numpy as np
    >>> np.asarray(decomposed_rel_pos_index(3, 3)).tolist()
    [[2, 1, 0], [3, 2, 1], [4, 3, 2]]
    >>> np.asarray(decomposed_rel_pos_index(4, 2)).tolist()
    [[2, 0], [3, 1], [4, 2], [5, 3]]
    """
    q = check_int("q_size", q_size, minimum=1)
    k = check_int("k_size", k_size, minimum=1)
    check_choice("index_arithmetic", index_arithmetic, INDEX_ARITHMETIC)
    xp = get_xp(xp)
    i = xp.arange(q, dtype=xp.int64)[:, None]
    j = xp.arange(k, dtype=xp.int64)[None, :]
    if index_arithmetic == "exact":
        return i + ((k - 1 - j) * q) // k if q >= k else (i * k) // q + (k - 1 - j)
    # torch: arange · python float in float32, the offset (k − 1)·max(q/k, 1) a float64 product rounded to float32
    query_coords = xp.astype(i, xp.float32) * xp.asarray(max(k / q, 1.0), dtype=xp.float32)
    key_coords = xp.astype(j, xp.float32) * xp.asarray(max(q / k, 1.0), dtype=xp.float32)
    coords = (query_coords - key_coords) + xp.asarray((k - 1) * max(q / k, 1.0), dtype=xp.float32)
    return xp.astype(xp.trunc(coords), xp.int64)


def decomposed_rel_pos_table(q_size: int, k_size: int, rel_pos: Array, *, index_arithmetic: str = "exact") -> Array:
    r"""``R[i, j] = rel_pos'[idx(i, j)]``, ``(q, k, C)``: one axis of ``get_rel_pos``.

    ``rel_pos`` ``(L, C)`` is resampled along its rows to ``2·max(q, k) − 1`` (1-D linear, align_corners
    False; unchanged when ``L`` already is that length), then read at :func:`decomposed_rel_pos_index`.

    Notes
    -----
    .. math:: R[i, j] = \big(W_{\mathrm{linear}}\,\mathrm{rel\_pos}\big)[\mathrm{idx}(i, j)], \qquad
        W_{\mathrm{linear}} \in \mathbb{R}^{(2\max(q, k) - 1) \times L}

    See Also
    --------
    decomposed_rel_pos_index : the rows read.
    refpos.encodings.resample.interpolate : the 1-D linear resampling of the table.

    References
    ----------
    transformers, ``models/sam/modeling_sam.py``: ``SamVisionAttention.get_rel_pos``;
    ``models/vitdet/modeling_vitdet.py``: ``get_rel_pos``.
    """
    rel_pos = floating_array(rel_pos, name="rel_pos")
    xp = array_namespace(rel_pos)
    if rel_pos.ndim != 2:
        raise ValueError(f"rel_pos must have shape (rows, channels), got {tuple(rel_pos.shape)}")
    index = decomposed_rel_pos_index(q_size, k_size, index_arithmetic=index_arithmetic, xp=xp)
    rows = 2 * max(q_size, k_size) - 1
    resized = xp.permute_dims(interpolate(xp.permute_dims(rel_pos, (1, 0)), rows, mode="linear"), (1, 0))  # (rows, C)
    return xp.reshape(xp.take(resized, xp.reshape(index, (-1,)), axis=0), (q_size, k_size, rel_pos.shape[1]))


def _sizes(name: str, value: Any) -> tuple[int, int]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (height, width), got {value!r}")
    return check_int(f"{name}[0]", value[0], minimum=1), check_int(f"{name}[1]", value[1], minimum=1)


def decomposed_rel_pos_terms(q: Array, rel_pos_h: Array, rel_pos_w: Array, q_size: tuple[int, int],
                             k_size: tuple[int, int], *, index_arithmetic: str = "exact") -> Array:
    r"""The term of every (query patch, key patch) pair, ``(..., q_h, q_w, k_h, k_w)``.

    ``q`` ``(..., q_h·q_w, C)``: the queries in raster order (SAM and ViTDet pass them unscaled, before
    ``head_dim^-1/2``), any leading axes (batch and heads).

    Notes
    -----
    .. math::
        T[y, x, y', x'] = \underbrace{q_{yx}\cdot R_h[y, y']}_{\text{rel\_h}}
        + \underbrace{q_{yx}\cdot R_w[x, x']}_{\text{rel\_w}}
    """
    q = floating_array(q, name="q")
    xp = array_namespace(q)
    (qh, qw), (kh, kw) = _sizes("q_size", q_size), _sizes("k_size", k_size)
    if q.ndim < 2 or q.shape[-2] != qh * qw:
        raise ValueError(f"q must have shape (..., q_h·q_w = {qh * qw}, C), got {tuple(q.shape)}")
    table_h = decomposed_rel_pos_table(qh, kh, rel_pos_h, index_arithmetic=index_arithmetic)  # (q_h, k_h, C)
    table_w = decomposed_rel_pos_table(qw, kw, rel_pos_w, index_arithmetic=index_arithmetic)  # (q_w, k_w, C)
    if table_h.shape[-1] != q.shape[-1] or table_w.shape[-1] != q.shape[-1]:
        raise ValueError(f"rel_pos_h and rel_pos_w must have q's {q.shape[-1]} channels, got "
                         f"{rel_pos_h.shape[-1]} and {rel_pos_w.shape[-1]}")
    grid = xp.reshape(q, (*q.shape[:-2], qh, qw, 1, q.shape[-1]))  # (..., q_h, q_w, 1, C)
    rel_h = xp.sum(grid * table_h[:, None, :, :], axis=-1)  # (..., q_h, q_w, k_h): q_yx · R_h[y, y']
    rel_w = xp.sum(grid * table_w[None, :, :, :], axis=-1)  # (..., q_h, q_w, k_w): q_yx · R_w[x, x']
    return rel_h[..., :, None] + rel_w[..., None, :]


def add_decomposed_rel_pos(attn: Array, q: Array, rel_pos_h: Array, rel_pos_w: Array, q_size: tuple[int, int],
                           k_size: tuple[int, int], *, index_arithmetic: str = "exact") -> Array:
    r"""Attention logits ``(..., q_h·q_w, k_h·k_w)`` with the decomposed terms added (raster order on both sides).

    Notes
    -----
    .. math:: A'[(y, x), (y', x')] = A[(y, x), (y', x')] + q_{yx}\cdot R_h[y, y'] + q_{yx}\cdot R_w[x, x']

    See Also
    --------
    decomposed_rel_pos_terms : the terms alone, ``(..., q_h, q_w, k_h, k_w)``.

    References
    ----------
    Y. Li et al., "MViTv2: Improved Multiscale Vision Transformers for Classification and Detection", CVPR 2022;
    transformers, ``models/vitdet/modeling_vitdet.py``: ``add_decomposed_relative_positions``;
    ``models/sam/modeling_sam.py``: ``SamVisionAttention.get_decomposed_rel_pos``.

    Examples
    --------
    >>> import numpy as np
    >>> q = np.ones((4, 1))                                   # a 2 × 2 grid, one channel
    >>> rel = np.arange(3.0)[:, None]                         # rows for offsets −1, 0, +1
    >>> np.asarray(add_decomposed_rel_pos(np.zeros((4, 4)), q, rel, 10 * rel, (2, 2), (2, 2)))[0].tolist()
    [11.0, 1.0, 10.0, 0.0]
    """
    attn = floating_array(attn, name="attn")
    xp = array_namespace(attn)
    terms = decomposed_rel_pos_terms(q, rel_pos_h, rel_pos_w, q_size, k_size, index_arithmetic=index_arithmetic)
    (qh, qw), (kh, kw) = tuple(q_size), tuple(k_size)
    flat = xp.reshape(terms, (*terms.shape[:-4], qh * qw, kh * kw))
    if tuple(attn.shape[-2:]) != (qh * qw, kh * kw):
        raise ValueError(f"attn must end in (q_h·q_w, k_h·k_w) = {(qh * qw, kh * kw)}, got {tuple(attn.shape)}")
    return attn + flat


def decomposed_error_bound(q: Array, rel_pos_h: Array, rel_pos_w: Array, q_size: tuple[int, int],
                           k_size: tuple[int, int], *, unit_roundoff: float) -> float:
    r"""The largest difference of a correct port's terms (computing with unit roundoff ``u``) from the reference.

    Each axis: the resampled rows are off by at most ``δR`` (the 1-D linear bound of
    :func:`refpos.encodings.resample_bounds.resample_error_bound`, plus the table stored in the dtype:
    ``u·max|R|``), so ``q·R`` by ``‖q‖₁·δR``; the ``C`` products are summed with error ``(C + 1)·u·‖q‖₁·max|R|``
    (the sum and the addition of the two terms).

    .. math:: \mathrm{atol} = \sum_{a \in \{h, w\}} \lVert q\rVert_1 \big(\delta R_a + (C + 1)\,u\,\max|R_a|\big)
    """
    q_norm = float(np.abs(to_numpy(q)).sum(axis=-1).max())
    total = 0.0
    for table, n_q, n_k in ((rel_pos_h, q_size[0], k_size[0]), (rel_pos_w, q_size[1], k_size[1])):
        table = to_numpy(table)
        biggest = float(np.abs(table).max())
        rows = resample_error_bound([table.shape[0]], [2 * max(n_q, n_k) - 1], mode="linear",
                                    unit_roundoff=unit_roundoff, magnitude=biggest) + unit_roundoff * biggest
        total += q_norm * (rows + (table.shape[1] + 1) * unit_roundoff * biggest)
    return total
