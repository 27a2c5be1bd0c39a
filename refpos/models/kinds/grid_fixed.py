r"""The native grid of a position grid's table, and the ways of a table added as it is (never resampled).

:func:`native_grid` reads a table's native grid from a config by the row's grid facts: :func:`image_grid` an image's
patch grid (``image_size // patch_size`` per axis); :func:`spectrogram_grid` the grid a strided patch convolution
cuts from a spectrogram (the Audio Spectrogram Transformer: ``⌊(F − k)/s_f⌋ + 1`` frequency rows by
``⌊(T − k)/s_t⌋ + 1`` time columns, :func:`refpos.encodings.grid_fixed.strided_grid`); :func:`stage_grids` the grid
of the table each stage of a PVT-style network adds before its layers.

A table added as it is has one of the ways of :data:`FIXED_WAYS`, each a reading of
:func:`refpos.encodings.grid_fixed.fixed_position_rows`: ``"fixed"`` (the tokens gain the table row for row: SAM's
image encoder, EoMT, AIMv2, AST) or ``"fixed_first_row"`` (no class token; each patch gains its grid row plus the
table's first row, ViTPose's backbone):

.. math:: P'_q = P_{1+q} + P_0, \qquad q = 0 \ldots N - 1
"""

from __future__ import annotations

import math
from typing import Any

from refpos.backend import Array
from refpos.encodings.grid import patch_grid
from refpos.encodings.grid_clips import FACTORISED
from refpos.encodings.grid_fixed import fixed_position_rows, strided_grid
from refpos.models.kinds.grid_clips import clip_fields
from refpos.models.kinds.record import Stack
from refpos.models.view import ConfigView
from refpos.validation import check_int

#: the way of a table added as it is: the input must have the native grid (no resampling)
FIXED = "fixed"
#: the way of a table whose first row every patch adds to its own (no class token)
FIXED_FIRST_ROW = "fixed_first_row"
#: each way of a table added as it is -> its reading (:data:`refpos.encodings.grid_fixed.FIXED_READS`)
FIXED_WAYS = {FIXED: "as_is", FIXED_FIRST_ROW: "first_row_added"}


def image_grid(view: ConfigView, image: str = "image_size", patch: str = "patch_size", *,
               image_default: Any = None, patch_default: Any = None) -> tuple[int, int]:
    """The native patch grid ``(image_h // patch_h, image_w // patch_w)`` of a config: ``image`` and ``patch`` hold
    an int or a pair (rows, columns); a ``ValueError`` naming the key when a value is not one."""
    (height, width), patch_sides = config_pair(view, image, image_default), config_pair(view, patch, patch_default)
    return patch_grid(height, width, patch_sides)


def config_pair(view: ConfigView, key: str, default: Any = None) -> tuple[int, int]:
    """The positive int or pair (rows, columns) of ``key`` as a pair; a ``ValueError`` naming the key otherwise."""
    value = view.value(key, default)
    pair = list(value) if isinstance(value, list | tuple) else [value, value]
    if len(pair) != 2:
        raise ValueError(f"{view.name(key)} must be an int or a pair (rows, columns), got {value!r}")
    return check_int(view.name(key), pair[0], minimum=1), check_int(view.name(key), pair[1], minimum=1)


def spectrogram_grid(view: ConfigView, keys: tuple[str, str, str, str], defaults: tuple[Any, ...] | None,
                     patch: str, patch_default: Any) -> tuple[int, int]:
    r"""The grid a square patch convolution of side ``patch`` cuts from a spectrogram (module docstring):
    ``keys`` are the frequency bins, the frequency stride, the frames and the time stride, ``defaults`` their class
    defaults; :math:`(\lfloor (F - k)/s_f \rfloor + 1,\ \lfloor (T - k)/s_t \rfloor + 1)`."""
    bins, f_stride, frames, t_stride = (view.int(key, None if defaults is None else defaults[i], minimum=1)
                                        for i, key in enumerate(keys))
    kernel = view.int(patch, patch_default, minimum=1)
    if bins < kernel or frames < kernel:
        raise ValueError(f"{view.name(patch)}: a {kernel} × {kernel} patch does not fit {bins} bins by {frames} "
                         "frames")
    return strided_grid((bins, frames), kernel, (f_stride, t_stride))


def native_grid(stack: Stack, facts: Any) -> tuple[int, int]:
    """The native grid ``(M_h, M_w)`` of a stack's table from its config and the row's grid facts (a
    :class:`~refpos.models.kinds.grid.GridFacts`): the square of the grid rows the config states (``positions``), the
    rows and columns it states apart (``sides``; a non-square table is reported to ``stack.not_modelled``), the
    background cells of a windowed grid (``window``), a spectrogram's strided cuts (``strides``), a clip's tubelet or
    frame table (``clip``), else the image over the patch (:func:`image_grid`)."""
    view = stack.view
    if facts.positions is not None:
        n = view.int(facts.positions, facts.positions_default, minimum=1)
        side = math.isqrt(n)
        if side * side != n:
            raise ValueError(f"{view.name(facts.positions)} must be a square number of grid rows, got {n}")
        return side, side
    if facts.sides is not None:
        rows, columns = facts.defaults or (None, None)
        grid = (view.int(facts.sides[0], rows, minimum=1), view.int(facts.sides[1], columns, minimum=1))
        if grid[0] != grid[1]:
            stack.not_modelled[view.name(facts.sides[1])] = (
                f"{grid[1]} columns beside {grid[0]} rows: the code resamples the table as a square of "
                f"{view.name(facts.sides[0])} a side, which refpos models only for a square table")
        return grid
    if facts.window is not None:  # the background's cells (M_h, M_w), stated in the config
        return config_pair(view, facts.window[0], (facts.window_default or (None, None))[0])
    if facts.strides is not None:  # a spectrogram cut by a strided convolution (AST)
        return spectrogram_grid(view, facts.strides, facts.strides_default, facts.patch, (facts.defaults or (0, 0))[1])
    if facts.clip in ("tubelets", *FACTORISED):  # the tubelet's last two sides, or the frame table's N × 1
        return clip_fields(view, facts, {})[0]
    image, patch = facts.defaults or (None, None)
    return image_grid(view, facts.image, facts.patch, image_default=image, patch_default=patch)


def stage_grids(view: ConfigView, keys: tuple[str, str, str], image: str, defaults: tuple[Any, Any] | None
                ) -> list[tuple[tuple[int, int], int, int]]:
    r"""``(grid, prefix, width)`` of the fixed table each stage of a PVT-style network adds before its layers:
    ``keys`` are the stage count ``S``, the patch sizes ``p_s`` and the widths ``W_s``, ``image`` the image size
    ``I`` (``defaults[0]`` its class default). Stage :math:`s` was built for an image of :math:`I_0 = I`,
    :math:`I_s = \lfloor I / 2^{s+1}\rfloor` (its input is the previous stage's map), so its table holds the grid
    :math:`\lfloor I_s / p_s\rfloor` a side, of width :math:`W_s`, and the last stage's a row before it for the
    class token that stage prepends:

    .. math:: M_s = \lfloor I_s / p_s\rfloor, \qquad \text{prefix}_s = [s = S - 1]
    """
    count = view.int(keys[0], minimum=1)
    side = view.int(image, None if defaults is None else defaults[0], minimum=1)
    lists = []
    for key in keys[1:]:
        value = view.value(key)
        if not isinstance(value, list | tuple) or len(value) < count:
            raise ValueError(f"{view.name(key)} must list one entry for each of the {count} stages, got {value!r}")
        lists.append([check_int(view.name(key), v, minimum=1) for v in value[:count]])
    out = []
    for s, (patch, width) in enumerate(zip(*lists, strict=True)):
        cells = (side if s == 0 else side // 2 ** (s + 1)) // patch
        if cells < 1:
            raise ValueError(f"{view.name(image)}: stage {s}'s table of {side} // 2^{s + 1} pixels holds no patch of "
                             f"{patch}")
        out.append(((cells, cells), int(s == count - 1), width))
    return out


def fixed_rows(layer: Any, table: Array, grid: tuple[int, int]) -> Array:
    """The rows a fixed table of ``layer`` (a :class:`~refpos.models.kinds.grid.GridLayer` of a way of
    :data:`FIXED_WAYS`) gives an input of patch grid ``grid``: its way's reading (module docstring)."""
    if tuple(grid) != layer.grid:
        raise ValueError(f"grid: the {layer.stack} table is not resampled, its input must have the native grid "
                         f"{layer.grid}, got {tuple(grid)}")
    return fixed_position_rows(table, grid, source_grid=layer.grid, prefix_tokens=layer.prefix,
                               suffix_tokens=layer.suffix, read=FIXED_WAYS.get(layer.way, "as_is"))


__all__ = ["FIXED", "FIXED_FIRST_ROW", "FIXED_WAYS", "config_pair", "fixed_rows", "image_grid", "native_grid",
           "spectrogram_grid", "stage_grids"]
