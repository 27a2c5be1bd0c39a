r"""The catalogued mistakes of a windowed grid (SAM 2's Hiera: :mod:`refpos.encodings.grid_windowed`), one
:class:`~refpos.encodings.grid_mistakes.GridMistake` each, and :func:`identify_windowed`.

:class:`WindowedInputs` holds one call: the background ``B`` of ``M_h × M_w`` cells, the window table ``W`` of
``m × m`` cells, the patch map ``(h, w)``. Its reference is

.. math:: P_{i,j} = \mathcal{R}_{h,w}(B)_{i,j} + W_{i \bmod m,\ j \bmod m}

(:func:`~refpos.encodings.grid_windowed.windowed_position_grid`). Each mistake here computes one of the wrong ways
of :data:`~refpos.encodings.grid_windowed.WINDOW_MISTAKES`.

**Bound.** The bicubic resampling's bound of a float32 port (:func:`~refpos.encodings.grid_mistakes.grid_tolerance`)
plus the sum's rounding ``u·(max|R(B)| + max|W|)``; the tiled rows are gathered exactly.

Besides this module's mistakes, every grid mistake of :data:`~refpos.encodings.grid_mistakes.GRID_MISTAKES` made on
the background, the window tiled over it, is named by its own name (:func:`windowed_mistakes`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from refpos.backend import to_numpy
from refpos.encodings.grid_mistakes import (
    GRID_MISTAKES,
    UNIT_ROUNDOFF,
    GridInputs,
    GridMistake,
    grid_tolerance,
    identify_among,
)
from refpos.encodings.grid_variants import GRID_VARIANTS
from refpos.encodings.grid_windowed import WINDOW_MISTAKES, windowed_position_grid
from refpos.validation import check_choice


@dataclasses.dataclass(frozen=True)
class WindowedInputs:
    """A windowed grid (module docstring): ``background`` ``(M_h·M_w, d)``, ``window`` ``(m·m, d)``, both in raster
    order."""

    background: np.ndarray
    window: np.ndarray
    grid: tuple[int, int]
    source_grid: tuple[int, int]
    window_side: int

    def reference(self) -> np.ndarray:
        r""":math:`P_{i,j} = \mathcal{R}_{h,w}(B)_{i,j} + W_{i \bmod m,\ j \bmod m}` (module docstring)."""
        return to_numpy(windowed_position_grid(self.background, self.window, tuple(self.grid),
                                               source_grid=tuple(self.source_grid), window_side=self.window_side))

    def background_inputs(self) -> GridInputs:
        """The background's resampling (the ``bicubic`` way, no extra rows)."""
        return GridInputs(self.background, tuple(self.grid), GRID_VARIANTS["bicubic"],
                          source_grid=tuple(self.source_grid))

    def tiled(self) -> np.ndarray:
        """``W_{i mod m, j mod m}`` over the map."""
        return self.reference() - self.background_inputs().resample()

    def tolerance(self, dtype: str = "float32") -> float:
        """A correct port's bound (module docstring)."""
        u = UNIT_ROUNDOFF[check_choice("dtype", dtype, tuple(UNIT_ROUNDOFF))]
        resampled = float(np.abs(self.background_inputs().resample()).max())
        return grid_tolerance(self.background_inputs(), dtype) + u * (resampled + float(np.abs(self.window).max()))

    def wrong(self, name: str) -> np.ndarray:
        """The rows of the wrong way ``name`` of :data:`~refpos.encodings.grid_windowed.WINDOW_MISTAKES`."""
        return to_numpy(WINDOW_MISTAKES[name](self.background, self.window, tuple(self.grid),
                                              tuple(self.source_grid), self.window_side))


def _way(name: str, description: str, applies=lambda i: True) -> GridMistake:
    return GridMistake(f"grid_{name}", description, lambda i: i.wrong(name), applies)


def _not_native(inputs: WindowedInputs) -> bool:
    return tuple(inputs.grid) != tuple(inputs.source_grid)


#: every mistake of a windowed grid, by name (the grid's own on the background: :func:`windowed_mistakes`)
WINDOWED_MISTAKES: dict[str, GridMistake] = {m.name: m for m in (
    _way("window_table_missing", "the window table left out: the background resampled alone"),
    _way("background_missing", "the background left out: the window table tiled alone"),
    _way("window_resampled_not_tiled", "the window table resampled bicubic to the patch map where the model "
         "repeats it over the map, W[i mod m, j mod m]",
         lambda i: tuple(i.grid) != (i.window_side, i.window_side)),
    _way("window_transposed", "the window table tiled with its axes swapped, W[j mod m, i mod m]"),
    _way("background_tiled_not_resampled", "the background repeated over the patch map like the window table where "
         "the model resamples it bicubic", _not_native),
)}


def _on_background(mistake: GridMistake) -> GridMistake:
    """``mistake`` made on the background, the window table tiled over it."""
    def compute(inputs: WindowedInputs) -> np.ndarray | None:
        wrong, tiled = np.asarray(mistake.compute(inputs.background_inputs())), inputs.tiled()
        return wrong + tiled if wrong.shape == tiled.shape else None

    return GridMistake(mistake.name, mistake.description, compute, lambda i: mistake.applies(i.background_inputs()))


#: the grid's mistakes, each made on the background
LIFTED_MISTAKES: dict[str, GridMistake] = {name: _on_background(m) for name, m in GRID_MISTAKES.items()}


def windowed_mistakes() -> dict[str, GridMistake]:
    """Every mistake :func:`identify_windowed` may name: this module's, then the grid's made on the background.

    See Also
    --------
    identify_windowed : the search over them.
    """
    return {**WINDOWED_MISTAKES, **LIFTED_MISTAKES}


def identify_windowed(candidate: np.ndarray, inputs: WindowedInputs, *, dtype: str = "float32") -> str | None:
    """The name of the catalogued mistake ``candidate`` made, ``None`` when it is within a correct ``dtype`` port's
    bound, :data:`~refpos.encodings.grid_mistakes.UNRECOGNISED` when no mistake explains it.

    See Also
    --------
    refpos.encodings.grid_mistakes.identify_among : the search.
    """
    return identify_among(candidate, inputs.reference(), inputs.tolerance(dtype), inputs,
                          windowed_mistakes().values())


__all__ = ["LIFTED_MISTAKES", "WINDOWED_MISTAKES", "WindowedInputs", "identify_windowed", "windowed_mistakes"]
