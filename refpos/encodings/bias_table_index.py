r"""The rows a window's (query, key) pairs read from a relative position bias table (Swin, BEiT).

The tokens of an ``Wh × Ww`` window are numbered row by row: token ``t`` sits at row ``h = ⌊t / Ww⌋``, column
``w = t mod Ww``. Query ``a`` and key ``b`` are ``(Δh, Δw) = (h_a − h_b, w_a − w_b)`` apart (query minus key),
each offset in ``[−(W − 1), W − 1]``: ``(2Wh − 1)(2Ww − 1)`` distinct offsets, one row each. BEiT adds three
rows for its CLS token. :mod:`refpos.encodings.bias_table` builds the biases on these indices.

See docs/bias-table.md.
"""

from __future__ import annotations

from types import ModuleType

from refpos.backend import Array, array_namespace, get_xp
from refpos.validation import check_int, check_memory

#: the largest window side refpos builds (a 1024 × 1024 window would already hold 10¹² (query, key) pairs)
MAX_WINDOW_SIDE = 1024


def check_window(name: str, window: object) -> tuple[int, int]:
    """``(Wh, Ww)`` from an int (a square window) or a pair of ints, each in ``[1, MAX_WINDOW_SIDE]``."""
    if isinstance(window, (tuple, list)):
        if len(window) != 2:
            raise ValueError(f"{name} must be an int or a pair (height, width), got {len(window)} values")
        sides = tuple(window)
    elif isinstance(window, int) and not isinstance(window, bool):
        sides = (window, window)
    else:
        raise TypeError(f"{name} must be an int or a pair (height, width) of ints, got {type(window).__name__}")
    wh, ww = (check_int(name, side, minimum=1, maximum=MAX_WINDOW_SIDE) for side in sides)
    return wh, ww


def relative_rows(window: tuple[int, int]) -> int:
    """The number of distinct offsets of a window, ``(2Wh − 1)(2Ww − 1)``."""
    return (2 * window[0] - 1) * (2 * window[1] - 1)


def window_offsets(window: int | tuple[int, int], *, xp: ModuleType | None = None) -> tuple[Array, Array]:
    r"""The offsets ``(Δh, Δw)`` of every (query, key) pair of a window, two int64 ``(N, N)`` arrays, ``N = Wh·Ww``.

    Notes
    -----
    Token ``t`` sits at ``(⌊t/W_w⌋, t \bmod W_w)``; the offset is the query's coordinates minus the key's:

    .. math:: \Delta h_{ab} = \lfloor a/W_w \rfloor - \lfloor b/W_w \rfloor, \qquad
              \Delta w_{ab} = (a \bmod W_w) - (b \bmod W_w)
    """
    wh, ww = check_window("window", window)
    xp = get_xp(xp)
    check_memory("the window's offsets (N, N), int64", 2 * 8 * (wh * ww) ** 2, f"window ({wh}, {ww})")
    token = xp.arange(wh * ww, dtype=xp.int64)
    rows, cols = token // ww, token % ww
    return rows[:, None] - rows[None, :], cols[:, None] - cols[None, :]


def swin_relative_index(window: int | tuple[int, int], *, xp: ModuleType | None = None) -> Array:
    r"""The table row each (query, key) pair of a window reads, int64 ``(N, N)`` (Swin's ``relative_position_index``).

    Notes
    -----
    Each offset is moved to start at 0 (``+ W − 1``) and the two are joined row-major, with the row stride the
    number of column offsets ``2W_w − 1``:

    .. math:: \mathrm{idx}_{ab} = (\Delta h_{ab} + W_h - 1)\,(2W_w - 1) + (\Delta w_{ab} + W_w - 1)
              \;\in\; [0,\ (2W_h - 1)(2W_w - 1))

    See Also
    --------
    refpos.encodings.bias_table.swin_bias : the bias gathered through this index.
    beit_relative_index : the same with BEiT's CLS entries.

    References
    ----------
    transformers, models/swin/modeling_swin.py, ``SwinRelativePositionBias._create_relative_position_index``;
    timm, models/swin_transformer.py, ``get_relative_position_index``.

    Examples
    --------
    >>> swin_relative_index(2).tolist()
    [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
    """
    wh, ww = check_window("window", window)
    dh, dw = window_offsets((wh, ww), xp=xp)
    return (dh + (wh - 1)) * (2 * ww - 1) + (dw + (ww - 1))


def gather_bias(table: Array, index: Array) -> Array:
    """``table[index[a, b], h]`` as ``(H, Na, Nb)``: the bias of each head for each (query, key) pair."""
    xp = array_namespace(table)
    rows = xp.take(table, xp.reshape(index, (-1,)), axis=0)  # (Na·Nb, H)
    rows = xp.reshape(rows, (index.shape[0], index.shape[1], table.shape[1]))
    return xp.permute_dims(rows, (2, 0, 1))  # (H, Na, Nb)


def beit_relative_index(window: int | tuple[int, int], *, xp: ModuleType | None = None) -> Array:
    r"""BEiT's row of each (query, key) pair, int64 ``(N + 1, N + 1)``; token 0 is CLS, tokens 1 … N the patches.

    Notes
    -----
    With :math:`R = (2W_h - 1)(2W_w - 1)` patch offsets:

    .. math::
        \mathrm{idx}_{ab} = \begin{cases}
            R + 2 & a = b = 0 \ (\text{CLS} \to \text{CLS}) \\
            R & a = 0 < b \ (\text{CLS query} \to \text{patch key}) \\
            R + 1 & b = 0 < a \ (\text{patch query} \to \text{CLS key}) \\
            \mathrm{idx}^{\text{Swin}}_{a-1,\,b-1} & a, b \ge 1
        \end{cases}

    See Also
    --------
    swin_relative_index : the patch block.
    refpos.encodings.bias_table.beit_bias : the bias gathered through this index.

    References
    ----------
    transformers, models/beit/modeling_beit.py, ``BeitRelativePositionBias.generate_relative_position_index``;
    timm, models/beit.py, ``gen_relative_position_index``.

    Examples
    --------
    >>> beit_relative_index(1).tolist()
    [[3, 1], [2, 0]]
    """
    wh, ww = check_window("window", window)
    patches = swin_relative_index((wh, ww), xp=xp)
    xp = array_namespace(patches)
    r = relative_rows((wh, ww))
    n = wh * ww
    top = xp.concat([xp.full((1, 1), r + 2, dtype=xp.int64), xp.full((1, n), r, dtype=xp.int64)], axis=1)
    body = xp.concat([xp.full((n, 1), r + 1, dtype=xp.int64), patches], axis=1)
    return xp.concat([top, body], axis=0)
