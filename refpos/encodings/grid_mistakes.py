"""The catalogued mistakes of resampled position grids, one :class:`GridMistake` each, and :func:`identify_grid`.

A mistake is a wrong way to resample the same inputs (:class:`GridInputs`: a table, the target grid, the way
of a :class:`~refpos.encodings.grid_variants.GridVariant`, the extra rows): its ``compute`` gives the wrong
output, its ``applies`` says for which ways it is a mistake at all (antialias cannot be "missing" from a way
that has none). :func:`identify_grid` names the mistake a candidate output made, or nothing when the
candidate is within what a correct float32 port may differ by
(:func:`refpos.encodings.resample_bounds.resample_error_bound`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.encodings.grid_buckets import position_id_choices
from refpos.encodings.grid_variants import GridVariant
from refpos.encodings.resample_bounds import resample_error_bound
from refpos.validation import check_choice

#: what :func:`identify_grid` answers for a wrong output no catalogued mistake explains
UNRECOGNISED = "grid_unrecognised"
#: unit roundoff of the dtypes a candidate may declare
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24}


@dataclasses.dataclass(frozen=True)
class GridInputs:
    """One resampling: ``table`` ``(prefix + M_h·M_w + suffix, d)`` to ``grid`` ``(h, w)`` the ``variant``'s way."""

    table: np.ndarray
    grid: tuple[int, int]
    variant: GridVariant
    prefix_tokens: int = 0
    suffix_tokens: int = 0
    source_grid: tuple[int, int] | None = None

    def source(self) -> tuple[int, int]:
        n = self.table.shape[0] - self.prefix_tokens - self.suffix_tokens
        side = math.isqrt(n)
        return self.source_grid if self.source_grid is not None else (side, side)

    def resample(self, variant: GridVariant | None = None, **changes: object) -> np.ndarray:
        """The output of ``variant`` (default this one's) with ``changes`` to its fields."""
        way = dataclasses.replace(variant or self.variant, **changes)
        return to_numpy(way.resample(self.table, self.grid, prefix_tokens=self.prefix_tokens,
                                     suffix_tokens=self.suffix_tokens, source_grid=self.source_grid))


@dataclasses.dataclass(frozen=True)
class GridMistake:
    """A wrong way to resample a position grid: ``compute`` and ``applies`` take the inputs of the grid's form
    (:class:`GridInputs` here; a video clip's, the tables between the layers' and a windowed grid's in
    :mod:`refpos.encodings.grid_clips_mistakes`, :mod:`~refpos.encodings.grid_mid_mistakes` and
    :mod:`~refpos.encodings.grid_windowed_mistakes`)."""

    name: str
    description: str
    compute: Callable[[Any], np.ndarray | None]
    applies: Callable[[Any], bool]


def _cls_resampled(inputs: GridInputs) -> np.ndarray:
    """The grid built from rows ``0 … M_h·M_w − 1`` of the table (the CLS row read as patch (0, 0), every patch
    moved by the number of extra rows, the last ones lost), the extra rows kept in front unchanged."""
    rows, cols = inputs.source()
    prefix, n = inputs.prefix_tokens, inputs.table.shape[0]
    table = np.concatenate([inputs.table[:prefix], inputs.table[:rows * cols], inputs.table[n - inputs.suffix_tokens:]])
    return dataclasses.replace(inputs, table=table).resample()


def _square_grows(inputs: GridInputs) -> bool:
    """A square crop whose square is larger than the table along both axes: antialias changes nothing there."""
    return inputs.variant.read == "square_crop" and max(inputs.grid) >= max(inputs.source())


def _buckets(inputs: GridInputs) -> bool:
    return inputs.variant.read == "buckets"


def _grid_rows(inputs: GridInputs) -> np.ndarray:
    """The table's grid rows ``(M_h·M_w, d)``."""
    start = inputs.prefix_tokens
    rows, cols = inputs.source()
    return inputs.table[start:start + rows * cols]


def _with_grid(inputs: GridInputs, flat: np.ndarray) -> np.ndarray:
    """``flat`` (the grid's rows) with the extra rows around it where the way keeps them."""
    if not inputs.variant.keep_extra:
        return flat
    n = inputs.table.shape[0]
    return np.concatenate([inputs.table[:inputs.prefix_tokens], flat, inputs.table[n - inputs.suffix_tokens:]])


def _centred(inputs: GridInputs) -> np.ndarray:
    """Each patch reads the row under its centre, ``⌊(i + ½)·M/n⌋`` (torch's ``nearest-exact``), not ``⌊i·M/n⌋``."""
    (m_h, m_w), (h, w) = inputs.source(), inputs.grid
    rows = [min(m_h - 1, math.floor((i + 0.5) * m_h / h)) for i in range(h)]
    cols = [min(m_w - 1, math.floor((j + 0.5) * m_w / w)) for j in range(w)]
    return _with_grid(inputs, _grid_rows(inputs)[[r * m_w + c for r in rows for c in cols]])


def _tile_grows(inputs: GridInputs) -> bool:
    """A tiled table read past its own side along some axis (where a tile differs from the table itself)."""
    return inputs.variant.read == "tile" and any(g > m for g, m in zip(inputs.grid, inputs.source(), strict=True))


def _clamped(inputs: GridInputs) -> np.ndarray:
    """Each patch past the table's side reads its last row or column, ``G[min(i, M_h − 1), min(j, M_w − 1)]``,
    where the model wraps around, ``G[i mod M_h, j mod M_w]``."""
    (m_h, m_w), (h, w) = inputs.source(), inputs.grid
    rows = [min(i, m_h - 1) for i in range(h)]
    cols = [min(j, m_w - 1) for j in range(w)]
    return _with_grid(inputs, _grid_rows(inputs)[[r * m_w + c for r in rows for c in cols]])


def reference_at_ties(candidate: np.ndarray, inputs: GridInputs) -> np.ndarray:
    """The reference of a way that reads buckets, each patch's row chosen among those a correct port may read
    (:func:`refpos.encodings.grid_buckets.position_id_choices`: the exact row, or at a tie the row below) as the
    one nearest ``candidate``'s; any other way's reference unchanged."""
    reference = inputs.resample()
    if not _buckets(inputs) or candidate.shape != reference.shape or inputs.variant.axes != "hw":
        return reference
    grid, start = _grid_rows(inputs), inputs.prefix_tokens if inputs.variant.keep_extra else 0
    chosen = reference.copy()
    for patch, choices in enumerate(position_id_choices(inputs.grid, inputs.source())):
        observed = candidate[start + patch]
        chosen[start + patch] = min((grid[c] for c in choices), key=lambda row: float(np.max(np.abs(row - observed))))
    return chosen


def _shape(inputs: GridInputs) -> bool:
    return inputs.grid[0] != inputs.grid[1]


#: every catalogued mistake, by name
GRID_MISTAKES: dict[str, GridMistake] = {m.name: m for m in (
    GridMistake("grid_bilinear_for_bicubic", "bilinear where the model resamples bicubic",
                lambda i: i.resample(mode="bilinear"), lambda i: i.variant.mode == "bicubic"),
    GridMistake("grid_bicubic_for_bilinear", "bicubic where the model resamples bilinear",
                lambda i: i.resample(mode="bicubic"), lambda i: i.variant.mode == "bilinear"),
    GridMistake("grid_align_corners_flipped", "align_corners the other way from the model's",
                lambda i: i.resample(align_corners=not i.variant.align_corners),
                lambda i: i.variant.mode != "nearest"),
    GridMistake("grid_antialias_missing", "no antialias where the model shrinks with antialias=True",
                lambda i: i.resample(antialias=False), lambda i: i.variant.antialias),
    GridMistake("grid_antialias_added", "antialias=True where the model resamples without it",
                lambda i: i.resample(antialias=True, padding="border"),
                lambda i: not i.variant.antialias and i.variant.mode != "nearest" and i.variant.padding == "border"
                and not _square_grows(i)),
    GridMistake("grid_cls_resampled", "the CLS (and other extra) rows resampled as patches of the grid: the grid "
                "read from the table's first rows", _cls_resampled, lambda i: i.prefix_tokens > 0),
    GridMistake("grid_axes_swapped", "the grid resampled to (w, h) and read in that raster order",
                lambda i: i.resample(axes="wh" if i.variant.axes == "hw" else "hw"), _shape),
    GridMistake("grid_offset_missing", "the size form (or the factor g/M) where the model's scale factor is "
                "(g + 0.1)/M: the step M/g instead of M/(g + 0.1)",
                lambda i: i.resample(scale_factor_offset=None),
                lambda i: bool(i.variant.scale_factor_offset) and i.variant.mode != "nearest"),
    GridMistake("grid_offset_added", "the scale factor (g + 0.1)/M where the model gives the size",
                lambda i: i.resample(scale_factor_offset=0.1),
                lambda i: i.variant.scale_factor_offset is None and i.variant.mode == "bicubic"),
    GridMistake("grid_stretched_for_square_crop", "the table resampled to (h, w) directly where the model resamples "
                "it to the square of the longer side and crops", lambda i: i.resample(read="resample"),
                lambda i: i.variant.read == "square_crop" and i.grid[0] != i.grid[1]),
    GridMistake("grid_resampled_for_buckets", "the table resampled bicubic (ViT's interpolate_pos_encoding) where "
                "the model reads it at bucketed fractional coordinates",
                lambda i: i.resample(read="resample", mode="bicubic"), _buckets),
    GridMistake("grid_buckets_centred", "each patch reads the row under its centre, floor((i + 1/2)·M/n), where "
                "the model reads the bucket of i/n, floor(i·M/n)", _centred, _buckets),
    GridMistake("grid_resampled_for_tile", "the table resampled bicubic (ViT's interpolate_pos_encoding) where the "
                "model tiles it over the image's grid", lambda i: i.resample(read="resample", mode="bicubic"),
                lambda i: i.variant.read == "tile" and tuple(i.grid) != tuple(i.source())),
    GridMistake("grid_tile_clamped", "the patches past the table's side read its last row or column, G[min(i, M - 1)], "
                "where the model wraps around, G[i mod M]", _clamped, _tile_grows),
)}


def grid_tolerance(inputs: GridInputs, dtype: str = "float32") -> float:
    """What a correct port computing in ``dtype`` may differ by (the bound of :mod:`refpos.encodings.resample_bounds`,
    the dtype of the way's own computation when it casts to float32)."""
    u = UNIT_ROUNDOFF[check_choice("dtype", dtype, tuple(UNIT_ROUNDOFF))]
    if inputs.variant.computes_in == "float32":
        u = max(u, UNIT_ROUNDOFF["float32"])
    way = inputs.variant
    target = inputs.grid[::-1] if way.axes == "wh" else inputs.grid
    target = (max(target),) * 2 if way.read == "square_crop" else target
    factors = None if way.scale_factor_offset is None else [(g + way.scale_factor_offset) / m
                                                             for g, m in zip(target, inputs.source(), strict=True)]
    magnitude = float(np.abs(inputs.table).max())
    return resample_error_bound(list(inputs.source()), list(target), mode=way.mode, unit_roundoff=u,
                                magnitude=magnitude, align_corners=way.align_corners, antialias=way.antialias,
                                scale_factors=factors, padding=way.padding) + u * magnitude


def identify_grid(candidate: np.ndarray, inputs: GridInputs, *, dtype: str = "float32") -> str | None:
    """The name of the catalogued mistake ``candidate`` made, ``None`` when it is correct for ``dtype``.

    ``candidate`` is within the reference's tolerance: ``None``; else the first applicable mistake whose
    output it matches within the same tolerance; else :data:`UNRECOGNISED`.
    """
    candidate = np.asarray(candidate, dtype=np.float64)
    return identify_among(candidate, reference_at_ties(candidate, inputs), grid_tolerance(inputs, dtype), inputs,
                          GRID_MISTAKES.values())


def identify_among(candidate: Any, reference: np.ndarray, tolerance: float, inputs: Any,
                   mistakes: Iterable[GridMistake]) -> str | None:
    """``None`` when ``candidate`` is within ``tolerance`` of ``reference``; else the name of the first of
    ``mistakes`` that applies to ``inputs`` and whose output it matches within the same tolerance; else
    :data:`UNRECOGNISED` (the search of :func:`identify_grid` and of the other grid forms' identifiers).

    See Also
    --------
    identify_grid : the search over :data:`GRID_MISTAKES`.
    """
    candidate = np.asarray(candidate, dtype=np.float64)
    if candidate.shape == reference.shape and float(np.max(np.abs(candidate - reference))) <= tolerance:
        return None
    for mistake in mistakes:
        if not mistake.applies(inputs):
            continue
        wrong = mistake.compute(inputs)
        if wrong is not None and wrong.shape == candidate.shape and \
                float(np.max(np.abs(candidate - wrong))) <= tolerance:
            return mistake.name
    return UNRECOGNISED
