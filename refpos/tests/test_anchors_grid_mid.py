r"""YOLOS's tables between the layers (``use_mid_position_embeddings``) against the modules transformers 5.25 builds.

:meth:`refpos.models.kinds.grid.GridLayer.mid_tables` is compared with ``InterpolateMidPositionEmbeddings`` (its
output: the tables resampled, one per layer but the last), and where they are added with ``YolosEncoder`` whose
layers are made the identity: its output minus its input is then the sum of the tables it adds, ``L − 1`` of them.
Bound: the bicubic resampling bound of :func:`refpos.encodings.grid_mistakes.grid_tolerance` (the largest table's),
plus, for the encoder, one rounding per addition, ``(L − 1)·u·max|h|``. The wrong answers (bilinear for bicubic, the
CLS row resampled, the axes swapped, the tables in the other order, the input's table at every layer, a table after
the last layer too) are outside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.grid_mistakes import GRID_MISTAKES, GridInputs, grid_tolerance
from refpos.models import model_positions

torch = pytest.importorskip("torch", reason="grid anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="grid anchors need transformers")
pytestmark = pytest.mark.anchors

DIM, PATCH, LAYERS = 8, 4, 4
DTYPES = {"float64": (torch.float64, 2.0**-53), "float32": (torch.float32, 2.0**-24)}


def _yolos(dtype):
    from transformers.models.yolos.modeling_yolos import YolosEncoder

    config = transformers.YolosConfig(image_size=[5 * PATCH, 7 * PATCH], patch_size=PATCH, num_detection_tokens=3,
                                      hidden_size=DIM, num_attention_heads=2, intermediate_size=DIM,
                                      num_hidden_layers=LAYERS)
    encoder = YolosEncoder(config).to(dtype).eval()
    mid = encoder.interpolation.mid_position_embeddings
    tables = np.random.default_rng(9).standard_normal(tuple(mid.shape))
    mid.data = torch.from_numpy(tables).to(dtype)
    return config, encoder, mid.detach().to(torch.float64).numpy()[:, 0]


def _bound(record, tables, grid, dtype) -> float:
    return max(grid_tolerance(GridInputs(t, grid, record.variant, prefix_tokens=1, suffix_tokens=3,
                                         source_grid=record.grid), dtype) for t in tables)


def _outside(wrong, theirs, bound) -> bool:
    return wrong.shape != theirs.shape or float(np.max(np.abs(wrong - theirs))) > bound


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("grid", [(5, 7), (9, 4), (3, 3)])
def test_yolos_mid_tables_resampled_each_as_the_input(grid, dtype):
    torch_dtype, _ = DTYPES[dtype]
    config, encoder, tables = _yolos(torch_dtype)
    record = model_positions(config.to_dict()).stack("vision.input")[0]
    assert record.mid == LAYERS - 1
    with torch.no_grad():
        theirs = encoder.interpolation((grid[0] * PATCH, grid[1] * PATCH))[:, 0].to(torch.float64).numpy()
    ours = np.asarray(record.mid_tables(tables, grid))
    bound = _bound(record, tables, grid, dtype)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)
    assert _outside(ours[::-1], theirs, bound), "the tables in the other order"
    assert _outside(np.stack([np.asarray(record.reference(tables[0], grid))] * record.mid), theirs, bound)
    if grid != record.grid:
        inputs = [GridInputs(t, grid, record.variant, prefix_tokens=1, suffix_tokens=3, source_grid=record.grid)
                  for t in tables]
        for name in ("grid_bilinear_for_bicubic", "grid_cls_resampled", "grid_axes_swapped"):
            if GRID_MISTAKES[name].applies(inputs[0]):  # the axes swapped: a grid of two sides
                wrong = np.stack([GRID_MISTAKES[name].compute(i) for i in inputs])
                assert _outside(wrong, theirs, bound), name


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_yolos_encoder_adds_a_table_after_each_layer_but_the_last(dtype):
    torch_dtype, u = DTYPES[dtype]
    config, encoder, tables = _yolos(torch_dtype)
    record = model_positions(config.to_dict()).stack("vision.input")[0]
    encoder.layer = torch.nn.ModuleList([torch.nn.Identity() for _ in range(LAYERS)])
    grid = (9, 4)
    hidden = torch.from_numpy(np.random.default_rng(1).standard_normal((1, 1 + 36 + 3, DIM))).to(torch_dtype)
    with torch.no_grad():
        out = encoder(hidden, grid[0] * PATCH, grid[1] * PATCH).last_hidden_state
    theirs = (out.to(torch.float64) - hidden.to(torch.float64))[0].numpy()
    ours = np.asarray(record.mid_tables(tables, grid)).sum(axis=0)
    bound = record.mid * (_bound(record, tables, grid, dtype) + u * float(out.to(torch.float64).abs().max()))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)
    extra = np.asarray(record.reference(tables[-1], grid))  # a table after the last layer too
    assert _outside(ours + extra, theirs, bound)


def test_yolos_without_mid_tables_adds_none():
    config = transformers.YolosConfig(use_mid_position_embeddings=False)
    record = model_positions(config.to_dict()).stack("vision.input")[0]
    assert record.mid == 0
    with pytest.raises(ValueError, match="no tables"):
        record.mid_tables(np.zeros((1, record.table_rows, record.dim)), record.grid)
