r"""refpos.encodings.grid_buckets against transformers 5.25's NaViT-style towers (Idefics2, Idefics3, SmolVLM,
Phi-4-multimodal: ``*VisionEmbeddings.forward`` over a ``patch_attention_mask``; MiniCPM: ``vision_utils.
get_vision_nearest_position_ids`` through ``*VisionEmbeddings.forward`` over ``target_sizes``).

The embeddings are run with their patch projection zeroed, so their output is the position rows alone: a gather,
exact in float64. The row indices are the model's own: transformers computes them in torch's default dtype
(float32; float64 when the default is set so, the anchors run both), and at a tie (``i·M/n`` an integer, the
fraction on a boundary: refpos/encodings/grid_buckets.py) its rounding may read the row below. So each run is
compared row for row with refpos's exact rows off the ties and with the exact row or the row below at a tie
(:func:`~refpos.encodings.grid_buckets.bucket_ties`); ``test_anchors_grid.py`` compares both records on grids
without ties, where the comparison is exact everywhere.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from refpos.encodings.grid_buckets import (
    bucket_ties,
    bucketed_position_ids,
    bucketed_positions_packed,
    bucketed_positions_padded,
    position_id_choices,
)

torch = pytest.importorskip("torch", reason="grid anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="grid anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

DIM, PATCH = 8, 4
#: model type -> (the module path of its embeddings class, its config class, how a batch is fed)
TOWERS = {
    "idefics2": ("transformers.models.idefics2.modeling_idefics2.Idefics2VisionEmbeddings",
                 "transformers.Idefics2VisionConfig", "padded"),
    "idefics3": ("transformers.models.idefics3.modeling_idefics3.Idefics3VisionEmbeddings",
                 "transformers.Idefics3VisionConfig", "padded"),
    "smolvlm": ("transformers.models.smolvlm.modeling_smolvlm.SmolVLMVisionEmbeddings",
                "transformers.models.smolvlm.configuration_smolvlm.SmolVLMVisionConfig", "padded"),
    "phi4_multimodal": ("transformers.models.phi4_multimodal.modeling_phi4_multimodal.Phi4MultimodalVisionEmbeddings",
                        "transformers.Phi4MultimodalVisionConfig", "padded"),
    "minicpm_ocr": ("transformers.models.minicpm_ocr.modeling_minicpm_ocr.MiniCPMOcrVisionEmbeddings",
                    "transformers.models.minicpm_ocr.configuration_minicpm_ocr.MiniCPMOcrVisionConfig", "packed"),
    "minicpmv4_6": ("transformers.models.minicpmv4_6.modeling_minicpmv4_6.MiniCPMV4_6VisionEmbeddings",
                    "transformers.models.minicpmv4_6.configuration_minicpmv4_6.MiniCPMV4_6VisionConfig", "packed"),
    "minicpmv4_7": ("transformers.models.minicpmv4_7.modeling_minicpmv4_7.MiniCPMV4_7VisionEmbeddings",
                    "transformers.models.minicpmv4_7.configuration_minicpmv4_7.MiniCPMV4_7VisionConfig", "packed"),
}
#: (table side M, image grids (n_h, n_w) of one batch): ties on the native grid, shrinking, growing, mixed sizes
BATCHES = [(5, [(5, 5)]), (6, [(4, 3), (6, 2)]), (7, [(10, 4), (14, 7), (3, 5)]), (32, [(32, 32), (24, 40)]),
           (70, [(70, 70), (35, 51)])]


def _load(path: str):
    import importlib

    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def embeddings(model_type: str, table: np.ndarray, dtype: torch.dtype):
    """The model type's embeddings module for a square ``table`` ``(M², d)``, its patch projection zeroed."""
    cls_path, config_path, _ = TOWERS[model_type]
    side = math.isqrt(table.shape[0])
    config = _load(config_path)(image_size=side * PATCH, patch_size=PATCH, hidden_size=DIM, num_attention_heads=2,
                                num_channels=1)
    emb = _load(cls_path)(config).to(dtype).eval()
    emb.patch_embedding.weight.data.zero_()
    emb.patch_embedding.bias.data.zero_()
    emb.position_embedding.weight.data = torch.from_numpy(table).to(dtype)
    return emb


def run(model_type: str, table: np.ndarray, sizes: list[tuple[int, int]], dtype: torch.dtype) -> np.ndarray:
    """The model's position rows for a batch of images of patch grids ``sizes``: padded ``(B, F_h·F_w, d)`` or
    packed ``(Σ n_h·n_w, d)``."""
    emb = embeddings(model_type, table, dtype)
    with torch.no_grad():
        if TOWERS[model_type][2] == "packed":
            pixels = torch.zeros(1, 1, PATCH, PATCH * sum(h * w for h, w in sizes), dtype=dtype)
            return emb(pixels, target_sizes=torch.tensor(sizes))[0].to(torch.float64).numpy()
        frame = (max(h for h, _ in sizes), max(w for _, w in sizes))
        mask = torch.zeros(len(sizes), *frame, dtype=torch.bool)
        for b, (h, w) in enumerate(sizes):
            mask[b, :h, :w] = True
        pixels = torch.zeros(len(sizes), 1, frame[0] * PATCH, frame[1] * PATCH, dtype=dtype)
        return emb(pixels, patch_attention_mask=mask).to(torch.float64).numpy()


def _ours(model_type: str, table: np.ndarray, sizes: list[tuple[int, int]]) -> np.ndarray:
    if TOWERS[model_type][2] == "packed":
        return np.asarray(bucketed_positions_packed(table, sizes))
    frame = (max(h for h, _ in sizes), max(w for _, w in sizes))
    return np.asarray(bucketed_positions_padded(table, sizes, frame))


@pytest.mark.parametrize("default", ["float32", "float64"])
@pytest.mark.parametrize(("side", "sizes"), BATCHES, ids=[f"{s}-{len(z)}images" for s, z in BATCHES])
@pytest.mark.parametrize("model_type", list(TOWERS))
def test_rows_equal_the_towers_off_ties_and_one_of_two_at_ties(model_type, side, sizes, default):
    table = np.random.default_rng(side).standard_normal((side * side, DIM))
    before = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, default))  # the dtype transformers computes the fractions in
    try:
        theirs = run(model_type, table, sizes, torch.float64)
    finally:
        torch.set_default_dtype(before)
    exact = _ours(model_type, table, sizes)
    assert theirs.shape == exact.shape
    flips = 0
    for b, (h, w), rows in _images(model_type, theirs, sizes):
        for patch, choices in enumerate(position_id_choices((h, w), (side, side))):
            read = [c for c in choices if np.array_equal(rows[patch], table[c])]
            assert read, f"{model_type} image {b} patch {patch}: no row of {choices}"
            flips += read[0] != choices[0]
    np.testing.assert_array_equal(theirs[_off_tie(model_type, sizes, side)], exact[_off_tie(model_type, sizes, side)])
    FLIPPED[(model_type, side, default)] = flips


def _images(model_type, theirs, sizes):
    """``(index, (h, w), its rows in raster order)`` of each image of a run."""
    start = 0
    for b, (h, w) in enumerate(sizes):
        if TOWERS[model_type][2] == "packed":
            yield b, (h, w), theirs[start:start + h * w]
            start += h * w
        else:
            frame_w = max(w for _, w in sizes)
            yield b, (h, w), theirs[b].reshape(-1, frame_w, DIM)[:h, :w].reshape(h * w, DIM)


def _off_tie(model_type, sizes, side):
    """Where no axis ties (and the padding, which reads row 0): the rows every port agrees on."""
    masks = []
    for h, w in sizes:
        grid = [not (a or b) for a in bucket_ties(h, side) for b in bucket_ties(w, side)]
        if TOWERS[model_type][2] == "packed":
            masks.extend(grid)
            continue
        frame = (max(x for x, _ in sizes), max(y for _, y in sizes))
        masks.append([r >= h or c >= w or grid[r * w + c] for r in range(frame[0]) for c in range(frame[1])])
    return np.asarray(masks)


#: (model type, side, default dtype) -> how many patches transformers read a row below at a tie
FLIPPED: dict = {}


def test_ties_are_where_the_rows_may_differ():
    """The row below differs from the exact row exactly at the ties (and the module's count of them)."""
    for n, m in [(5, 5), (4, 6), (9, 6), (7, 3), (70, 70)]:
        exact = bucketed_position_ids((n, 1), (m, 1))
        below = bucketed_position_ids((n, 1), (m, 1), at_ties="below")
        assert [a != b for a, b in zip(exact, below, strict=True)] == bucket_ties(n, m)


def test_a_wrong_reading_fails_the_anchor():
    """Rows read at the patch centres (``⌊(i + ½)·M/n⌋``, a wrong variant) are neither answer at some patch."""
    table = np.random.default_rng(0).standard_normal((36, DIM))
    theirs = run("idefics2", table, [(4, 9)], torch.float64)[0]
    rows = [min(5, math.floor((i + 0.5) * 6 / 4)) for i in range(4)]
    cols = [min(5, math.floor((j + 0.5) * 6 / 9)) for j in range(9)]
    centred = table[[r * 6 + c for r in rows for c in cols]]
    assert not np.all(np.all(theirs == centred, axis=-1))
