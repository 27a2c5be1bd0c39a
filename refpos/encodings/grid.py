r"""Learned position grids resampled to the input's grid (ViT, DeiT, DINOv2, CLIP, SigLIP, SigLIP2, Qwen3-VL, …).

A vision transformer trained on ``M_h × M_w`` patches learns one vector per patch, a table
``P ∈ R^{(n_extra + M_h·M_w) × d}`` whose grid rows are the patches in raster order (row = height). At
another resolution ``h × w`` the grid is resampled and the extra rows (the CLS token, DeiT's distillation
token, registers, YOLOS's detection tokens) are kept apart, never resampled:

.. math::
    P' = \big[\,P_{\text{prefix}};\ \mathrm{vec}\big(\mathcal{R}(\mathrm{grid}(P_{\text{patches}}))\big);\
    P_{\text{suffix}}\big], \qquad \mathcal{R}(G)_{::c} = W_h\,G_{::c}\,W_w^{\top}

with ``W_h, W_w`` the matrices of :func:`refpos.encodings.resample.resample_matrix` (a family's mode,
``align_corners``, antialias, size or scale-factor form). The families' choices are the records of
:mod:`refpos.encodings.grid_variants`; docs/grid.md puts them side by side.

Forms of the step (``r`` of :func:`~refpos.encodings.resample.resample_scale`) along an axis of ``M`` rows
resampled to ``g``:

* **size** (``scale_factor_offset=None``): ``r = M/g``;
* **offset and scale** (DINOv2's original code, transformers' HunYuan-V4-VL): a scale factor
  ``s = (g + δ)/M`` with ``δ = 0.1``, so ``r = M/(g + δ)`` and ``⌊M·s⌋ = g``; ``δ = 0`` is the plain
  scale-factor form (TVP), whose ``⌊M·(g/M)⌋`` can fall one row short, which is refused here.

How the grid is read (``read``): ``"resample"`` (the above); ``"buckets"``: each patch reads the table row
of the bucket its fractional coordinates fall in, ``G'[i, j] = G[⌊i·M_h/h⌋, ⌊j·M_w/w⌋]``, rows gathered, not
blended (NaViT: Idefics2, SmolVLM, Phi-4-multimodal, MiniCPM; :mod:`refpos.encodings.grid_buckets`);
``"square_crop"``: resampled to the square of the longer side ``D = max(h, w)`` and cropped to its first
``h`` rows and ``w`` columns, so the table's scale is the same along both axes (RADIO's cropped position
embedding):

.. math:: G' = \mathcal{R}_{D \times D}(G)_{\,0:h,\ 0:w}

``"tile"``: the table repeated over the input's grid and cut to it, every patch reading the row its place
modulo the table's side gives (SAM 3's ViT), rows gathered, not blended:

.. math:: G'[i, j] = G[i \bmod M_h,\ j \bmod M_w]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.encodings.grid_buckets import read_buckets
from refpos.encodings.resample import MODE_AXES, MODES, interpolate, resampled_size
from refpos.validation import check_bool, check_choice, check_float, check_int, floating_array

#: how the grid is read into patch order: raster over (h, w), or over (w, h) (the table read transposed)
GRID_AXES = ("hw", "wh")
#: how the grid is read at the input's grid: resampled by ``mode``, read at bucketed fractional coordinates, resampled
#: to a square and cropped, or tiled
GRID_READS = ("resample", "buckets", "square_crop", "tile")


def patch_grid(height: int, width: int, patch_size: int | tuple[int, int]) -> tuple[int, int]:
    """The patch grid ``(⌊H/p_h⌋, ⌊W/p_w⌋)`` of an ``H × W`` image (what ``interpolate_pos_encoding`` computes).

    >>> patch_grid(518, 392, 14)
    (37, 28)
    """
    ph, pw = (patch_size, patch_size) if isinstance(patch_size, int) else tuple(patch_size)
    height, width = check_int("height", height, minimum=1), check_int("width", width, minimum=1)
    ph, pw = check_int("patch_size", ph, minimum=1), check_int("patch_size", pw, minimum=1)
    if height < ph or width < pw:
        raise ValueError(f"an image of {height}×{width} holds no {ph}×{pw} patch")
    return height // ph, width // pw


def _target(name: str, value: Any) -> tuple[int, int]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (rows, columns), got {value!r}")
    return check_int(f"{name}[0]", value[0], minimum=1), check_int(f"{name}[1]", value[1], minimum=1)


def resample_position_grid(grid: Array, size: tuple[int, int], *, mode: str, align_corners: bool = False,
                           antialias: bool = False, scale_factor_offset: float | None = None,
                           padding: str = "border") -> Array:
    r"""A position grid ``(M_h, M_w, d)`` resampled to ``size = (h, w)``: ``(h, w, d)``.

    ``scale_factor_offset`` ``δ`` selects the offset-and-scale form (``s = (g + δ)/M`` per axis; the
    module docstring); ``None`` is the size form. Every other argument is
    :func:`refpos.encodings.resample.interpolate`'s.

    Notes
    -----
    .. math:: G'_{::c} = W_h\,G_{::c}\,W_w^{\top}, \qquad c = 1 \ldots d

    See Also
    --------
    refpos.encodings.resample.interpolate : the resampling itself.

    References
    ----------
    transformers, ``models/dinov2/modeling_dinov2.py``: ``Dinov2Embeddings.interpolate_pos_encoding``;
    facebookresearch/dinov2, ``dinov2/models/vision_transformer.py``: ``DinoVisionTransformer.interpolate_pos_encoding``
    (the offset-and-scale form).

    Examples
    --------
    >>> import numpy as np
    >>> grid = np.arange(8.0).reshape(2, 2, 2)
    >>> np.asarray(resample_position_grid(grid, (2, 2), mode="bicubic")).tolist() == grid.tolist()
    True
    """
    grid = floating_array(grid, name="grid")
    xp = array_namespace(grid)
    if grid.ndim != 3:
        raise ValueError(f"grid must have shape (rows, columns, dim), got {tuple(grid.shape)}")
    size = _target("size", size)
    check_choice("mode", mode, MODES)
    channels_first = xp.permute_dims(grid, (2, 0, 1))  # (d, M_h, M_w): torch's (C, H, W)
    if scale_factor_offset is None:
        resampled = interpolate(channels_first, size, mode=mode, align_corners=align_corners, antialias=antialias,
                                padding=padding)
    else:
        offset = check_float("scale_factor_offset", scale_factor_offset, minimum=0.0)
        factors = tuple((g + offset) / m for g, m in zip(size, grid.shape[:2], strict=True))
        got = tuple(resampled_size(m, s) for m, s in zip(grid.shape[:2], factors, strict=True))
        if got != size:
            raise ValueError(f"the scale factors (g + {offset})/M = {factors} give {got} rows and columns, not "
                             f"size {size} (floor(M·s) fell short): the model's own code fails here too")
        resampled = interpolate(channels_first, scale_factor=factors, mode=mode, align_corners=align_corners,
                                antialias=antialias, padding=padding)
    return xp.permute_dims(resampled, (1, 2, 0))  # (h, w, d)


def read_tiled(grid: Array, size: tuple[int, int]) -> Array:
    r"""A position grid ``(M_h, M_w, d)`` tiled over ``size = (h, w)``: ``G'[i, j] = G[i mod M_h, j mod M_w]``.

    >>> import numpy as np
    >>> np.asarray(read_tiled(np.arange(4.0).reshape(2, 2, 1), (3, 3)))[:, :, 0].tolist()
    [[0.0, 1.0, 0.0], [2.0, 3.0, 2.0], [0.0, 1.0, 0.0]]
    """
    grid = floating_array(grid, name="grid")
    xp = array_namespace(grid)
    if grid.ndim != 3:
        raise ValueError(f"grid must have shape (rows, columns, dim), got {tuple(grid.shape)}")
    h, w = _target("size", size)
    rows = xp.asarray([i % grid.shape[0] for i in range(h)], dtype=xp.int64)
    cols = xp.asarray([j % grid.shape[1] for j in range(w)], dtype=xp.int64)
    return xp.take(xp.take(grid, rows, axis=0), cols, axis=1)


def _square_side(n: int) -> int:
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"a grid of {n} rows is not square: give source_grid (rows, columns)")
    return side


def resample_position_table(table: Array, grid: tuple[int, int], *, mode: str, align_corners: bool = False,
                            antialias: bool = False, scale_factor_offset: float | None = None,
                            padding: str = "border", prefix_tokens: int = 0, suffix_tokens: int = 0,
                            keep_extra: bool = True, source_grid: tuple[int, int] | None = None,
                            axes: str = "hw", read: str = "resample") -> Array:
    r"""A flat position table ``(prefix + M_h·M_w + suffix, d)`` resampled to the patch grid ``grid = (h, w)``.

    The first ``prefix_tokens`` rows (CLS; DeiT's CLS and distillation; registers) and the last
    ``suffix_tokens`` (YOLOS's detection tokens) are kept apart and returned unchanged around the
    resampled grid, or left out (``keep_extra=False``: SegGPT, ViTDet, HunYuan-VL return the grid alone).
    The grid rows are the patches in raster order of ``source_grid`` (default: a square).
    ``axes="wh"`` resamples to ``(w, h)`` and returns that grid's raster order (the table read transposed:
    DINOv2's original code, transformers' Muse vision towers). ``read="buckets"`` reads the grid at bucketed
    fractional coordinates instead (NaViT, the module docstring; ``mode`` ``"nearest"``, whose exact rows these
    are, and no other option); ``read="square_crop"`` resamples to the square of the longer side and keeps the
    first rows and columns (RADIO); ``read="tile"`` repeats the grid over the input's and cuts it there (SAM 3's
    ViT: :func:`read_tiled`; ``mode`` ``"nearest"`` and no other option). Other arguments:
    :func:`resample_position_grid`.

    Notes
    -----
    .. math:: P' = [P_{:n_p};\ \mathrm{vec}(\mathcal{R}(\mathrm{grid}(P_{n_p : N - n_s})));\ P_{N - n_s:}]

    (``read="square_crop"``: :math:`\mathcal{R}` to ``D × D``, ``D = max(h, w)``, then rows ``0:h``, columns ``0:w``.)

    See Also
    --------
    refpos.encodings.grid_variants.GRID_VARIANTS : each family's choices, one record each.
    resample_position_grid : the grid alone.

    References
    ----------
    transformers, ``models/vit/modeling_vit.py``: ``ViTEmbeddings.interpolate_pos_encoding``;
    ``models/yolos/modeling_yolos.py``: ``InterpolateInitialPositionEmbeddings`` (rows after the grid);
    timm, ``timm/layers/pos_embed.py``: ``resample_abs_pos_embed``.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.arange(10.0)[:, None]                       # CLS, then a 3 × 3 grid
    >>> out = resample_position_table(table, (3, 3), mode="bicubic", prefix_tokens=1)
    >>> np.asarray(out)[:, 0].tolist() == table[:, 0].tolist()  # the same grid: unchanged
    True
    """
    table = floating_array(table, name="table")
    xp = array_namespace(table)
    if table.ndim != 2:
        raise ValueError(f"table must have shape (rows, dim), got {tuple(table.shape)}")
    prefix = check_int("prefix_tokens", prefix_tokens, minimum=0)
    suffix = check_int("suffix_tokens", suffix_tokens, minimum=0)
    keep_extra, axes = check_bool("keep_extra", keep_extra), check_choice("axes", axes, GRID_AXES)
    gathered = ("nearest", False, False, None, "border")  # the options of a gather: none
    if check_choice("read", read, GRID_READS) in ("buckets", "tile") and (
            (mode, align_corners, antialias, scale_factor_offset, padding) != gathered):
        raise ValueError(f"read {read!r} gathers rows: it takes mode 'nearest' and no align_corners, antialias, "
                         f"scale_factor_offset or padding, got mode {mode!r}")
    n_grid = table.shape[0] - prefix - suffix
    if n_grid < 1:
        raise ValueError(f"table has {table.shape[0]} rows, no grid after {prefix} prefix and {suffix} suffix rows")
    rows, cols = (_square_side(n_grid),) * 2 if source_grid is None else _target("source_grid", source_grid)
    if rows * cols != n_grid:
        raise ValueError(f"source_grid {(rows, cols)} holds {rows * cols} rows, the table's grid has {n_grid}")
    target = _target("grid", grid)
    patches = xp.reshape(table[prefix:prefix + n_grid, :], (rows, cols, table.shape[1]))  # row = height
    size = target[::-1] if axes == "wh" else target
    square = (max(size),) * 2  # square_crop: D × D, then the first h rows and w columns
    if read == "buckets":
        resampled = read_buckets(patches, size)
    elif read == "tile":
        resampled = read_tiled(patches, size)
    else:
        resampled = resample_position_grid(
            patches, square if read == "square_crop" else size, mode=mode, align_corners=align_corners,
            antialias=antialias, scale_factor_offset=scale_factor_offset, padding=padding)[:size[0], :size[1], :]
    flat = xp.reshape(resampled, (target[0] * target[1], table.shape[1]))  # raster order of the resampled grid
    if not keep_extra:
        return flat
    return xp.concat([table[:prefix, :], flat, table[table.shape[0] - suffix:, :]], axis=0)


def resample_position_sequence(table: Array, length: int, *, mode: str, antialias: bool = False,
                               align_corners: bool = False, prefix_tokens: int = 0) -> Array:
    r"""A 1-D position table ``(prefix + N, d)`` resampled along its rows to ``length``: ``(prefix + length, d)``.

    ``mode`` ``"linear"`` or ``"nearest"`` resamples the row axis directly (TimeSformer's time table:
    nearest); ``"bilinear"`` and ``"bicubic"`` resample a grid of one row of ``N`` columns to ``1 × length``,
    as the models that reshape their sequence into a 2-D map do (ViT-MAE's decoder: bicubic; VideoPrism's
    temporal table: antialiased bilinear). One row stays one row exactly (its weight matrix is ``[[1]]``).

    >>> import numpy as np
    >>> np.asarray(resample_position_sequence(np.arange(3.0)[:, None], 5, mode="linear", align_corners=True))[:, 0]
    array([0. , 0.5, 1. , 1.5, 2. ])
    """
    table = floating_array(table, name="table")
    xp = array_namespace(table)
    if table.ndim != 2:
        raise ValueError(f"table must have shape (rows, dim), got {tuple(table.shape)}")
    prefix = check_int("prefix_tokens", prefix_tokens, minimum=0)
    if table.shape[0] - prefix < 1:
        raise ValueError(f"table has {table.shape[0]} rows, no sequence after {prefix} prefix rows")
    length = check_int("length", length, minimum=1)
    rows = xp.permute_dims(table[prefix:, :], (1, 0))  # (d, N)
    if MODE_AXES[check_choice("mode", mode, MODES)] != 2:  # the modes that resample the row axis itself
        out = interpolate(rows, (length,), mode=mode, align_corners=align_corners, antialias=antialias)
    else:
        out = interpolate(rows[:, None, :], (1, length), mode=mode, align_corners=align_corners,
                          antialias=antialias)[:, 0, :]
    return xp.concat([table[:prefix, :], xp.permute_dims(out, (1, 0))], axis=0)


def merge_block_order(grid: tuple[int, int], merge: int) -> list[int]:
    r"""The raster index of each patch in spatial-merge-block order (Qwen2-VL-style towers, ``merge × merge`` blocks).

    Patches are listed block by block (blocks in raster order), and within a block in raster order: the
    order in which Qwen3-VL, Cosmos3-Edge and their kin emit patch tokens and read their resampled grid.

    >>> merge_block_order((2, 4), 2)
    [0, 1, 4, 5, 2, 3, 6, 7]
    """
    rows, cols = _target("grid", grid)
    merge = check_int("merge", merge, minimum=1)
    if rows % merge or cols % merge:
        raise ValueError(f"grid {(rows, cols)} does not divide into merge × merge = {merge} × {merge} blocks")
    return [(block_row * merge + in_row) * cols + block_col * merge + in_col
            for block_row in range(rows // merge) for block_col in range(cols // merge)
            for in_row in range(merge) for in_col in range(merge)]


def packed_position_rows(rows_of: Callable[[tuple[int, int]], Array], grids: Sequence[Sequence[int]],
                         merge: int = 1, frame_rows: Callable[[int], Array] | None = None,
                         class_row: Array | None = None) -> Array:
    r"""The position rows of a packed sequence of images and clips, token by token (Qwen3-VL-style towers).

    A tower fed flat patches and their grids ``grids[b] = (t_b, h_b, w_b)`` (``grid_thw``) adds to image ``b``'s
    tokens its grid resampled to ``(h_b, w_b)``, ``G'_b = rows_of((h_b, w_b))`` (``h_b·w_b`` rows in raster
    order), laid out in the tower's token order ``π_m`` (:func:`merge_block_order`; ``m = 1``: raster) and
    repeated for each of its ``t_b`` frames; the images follow one another:

    .. math:: P = \big[\,\underbrace{G'_1[\pi_m];\ \dots;\ G'_1[\pi_m]}_{t_1};\ \dots;\
        \underbrace{G'_B[\pi_m];\ \dots;\ G'_B[\pi_m]}_{t_B}\big]

    ``frame_rows`` adds a row ``F(f)`` to every token of frame ``f = 0 … t_b − 1`` of a clip (``t_b > 1``; an
    image adds none): Kimi K2.5's fixed sinusoid over a clip's frames, ``G'_b[\pi_m] + F(f)``. ``class_row`` is a
    row put before each image's tokens: the learned position of the class token each image starts with (Inkling2).

    >>> import numpy as np
    >>> rows = packed_position_rows(lambda g: np.arange(g[0] * g[1])[:, None], [(2, 2, 2), (1, 2, 4)], merge=2)
    >>> rows[:, 0].tolist()
    [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 4, 5, 2, 3, 6, 7]

    See Also
    --------
    merge_block_order : the token order of one frame
    resample_position_table : what ``rows_of`` computes for most towers
    """
    merge = check_int("merge", merge, minimum=1)
    if not isinstance(grids, Sequence) or not grids:
        raise ValueError(f"grids must be a non-empty list of (t, h, w) grids, got {grids!r}")
    blocks = []
    for index, thw in enumerate(grids):
        if not isinstance(thw, Sequence) or len(thw) != 3:
            raise TypeError(f"grids[{index}] must be (t, h, w), got {thw!r}")
        frames = check_int(f"grids[{index}][0]", thw[0], minimum=1)
        hw = _target(f"grids[{index}][1:]", list(thw[1:]))
        rows = rows_of(hw)
        if rows.shape[0] != hw[0] * hw[1]:
            raise ValueError(f"rows_of({hw}) must give {hw[0] * hw[1]} rows, got {rows.shape[0]}")
        xp = array_namespace(rows)
        order = xp.asarray(merge_block_order(hw, merge))
        frame = xp.take(rows, order, axis=0)
        if class_row is not None:
            blocks.append(xp.reshape(class_row, (1, -1)))
        if frame_rows is None or frames == 1:
            blocks.extend([frame] * frames)
        else:
            blocks.extend(frame + xp.reshape(frame_rows(f), (1, -1)) for f in range(frames))
    return array_namespace(blocks[0]).concat(blocks, axis=0)


def resample_position_grids_padded(grid: Array, sizes: list[tuple[int, int]], max_length: int, *,
                                   mode: str = "bilinear", antialias: bool = True) -> Array:
    r"""SigLIP2's per-image resize: the grid ``(M, M, d)`` resampled to each image's patch grid, ``(B, L, d)``.

    Image ``b`` of grid ``(h_b, w_b)`` reads rows ``0 … h_b·w_b − 1`` in raster order; its padding rows (up
    to ``max_length``) repeat the first resampled row, as transformers' ``Siglip2VisionEmbeddings.
    resize_positional_embeddings`` fills them (antialiased bilinear, align_corners False).
    """
    grid = floating_array(grid, name="grid")
    xp = array_namespace(grid)
    max_length = check_int("max_length", max_length, minimum=1)
    images = []
    for index, size in enumerate(sizes):
        h, w = _target(f"sizes[{index}]", size)
        if h * w > max_length:
            raise ValueError(f"sizes[{index}] = {(h, w)} holds {h * w} patches, more than max_length {max_length}")
        flat = xp.reshape(resample_position_grid(grid, (h, w), mode=mode, antialias=antialias), (h * w, -1))
        pad = xp.broadcast_to(flat[:1, :], (max_length - h * w, flat.shape[1]))
        images.append(xp.concat([flat, pad], axis=0))
    return xp.stack(images, axis=0)
