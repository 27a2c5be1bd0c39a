r"""X-CLIP's vision tower (``xclip_vision_model``) against the modules transformers 5.25 builds.

The tower is CLIP's per frame: its embeddings add the learned grid with its CLS row (resampled bicubic with
``interpolate_pos_encoding``), and its layers attend without positions, though each layer also runs a second
attention, over the video's frames, on one message token per frame (made from the frame's CLS output), and appends
those tokens after each frame's tokens for its self-attention alone. refpos's answer: the record ``vision.input`` a
grid (the formula :meth:`refpos.models.kinds.grid.GridLayer.reference`), the layers ``none``.

Bounds. The grid: the embedding module with its patch projection and class token zeroed outputs what the table
adds; a correct port differs from it by at most the way's resampling bound
(:func:`refpos.encodings.grid_mistakes.grid_tolerance`: 0 where the table is read as it is, the bicubic bound
where it is resampled), the catalogued mistakes of the grid (bilinear for bicubic, the CLS row resampled with the
grid, the axes swapped, antialias added) each outside it. The layers: a network whose attentions see no position is
equivariant to any reordering of the tokens they attend over; the same float operations on the reordered tokens
differ only in the order of each sum over tokens (at most ``n`` terms in a softmax-weighted sum), so each output
entry of the tower differs by at most ``γ_n`` of its magnitude per attention, with headroom for the layers' norms:
``16 · L · n · u · max|y|``. The tower with its grid still added is not equivariant (its patches carry their rows):
that output falls outside the same bound, which shows the check able to fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.grid_mistakes import GRID_MISTAKES, GridInputs, grid_tolerance
from refpos.models import model_positions

torch = pytest.importorskip("torch", reason="X-CLIP anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="X-CLIP anchors need transformers")
pytestmark = pytest.mark.anchors

DIM, PATCH, SIDE, FRAMES, LAYERS = 8, 4, 4, 3, 2
DTYPES = {"float64": (torch.float64, 2.0**-53), "float32": (torch.float32, 2.0**-24)}
#: the native 4 × 4 grid, then grids the table is resampled to: fewer rows, more columns; a larger square
GRIDS = [(4, 4), (3, 6), (5, 5)]
MISTAKES = ("grid_bilinear_for_bicubic", "grid_cls_resampled", "grid_axes_swapped", "grid_antialias_added")


def _np(t) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()


def _config():
    return transformers.XCLIPVisionConfig(image_size=SIDE * PATCH, patch_size=PATCH, num_channels=1, hidden_size=DIM,
                                          intermediate_size=DIM, num_attention_heads=2, num_hidden_layers=LAYERS,
                                          num_frames=FRAMES)


def test_xclip_vision_resolves_as_clip_s_grid_before_layers_without_positions():
    positions = model_positions(_config().to_dict())
    (site,) = positions.stack("vision.input")
    assert (site.kind, site.way, site.grid, site.prefix, site.table_rows, site.dim) == \
        ("grid", "bicubic", (SIDE, SIDE), 1, 1 + SIDE * SIDE, DIM)
    assert [r.kind for r in positions.stack("vision")] == ["none"] * LAYERS
    assert positions.complete
    model = transformers.XCLIPVisionModel(_config())
    attentions = [name for name, m in model.named_modules() if type(m).__name__ == "XCLIPAttention"]
    # two attentions per layer: the frame's self-attention and the message tokens' attention over the frames
    assert sorted(name.rsplit(".", 1)[-1] for name in attentions) == ["message_attn"] * LAYERS + ["self_attn"] * LAYERS


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("grid", GRIDS)
def test_xclip_grid_is_the_embeddings(grid, dtype):
    torch_dtype, _ = DTYPES[dtype]
    config = _config()
    record = model_positions(config.to_dict()).stack("vision.input")[0]
    emb = transformers.models.x_clip.modeling_x_clip.XCLIPVisionEmbeddings(config).to(torch_dtype).eval()
    emb.patch_embedding.weight.data.zero_()
    emb.class_embedding.data.zero_()  # the output is then what the table adds
    table = np.random.default_rng(grid[0] * 10 + grid[1]).standard_normal((record.table_rows, DIM))
    emb.position_embedding.weight.data = torch.from_numpy(table).to(torch_dtype)
    table = _np(emb.position_embedding.weight)  # the table as the model holds it (float32: rounded once)
    pixels = torch.zeros(FRAMES, 1, grid[0] * PATCH, grid[1] * PATCH, dtype=torch_dtype)
    with torch.no_grad():
        theirs = _np(emb(pixels, interpolate_pos_encoding=grid != (SIDE, SIDE)))
    ours = np.asarray(record.reference(table, grid))
    inputs = GridInputs(table, grid, record.variant, prefix_tokens=1, source_grid=record.grid)
    bound = grid_tolerance(inputs, dtype)
    assert theirs.shape == (FRAMES, 1 + grid[0] * grid[1], DIM)
    for frame in theirs:  # every frame gains the same rows
        np.testing.assert_allclose(frame, ours, rtol=0, atol=bound)
    if grid == (SIDE, SIDE):
        return
    for name in (name for name in MISTAKES if GRID_MISTAKES[name].applies(inputs)):
        wrong = np.asarray(GRID_MISTAKES[name].compute(inputs))
        assert wrong.shape != ours.shape or float(np.max(np.abs(wrong - theirs[0]))) > bound, name


def _tower(seed: int):
    torch.manual_seed(seed)
    model = transformers.XCLIPVisionModel(_config()).to(torch.float64).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    return model


@pytest.mark.parametrize("seed", [0, 1])
def test_xclip_layers_add_no_positions(seed):
    """Patches reordered within every frame, and frames reordered within the video, reorder the tower's output
    alike, within the bound of the module docstring, once the grid is zeroed: no attention of the layers (the
    frame's self-attention, the message tokens' attention over the frames) sees a position. With the grid, the
    patch reordering does not commute (the check fails on an answer that puts positions in the layers' input)."""
    model = _tower(seed)
    rng = np.random.default_rng(seed)
    pixels = torch.from_numpy(rng.standard_normal((FRAMES, 1, SIDE * PATCH, SIDE * PATCH)))
    patches = SIDE * SIDE
    order = rng.permutation(patches)
    frames = rng.permutation(FRAMES)
    blocks = pixels.reshape(FRAMES, 1, SIDE, PATCH, SIDE, PATCH).permute(0, 1, 2, 4, 3, 5).reshape(
        FRAMES, 1, patches, PATCH, PATCH)
    moved = blocks[:, :, order].reshape(FRAMES, 1, SIDE, SIDE, PATCH, PATCH).permute(0, 1, 2, 4, 3, 5).reshape(
        pixels.shape)

    def run() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with torch.no_grad():
            return (_np(model(pixels).last_hidden_state), _np(model(moved).last_hidden_state),
                    _np(model(pixels[frames]).last_hidden_state))

    with_grid = run()
    model.embeddings.position_embedding.weight.data.zero_()
    base, by_patch, by_frame = run()
    bound = 16 * LAYERS * (patches + 2) * 2.0**-53 * float(np.abs(base).max())
    token = np.concatenate([[0], 1 + order])  # the CLS row stays first
    np.testing.assert_allclose(by_patch, base[:, token], rtol=0, atol=bound)
    np.testing.assert_allclose(by_frame, base[frames], rtol=0, atol=bound)
    grid_bound = 16 * LAYERS * (patches + 2) * 2.0**-53 * float(np.abs(with_grid[0]).max())
    assert float(np.max(np.abs(with_grid[1] - with_grid[0][:, token]))) > grid_bound
