r"""Fixed 2-D sin–cos position embeddings of vision encoders and detectors (docs/sincos2d.md#the-math).

Every variant is built from one map of a real coordinate ``c`` to ``W`` channels (:func:`sine_features`): the
``W/2`` frequencies of a temperature ``T`` (:func:`sine_frequencies`),

* ``"paired"`` — ``ω_j = T^(−2j/W)``, ``j < W/2``: every model but one;
* ``"doubled"`` — ``ω_k = T^(−2⌊k/2⌋/(W/2))``, ``k < W/2``: each frequency taken twice (SAM 2's temporal
  encoding of object pointers, transformers ``get_1d_sine_pe``),

the angles ``c·ω`` and their sines and cosines written in one of the two sinusoid layouts of
:mod:`refpos.pairs`: ``"interleaved"`` (channels ``2j, 2j+1``; DETR's stack-and-flatten) or ``"concat"``
(channels ``j, j + W/2``; MAE, RT-DETR). What varies between models is where the coordinates come from:

* :func:`sincos_2d_grid` — the patch indices ``0 … H−1`` and ``0 … W−1`` of a grid, flattened row-major or
  column-major, one channel block per axis in a stated order, zero rows for class tokens (MAE, RT-DETR, …);
* :func:`sine_position_map` — the cumulative sums of a pixel mask (1-based; padded pixels repeat the last valid
  count), optionally normalised ``(c + offset)/(c_last + eps)·scale`` (DETR and its descendants, SAM 2's neck);
* :func:`sine_coordinates` — given coordinates (anchor points, boxes, positions) times a scale, one block per
  coordinate in a stated order (the decoders' query embeddings).

Which model uses which parameters is the registry :mod:`refpos.encodings.sincos2d_variants`.
"""

from __future__ import annotations

import math
from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.pairs import SINUSOID_LAYOUTS, place_pairs
from refpos.validation import (
    MAX_WIDTH,
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_memory,
    check_size,
    element_count,
    floating_array,
)

#: where sin and cos of frequency j go (the sinusoid layouts of :mod:`refpos.pairs`)
LAYOUTS = SINUSOID_LAYOUTS
#: how the W/2 frequencies of a block of W channels are spaced
FREQUENCY_RULES = ("paired", "doubled")
#: the order of the two axes' channel blocks of a grid: ``"yx"`` rows first, ``"xy"`` columns first
AXIS_ORDERS = ("yx", "xy")
#: the order of a grid's tokens: ``"row_major"`` (y outer, as a feature map flattens) or ``"column_major"``
FLATTENS = ("row_major", "column_major")
#: DETR's default scale of normalised coordinates, shared by every family that normalises
TWO_PI = 2.0 * math.pi


def _check_width(name: str, width: object, multiple: int) -> int:
    width = check_size(name, width, maximum=MAX_WIDTH, bytes_each=8, what="float64 per coordinate")
    if width % multiple:
        raise ValueError(f"{name} must be a multiple of {multiple}, got {width}")
    return width


def _check_temperature(name: str, temperature: object) -> float:
    temperature = check_float(name, temperature, positive=True)
    if temperature <= 1.0:
        raise ValueError(f"{name} must be > 1, got {temperature}")
    return temperature


def sine_frequencies(width: int, *, temperature: float = 10000.0, rule: str = "paired", xp: Any = None) -> Array:
    r"""The ``width/2`` angular frequencies of a block of ``width`` channels, shape ``(width/2,)``.

    Notes
    -----
    .. math::
        \omega_j^{\text{paired}} = T^{-2j/W}, \qquad \omega_k^{\text{doubled}} = T^{-2\lfloor k/2\rfloor/(W/2)},
        \qquad j, k < W/2

    ``paired`` is ``1/dim_t`` of DETR's ``dim_t = T^(2⌊i/2⌋/W)`` read at the even channels ``i = 2j`` (the odd
    ones repeat it), and MAE's ``1/T^(j/(W/2))``.

    Examples
    --------
    >>> sine_frequencies(8, temperature=10000.0).tolist()
    [1.0, 0.1, 0.01, 0.001]
    >>> sine_frequencies(8, temperature=10000.0, rule="doubled").tolist()
    [1.0, 1.0, 0.01, 0.01]
    """
    xp = get_xp(xp)
    width = _check_width("width", width, 2)
    temperature = _check_temperature("temperature", temperature)
    check_choice("rule", rule, FREQUENCY_RULES)
    half = width // 2
    k = xp.arange(half, dtype=xp.float64)  # (W/2,)
    if rule == "paired":
        return temperature ** (-2.0 * k / width)
    return temperature ** (-2.0 * xp.floor(k / 2.0) / half)


def sine_features(values: Array, width: int, *, temperature: float = 10000.0, layout: str = "interleaved",
                  rule: str = "paired") -> Array:
    r"""Sines and cosines of ``values · ω``: shape ``(*values.shape, width)``.

    Parameters
    ----------
    values : real floating array
        The coordinates ``c`` (already scaled: the angles are ``c·ω_j``).
    width : int
        Even number of channels per coordinate (``num_pos_feats`` of DETR, ``embed_dim/2`` of MAE).
    temperature : float
        ``T > 1``.
    layout : {"interleaved", "concat"}
    rule : {"paired", "doubled"}
        :func:`sine_frequencies`.

    Notes
    -----
    .. math::
        \text{interleaved: } (s_{2j}, s_{2j+1}) = (\sin c\,\omega_j, \cos c\,\omega_j), \qquad
        \text{concat: } (s_j, s_{j+W/2}) = (\sin c\,\omega_j, \cos c\,\omega_j)

    See Also
    --------
    sine_frequencies, refpos.encodings.sinusoidal.sinusoidal : the same map on integer positions (text models).

    References
    ----------
    .. [1] Carion et al., "End-to-End Object Detection with Transformers" (DETR), 2020; transformers
       ``models/detr/modeling_detr.py``, ``DetrSinePositionEmbedding.build_sine_position_embedding``.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(sine_features(np.array([1.0]), 4, temperature=100.0)[0], 6).tolist()
    [0.841471, 0.540302, 0.099833, 0.995004]
    """
    values = floating_array(values, name="values")
    xp = array_namespace(values)
    check_choice("layout", layout, LAYOUTS)
    width = _check_width("width", width, 2)
    check_memory("the sine features and their angles, float64", 2 * element_count(values) * width * 8,
                 f"{element_count(values)} coordinates of width {width}")
    omega = sine_frequencies(width, temperature=temperature, rule=rule, xp=xp)  # (W/2,)
    angles = xp.astype(values, xp.float64)[..., None] * omega  # (..., W/2)
    return place_pairs(xp.sin(angles), xp.cos(angles), layout)  # (..., W)


def sincos_2d_grid(height: int, width: int, dim: int, *, temperature: float = 10000.0, axes: str = "yx",
                   flatten: str = "row_major", cls_rows: int = 0, xp: Any = None) -> Array:
    r"""The fixed 2-D sin–cos table of an ``height × width`` patch grid: shape ``(cls_rows + height·width, dim)``.

    Parameters
    ----------
    height, width : int
        The grid in patches.
    dim : int
        Embedding width, a multiple of 4: each axis takes ``dim/2`` channels, ``[sin | cos]`` of ``dim/4``
        frequencies ``ω_j = T^(−j/(dim/4))``.
    temperature : float
    axes : {"yx", "xy"}
        Which axis the first ``dim/2`` channels encode: ``"yx"`` the row (transformers' RT-DETR family),
        ``"xy"`` the column (MAE's checkpoints, AIMv2, Granite-Docling).
    flatten : {"row_major", "column_major"}
        The order of the tokens: ``row_major`` token ``t`` at ``(y, x) = (t // width, t % width)``, as a feature
        map flattens; ``column_major`` at ``(t % height, t // height)`` (OmDet-Turbo's ``meshgrid(w, h, "ij")``).
    cls_rows : int
        Rows of zeros placed before the grid (MAE's class token).

    Notes
    -----
    .. math::
        P_t = \bigl[\sin a\,\omega \;|\; \cos a\,\omega \;|\; \sin b\,\omega \;|\; \cos b\,\omega\bigr],
        \qquad (a, b) = (y_t, x_t) \text{ for "yx"}, \ (x_t, y_t) \text{ for "xy"}

    See Also
    --------
    sine_features, refpos.encodings.sincos2d_variants : which model uses which ``axes`` and ``flatten``.

    References
    ----------
    .. [1] He et al., "Masked Autoencoders Are Scalable Vision Learners", 2021; facebookresearch/mae
       ``util/pos_embed.py``, ``get_2d_sincos_pos_embed``.
    .. [2] transformers ``models/vit_mae/modeling_vit_mae.py``, ``build_2d_sinusoidal_position_embedding``;
       ``models/omdet_turbo/modeling_omdet_turbo.py``, ``build_2d_sincos_position_embedding``.

    Examples
    --------
    >>> import numpy as np
    >>> table = sincos_2d_grid(2, 3, 4, axes="yx")
    >>> table.shape, np.round(table[4], 4).tolist()
    ((6, 4), [0.8415, 0.5403, 0.8415, 0.5403])
    """
    xp = get_xp(xp)
    height = check_size("height", height, maximum=MAX_WIDTH, bytes_each=8, what="float64 per row")
    width = check_size("width", width, maximum=MAX_WIDTH, bytes_each=8, what="float64 per column")
    dim = _check_width("dim", dim, 4)
    check_choice("axes", axes, AXIS_ORDERS)
    check_choice("flatten", flatten, FLATTENS)
    cls_rows = check_int("cls_rows", cls_rows, minimum=0, maximum=MAX_WIDTH)
    check_memory("the 2-D sin-cos table, float64", 2 * (cls_rows + height * width) * dim * 8,
                 f"a {height}x{width} grid of dim {dim}")
    t = xp.arange(height * width, dtype=xp.int64)  # token index
    if flatten == "row_major":
        y, x = t // width, t % width
    else:
        y, x = t % height, t // height
    first, second = (y, x) if axes == "yx" else (x, y)
    blocks = [sine_features(xp.astype(c, xp.float64), dim // 2, temperature=temperature, layout="concat")
              for c in (first, second)]  # each (H·W, dim/2)
    table = xp.concat(blocks, axis=-1)  # (H·W, dim)
    return xp.concat([xp.zeros((cls_rows, dim), dtype=xp.float64), table], axis=0)


def _check_mask(mask: Any) -> Any:
    ns = array_namespace(mask) if not isinstance(mask, list) else None
    if ns is None or not (ns.isdtype(mask.dtype, "bool") or ns.isdtype(mask.dtype, "integral")):
        raise TypeError(f"mask must be a bool or 0/1 integer array (..., H, W), got {type(mask).__name__}"
                        + (f" of dtype {mask.dtype}" if ns is not None else ""))
    if mask.ndim < 2:
        raise ValueError(f"mask must have shape (..., H, W), got {tuple(mask.shape)}")
    if not ns.isdtype(mask.dtype, "bool") and mask.size and bool(ns.any((mask != 0) & (mask != 1))):
        raise ValueError("mask must hold only 0 and 1 (1: a valid pixel)")
    return ns


def mask_coordinates(mask: Array, *, normalize: bool, scale: float | None = None, offset: float = 0.0,
                     eps: float = 1e-6) -> tuple[Array, Array]:
    r"""The coordinates ``(y, x)`` DETR reads from a pixel mask, each of the mask's shape ``(..., H, W)``.

    Parameters
    ----------
    mask : bool or 0/1 integer array ``(..., H, W)``
        1 (True) on valid pixels, 0 on padding (an image padded at the bottom and right). A model called without
        a mask reads an all-ones mask.
    normalize : bool
    scale : float, optional
        The span of normalised coordinates; :data:`TWO_PI` when ``normalize`` and not given.
    offset : float
        Added to the counts before normalising (Deformable DETR: −0.5).
    eps : float
        Added to the last count (DETR's 1e-6).

    Notes
    -----
    The counts are the cumulative sums along each axis — ``y_{i,j} = Σ_{i' ≤ i} m_{i',j}``, ``x`` likewise along
    the row — so a valid pixel's coordinates start at 1 and a padded pixel repeats the last valid count. With
    ``normalize``:

    .. math:: y \leftarrow \frac{y + o}{y_{H-1,\,j} + \varepsilon}\,s, \qquad
        x \leftarrow \frac{x + o}{x_{i,\,W-1} + \varepsilon}\,s

    References
    ----------
    .. [1] transformers ``models/detr/modeling_detr.py``, ``DetrSinePositionEmbedding``;
       ``models/deformable_detr/modeling_deformable_detr.py``, ``DeformableDetrSinePositionEmbedding`` (offset).
    """
    xp = _check_mask(mask)
    normalize = check_bool("normalize", normalize)
    offset = check_float("offset", offset)
    eps = check_float("eps", eps, minimum=0.0)
    if not normalize and (scale is not None or offset != 0.0):
        raise ValueError("scale and offset apply to normalised coordinates: give them only with normalize=True")
    counts = xp.astype(mask, xp.float64)
    y = xp.cumulative_sum(counts, axis=-2)  # (..., H, W)
    x = xp.cumulative_sum(counts, axis=-1)  # (..., H, W)
    if not normalize:
        return y, x
    scale = TWO_PI if scale is None else check_float("scale", scale, positive=True)
    y = (y + offset) / (y[..., -1:, :] + eps) * scale
    x = (x + offset) / (x[..., :, -1:] + eps) * scale
    return y, x


def sine_position_map(mask: Array, num_features: int, *, temperature: float | tuple[float, float] = 10000.0,
                      normalize: bool, scale: float | None = None, offset: float = 0.0, eps: float = 1e-6) -> Array:
    r"""DETR's sine position embedding of a pixel mask: shape ``(..., H, W, 2·num_features)``, channels last.

    Parameters
    ----------
    mask : bool or 0/1 integer array ``(..., H, W)``
        :func:`mask_coordinates`.
    num_features : int
        Even number of channels per axis (``num_pos_feats``: ``d_model/2`` in DETR).
    temperature : float or (float, float)
        ``T``, or ``(T_y, T_x)`` per axis (DAB-DETR's ``temperature_height``, ``temperature_width``).
    normalize, scale, offset, eps
        :func:`mask_coordinates`.

    Notes
    -----
    .. math:: P_{i,j} = \bigl[\,s(y_{i,j};\, T_y) \;|\; s(x_{i,j};\, T_x)\,\bigr]

    with ``s`` the interleaved :func:`sine_features` of ``num_features`` channels: the row coordinate first.
    transformers returns the channels first, ``(B, 2F, H, W)``: the same values permuted.

    See Also
    --------
    mask_coordinates, sine_features, sine_coordinates

    References
    ----------
    .. [1] Carion et al., DETR, 2020; transformers ``models/detr/modeling_detr.py``, ``DetrSinePositionEmbedding``.
    .. [2] transformers ``models/dab_detr/modeling_dab_detr.py``, ``DabDetrSinePositionEmbedding`` (a temperature
       per axis).

    Examples
    --------
    >>> import numpy as np
    >>> emb = sine_position_map(np.ones((1, 2, 3), dtype=bool), 4, normalize=True)
    >>> emb.shape
    (1, 2, 3, 8)
    """
    if isinstance(temperature, tuple):
        if len(temperature) != 2:
            raise ValueError(f"temperature must be a number or a pair (T_y, T_x), got {len(temperature)} values")
        t_y, t_x = (_check_temperature(f"temperature[{i}]", t) for i, t in enumerate(temperature))
    else:
        t_y = t_x = _check_temperature("temperature", temperature)
    num_features = _check_width("num_features", num_features, 2)
    y, x = mask_coordinates(mask, normalize=normalize, scale=scale, offset=offset, eps=eps)  # (..., H, W)
    xp = array_namespace(y)
    return xp.concat([sine_features(y, num_features, temperature=t_y, layout="interleaved"),
                      sine_features(x, num_features, temperature=t_x, layout="interleaved")], axis=-1)


def sine_coordinates(coords: Array, num_features: int, *, temperature: float = 10000.0, scale: float = TWO_PI,
                     swap_xy: bool, layout: str = "interleaved", rule: str = "paired") -> Array:
    r"""Sine features of given coordinates (anchor points, boxes, positions): shape ``(..., n·num_features)``.

    Parameters
    ----------
    coords : real floating array ``(..., n)``
        ``n`` coordinates per point in the model's order (``(x, y)`` or ``(x, y, w, h)``, in [0, 1] for boxes).
    num_features : int
        Even number of channels per coordinate.
    temperature : float
    scale : float
        The coordinates are multiplied by it first (2π for boxes and text positions, 1 for SAM 2's pointers).
    swap_xy : bool
        Whether the first two blocks are exchanged, ``[s(y) | s(x) | s(w) | s(h)]``: transformers'
        ``encode_sinusoidal_position_embedding`` (DETR's y-first order) does, Deformable DETR's proposals do not.
    layout, rule
        :func:`sine_features`.

    Notes
    -----
    .. math:: P = \bigl[\,s(\text{scale}\cdot c_{\pi(0)}) \;|\; \dots \;|\; s(\text{scale}\cdot c_{\pi(n-1)})\,\bigr]

    with ``π`` the identity, or the exchange of 0 and 1 when ``swap_xy`` and ``n ≥ 2``.

    References
    ----------
    .. [1] Meng et al., "Conditional DETR for Fast Training Convergence", 2021; transformers
       ``models/conditional_detr/modeling_conditional_detr.py``, ``encode_sinusoidal_position_embedding``.
    .. [2] transformers ``models/sam2_video/modeling_sam2_video.py``, ``get_1d_sine_pe`` (``rule="doubled"``,
       ``layout="concat"``, scale 1).

    Examples
    --------
    >>> import numpy as np
    >>> sine_coordinates(np.array([[0.25, 0.5]]), 2, swap_xy=True).round(12).tolist()
    [[0.0, -1.0, 1.0, 0.0]]
    """
    coords = floating_array(coords, name="coords")
    if coords.ndim < 1 or coords.shape[-1] < 1:
        raise ValueError(f"coords must have shape (..., n) with n >= 1, got {tuple(coords.shape)}")
    xp = array_namespace(coords)
    scale = check_float("scale", scale, positive=True)
    swap_xy = check_bool("swap_xy", swap_xy)
    n = coords.shape[-1]
    order = list(range(n))
    if swap_xy and n >= 2:
        order[0], order[1] = 1, 0
    blocks = [sine_features(coords[..., i] * scale, num_features, temperature=temperature, layout=layout, rule=rule)
              for i in order]  # each (..., F)
    return xp.concat(blocks, axis=-1)

