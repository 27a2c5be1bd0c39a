r"""Relative position bias tables indexed by a window: Swin v1, Swin v2's continuous bias, BEiT.

The tokens of an ``Wh × Ww`` window are numbered row by row: token ``t`` sits at row ``h = ⌊t / Ww⌋``, column
``w = t mod Ww``. Query ``a`` and key ``b`` are ``(Δh, Δw) = (h_a − h_b, w_a − w_b)`` apart (query minus key),
each offset in ``[−(W − 1), W − 1]``: ``(2Wh − 1)(2Ww − 1)`` distinct offsets, one row of a learned table each,
one column per head. The bias is added to the logits ``q·kᵀ/√d`` of the window's attention.

* **Swin v1** (Liu et al. 2021): row ``(Δh + Wh − 1)·(2Ww − 1) + (Δw + Ww − 1)`` of a learned table.
* **BEiT** (Bao et al. 2022) and Data2Vec-vision: the same rows for the patches, plus three rows for the CLS
  token (token 0, the patches are 1 … N): CLS→patch, patch→CLS, CLS→CLS. When the input's window differs from
  the table's, the patch rows, seen as a ``(2Wh − 1) × (2Ww − 1)`` image per head, are resampled bilinearly.
* **Swin v2** (Liu et al. 2022): no table of numbers but a small MLP of the log-spaced offset (continuous
  position bias), squashed to ``(0, 16)`` by ``16·σ``.

The row each pair reads comes from :mod:`refpos.encodings.bias_table_index`; :func:`window_bias` takes any of
the three forms by name. See docs/bias-table.md.
"""

from __future__ import annotations

import math
from types import ModuleType

from refpos.backend import Array, array_namespace, get_xp
from refpos.core.activations import sigmoid
from refpos.encoding import Encoding
from refpos.encodings._bilinear import bilinear_resize
from refpos.encodings.bias_table_index import (
    beit_relative_index,
    check_window,
    gather_bias,
    relative_rows,
    swin_relative_index,
)
from refpos.validation import as_positions, check_choice, floating_array

#: the rows BEiT adds after the patch offsets: CLS→patch, patch→CLS, CLS→CLS (in that order)
BEIT_CLS_ROWS = 3


def _check_table(table: Array, rows: int, what: str) -> Array:
    table = floating_array(table, name="table")
    if table.ndim != 2 or table.shape[0] != rows:
        raise ValueError(f"table must have shape ({what} = {rows}, n_heads), got {tuple(table.shape)}")
    return table


def swin_bias(table: Array, window: int | tuple[int, int]) -> Array:
    r"""Swin v1's relative position bias of a window, ``(H, N, N)``.

    Parameters
    ----------
    table : float array, shape ``((2Wh − 1)(2Ww − 1), H)``
        The learned table (transformers' ``relative_position_bias_table``).
    window : int or (int, int)
        The window ``(Wh, Ww)`` (an int: square).

    Notes
    -----
    .. math:: B_{h,ab} = \mathrm{table}[\mathrm{idx}_{ab},\, h]

    with :math:`\mathrm{idx}` of :func:`swin_relative_index`. Donut-Swin, MaskFormer-Swin and CLAP's audio
    encoder use the same rule.

    See Also
    --------
    swin_relative_index : the row each pair reads.
    swinv2_bias : Swin v2's continuous bias.
    beit_bias : the same rows with three for the CLS token.

    References
    ----------
    Liu et al. 2021, "Swin Transformer", §3.2; transformers, models/swin/modeling_swin.py,
    ``SwinRelativePositionBias``; timm, models/swin_transformer.py, ``get_relative_position_index``.
    """
    wh, ww = check_window("window", window)
    table = _check_table(table, relative_rows((wh, ww)), "(2Wh − 1)(2Ww − 1)")
    return gather_bias(table, swin_relative_index((wh, ww), xp=array_namespace(table)))


def beit_resample_table(table: Array, table_window: int | tuple[int, int], window: int | tuple[int, int]) -> Array:
    r"""BEiT's table for another window: the patch rows resampled, the three CLS rows kept, ``(R' + 3, H)``.

    Notes
    -----
    The first :math:`R = (2P_h - 1)(2P_w - 1)` rows, read as one ``(2P_h − 1) × (2P_w − 1)`` image per head, are
    resampled to ``(2W_h − 1) × (2W_w − 1)`` bilinearly with half-pixel centres (``align_corners=False``) and no
    antialiasing, as torch's ``interpolate(size=…, mode="bilinear")``; the offset 0 stays at the centre. The
    same window returns the table unchanged (every weight is 0 or 1).

    transformers reads the patch rows as a ``(2P_w − 1) × (2P_h − 1)`` image, which is the table's own layout
    only for a square ``table_window``, and resamples even at the table's own window: for a non-square table
    its bias is not the table's. refpos returns the table itself at its own window (timm's rule and the paper's)
    and refuses to resample a non-square one (no published BEiT has one).

    See Also
    --------
    beit_bias : the bias read from the resampled table.

    References
    ----------
    transformers, models/beit/modeling_beit.py, ``BeitRelativePositionBias.forward``; PyTorch,
    torch/nn/functional.py, ``interpolate`` (``mode="bilinear"``).
    """
    ph, pw = check_window("table_window", table_window)
    wh, ww = check_window("window", window)
    table = _check_table(table, relative_rows((ph, pw)) + BEIT_CLS_ROWS, "(2Ph − 1)(2Pw − 1) + 3")
    if (ph, pw) == (wh, ww):
        return table
    if ph != pw:
        raise ValueError(f"table_window must be square to be resampled (transformers reads a non-square table "
                         f"with its axes swapped, which refpos does not model), got ({ph}, {pw})")
    xp = array_namespace(table)
    r = relative_rows((ph, pw))
    image = xp.reshape(xp.permute_dims(table[:r, :], (1, 0)), (table.shape[1], 2 * ph - 1, 2 * pw - 1))
    resampled = bilinear_resize(image, (2 * wh - 1, 2 * ww - 1), align_corners=False)  # (H, 2Wh−1, 2Ww−1)
    rows = xp.permute_dims(xp.reshape(resampled, (table.shape[1], relative_rows((wh, ww)))), (1, 0))
    return xp.concat([rows, table[r:, :]], axis=0)


def beit_bias(table: Array, window: int | tuple[int, int], *, table_window: int | tuple[int, int]) -> Array:
    r"""BEiT's relative position bias, ``(H, N + 1, N + 1)`` with the CLS token first.

    Parameters
    ----------
    table : float array, shape ``((2Ph − 1)(2Pw − 1) + 3, H)``
        The learned table of the window ``table_window`` (transformers' ``relative_position_bias_table``).
    window : int or (int, int)
        The patch grid of the input, ``(height // patch_size, width // patch_size)``.
    table_window : int or (int, int)
        The window the table was made for (``image_size // patch_size``); when it differs from ``window`` the
        table is resampled first (:func:`beit_resample_table`).

    Notes
    -----
    .. math:: B_{h,ab} = \mathrm{table}'[\mathrm{idx}_{ab},\, h]

    with :math:`\mathrm{idx}` of :func:`beit_relative_index` and table' the (resampled) table. Data2Vec-vision
    uses the same rule.

    See Also
    --------
    beit_relative_index, beit_resample_table, swin_bias

    References
    ----------
    Bao et al. 2022, §2.2 of "BEiT: BERT Pre-Training of Image Transformers"; transformers,
    models/beit/modeling_beit.py, ``BeitRelativePositionBias``; timm, models/beit.py,
    ``gen_relative_position_index``.
    """
    table = beit_resample_table(table, table_window, window)
    return gather_bias(table, beit_relative_index(window, xp=array_namespace(table)))


def swinv2_log_coords(window: int | tuple[int, int], *, pretrained_window: int | tuple[int, int] | None,
                      xp: ModuleType | None = None) -> Array:
    r"""Swin v2's log-spaced offsets, float64 ``(2Wh − 1, 2Ww − 1, 2)`` (the MLP's input; row-major like the table).

    Parameters
    ----------
    window : int or (int, int)
        The window ``(Wh, Ww)``.
    pretrained_window : int, (int, int) or None
        The window the MLP was trained at (transformers' ``pretrained_window_size``, when > 0): the offsets are
        measured in its units. ``None``: in the window's own units.

    Notes
    -----
    Each offset :math:`\Delta` of axis ``a`` is scaled to ``[−8, 8]`` by the side :math:`S_a` (the pretrained
    window's, else the window's), then spaced logarithmically:

    .. math::
        \hat\Delta = \frac{8\,\Delta}{S_a - 1}, \qquad
        c = \operatorname{sign}(\hat\Delta)\,\frac{\log_2(1 + |\hat\Delta|)}{\log_2 8}

    An axis of side 1 has only the offset 0 and keeps it (transformers tests the first axis only; the two
    agree on square windows, the only ones Swin v2 builds).

    See Also
    --------
    swinv2_bias : the bias made of these coordinates.

    References
    ----------
    Liu et al. 2022, "Swin Transformer V2", §3.3 (log-spaced coordinates); transformers,
    models/swinv2/modeling_swinv2.py, ``Swinv2SelfAttention.create_coords_table_and_index``.
    """
    wh, ww = check_window("window", window)
    sides = (wh, ww) if pretrained_window is None else check_window("pretrained_window", pretrained_window)
    if pretrained_window is not None and min(sides) < 2:
        raise ValueError(f"pretrained_window must be at least 2 on each side (its offsets are divided by side − 1), "
                         f"got {sides}")
    xp = get_xp(xp)
    axes = []
    for side, norm in zip((wh, ww), sides, strict=True):
        delta = xp.arange(-(side - 1), side, dtype=xp.float64)
        scaled = 8.0 * delta / (norm - 1) if norm > 1 else delta  # side 1: the offset 0 alone
        axes.append(xp.sign(scaled) * xp.log1p(xp.abs(scaled)) / (3.0 * math.log(2.0)))  # log2(1+|x|)/log2(8)
    coords_h, coords_w = xp.meshgrid(axes[0], axes[1], indexing="ij")
    return xp.stack([coords_h, coords_w], axis=-1)


def swinv2_table(coords: Array, w1: Array, b1: Array, w2: Array) -> Array:
    r"""The continuous position bias MLP on the offsets, ``(…, H)`` before the sigmoid: ``relu(c·W₁ + b₁)·W₂``.

    ``coords`` ``(…, 2)``; ``w1`` ``(2, hidden)``, ``b1`` ``(hidden,)``, ``w2`` ``(hidden, H)`` (``x @ W``
    orientation: torch ``Linear.weight`` transposed; the second layer has no bias).
    """
    w1, b1, w2 = (floating_array(a, name=name) for a, name in ((w1, "w1"), (b1, "b1"), (w2, "w2")))
    xp = array_namespace(w1)
    if w1.ndim != 2 or w1.shape[0] != 2:
        raise ValueError(f"w1 must have shape (2, hidden), got {tuple(w1.shape)}")
    if tuple(b1.shape) != (w1.shape[1],):
        raise ValueError(f"b1 must have shape ({w1.shape[1]},), got {tuple(b1.shape)}")
    if w2.ndim != 2 or w2.shape[0] != w1.shape[1]:
        raise ValueError(f"w2 must have shape ({w1.shape[1]}, n_heads), got {tuple(w2.shape)}")
    hidden = coords @ w1 + b1
    return xp.maximum(hidden, xp.zeros_like(hidden)) @ w2


def swinv2_bias(window: int | tuple[int, int], w1: Array, b1: Array, w2: Array, *,
                pretrained_window: int | tuple[int, int] | None) -> Array:
    r"""Swin v2's continuous relative position bias of a window, ``(H, N, N)``, in ``(0, 16)``.

    Parameters
    ----------
    window : int or (int, int)
        The window ``(Wh, Ww)``.
    w1, b1, w2 : float arrays
        The MLP ``Linear(2, hidden) → ReLU → Linear(hidden, H, bias=False)`` (transformers'
        ``continuous_position_bias_mlp``, timm's ``cpb_mlp``), as :func:`swinv2_table` takes them.
    pretrained_window : int, (int, int) or None
        See :func:`swinv2_log_coords`.

    Notes
    -----
    .. math:: B_{h,ab} = 16\,\sigma\!\big(\mathrm{MLP}(c)[\mathrm{idx}_{ab},\, h]\big)

    with ``c`` of :func:`swinv2_log_coords` flattened row-major and :math:`\mathrm{idx}` of
    :func:`swin_relative_index`. Swin2SR uses the same rule. (Swin v2's cosine attention and its learned
    logit scale act on ``q·kᵀ``, not on this bias.)

    See Also
    --------
    swinv2_log_coords, swinv2_table, swin_bias

    References
    ----------
    Liu et al. 2022, "Swin Transformer V2", §3.3; transformers, models/swinv2/modeling_swinv2.py,
    ``Swinv2SelfAttention.create_coords_table_and_index``; timm, models/swin_transformer_v2.py,
    ``WindowAttention._make_pair_wise_relative_positions``.
    """
    wh, ww = check_window("window", window)
    w1 = floating_array(w1, name="w1")
    xp = array_namespace(w1)
    coords = swinv2_log_coords((wh, ww), pretrained_window=pretrained_window, xp=xp)
    table = swinv2_table(xp.reshape(coords, (relative_rows((wh, ww)), 2)), w1, b1, w2)  # (R, H)
    return 16.0 * sigmoid(gather_bias(table, swin_relative_index((wh, ww), xp=xp)))


class WindowBias(Encoding):
    """A window's relative position bias ``(H, N, N)`` (any form above) as a pipeline encoding.

    Positions are token slots of the window (0 … N − 1, row-major; with BEiT's bias slot 0 is CLS).
    """

    name = "window_bias"

    def __init__(self, bias: Array) -> None:
        self.window_bias = floating_array(bias, name="bias")
        if self.window_bias.ndim != 3 or self.window_bias.shape[1] != self.window_bias.shape[2]:
            raise ValueError(f"bias must have shape (n_heads, N, N), got {tuple(self.window_bias.shape)}")

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        xp = array_namespace(self.window_bias)
        if self.window_bias.shape[0] != n_heads:
            raise ValueError(f"the bias has {self.window_bias.shape[0]} heads but the layer has n_heads={n_heads}")
        n = self.window_bias.shape[1]
        slots = []
        for name, p in (("q_positions", q_positions), ("k_positions", k_positions)):
            p = as_positions(p, name=name, xp=xp, max_abs=n - 1)
            if p.ndim != 1:
                raise ValueError(f"{name} must be one row (T,) of token slots 0 … {n - 1}, got shape {tuple(p.shape)}")
            slots.append(p)
        return xp.take(xp.take(self.window_bias, slots[0], axis=1), slots[1], axis=2)

    def __repr__(self) -> str:
        return f"WindowBias(bias of shape {tuple(self.window_bias.shape)})"


#: the bias forms :func:`window_bias` computes
BIAS_FORMS = ("swin", "swinv2", "beit")
#: the keyword arguments each form reads (the others must be left out)
FORM_INPUTS = {"swin": ("table",), "swinv2": ("mlp", "pretrained_window"), "beit": ("table", "table_window")}


def window_bias(form: str, window: int | tuple[int, int], *, table: Array | None = None,
                table_window: int | tuple[int, int] | None = None, mlp: tuple[Array, Array, Array] | None = None,
                pretrained_window: int | tuple[int, int] | None = None) -> Array:
    """The relative position bias of a window in one of :data:`BIAS_FORMS`, ``(H, N, N)`` (BEiT ``(H, N + 1, N + 1)``).

    ``"swin"`` reads ``table`` (:func:`swin_bias`); ``"beit"`` ``table`` and ``table_window``
    (:func:`beit_bias`); ``"swinv2"`` ``mlp = (w1, b1, w2)`` and ``pretrained_window`` (``None``: the window's
    own units; :func:`swinv2_bias`). An argument the form does not read is refused by name, never ignored.
    """
    check_choice("form", form, BIAS_FORMS)
    given = {"table": table, "table_window": table_window, "mlp": mlp, "pretrained_window": pretrained_window}
    stray = [name for name, value in given.items() if value is not None and name not in FORM_INPUTS[form]]
    if stray:
        raise ValueError(f"the {form!r} bias does not read {', '.join(stray)}; it reads {FORM_INPUTS[form]}")
    required = {"swin": ("table",), "beit": ("table", "table_window"), "swinv2": ("mlp",)}[form]
    missing = [name for name in required if given[name] is None]
    if missing:
        raise ValueError(f"the {form!r} bias needs {', '.join(missing)}")
    if form == "swin":
        return swin_bias(table, window)
    if form == "beit":
        return beit_bias(table, window, table_window=table_window)
    if not isinstance(mlp, (tuple, list)) or len(mlp) != 3:
        raise ValueError("mlp must be the three arrays (w1, b1, w2)")
    return swinv2_bias(window, *mlp, pretrained_window=pretrained_window)
