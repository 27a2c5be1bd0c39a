"""Golden cases of resampling and of learned position grids (docs/grid.md).

* ``resample/<mode>-…``: :func:`refpos.encodings.resample.interpolate` of a seeded ``(2, 7, 9)`` array (a
  ``(2, 11)`` one for ``linear``) in every mode, ``align_corners`` both ways, antialias shrinking and growing, the
  size form and the scale-factor form with and without ``recompute_scale_factor``;
* ``grid/<way>``: :func:`refpos.encodings.grid.resample_position_table` of a seeded table (a CLS row, a 6 × 6
  grid, 4 channels) to the patch grid 4 × 9 (one axis shrinks, one grows), the way of each record of
  :data:`refpos.encodings.grid_variants.GRID_VARIANTS`.

Exact values: torch's rules evaluated tap by tap in rationals from the float64 inputs
(:mod:`refpos.golden.cases.grid_exact` with ``Fraction``), shown at :data:`refpos.golden.exact.certify.DIGITS` digits.
Tolerance: the value rule at the input's largest magnitude, raised where a correct port may differ more
(:func:`refpos.encodings.resample_bounds.resample_error_bound` at each dtype's unit roundoff).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from refpos.encodings.grid_variants import GRID_VARIANTS, WAY_FIELDS
from refpos.encodings.resample_bounds import resample_error_bound
from refpos.golden.cases import grid_exact
from refpos.golden.cases.common import In, as_xp, call, rng_for, to_np
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import round_up, tolerance_value
from refpos.golden.exact.ulp import MANTISSA
from refpos.golden.files.manifest import Case, Output

#: (name, keyword arguments of interpolate): every mode and option, shrinking and growing
RESAMPLE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("bicubic-size", {"size": [4, 13], "mode": "bicubic"}),
    ("bicubic-align-corners", {"size": [4, 13], "mode": "bicubic", "align_corners": True}),
    ("bicubic-antialias", {"size": [3, 4], "mode": "bicubic", "antialias": True}),
    ("bicubic-antialias-growing", {"size": [12, 17], "mode": "bicubic", "antialias": True}),
    ("bilinear-size", {"size": [5, 12], "mode": "bilinear"}),
    ("bilinear-align-corners", {"size": [5, 12], "mode": "bilinear", "align_corners": True}),
    ("bilinear-antialias", {"size": [3, 5], "mode": "bilinear", "antialias": True}),
    ("bicubic-scale-factor", {"scale_factor": [1.5, 0.75], "mode": "bicubic"}),
    ("bicubic-scale-factor-recomputed", {"scale_factor": [1.5, 0.75], "mode": "bicubic",
                                         "recompute_scale_factor": True}),
    ("bicubic-offset-scale-factor", {"scale_factor": [(10 + 0.1) / 7, (5 + 0.1) / 9], "mode": "bicubic"}),
    ("bilinear-antialias-scale-factor", {"scale_factor": [0.5, 0.4], "mode": "bilinear", "antialias": True}),
    ("nearest-size", {"size": [5, 13], "mode": "nearest"}),
    ("linear-1d", {"size": [6], "mode": "linear"}),
    ("linear-1d-growing", {"size": [25], "mode": "linear"}),
]


def _mp(values: np.ndarray) -> np.ndarray:
    """Exact rationals as mpmath numbers at the certificate's precision."""
    return np.vectorize(lambda v: cert.mp.mpf(v.numerator) / v.denominator, otypes=[object])(values)


def _tolerance(reference: np.ndarray, magnitude: float, bound: Any) -> dict[str, Any]:
    """The value rule at ``magnitude``, each dtype's atol raised to ``bound(u)`` where that is larger."""
    entry = tolerance_value(reference, scale=magnitude)
    for dtype, spec in entry.items():
        if isinstance(spec, dict):
            spec["atol"] = round_up(max(spec["atol"], bound(2.0 ** -(MANTISSA[dtype] + 1))))
    return entry


def _n_axes(options: dict[str, Any]) -> int:
    """How many trailing axes a call resamples: as many as its size or scale factor names."""
    return len(options["size"] if "size" in options else options["scale_factor"])


def _exact_resample(x: np.ndarray, options: dict[str, Any]) -> np.ndarray:
    axes = list(range(x.ndim - _n_axes(options), x.ndim))
    sizes, factors = _sizes(x, options)
    kw = {k: options.get(k, False) for k in ("align_corners", "antialias")}
    out = x
    for axis, size, factor in zip(axes, sizes, factors, strict=True):
        taps = grid_exact.axis_taps(out.shape[axis], size, mode=options["mode"], scale_factor=factor, f=Fraction, **kw)
        out = grid_exact.apply_taps(out, taps, axis, Fraction)
    return out


def _sizes(x: np.ndarray, options: dict[str, Any]) -> tuple[list[int], list[float | None]]:
    n_in = list(x.shape[x.ndim - _n_axes(options):])
    if "size" in options:
        return list(options["size"]), [None] * len(n_in)
    sizes = [math.floor(n * s) for n, s in zip(n_in, options["scale_factor"], strict=True)]
    return sizes, [None] * len(n_in) if options.get("recompute_scale_factor") else list(options["scale_factor"])


#: the contract's interpolate arguments after x, in order, with their values when a call leaves them out
INTERPOLATE_ARGS = {"size": None, "mode": None, "align_corners": False, "antialias": False, "scale_factor": None,
                    "recompute_scale_factor": False}


def resample_cases() -> list[Case]:
    from refpos.encodings.resample import interpolate

    cases = []
    for name, options in RESAMPLE_CALLS:
        cid = f"resample/{name}"
        x = rng_for(cid).standard_normal((2, 11) if _n_axes(options) == 1 else (2, 7, 9))
        arguments = {**INTERPOLATE_ARGS, **options}
        size = arguments.pop("size")
        y = to_np(interpolate(as_xp(x), size, **arguments))
        sizes, factors = _sizes(x, options)
        magnitude = float(np.abs(x).max())

        def bound(u: float, x=x, sizes=sizes, factors=factors, a=arguments, magnitude=magnitude):
            return resample_error_bound(list(x.shape[1:]), sizes, mode=a["mode"], unit_roundoff=u, magnitude=magnitude,
                                        align_corners=a["align_corners"], antialias=a["antialias"],
                                        scale_factors=factors)

        cases.append(Case(
            cid, "resample", "interpolate",
            f"torch's interpolate, {name.replace('-', ' ')}: {tuple(x.shape)} → {tuple(y.shape)} "
            "(docs/grid.md#resampling)",
            {"call": call("interpolate", ["y"], In("x"), size, *arguments.values()), "options": options}, {"x": x},
            {"y": Output(y, _tolerance(y, magnitude, bound),
                         lambda x=x, o=options: (_mp(_exact_resample(x, o)), float(np.abs(x).max())))}))
    return cases


def _way(name: str) -> dict[str, Any]:
    variant = GRID_VARIANTS[name]  # "read" named only where it is not the default (the committed cases' calls)
    return {key: getattr(variant, key) for key in WAY_FIELDS if key != "read" or variant.read != WAY_FIELDS["read"]}


def grid_variant_cases() -> list[Case]:
    cases = []
    for name, variant in GRID_VARIANTS.items():
        cid = f"grid/{name.replace('_', '-')}"
        table = rng_for(cid).standard_normal((1 + 36, 4))
        grid = [4, 9]
        out = to_np(variant.resample(as_xp(table), tuple(grid), prefix_tokens=1))
        way = _way(name)
        target = grid[::-1] if variant.axes == "wh" else grid
        target = [max(target)] * 2 if variant.read == "square_crop" else target  # resampled to the square, cropped
        factors = None if variant.scale_factor_offset is None else [(g + variant.scale_factor_offset) / 6
                                                                     for g in target]
        magnitude = float(np.abs(table).max())

        def bound(u: float, target=target, variant=variant, factors=factors, magnitude=magnitude):
            return resample_error_bound([6, 6], list(target), mode=variant.mode, unit_roundoff=u, magnitude=magnitude,
                                        align_corners=variant.align_corners, antialias=variant.antialias,
                                        scale_factors=factors, padding=variant.padding)

        cases.append(Case(
            cid, "grid", "resample_position_table",
            f"a CLS row and a 6 × 6 position grid resampled to 4 × 9 the {name} way ({variant.source}; "
            f"docs/grid.md#the-ways)",
            {"call": call("resample_position_table", ["resampled"], In("table"), grid, way, 1, 0), "way": way},
            {"table": table},
            {"resampled": Output(out, _tolerance(out, magnitude, bound), lambda t=table, w=way: (
                _mp(grid_exact.resample_table(t, (4, 9), w, 1, 0, f=Fraction)), float(np.abs(t).max())))}))
    return cases


def grid_cases() -> list[Case]:
    """Every resampling and position-grid case."""
    return resample_cases() + grid_variant_cases()
