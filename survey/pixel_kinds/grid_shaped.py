"""The ``grid`` comparison of a tower fed patches with its image's ``(h, w)`` (:mod:`survey.pixel_shapes`: SigLIP 2's
NaFlex tower): the run's rows are its ``N`` patches, the first ``h·w`` the image in raster order and the rest padding
its mask leaves out of attention. The image's rows are compared with refpos's table resampled to ``(h, w)``; the
padding rows are not (what the tower adds there is masked and no position of the image).

Besides the grid's catalogued mistakes (:func:`survey.pixel_kinds.base.mistakes_of`: bilinear without antialias,
bicubic, the axes swapped, …), two wrong readings of the fed grid are tried: the padding rows counted as rows of the
image (the table resampled to ``(N / w, w)``, its first ``h·w`` rows read) and the image's patches read column by
column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import mistakes_of


def shaped_case(record: Any, table: np.ndarray, observed: np.ndarray, grid: tuple[int, int], dtype: str,
                noise: float) -> tuple[np.ndarray, np.ndarray, float, dict[str, np.ndarray | None]]:
    """The case of one run: ``observed`` the ``N`` rows the table added, ``grid`` the ``(h, w)`` fed; its bound is
    the way's in the run's ``dtype`` plus ``noise``, the run's own rounding (module docstring)."""
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance

    h, w = grid
    n = h * w
    if observed.shape[0] < n:
        raise ValueError(f"observed: {observed.shape[0]} rows, fewer than the {h}×{w} grid fed")
    image = observed[:n]
    inputs = GridInputs(table, (h, w), record.variant, prefix_tokens=record.prefix, suffix_tokens=record.suffix,
                        source_grid=record.grid)
    reference = np.asarray(record.reference(table, (h, w)), dtype=np.float64)
    wrong = mistakes_of("grid", inputs)
    rows = observed.shape[0] // w
    if rows > h:  # the padding rows counted as rows of the image
        wrong["grid_padding_counted"] = np.asarray(record.reference(table, (rows, w)), dtype=np.float64)[:n]
    if h != w or h > 1:  # the image's patches read column by column
        wrong["grid_read_by_columns"] = reference.reshape(h, w, -1).transpose(1, 0, 2).reshape(n, -1)
    return image, reference, grid_tolerance(inputs, dtype) + noise, wrong
