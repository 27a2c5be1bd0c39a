"""``refpos check sincos2d``: a fixed 2-D sin–cos embedding from a call of ``sincos_2d_grid`` (a patch grid),
``sine_position_map`` (a pixel mask, DETR's form) or ``sine_coordinates`` (given points), against
:mod:`refpos.encodings.sincos2d` within the bound of a float32 port per token, pixel or point
(:meth:`refpos.encodings.sincos2d_mistakes.Sincos2dInputs.bound`), the mistake named by
:func:`~refpos.encodings.sincos2d_mistakes.identify_sincos2d` (docs/sincos2d.md#mistakes).

A call is a variant of its own: a :class:`~refpos.encodings.sincos2d_variants.SineVariant` that fixes no keyword,
every keyword the call's (its defaults those of the contract function).
"""

from __future__ import annotations

import math
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.sincos2d_mistakes import SINCOS2D_MISTAKES, Sincos2dInputs, identify_sincos2d
from refpos.encodings.sincos2d_variants import SineVariant


def _call(builder: str, **keywords: Any) -> Sincos2dInputs:
    """The inputs of a call of ``builder`` with every keyword given (no keyword fixed by a variant)."""
    variant = SineVariant(f"a call of {builder}", builder, MappingProxyType({}), "the call's arguments", (),
                          "refpos check", "the call's own keywords")
    return Sincos2dInputs(variant, keywords)


def sincos_2d_grid(height: int, width: int, dim: int, temperature: float = 10000.0, axes: str = "yx",
                   flatten: str = "row_major", cls_rows: int = 0) -> Sincos2dInputs:
    """The inputs of a ``sincos_2d_grid`` call."""
    return _call("grid", height=height, width=width, dim=dim, temperature=float(temperature), axes=axes,
                 flatten=flatten, cls_rows=cls_rows)


def sine_position_map(mask: Any, num_features: int, temperature: float | list[float] = 10000.0,
                      normalize: bool = True, scale: float | None = None, offset: float = 0.0,
                      eps: float = 1e-6) -> Sincos2dInputs:
    """The inputs of a ``sine_position_map`` call (``temperature`` a number or ``[T_y, T_x]``)."""
    temperature = tuple(temperature) if isinstance(temperature, list | tuple) else temperature
    return _call("mask", mask=np.asarray(mask, dtype=bool), num_features=num_features, temperature=temperature,
                 normalize=normalize, scale=scale, offset=offset, eps=eps)


def sine_coordinates(coords: Any, num_features: int, temperature: float = 10000.0, scale: float = 2 * math.pi,
                     swap_xy: bool = True, layout: str = "interleaved", rule: str = "paired") -> Sincos2dInputs:
    """The inputs of a ``sine_coordinates`` call."""
    return _call("coordinates", coords=np.asarray(coords, dtype=np.float64), num_features=num_features,
                 temperature=temperature, scale=scale, swap_xy=swap_xy, layout=layout, rule=rule)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Non-square grids (MAE's CLS row and column-first axes; OmDet-Turbo's column-major tokens at temperature 20),
    a padded batch of masks (Deformable DETR's offset; DAB-DETR's two temperatures), boxes and SAM 2's pointers."""
    mask = np.ones((2, 6, 9), dtype=bool)
    mask[0, 4:, :] = False
    mask[1, :, 5:] = False
    rng = np.random.default_rng(0)
    return [("sincos_2d_grid", {"height": 3, "width": 5, "dim": 16, "axes": "xy", "cls_rows": 1}),
            ("sincos_2d_grid", {"height": 3, "width": 5, "dim": 16, "temperature": 20.0, "axes": "xy",
                                "flatten": "column_major"}),
            ("sine_position_map", {"mask": mask, "num_features": 8, "offset": -0.5}),
            ("sine_position_map", {"mask": mask, "num_features": 8, "temperature": [20.0, 30.0]}),
            ("sine_coordinates", {"coords": rng.random((3, 4)), "num_features": 8}),
            ("sine_coordinates", {"coords": rng.random((3, 1)), "num_features": 8, "scale": 1.0, "swap_xy": False,
                                  "layout": "concat", "rule": "doubled"})]


SINCOS2D_CHECK = KindCheck(
    kind="sincos2d", calls=(sincos_2d_grid, sine_position_map, sine_coordinates),
    reference=Sincos2dInputs.reference, identify=identify_sincos2d,
    mistakes={m.name: m.description for m in SINCOS2D_MISTAKES},
    wrong=partial(mistake_output, SINCOS2D_MISTAKES), examples=_examples)

__all__ = ["SINCOS2D_CHECK", "sincos_2d_grid", "sine_coordinates", "sine_position_map"]
