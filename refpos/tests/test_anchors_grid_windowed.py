r"""refpos.encodings.grid_windowed against transformers 5.25: SAM 2's Hiera adds to its patch map the background
table resampled bicubic plus the window table tiled (``Sam2HieraDetModel._get_pos_embed``), and the family row's
record (refpos.models.kinds.grid, the ``window`` fact) answers the same.

Tolerance: the bicubic resampling's bound of a float32 port (:func:`refpos.encodings.grid_mistakes.grid_tolerance`,
the derivation of refpos/encodings/resample_bounds.py), plus the sum's rounding ``u·(max|R(B)| + max|W|)``; the tiled
rows are gathered exactly. Run in float64 (the module in ``.double()``), the same derivation at ``u = 2⁻⁵³``. Every
wrong way of :data:`~refpos.encodings.grid_windowed.WINDOW_MISTAKES` and of the bicubic catalogue lies outside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.grid_mistakes import GRID_MISTAKES, GridInputs, grid_tolerance
from refpos.encodings.grid_variants import GRID_VARIANTS
from refpos.encodings.grid_windowed import WINDOW_MISTAKES, windowed_position_grid

torch = pytest.importorskip("torch", reason="grid anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="grid anchors need transformers")

pytestmark = pytest.mark.anchors

U = {"float32": 2.0**-24, "float64": 2.0**-53}
#: (patch map, window side, background cells): the default's 7 × 7 background and 8 × 8 window on a square map, a
#: wide map, and another background
CASES = [((64, 64), 8, (7, 7)), ((32, 48), 8, (7, 7)), ((24, 16), 4, (5, 9))]


def _model(window: int, cells: tuple[int, int], dtype: str) -> tuple[object, np.ndarray, np.ndarray]:
    """Hiera with seeded tables (zeros at initialisation would let any answer pass), and both tables as rows."""
    from transformers.models.sam2.configuration_sam2 import Sam2HieraDetConfig
    from transformers.models.sam2.modeling_sam2 import Sam2HieraDetModel

    config = Sam2HieraDetConfig(hidden_size=16, window_positional_embedding_background_size=list(cells),
                                window_size_per_stage=[window, 4, 4, 4], blocks_per_stage=[1, 1, 1, 1],
                                embed_dim_per_stage=[16, 32, 64, 128], num_attention_heads_per_stage=[1, 1, 1, 1],
                                global_attention_blocks=[2])
    model = Sam2HieraDetModel(config)
    generator = torch.Generator().manual_seed(sum(cells) + window)
    with torch.no_grad():
        model.pos_embed.copy_(torch.randn(model.pos_embed.shape, generator=generator))
        model.pos_embed_window.copy_(torch.randn(model.pos_embed_window.shape, generator=generator))
    if dtype == "float64":
        model = model.double()
    background = model.pos_embed.detach().double().numpy()[0].transpose(1, 2, 0).reshape(-1, 16)
    window_rows = model.pos_embed_window.detach().double().numpy()[0].transpose(1, 2, 0).reshape(-1, 16)
    return model, background, window_rows


def _bound(background: np.ndarray, window: np.ndarray, grid: tuple[int, int], cells: tuple[int, int],
           dtype: str) -> float:
    inputs = GridInputs(background, grid, GRID_VARIANTS["bicubic"], source_grid=cells)
    resampled = np.asarray(GRID_VARIANTS["bicubic"].resample(background, grid, prefix_tokens=0, source_grid=cells))
    return grid_tolerance(inputs, dtype) + U[dtype] * (float(np.abs(resampled).max()) + float(np.abs(window).max()))


def _theirs(model: object, grid: tuple[int, int]) -> np.ndarray:
    with torch.no_grad():
        return model._get_pos_embed(grid)[0].double().numpy().reshape(grid[0] * grid[1], -1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("grid", "window", "cells"), CASES)
def test_hiera_positions_within_the_bound_and_every_wrong_way_outside(grid, window, cells, dtype):
    model, background, window_rows = _model(window, cells, dtype)
    theirs = _theirs(model, grid)
    ours = np.asarray(windowed_position_grid(background, window_rows, grid, source_grid=cells, window_side=window))
    bound = _bound(background, window_rows, grid, cells, dtype)
    assert np.abs(theirs - ours).max() <= bound
    for name, wrong in WINDOW_MISTAKES.items():
        rows = np.asarray(wrong(background, window_rows, grid, cells, window))
        assert np.abs(theirs - rows).max() > bound, name
    inputs = GridInputs(background, grid, GRID_VARIANTS["bicubic"], source_grid=cells)
    tiled = np.asarray(GRID_VARIANTS["tile"].resample(window_rows, grid, prefix_tokens=0,
                                                      source_grid=(window, window)))
    for mistake in GRID_MISTAKES.values():
        if mistake.applies(inputs):
            wrong = np.asarray(mistake.compute(inputs))
            if wrong.shape == tiled.shape:
                assert np.abs(theirs - (wrong + tiled)).max() > bound, mistake.name


def test_the_family_row_answers_hiera():
    from transformers import AutoConfig

    from refpos.models import model_positions

    config = AutoConfig.for_model("sam2_hiera_det_model").to_dict()
    config.update(hidden_size=16, window_size_per_stage=[8, 4, 4, 4], blocks_per_stage=[1, 1, 1, 1],
                  embed_dim_per_stage=[16, 32, 64, 128], num_attention_heads_per_stage=[1, 1, 1, 1],
                  global_attention_blocks=[2])
    site = model_positions(config).stack("vision.input")[0]
    assert (site.grid, site.window, site.prefix) == ((7, 7), 8, 0)
    model, background, window_rows = _model(8, (7, 7), "float32")
    theirs = _theirs(model, (64, 64))
    ours = np.asarray(site.reference(background, (64, 64), window_table=window_rows))
    assert np.abs(theirs - ours).max() <= _bound(background, window_rows, (64, 64), (7, 7), "float32")
    with pytest.raises(ValueError, match="window_table"):
        site.reference(background, (64, 64))
    with pytest.raises(ValueError, match="grid: the window table"):
        site.reference(background, (60, 64), window_table=window_rows)


def test_the_record_is_the_model_s():
    """The row's record against the model transformers builds from the config class's defaults (a config.json leaves
    them out): the background's cells, the window table's side and the width are its two tables', its layers its
    attention modules (one per block, none adding positions), and an input of another size calls interpolate on the
    background bicubic, align_corners False, no antialias, in the table's dtype."""
    from transformers import AutoConfig

    from refpos.models import model_positions
    from refpos.models.families import FAMILIES
    from refpos.tests.model_anchors import attention_modules, build, interpolate_calls

    facts = FAMILIES["sam2_hiera_det_model"].input.facts_of("grid")
    config = AutoConfig.for_model("sam2_hiera_det_model", hidden_size=16, embed_dim_per_stage=[16, 32, 64, 128],
                                  blocks_per_stage=[1, 2, 1, 1], global_attention_blocks=[2],
                                  num_attention_heads_per_stage=[1, 1, 2, 2])
    bare = {k: v for k, v in config.to_dict().items() if k not in facts.window}  # their class defaults
    positions = model_positions(bare)
    site = positions.stack("vision.input")[0]
    model = build(config)
    assert tuple(model.pos_embed.shape) == (1, site.dim, *site.grid)
    assert tuple(model.pos_embed_window.shape) == (1, site.dim, site.window, site.window)
    assert len(attention_modules(model)) == len(positions.stack("vision")) == 5
    with interpolate_calls() as calls:
        model(pixel_values=torch.randn(1, 3, 128, 160, dtype=torch.float64))
    (call,) = calls
    assert call["shape"][-2:] == site.grid and (call["mode"], call["align_corners"], call["antialias"]) == (
        "bicubic", False, False) and call["scale_factor"] is None and call["dtype"] == "float64"


def largest_errors() -> dict[str, tuple[float, float]]:
    """case -> (largest error, its ratio to the bound), float32: the numbers docs/grid.md reports."""
    out = {}
    for grid, window, cells in CASES:
        model, background, window_rows = _model(window, cells, "float32")
        theirs = _theirs(model, grid)
        ours = np.asarray(windowed_position_grid(background, window_rows, grid, source_grid=cells,
                                                 window_side=window))
        error = float(np.abs(theirs - ours).max())
        out[f"{grid} window {window} background {cells}"] = (
            error, error / _bound(background, window_rows, grid, cells, "float32"))
    return out
