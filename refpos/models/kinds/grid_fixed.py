r"""The native grid of a position grid's table, and the ways of a table added as it is (never resampled).

:func:`image_grid` reads an image's native patch grid from a config (``image_size // patch_size`` per axis);
:func:`spectrogram_grid` the grid a strided patch convolution cuts from a spectrogram (the Audio Spectrogram
Transformer: ``⌊(F − k)/s_f⌋ + 1`` frequency rows by ``⌊(T − k)/s_t⌋ + 1`` time columns,
:func:`refpos.encodings.grid_fixed.strided_grid`).

A table added as it is has one of the ways of :data:`FIXED_WAYS`, each a reading of
:func:`refpos.encodings.grid_fixed.fixed_position_rows`: ``"fixed"`` (the tokens gain the table row for row: SAM's
image encoder, EoMT, AIMv2, AST) or ``"fixed_first_row"`` (no class token; each patch gains its grid row plus the
table's first row, ViTPose's backbone):

.. math:: P'_q = P_{1+q} + P_0, \qquad q = 0 \ldots N - 1
"""

from __future__ import annotations

from typing import Any

from refpos.backend import Array
from refpos.encodings.grid import patch_grid
from refpos.encodings.grid_fixed import fixed_position_rows, strided_grid
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


def fixed_rows(layer: Any, table: Array, grid: tuple[int, int]) -> Array:
    """The rows a fixed table of ``layer`` (a :class:`~refpos.models.kinds.grid.GridLayer` of a way of
    :data:`FIXED_WAYS`) gives an input of patch grid ``grid``: its way's reading (module docstring)."""
    if tuple(grid) != layer.grid:
        raise ValueError(f"grid: the {layer.stack} table is not resampled, its input must have the native grid "
                         f"{layer.grid}, got {tuple(grid)}")
    return fixed_position_rows(table, grid, source_grid=layer.grid, prefix_tokens=layer.prefix,
                               suffix_tokens=layer.suffix, read=FIXED_WAYS.get(layer.way, "as_is"))


__all__ = ["FIXED", "FIXED_FIRST_ROW", "FIXED_WAYS", "config_pair", "fixed_rows", "image_grid", "spectrogram_grid"]
