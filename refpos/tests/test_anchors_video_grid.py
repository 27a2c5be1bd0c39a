r"""The video towers' position rows (TimeSformer, ViViT) against the embedding modules transformers 5.25 builds.

Each module is built from a small config, its patch projection and CLS token zeroed, so that its output is what its
tables add (:meth:`refpos.models.kinds.grid.GridLayer.clip_rows`, :mod:`refpos.encodings.grid_clips`). refpos's
record is the one its family row builds from the same config.

Bound: the way's resampling bound (:func:`refpos.encodings.grid_mistakes.grid_tolerance`, nearest: the rows are
copied, the bound is the table's rounding to the dtype, ``u·max|P|``) plus one rounding of the sum
``G'_p + T'_f``, ``u·max|P'|``. Each test also shows the wrong variants (the time table skipped, the tokens frame by
frame, bicubic or bilinear for the model's way, the CLS row resampled with the grid) outside that bound.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.encodings.grid_clips import frame_major_order, patch_major_rows
from refpos.encodings.grid_mistakes import GRID_MISTAKES, GridInputs, grid_tolerance
from refpos.models import model_positions

torch = pytest.importorskip("torch", reason="video grid anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="video grid anchors need transformers")
pytestmark = pytest.mark.anchors

DIM, PATCH = 8, 4
DTYPES = {"float64": (torch.float64, 2.0**-53), "float32": (torch.float32, 2.0**-24)}


def _np(t) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()


def _record(config):
    return model_positions(config.to_dict()).stack("vision.input")[0]


def _bound(record, table: np.ndarray, grid: tuple[int, int], u: float, rows: np.ndarray) -> float:
    inputs = GridInputs(table, grid, record.variant, prefix_tokens=1, source_grid=record.grid)
    return grid_tolerance(inputs, "float64" if u < 2.0**-30 else "float32") + u * float(np.abs(rows).max())


def _outside(wrong: np.ndarray, theirs: np.ndarray, bound: float) -> bool:
    return wrong.shape != theirs.shape or float(np.max(np.abs(wrong - theirs))) > bound


# --------------------------------------------------------------------------- TimeSformer
def _timesformer(side: int, table_frames: int, dtype):
    config = transformers.TimesformerConfig(image_size=side * PATCH, patch_size=PATCH, num_channels=1,
                                            num_frames=table_frames, hidden_size=DIM, num_attention_heads=2,
                                            num_hidden_layers=1, intermediate_size=DIM)
    emb = transformers.models.timesformer.modeling_timesformer.TimesformerEmbeddings(config).to(dtype).eval()
    for tensor in (emb.patch_embeddings.projection.weight, emb.patch_embeddings.projection.bias, emb.cls_token):
        tensor.data.zero_()  # the output is then what the two tables add
    rng = np.random.default_rng(side * 10 + table_frames)
    table, time = rng.standard_normal((1 + side * side, DIM)), rng.standard_normal((table_frames, DIM))
    emb.position_embeddings.data = torch.from_numpy(table).to(dtype)[None]
    emb.time_embeddings.data = torch.from_numpy(time).to(dtype)[None]
    return config, emb, _np(emb.position_embeddings[0]), _np(emb.time_embeddings[0])


#: (table side M, table frames N, input grid (h, w), input frames F): native; the grid resampled (fewer rows, more
#: columns); the time table resampled (more and fewer frames); the same patch count in another shape (not resampled)
TIMESFORMER = [(4, 4, (4, 4), 4), (4, 4, (3, 6), 4), (5, 3, (7, 4), 8), (4, 6, (5, 3), 4), (4, 4, (2, 8), 3)]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("side", "table_frames", "grid", "frames"), TIMESFORMER)
def test_timesformer_grid_and_time_table(side, table_frames, grid, frames, dtype):
    torch_dtype, u = DTYPES[dtype]
    config, emb, table, time = _timesformer(side, table_frames, torch_dtype)
    record = _record(config)
    pixels = torch.zeros(1, frames, 1, grid[0] * PATCH, grid[1] * PATCH, dtype=torch_dtype)
    with torch.no_grad():
        theirs = _np(emb(pixels)[0])
    ours = np.asarray(record.clip_rows(table, grid, frames, time))
    bound = _bound(record, table, grid, u, ours)
    assert theirs.shape == ours.shape == (1 + grid[0] * grid[1] * frames, DIM)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)
    # the wrong variants, each outside the bound
    skipped = np.asarray(record.clip_rows(table, grid, frames, np.zeros_like(time)))
    assert _outside(skipped, theirs, bound), "the time table skipped"
    patches = grid[0] * grid[1]
    if frames > 1:
        by_frame = np.concatenate([ours[:1], ours[1:][frame_major_order(patches, frames)]])
        assert _outside(by_frame, theirs, bound), "the tokens frame by frame"
    if patches != side * side:
        for mode in ("bicubic", "bilinear"):
            other = dataclasses.replace(record, way=mode)
            assert _outside(np.asarray(other.clip_rows(table, grid, frames, time)), theirs, bound), mode
        inputs = GridInputs(table, grid, record.variant, prefix_tokens=1, source_grid=record.grid)
        cls_resampled = np.asarray(GRID_MISTAKES["grid_cls_resampled"].compute(inputs))
        wrong = np.asarray(patch_major_rows(table[0], cls_resampled[1:], frames, time))
        assert _outside(wrong, theirs, bound), "the CLS row resampled with the grid"
    else:  # the same patch count: the table read as it is, which a resampling to another shape is not
        if grid != record.grid:
            wrong = np.asarray(patch_major_rows(table[0], np.asarray(record.reference(table, grid))[1:], frames, time))
            assert _outside(wrong, theirs, bound), "resampled at the same patch count"


def test_timesformer_space_only_is_refused_by_name():
    config = transformers.TimesformerConfig(attention_type="space_only")
    assert "attention_type" in model_positions(config.to_dict()).not_modelled


# --------------------------------------------------------------------------- ViViT
def _vivit(side: int, frames: int, dtype):
    config = transformers.VivitConfig(image_size=side * PATCH, tubelet_size=[2, PATCH, PATCH], num_frames=frames,
                                      num_channels=1, hidden_size=DIM, num_attention_heads=2, num_hidden_layers=1,
                                      intermediate_size=DIM)
    emb = transformers.models.vivit.modeling_vivit.VivitEmbeddings(config).to(dtype).eval()
    for tensor in (emb.patch_embeddings.projection.weight, emb.patch_embeddings.projection.bias, emb.cls_token):
        tensor.data.zero_()
    rows = emb.position_embeddings.shape[1]
    emb.position_embeddings.data = torch.from_numpy(np.random.default_rng(rows).standard_normal((rows, DIM))).to(
        dtype)[None]
    return config, emb, _np(emb.position_embeddings[0])


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("side", "frames"), [(4, 4), (3, 6), (4, 2)])
def test_vivit_table_of_tubelet_frames_at_the_native_grid(side, frames, dtype):
    """The table, one grid per tubelet frame, added as it is: tokens in the raster order of (t, i, j)."""
    torch_dtype, u = DTYPES[dtype]
    config, emb, table = _vivit(side, frames, torch_dtype)
    record = _record(config)
    assert (record.depth, record.stride, record.table_rows) == (frames // 2, 2, 1 + frames // 2 * side * side)
    pixels = torch.zeros(1, frames, 1, side * PATCH, side * PATCH, dtype=torch_dtype)
    with torch.no_grad():
        theirs = _np(emb(pixels)[0])
    ours = np.asarray(record.clip_rows(table, (side, side), frames))
    np.testing.assert_array_equal(theirs, ours)  # copied rows: bit for bit
    depth, bound = frames // 2, u * float(np.abs(ours).max())
    if depth > 1:  # the tubelet frames patch by patch, or each frame's grid transposed
        grids = ours[1:].reshape(depth, side * side, DIM)
        by_patch = np.concatenate([ours[:1], grids.transpose(1, 0, 2).reshape(-1, DIM)])
        assert _outside(by_patch, theirs, bound)
    transposed = ours[1:].reshape(depth, side, side, DIM).transpose(0, 2, 1, 3).reshape(-1, DIM)
    assert _outside(np.concatenate([ours[:1], transposed]), theirs, bound)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("grid", [(3, 5), (6, 4)])
def test_vivit_one_tubelet_frame_resampled_bicubic(grid, dtype):
    """A table of one tubelet frame is resampled as an image's grid (interpolate_pos_encoding, ``h ≠ w``)."""
    torch_dtype, u = DTYPES[dtype]
    config, emb, table = _vivit(4, 2, torch_dtype)
    record = _record(config)
    pixels = torch.zeros(1, 2, 1, grid[0] * PATCH, grid[1] * PATCH, dtype=torch_dtype)
    with torch.no_grad():
        theirs = _np(emb(pixels, interpolate_pos_encoding=True)[0])
    ours = np.asarray(record.clip_rows(table, grid, 2))
    bound = _bound(record, table, grid, u, ours)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)
    inputs = GridInputs(table, grid, record.variant, prefix_tokens=1, source_grid=record.grid)
    for name in ("grid_bilinear_for_bicubic", "grid_cls_resampled", "grid_axes_swapped", "grid_antialias_added"):
        assert _outside(np.asarray(GRID_MISTAKES[name].compute(inputs)), theirs, bound), name


def test_vivit_tubelet_frames_are_not_resampled_as_the_model_fails_too():
    """Two tubelet frames at another grid: refpos refuses naming the grid, transformers' own code fails."""
    config, emb, table = _vivit(4, 4, torch.float64)
    record = _record(config)
    with pytest.raises(ValueError, match="grid"):
        record.clip_rows(table, (3, 5), 4)
    with pytest.raises(ValueError, match="frames"):
        record.clip_rows(table, (4, 4), 6)
    with pytest.raises(RuntimeError):
        emb(torch.zeros(1, 4, 1, 3 * PATCH, 5 * PATCH, dtype=torch.float64), interpolate_pos_encoding=True)
