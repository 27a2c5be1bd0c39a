"""Public hypothesis strategies for vision position grids: resampling calls and position tables with the way a
family resamples them (the contract of ``spec_tests/README.md``).

>>> from hypothesis import given
>>> from refpos.testing import strategies_grid as gst
>>> @given(gst.position_tables())
... def test_my_resampler(case):
...     assert case["table"].shape[0] == case["prefix_tokens"] + case["side"] ** 2 + case["suffix_tokens"]
>>> test_my_resampler()

Arrays are drawn as a seed (:func:`refpos.testing.strategies.seeded_normal`).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from refpos.encodings.resample import ANTIALIAS_MODES, MODE_AXES, MODES
from refpos.testing.strategies import seeded_normal

#: the modes a position grid is resampled in
GRID_MODES = ("nearest", "bilinear", "bicubic")


@st.composite
def resample_calls(draw: st.DrawFn, modes: tuple[str, ...] = MODES, max_size: int = 24) -> dict[str, Any]:
    """Keyword arguments of the contract's ``interpolate``: ``x`` ``(C, n[, m])`` and the size or scale-factor form."""
    mode = draw(st.sampled_from(modes))
    n_axes = MODE_AXES[mode] or 2  # nearest: a 2-D grid
    in_sizes = tuple(draw(st.integers(1, max_size)) for _ in range(n_axes))
    call: dict[str, Any] = {"x": draw(seeded_normal((2, *in_sizes))), "mode": mode}
    if mode != "nearest":
        call["align_corners"] = draw(st.booleans())
        call["antialias"] = mode in ANTIALIAS_MODES and not call["align_corners"] and draw(st.booleans())
    if draw(st.booleans()) or call.get("align_corners"):
        call["size"] = [draw(st.integers(2 if n_axes == 2 else 1, max_size)) for _ in in_sizes]
    else:
        factors = [draw(st.sampled_from([0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0])) for _ in in_sizes]
        call["scale_factor"] = [max(s, 2.0 / n) for s, n in zip(factors, in_sizes, strict=True)]  # ≥ 2 rows out
        call["recompute_scale_factor"] = draw(st.booleans())
    return call


@st.composite
def grid_ways(draw: st.DrawFn, modes: tuple[str, ...] = GRID_MODES) -> dict[str, Any]:
    """A contract way dict: mode, align_corners, antialias, scale_factor_offset, padding, keep_extra, axes."""
    mode = draw(st.sampled_from(modes))
    way: dict[str, Any] = {"mode": mode, "keep_extra": draw(st.booleans()), "axes": draw(st.sampled_from(["hw", "wh"]))}
    if mode == "nearest":
        return way
    way["antialias"] = draw(st.booleans())
    way["align_corners"] = not way["antialias"] and draw(st.booleans())
    way["scale_factor_offset"] = None if way["align_corners"] else draw(st.sampled_from([None, None, 0.1]))
    way["padding"] = "zeros" if not way["antialias"] and draw(st.integers(0, 3)) == 0 else "border"
    return way


@st.composite
def position_tables(draw: st.DrawFn, max_side: int = 8, max_grid: int = 12, dim: int = 3) -> dict[str, Any]:
    """``table`` ``(prefix + side² + suffix, dim)``, a target ``grid`` ``(h, w)`` and the extra-row counts."""
    side = draw(st.integers(1, max_side))
    prefix, suffix = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    return {"table": draw(seeded_normal((prefix + side * side + suffix, dim))), "side": side,
            "grid": [draw(st.integers(1, max_grid)), draw(st.integers(1, max_grid))],
            "prefix_tokens": prefix, "suffix_tokens": suffix}
