"""Where each vision-RoPE form of :mod:`refpos.rope.vision` puts an image's patches: ``(N, 2)`` coordinates
``(h, w)`` in the order the tower's code lays its patches out.

* Qwen2-VL's tower (and the towers that share its rotary module): ``k × k`` merge blocks, row-major, each block's
  patches row-major, every frame alike (:func:`qwen_patch_positions`);
* Pixtral, MLCD and Gemma 4: row-major from 0 (:func:`pixtral_patch_positions`);
* Llama 4: from 1, the class token last at (0, 0) (:func:`llama4_patch_positions`);
* DINOv3: each patch's centre scaled to [−1, 1] after the unrotated class and register tokens
  (:func:`dinov3_patch_positions`);
* SAM 3's ViT: a window's rows and columns, or the config grid's scaled (:func:`sam3_patch_positions`);
* Muse Glimmer and Muse Spark: row-major, then reordered window by window (:func:`window_patch_positions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from refpos.validation import check_float, check_int


def qwen_patch_positions(grids: Any, spatial_merge_size: int | Sequence[int] = 2) -> np.ndarray:
    """``(N, 2)`` positions ``(h, w)`` of the Qwen-family vision tower, for grids ``(t, h, w)``.

    Patches come merge block by merge block: for each frame, the ``k × k`` blocks in row-major order,
    inside each block its patches row-major; every frame repeats the same ``(h, w)``. ``spatial_merge_size``: one
    ``k`` for every grid, or one per grid (Video-LLaMA 3's ``merge_sizes`` input).
    """
    grids = list(grids)
    if isinstance(spatial_merge_size, Sequence) and not isinstance(spatial_merge_size, str):
        if len(spatial_merge_size) != len(grids):
            raise ValueError(f"spatial_merge_size must be one int or one per grid ({len(grids)}), got "
                             f"{list(spatial_merge_size)}")
        merges = [check_int(f"spatial_merge_size[{i}]", k, minimum=1) for i, k in enumerate(spatial_merge_size)]
    else:
        merges = [check_int("spatial_merge_size", spatial_merge_size, minimum=1)] * len(grids)
    out = []
    for index, (grid, merge) in enumerate(zip(grids, merges, strict=True)):
        if len(grid) != 3:
            raise ValueError(f"grids[{index}] must be (t, h, w), got {grid!r}")
        t, h, w = (check_int(f"grids[{index}][{a}]", v, minimum=1) for a, v in zip("thw", grid, strict=True))
        if h % merge or w % merge:
            raise ValueError(f"grids[{index}]: (h, w) = ({h}, {w}) is not a multiple of spatial_merge_size={merge}")
        rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")  # (h, w)
        blocks = (h // merge, merge, w // merge, merge)
        rows = rows.reshape(blocks).transpose(0, 2, 1, 3).ravel()  # block row, block col, in-block row, col
        cols = cols.reshape(blocks).transpose(0, 2, 1, 3).ravel()
        out.append(np.tile(np.stack([rows, cols], axis=-1), (t, 1)))  # (t·h·w, 2)
    if not out:
        raise ValueError("grids must hold at least one (t, h, w)")
    return np.concatenate(out, axis=0).astype(np.int64)


def pixtral_patch_positions(height: int, width: int) -> np.ndarray:
    """``(height·width, 2)`` row-major positions ``(h, w)`` of one Pixtral image (patches per side)."""
    height, width = check_int("height", height, minimum=1), check_int("width", width, minimum=1)
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return np.stack([rows.ravel(), cols.ravel()], axis=-1).astype(np.int64)  # (h·w, 2)


def llama4_patch_positions(side: int) -> np.ndarray:
    """``(side² + 1, 2)`` Llama-4 vision positions: patch (r, c) at ``(r + 1, c + 1)``, then CLS at (0, 0)."""
    side = check_int("side", side, minimum=1)
    patches = pixtral_patch_positions(side, side) + 1  # (side², 2), 1-based
    return np.concatenate([patches, np.zeros((1, 2), dtype=np.int64)], axis=0)  # class token last: angle 0


def dinov3_patch_positions(height: int, width: int, prefix: int = 0) -> np.ndarray:
    r"""``(prefix + height·width, 2)`` float64 DINOv3 coordinates ``(h, w)``: the class and register tokens at
    (0, 0) (unrotated), then each patch's centre scaled to [−1, 1], row-major.

    Notes
    -----
    Patch ``i`` of ``n`` along an axis has its centre at :math:`(i + \tfrac12)/n` of the side, mapped to
    :math:`c_i = 2\,(i + \tfrac12)/n - 1 = (2i + 1)/n - 1`.

    See Also
    --------
    refpos.rope.vision.apply_vision_rope : rotates by these (form ``dinov3``).

    References
    ----------
    ``get_patches_center_coordinates``, transformers/models/dinov3_vit/modeling_dinov3_vit.py.
    """
    height, width = check_int("height", height, minimum=1), check_int("width", width, minimum=1)
    prefix = check_int("prefix", prefix, minimum=0)
    rows = (2.0 * np.arange(height, dtype=np.float64) + 1.0) / height - 1.0  # c_i = (2i + 1)/n − 1
    cols = (2.0 * np.arange(width, dtype=np.float64) + 1.0) / width - 1.0
    grid_h, grid_w = np.meshgrid(rows, cols, indexing="ij")  # (height, width) each
    patches = np.stack([grid_h.ravel(), grid_w.ravel()], axis=-1)  # (h·w, 2), row-major
    return np.concatenate([np.zeros((prefix, 2)), patches], axis=0)  # prefix tokens at (0, 0): angle 0


def sam3_patch_positions(rows: int, columns: int, scale: float = 1.0) -> np.ndarray:
    r"""``(rows·columns, 2)`` float64 SAM 3 ViT coordinates ``(h, w)``, row-major: patch ``(r, c)`` at
    :math:`(r\,s, c\,s)`.

    Notes
    -----
    A windowed layer rotates the ``window_size × window_size`` patches of each window at their place in it
    (``rows = columns = window_size``, :math:`s = 1`); a global layer every patch of the config's grid of
    ``G_h × G_w`` patches (``image_size // patch_size``) at :math:`s = \mathrm{window\_size} / G_w`.

    See Also
    --------
    refpos.rope.vision.apply_vision_rope : rotates by these (form ``sam3``).

    References
    ----------
    ``Sam3ViTLayer.precompute_positions``, transformers/models/sam3/modeling_sam3.py.
    """
    rows, columns = check_int("rows", rows, minimum=1), check_int("columns", columns, minimum=1)
    scale = check_float("scale", scale, positive=True)
    grid_h, grid_w = np.meshgrid(np.arange(rows, dtype=np.float64), np.arange(columns, dtype=np.float64),
                                 indexing="ij")
    return np.stack([grid_h.ravel(), grid_w.ravel()], axis=-1) * scale  # (r·s, c·s)


def window_patch_positions(grids: Any, window: int, start: int = 0) -> np.ndarray:
    r"""``(N, 2)`` positions ``(h, w)`` of packed grids ``(t, h, w)`` whose patches a tower reorders window by window:
    each frame's grid cut into ``window × window`` windows (the last row and column of windows cut short where the
    side is no multiple), the windows row-major, each window's patches row-major; coordinates counted from
    ``start``.

    Notes
    -----
    Patch ``(r, c)`` lies in window :math:`(\lfloor r/W \rfloor, \lfloor c/W \rfloor)`; it comes before every patch
    of a later window and, in its window, before the patches after it in raster order. Its position is
    :math:`(r + s, c + s)`, ``s = start``.

    See Also
    --------
    refpos.rope.vision.apply_vision_rope : rotates by these (Muse's towers: form ``step3p7``, ``start = 1``).

    References
    ----------
    ``get_vision_window_index`` (transformers/vision_utils.py) with a merge size of 1, and
    ``MuseGlimmerVisionEncoder.forward`` (transformers/models/muse_glimmer/modeling_muse_glimmer.py).
    """
    window = check_int("window", window, minimum=1)
    start = check_int("start", start)
    out = []
    for index, grid in enumerate(list(grids)):
        if len(grid) != 3:
            raise ValueError(f"grids[{index}] must be (t, h, w), got {grid!r}")
        t, h, w = (check_int(f"grids[{index}][{a}]", v, minimum=1) for a, v in zip("thw", grid, strict=True))
        rows, cols = (a.ravel() for a in np.meshgrid(np.arange(h), np.arange(w), indexing="ij"))  # raster
        order = np.lexsort((cols, rows, cols // window, rows // window))  # window row, window column, row, column
        frame = np.stack([rows[order], cols[order]], axis=-1) + start  # (h·w, 2)
        out.append(np.tile(frame, (t, 1)))
    if not out:
        raise ValueError("grids must hold at least one (t, h, w)")
    return np.concatenate(out, axis=0).astype(np.int64)
