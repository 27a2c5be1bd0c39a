"""Composite vision towers answered stack by stack, against the models transformers builds (anchors env).

Granite-Docling's vision model runs a SigLIP-style tower (a learned grid added as it is) and then its connector: the
tile's tokens pixel-shuffled by ``scale_factor`` (the coarse path) or by half of it (the fine path, ``fine=True``),
projected to ``out_hidden_size``, plus that path's fixed sin–cos of the shuffled grid (the row's ``output``: one
``sincos2d`` record per path). Each path's record is compared with what ``GraniteDoclingPositionEmbedding`` adds in
the model's forward (its output minus its input), in float32: within the kind's float32 bound
(:meth:`refpos.encodings.sincos2d_mistakes.Sincos2dInputs.bound`) plus the subtraction's ``2u·max|output|``; the rows
first variant, and the other path's grid, outside it.

Unlimited-OCR's vision model runs two encoders one after the other: a SAM-style encoder on the pixels (its own row,
``unlimited_ocr_sam_vision_model``: a learned grid and decomposed relative positions), whose output map feeds a
CLIP-style encoder as its patches (``unlimited_ocr_vision_encoder``: a class row and a learned grid resampled bicubic
with antialias in float32 to the map's grid, on every call). The encoder's grid record is compared with what
``UnlimitedOcrVisionModel`` adds: the CLIP embeddings' output minus the same output with its position table zeroed
(the addition is linear in the table), at the grid the SAM map has for the image fed.

Bound. A float32 run differs from refpos's float64 rows by the resampling's float32 bound
(:func:`refpos.encodings.grid_mistakes.grid_tolerance`) plus the subtraction's ``2u·max|output|`` (the output and
the zeroed output are float32 values, each rounded once). A wrong way (no antialias) and a wrong count of extra rows
are shown outside it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance
from refpos.encodings.grid_variants import GRID_VARIANTS

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

U32 = 2.0**-24
#: a small Unlimited-OCR vision config: SAM 64 × 64 pixels in patches of 16, a CLIP table of 4 × 4 patches + CLS
SAM = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "mlp_dim": 37, "image_size": 64,
       "patch_size": 16, "window_size": 2, "global_attn_indexes": [1], "output_channels": 16,
       "downsample_channels": [16, 32]}
CLIP = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 37,
        "image_size": 32, "patch_size": 8}
#: pixel sizes fed: the SAM map (H/16, W/16) halved twice (ceil) is the CLIP grid: 4 × 5, 2 × 3, 4 × 4 (its own)
IMAGES = [(256, 320), (96, 160), (256, 256)]


def _unlimited_ocr():
    config = transformers.AutoConfig.for_model("unlimited_ocr_vision", sam_config=SAM, encoder_config=CLIP)
    torch.manual_seed(0)
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrVisionModel

    model = UnlimitedOcrVisionModel(config).eval()
    table = model.vision_encoder.embeddings.position_embedding.weight
    with torch.no_grad():  # a table whose rows differ (the initialiser's may not)
        table.copy_(torch.randn(table.shape, generator=torch.Generator().manual_seed(1)))
    return config, model


def _added(model, pixels: torch.Tensor) -> np.ndarray:
    """What the CLIP encoder's embeddings add for ``pixels``: output minus output with the table zeroed."""
    embeddings = model.vision_encoder.embeddings
    outputs = []
    hook = embeddings.register_forward_hook(lambda module, args, out: outputs.append(out.detach().clone()))
    try:
        with torch.no_grad():
            model(pixel_values=pixels)
            saved = embeddings.position_embedding.weight.detach().clone()
            embeddings.position_embedding.weight.zero_()
            model(pixel_values=pixels)
            embeddings.position_embedding.weight.copy_(saved)
    finally:
        hook.remove()
    out, zeroed = (o.to(torch.float64).numpy()[0] for o in outputs)
    return out - zeroed, float(np.abs(out).max())


def _sam_map(size: tuple[int, int]) -> tuple[int, int]:
    """The CLIP grid for an image of ``size``: the SAM patches, halved twice by the stride-2 convolutions (ceil)."""
    return tuple(math.ceil(math.ceil(side // SAM["patch_size"] / 2) / 2) for side in size)


@pytest.mark.parametrize("size", IMAGES)
def test_unlimited_ocr_encoder_grid_is_what_the_vision_model_adds(size):
    config, model = _unlimited_ocr()
    positions = refpos.model_positions(config.to_dict())
    assert positions.complete
    (site,) = positions.stack("encoder.input")
    assert (site.way, site.prefix, site.grid, site.always) == ("bicubic_antialias", 1, (4, 4), True)
    assert [r.kind for r in positions.stack("sam.input")] == ["grid"]
    assert {r.kind for r in positions.stack("sam")} == {"decomposed"}
    assert {r.kind for r in positions.stack("encoder")} == {"none"}
    assert len(positions.stack("encoder")) == CLIP["num_hidden_layers"]
    grid = _sam_map(size)
    table = model.vision_encoder.embeddings.position_embedding.weight.detach().to(torch.float64).numpy()
    ours = np.asarray(site.reference(table, grid), dtype=np.float64)
    added, magnitude = _added(model, torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(2)))
    assert added.shape == ours.shape == (1 + grid[0] * grid[1], CLIP["hidden_size"])
    inputs = GridInputs(table, grid, site.variant, prefix_tokens=1)
    bound = grid_tolerance(inputs, "float32") + 2 * U32 * magnitude
    error = float(np.max(np.abs(added - ours)))
    assert error <= bound, f"{size}: {error:.3g} > {bound:.3g}"
    if grid == site.grid:  # the native square: the table itself (no resampling), to the subtraction's rounding
        assert float(np.max(np.abs(added - table))) <= 2 * U32 * magnitude
    # wrong answers: the way without antialias, and the class row read as part of the grid
    if grid != site.grid:
        plain = np.asarray(dataclasses.replace(site, way="bicubic").reference(table, grid))
        assert float(np.max(np.abs(added - plain))) > bound
    with pytest.raises(ValueError, match="table must have shape"):
        dataclasses.replace(site, prefix=0).reference(table, grid)
    shifted = np.asarray(GRID_VARIANTS["bicubic_antialias"].resample(table[1:], grid, prefix_tokens=0,
                                                                      source_grid=(4, 4)))
    assert float(np.max(np.abs(added[1:] - shifted))) <= bound  # the patches' rows are the grid's alone
    assert float(np.max(np.abs(added[0] - table[0]))) <= 2 * U32 * magnitude  # the class row kept as it is


#: a small Granite-Docling vision config: 64-pixel tiles in patches of 8 (8 × 8 tokens), shuffled by 4 and by 2
DOCLING = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 37,
           "image_size": 64, "patch_size": 8, "out_hidden_size": 24, "scale_factor": 4,
           "deepstack_visual_indexes": [0, 1], "use_fine_route": True}


def _docling_added(model, fine: bool) -> dict[str, tuple[np.ndarray, float]]:
    """What each connector path's position module added in one forward (output minus input), by path."""
    from transformers.models.granite_docling.modeling_granite_docling import GraniteDoclingPositionEmbedding

    seen: dict[str, tuple[np.ndarray, float]] = {}
    hooks = [module.register_forward_hook(
        lambda m, args, out, name=name: seen.__setitem__(name, (
            (out - args[0]).detach().to(torch.float64).numpy()[0], float(out.abs().max()))))
        for name, module in model.named_modules() if isinstance(module, GraniteDoclingPositionEmbedding)]
    try:
        with torch.no_grad():
            model(pixel_values=torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(3)), fine=fine)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


@pytest.mark.parametrize("fine", [False, True])
def test_granite_docling_connector_paths_are_what_the_vision_model_adds(fine):
    from transformers.models.granite_docling.modeling_granite_docling import GraniteDoclingVisionModel

    from refpos.encodings.sincos2d_mistakes import Sincos2dInputs

    config = transformers.AutoConfig.for_model("granite_docling_vision", **DOCLING)
    torch.manual_seed(0)
    model = GraniteDoclingVisionModel(config).eval()
    positions = refpos.model_positions(config.to_dict())
    assert positions.complete
    paths = positions.stack("vision.output")
    assert [(r.shuffle, r.grid, r.features) for r in paths] == [(4, (2, 2), 24), (2, (4, 4), 24)]
    assert [r.kind for r in positions.stack("vision.input")] == ["grid"]
    added = _docling_added(model, fine)
    assert list(added) == ["connector.fine.pos_embed" if fine else "connector.coarse.pos_embed"]
    (rows, magnitude), = added.values()
    record = paths[1 if fine else 0]
    ours = np.asarray(record.reference(height=record.grid[0], width=record.grid[1]), dtype=np.float64)
    inputs = Sincos2dInputs(record.variant, {"height": record.grid[0], "width": record.grid[1],
                                             "dim": record.features})
    bound = inputs.bound() + 2 * U32 * magnitude
    assert rows.shape == ours.shape
    error = np.abs(rows - ours)
    assert np.all(error <= bound), f"{float(error.max()):.3g} above the bound"
    rows_first = np.asarray(dataclasses.replace(record, variant="rt_detr").reference(
        height=record.grid[0], width=record.grid[1]))
    assert np.any(np.abs(rows - rows_first) > bound)  # the h-first table (vit_mae's layout, not rolled)
    other = paths[0 if fine else 1]
    with pytest.raises(ValueError, match="fixed at"):  # the other path's grid is not this table's
        record.reference(height=other.grid[0], width=other.grid[1])


def test_granite_docling_connector_without_the_fine_route_has_one_path():
    """``use_fine_route`` false builds no fine path (GraniteDoclingConnector.fine is None): one record."""
    from transformers.models.granite_docling.modeling_granite_docling import GraniteDoclingVisionModel

    config = transformers.AutoConfig.for_model("granite_docling_vision", **{**DOCLING, "use_fine_route": False})
    model = GraniteDoclingVisionModel(config)
    assert model.connector.fine is None
    paths = refpos.model_positions(config.to_dict()).stack("vision.output")
    assert [(r.shuffle, r.grid) for r in paths] == [(4, (2, 2))]
