"""``refpos check grid``: a learned position table resampled to a patch grid, from a call of
``resample_position_table``, against :mod:`refpos.encodings.grid` within the bound of a float32 port
(:func:`refpos.encodings.grid_mistakes.grid_tolerance`), the mistake named by
:func:`~refpos.encodings.grid_mistakes.identify_grid` (docs/grid.md#mistakes).

The call's ``way`` is a :class:`~refpos.encodings.grid_variants.GridVariant` of its own: the mistakes change one of
its choices (bilinear for bicubic, ``align_corners``, antialias, the size form, the axes, the extra rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck
from refpos.encodings.grid_mistakes import GRID_MISTAKES, UNRECOGNISED, GridInputs, grid_tolerance, identify_grid
from refpos.encodings.grid_variants import WAY_FIELDS, GridVariant


def resample_position_table(table: Any, grid: list[int], way: dict, prefix_tokens: int = 0,
                            suffix_tokens: int = 0) -> GridInputs:
    """The inputs of a ``resample_position_table`` call: ``way`` holds the keys of
    :data:`~refpos.encodings.grid_variants.WAY_FIELDS` (``mode`` required)."""
    if not isinstance(way, dict) or set(way) - set(WAY_FIELDS) or way.get("mode") is None:
        raise ValueError(f"way takes the keys {tuple(WAY_FIELDS)} ('mode' required), got {way!r}")
    options = {**WAY_FIELDS, **way}
    variant = GridVariant("the call's way", options["mode"], options["align_corners"], options["antialias"],
                          options["scale_factor_offset"], options["keep_extra"], "table", (), "the call",
                          padding=options["padding"], axes=options["axes"], read=options["read"])
    return GridInputs(np.asarray(table, dtype=np.float64), tuple(grid), variant, prefix_tokens=prefix_tokens,
                      suffix_tokens=suffix_tokens)


def _identify(candidate: np.ndarray, inputs: GridInputs) -> str | None:
    name = identify_grid(candidate, inputs)
    return None if name == UNRECOGNISED else name


def _wrong(inputs: GridInputs, name: str) -> np.ndarray | None:
    mistake = GRID_MISTAKES[name]
    return mistake.compute(inputs) if mistake.applies(inputs) else None


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """An 8 × 8 table with a CLS row resampled to 5 × 11 (one axis shrinks, one grows, not square) six ways:
    ViT's bicubic, SigLIP2's bilinear with antialias, DINOv2's scale factor (g + 0.1)/M, NaViT's buckets, RADIO's
    square crop and SAM 3's tiling (the last three leave the CLS row out)."""
    table = np.random.default_rng(37).standard_normal((1 + 64, 4))
    ways = [{"mode": "bicubic"}, {"mode": "bilinear", "antialias": True},
            {"mode": "bicubic", "scale_factor_offset": 0.1},
            {"mode": "nearest", "read": "buckets", "keep_extra": False},
            {"mode": "bilinear", "read": "square_crop", "keep_extra": False},
            {"mode": "nearest", "read": "tile", "keep_extra": False}]
    return [("resample_position_table", {"table": table, "grid": [5, 11], "way": way, "prefix_tokens": 1})
            for way in ways]


GRID_CHECK = KindCheck(
    kind="grid", calls=(resample_position_table,),
    reference=lambda inputs: (inputs.resample(), grid_tolerance(inputs)),
    identify=_identify, mistakes={name: m.description for name, m in GRID_MISTAKES.items()}, wrong=_wrong,
    examples=_examples)

__all__ = ["GRID_CHECK", "resample_position_table"]
