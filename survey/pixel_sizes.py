"""Image sizes a model's forward needs that the plain sizes of :mod:`survey.pixel_inputs` (64 and 96 pixels for a
model that states no image size) do not meet, each read from what its config states the forward computes with.

* a two-stage detector that keeps its ``num_queries`` best anchors of the feature maps at ``feat_strides`` (RT-DETR
  and the detectors built on its decoder: ``torch.topk`` over the anchors refuses more queries than anchors): the
  smallest square side ``n``, a multiple of the coarsest stride, whose maps hold at least ``num_queries`` anchors,

  .. math:: \\sum_l \\lceil n / s_l \\rceil^2 \\ge Q,

  the extra levels past the strides each halving the last map (:func:`anchor_count`); the resampling size keeps the
  height and grows the width by two of the coarsest cells, ``(n, n + 2 s_{max})`` (more anchors still, a grid
  that is not square); a detector on a backbone cut into windows (LW-DETR's and RF-DETR's ViTs) has its anchors
  one per patch of each projector level, and its side holds whole windows of patches (:func:`_strides`).

:func:`stated_sizes` returns ``{"native": (H, W), "resampled": (H, W)}`` or None where no rule applies; the
module's rules read the config only, and apply only where it states every field they read.
"""

from __future__ import annotations

import math
from typing import Any

#: the largest side an anchor rule may choose (a config asking for more queries than this holds is left alone)
MAX_SIDE = 1024


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and v > 0 for v in value):
        return [int(v) for v in value]
    return None


def anchor_count(height: int, width: int, strides: list[float], levels: int) -> int:
    """The anchors of a two-stage detector's ``levels`` feature maps over an image of ``height × width``: one per
    cell of the map at each stride, ``⌈H/s⌉ · ⌈W/s⌉``, and past the strides (``levels > len(strides)``) maps of
    twice the last stride each (a stride-2 convolution of the last map)."""
    if height <= 0 or width <= 0 or not strides:
        raise ValueError(f"height, width, strides: positive sizes and at least one stride, not {height}, {width}, "
                         f"{strides}")
    all_strides = list(strides) + [strides[-1] * 2 ** (i + 1) for i in range(max(0, levels - len(strides)))]
    return sum(math.ceil(height / s) * math.ceil(width / s) for s in all_strides)


def _strides(config: Any) -> tuple[list[float], int, int] | None:
    """``(strides, levels, step)`` of a detector's anchor maps: its ``feat_strides`` (the extra levels past them
    counted by ``num_feature_levels``), else, on a backbone cut into windows (``num_windows_side`` or
    ``num_windows`` a side), the backbone's ``patch_size`` scaled by each of ``projector_scale_factors`` (``p / s``;
    one level of the patches where it states none); ``step`` the side an image is a multiple of (the coarsest
    stride, with whole windows of patches on a windowed backbone)."""
    strides = _ints(getattr(config, "feat_strides", None))
    if strides is not None:
        levels = getattr(config, "num_feature_levels", None)
        return strides, levels if isinstance(levels, int) and levels > 0 else len(strides), max(strides)
    backbone = getattr(config, "backbone_config", None)
    patch = getattr(backbone, "patch_size", None)
    windows = getattr(backbone, "num_windows_side", None) or getattr(backbone, "num_windows", None)
    if not (isinstance(patch, int) and patch > 0 and isinstance(windows, int) and windows > 0):
        return None
    scales = [s for s in getattr(config, "projector_scale_factors", None) or [1.0] if isinstance(s, (int, float))]
    scaled = [patch / s for s in scales if s > 0] or [float(patch)]
    return scaled, len(scaled), math.lcm(patch * windows, math.ceil(max(scaled)))


def query_sizes(config: Any) -> dict[str, tuple[int, int]] | None:
    """The native and resampling ``(H, W)`` of a detector selecting ``num_queries`` of the anchors of its feature
    maps (module docstring, :func:`_strides`), None where the config states no such pair."""
    queries, found = getattr(config, "num_queries", None), _strides(config)
    if not isinstance(queries, int) or queries <= 0 or found is None:
        return None
    strides, levels, step = found
    side = step
    while anchor_count(side, side, strides, levels) < queries:
        side += step
        if side > MAX_SIDE:
            return None
    return {"native": (side, side), "resampled": (side, side + 2 * step)}


def stated_sizes(config: Any) -> dict[str, tuple[int, int]] | None:
    """The sizes a rule of this module gives ``config`` (module docstring), None where none applies."""
    return query_sizes(config)
