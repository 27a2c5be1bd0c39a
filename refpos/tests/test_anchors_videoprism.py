r"""VideoPrism's vision tower (``videoprism_vision_model``) against the modules transformers 5.25 builds.

The tower is factorised: its spatial layers run over each frame's patches, its temporal layers over each patch's
frames, and each stack adds a learned table at its input (resampled bilinear with antialias, in the table's dtype,
only with ``interpolate_pos_encoding``). refpos's answer: the stacks ``spatial`` and ``temporal``, each ``none`` in
its layers, their inputs a grid record each (:mod:`refpos.encodings.grid_clips`, the factorised layouts): the
spatial grid without a CLS row read at ``(h, w)`` for every frame (``frame_grid``), the frame table of
``num_frames`` rows read as a grid of ``N × 1`` at ``(F, 1)`` for every patch (``frame_table``).

Bounds. Each embedding module with its input zeroed (the patch projection zeroed; the temporal module fed zero
features) outputs what its table adds; a correct port differs from it by at most the way's resampling bound
(:func:`refpos.encodings.grid_mistakes.grid_tolerance`). The catalogued mistakes that apply to a resampling (bicubic
for bilinear, no antialias where the table shrinks, align_corners flipped, the axes swapped) and, for the frame
table, the frames read in reverse or nearest (TimeSformer's way), each fall outside it. The layers: a network whose
attentions see no position is equivariant to a reordering of the tokens each attends over; the reordered run
differs only in the order of each sum over at most ``n`` tokens, and its attention takes the softmax in float32
whatever the model's dtype, so ``u`` is float32's: ``16 · L · n · u · max|y|`` with headroom for the norms; with its
tables the tower is not equivariant, which shows the check able to fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.grid_mistakes import GRID_MISTAKES, GridInputs, grid_tolerance
from refpos.encodings.grid_variants import GRID_VARIANTS
from refpos.models import model_positions

torch = pytest.importorskip("torch", reason="VideoPrism anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="VideoPrism anchors need transformers")
pytestmark = pytest.mark.anchors

DIM, PATCH, SIDE, FRAMES = 8, 4, 4, 6
SPATIAL, TEMPORAL = 2, 2
DTYPES = {"float64": (torch.float64, 2.0**-53), "float32": (torch.float32, 2.0**-24)}
#: the native 4 × 4 grid; resampled: fewer rows and more columns, a larger square
GRIDS = [(4, 4), (3, 6), (6, 6)]
#: the native 6 frames; resampled: more, fewer (shrunk with antialias)
CLIP_FRAMES = [6, 9, 3]
MISTAKES = ("grid_bicubic_for_bilinear", "grid_antialias_missing", "grid_align_corners_flipped", "grid_axes_swapped")


def _np(t) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()


def _config():
    return transformers.VideoPrismVisionConfig(image_size=SIDE * PATCH, tubelet_size=[1, PATCH, PATCH],
                                               num_channels=1, num_frames=FRAMES, hidden_size=DIM,
                                               intermediate_size=DIM, num_attention_heads=2,
                                               num_spatial_layers=SPATIAL, num_temporal_layers=TEMPORAL)


def _records():
    positions = model_positions(_config().to_dict())
    return positions, positions.stack("spatial.input")[0], positions.stack("temporal.input")[0]


def _outside(wrong, theirs: np.ndarray, bound: float) -> bool:
    wrong = np.asarray(wrong)
    return wrong.shape != theirs.shape or float(np.max(np.abs(wrong - theirs))) > bound


def test_videoprism_resolves_two_stacks_each_with_its_table():
    positions, spatial, temporal = _records()
    assert [r.kind for r in positions.stack("spatial")] == ["none"] * SPATIAL
    assert [r.kind for r in positions.stack("temporal")] == ["none"] * TEMPORAL
    assert (spatial.clip, spatial.grid, spatial.prefix, spatial.table_rows, spatial.way) == \
        ("frame_grid", (SIDE, SIDE), 0, SIDE * SIDE, "bilinear_antialias")
    assert (temporal.clip, temporal.grid, temporal.prefix, temporal.table_rows, temporal.way) == \
        ("frame_table", (FRAMES, 1), 0, FRAMES, "bilinear_antialias")
    model = transformers.VideoPrismVisionModel(_config())
    tables = {name: tuple(p.shape) for name, p in model.named_parameters() if "position_embeddings" in name}
    assert tables == {"spatial_embeddings.position_embeddings": (1, spatial.table_rows, DIM),
                      "temporal_embeddings.position_embeddings": (1, temporal.table_rows, DIM)}
    attentions = [name for name, m in model.named_modules() if type(m).__name__ == "VideoPrismAttention"]
    assert len(attentions) == SPATIAL + TEMPORAL


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("grid", GRIDS)
def test_videoprism_spatial_grid_is_the_embeddings(grid, dtype):
    torch_dtype, _ = DTYPES[dtype]
    _, record, _ = _records()
    emb = transformers.models.videoprism.modeling_videoprism.VideoPrismSpatialEmbeddings(_config()).to(
        torch_dtype).eval()
    for tensor in (emb.patch_embeddings.projection.weight, emb.patch_embeddings.projection.bias):
        tensor.data.zero_()
    table = np.random.default_rng(grid[0] * 10 + grid[1]).standard_normal((record.table_rows, DIM))
    emb.position_embeddings.data = torch.from_numpy(table).to(torch_dtype)[None]
    table = _np(emb.position_embeddings[0])
    pixels = torch.zeros(1, 2, 1, grid[0] * PATCH, grid[1] * PATCH, dtype=torch_dtype)
    with torch.no_grad():
        theirs = _np(emb(pixels, interpolate_pos_encoding=grid != (SIDE, SIDE)))
    ours = np.asarray(record.clip_rows(table, grid, 2))
    inputs = GridInputs(table, grid, record.variant, source_grid=record.grid)
    bound = grid_tolerance(inputs, dtype)
    assert theirs.shape == (2, grid[0] * grid[1], DIM)
    for frame in theirs:  # every frame's patches gain the same rows
        np.testing.assert_allclose(frame, ours, rtol=0, atol=bound)
    if grid != (SIDE, SIDE):
        shrinks = grid[0] < SIDE or grid[1] < SIDE  # antialias changes nothing where the grid only grows
        for name in (n for n in MISTAKES if GRID_MISTAKES[n].applies(inputs) and (shrinks or "antialias" not in n)):
            assert _outside(GRID_MISTAKES[name].compute(inputs), theirs[0], bound), name


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("frames", CLIP_FRAMES)
def test_videoprism_frame_table_is_the_embeddings(frames, dtype):
    torch_dtype, _ = DTYPES[dtype]
    _, _, record = _records()
    emb = transformers.models.videoprism.modeling_videoprism.VideoPrismTemporalEmbeddings(_config()).to(
        torch_dtype).eval()
    table = np.random.default_rng(frames).standard_normal((record.table_rows, DIM))
    emb.position_embeddings.data = torch.from_numpy(table).to(torch_dtype)[None]
    table = _np(emb.position_embeddings[0])
    patches = 5
    features = torch.zeros(frames, patches, DIM, dtype=torch_dtype)  # the spatial stack's output, frame by frame
    with torch.no_grad():
        theirs = _np(emb(features, (1, frames, 1, SIDE * PATCH, SIDE * PATCH),
                         interpolate_pos_encoding=frames != FRAMES))
    ours = np.asarray(record.clip_rows(table, (frames, 1), frames))
    inputs = GridInputs(table, (frames, 1), record.variant, source_grid=record.grid)
    bound = grid_tolerance(inputs, dtype)
    assert theirs.shape == (patches, frames, DIM)
    for patch in theirs:  # every patch's frames gain the same rows
        np.testing.assert_allclose(patch, ours, rtol=0, atol=bound)
    assert _outside(ours[::-1], theirs[0], bound), "the frames read in reverse"
    if frames != FRAMES:
        nearest = GRID_VARIANTS["nearest"].resample(table, (frames, 1), source_grid=record.grid)
        assert _outside(nearest, theirs[0], bound), "the frames read nearest"
        for name in (n for n in MISTAKES[:3] if GRID_MISTAKES[n].applies(inputs) and (frames < FRAMES
                                                                                      or "antialias" not in n)):
            assert _outside(GRID_MISTAKES[name].compute(inputs), theirs[0], bound), name


@pytest.mark.parametrize("seed", [0, 1])
def test_videoprism_layers_add_no_positions(seed):
    """Patches reordered within every frame, and frames reordered, reorder the tower's output alike once both
    tables are zeroed (module docstring); with the tables they do not."""
    torch.manual_seed(seed)
    model = transformers.VideoPrismVisionModel(_config()).to(torch.float64).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    rng = np.random.default_rng(seed)
    patches, frames = SIDE * SIDE, 3
    pixels = torch.from_numpy(rng.standard_normal((1, frames, 1, SIDE * PATCH, SIDE * PATCH)))
    order, frame_order = np.roll(rng.permutation(patches), 1), np.array([2, 0, 1])  # neither the identity
    blocks = pixels.reshape(frames, SIDE, PATCH, SIDE, PATCH).permute(0, 1, 3, 2, 4).reshape(frames, patches, -1)
    moved = blocks[:, order].reshape(frames, SIDE, SIDE, PATCH, PATCH).permute(0, 1, 3, 2, 4).reshape(pixels.shape)

    def run() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with torch.no_grad():
            outs = [model(video, interpolate_pos_encoding=True).last_hidden_state[0]
                    for video in (pixels, moved, pixels[:, frame_order])]
        return tuple(_np(out).reshape(frames, patches, DIM) for out in outs)

    with_tables = run()
    model.spatial_embeddings.position_embeddings.data.zero_()
    model.temporal_embeddings.position_embeddings.data.zero_()
    base, by_patch, by_frame = run()
    n = max(patches, frames)
    bound = 16 * (SPATIAL + TEMPORAL) * n * 2.0**-24 * float(np.abs(base).max())  # the softmax in float32
    np.testing.assert_allclose(by_patch, base[:, order], rtol=0, atol=bound)
    np.testing.assert_allclose(by_frame, base[frame_order], rtol=0, atol=bound)
    table_bound = 16 * (SPATIAL + TEMPORAL) * n * 2.0**-24 * float(np.abs(with_tables[0]).max())
    assert _outside(with_tables[1], with_tables[0][:, order], table_bound)
    assert _outside(with_tables[2], with_tables[0][frame_order], table_bound)
