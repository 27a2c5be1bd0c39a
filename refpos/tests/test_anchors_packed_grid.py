"""The grids of the packed towers (Qwen3-VL and its kin) against the towers transformers builds (anchors env).

A packed tower takes flat patches and their ``(t, h, w)`` grids and adds to each token its image's grid resampled
to ``(h, w)``, in merge-block order, once per frame (:meth:`refpos.models.kinds.grid.GridLayer.tokens`). Each row's
tower is built small, in float64, and fed two images of different grids, one of them a clip of two frames; what
its table adds is its first block's input minus the same input with the table zeroed (the addition is linear in
the table). Bound: the way's resampling bound at float32 (:func:`refpos.encodings.grid_mistakes.grid_tolerance`:
the model computes its coordinates and weights in float32, the way's ``computes_in``), the largest of the images'.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.encodings.grid import packed_position_rows
from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance
from refpos.models.families import FAMILY_ROWS

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import build  # noqa: E402  (after the importorskip of torch)

PACKED_ROWS = [row.model_type for row in FAMILY_ROWS if row.input is not None and row.input.encoding == "grid"
               and not row.unmodelled and row.input.facts_of("grid").packed]
#: two images: a clip of two frames of 4 × 6 patches, and an image of 6 × 4 (merge blocks of 2 divide both)
GRIDS = [[2, 4, 6], [1, 6, 4]]
#: the same without the clip's second frame, for a tower whose row models images only (GLM-Image)
IMAGES = [[1, 4, 6], [1, 6, 4]]
#: the small geometry of each family of packed towers (a table of 64 grid rows: 8 × 8)
QWEN = {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 32, "out_hidden_size": 32,
        "num_position_embeddings": 64, "spatial_merge_size": 2, "patch_size": 4, "temporal_patch_size": 2,
        "deepstack_visual_indexes": []}
TOWERS = {"cosmos3_edge_vision": {"num_patches": 64, "patch_size": 4},
          "hunyuan_vl_vision": {"max_image_size": 32, "patch_size": 4},
          "hy_v4_vl_vision": {"max_image_size": 32, "patch_size": 4},
          "glm_image_vision": {"image_size": 32, "patch_size": 4},
          "glm4v_vision": {**QWEN, "image_size": 32},
          "glm4v_moe_vision": {**QWEN, "image_size": 32},
          "ovis2_5_vision": {"image_size": 32, "patch_size": 4},
          "paddleocr_vl_vision": {"image_size": 32, "patch_size": 4},
          "muse_glimmer_vision": {"pos_emb_height": 8, "pos_emb_width": 8, "patch_size": 4},
          "muse_spark_vision": {"pos_emb_height": 8, "pos_emb_width": 8, "patch_size": 4}}
#: the towers fed one batch of patches ``(1, t·h·w, C, p, p)`` (PaddleOCR-VL's), the others flat rows
BATCHED = ("paddleocr_vl_vision",)
SMALL = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 32}


def small(model_type: str):
    """A small config of ``model_type``'s class: :data:`QWEN` for Qwen3-VL's kin, else :data:`SMALL` and its
    :data:`TOWERS` entry."""
    values = {**SMALL, **TOWERS[model_type]} if model_type in TOWERS else QWEN
    return transformers.AutoConfig.for_model(model_type, **values)


def added_rows(model, table_name: str, grids: list[list[int]]) -> np.ndarray:
    """What the tower's table adds to the tokens of ``grids``: the output of the embedding module that holds it
    (or, for a table added in the tower's own forward, its first layer's input), minus the same with the table
    zeroed."""
    config = model.config
    tokens = sum(t * h * w for t, h, w in grids)
    channels = getattr(config, "in_channels", None) or getattr(config, "num_channels", 3)
    temporal = getattr(config, "temporal_patch_size", None) or getattr(config, "patch_temporal", None) or 1
    width = channels * temporal * config.patch_size ** 2
    patches = torch.randn(tokens, width, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    if config.model_type in BATCHED:
        patches = patches.reshape(1, tokens, channels, config.patch_size, config.patch_size)
    owner = model.get_submodule(table_name.rsplit(".", 2)[0] if table_name.count(".") > 1 else "")
    seen = []
    if "embed" in type(owner).__name__.lower():
        handle = owner.register_forward_hook(lambda module, args, out: seen.append(out.clone()))
    else:
        layers = next(child for name, child in owner.named_children() if name in ("blocks", "layers"))
        handle = layers[0].register_forward_pre_hook(
            lambda module, args, kwargs: seen.append((args[0] if args else kwargs["hidden_states"]).clone()),
            with_kwargs=True)
    table = dict(model.named_parameters())[table_name]
    with torch.no_grad():
        for zeroed in (False, True):
            kept = table.clone()
            if zeroed:
                table.zero_()
            try:
                model(patches, torch.tensor(grids))
            except RuntimeError:  # HunYuan-VL's merger takes no clip: its embedding has run
                assert len(seen) == 1 + zeroed
            table.copy_(kept)
    handle.remove()
    return (seen[0] - seen[1]).reshape(tokens, -1).numpy()


@pytest.mark.parametrize("model_type", PACKED_ROWS)
def test_the_packed_rows_are_the_tower_s(model_type):
    config = small(model_type)
    (site,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "grid"]
    assert site.packed and site.grid == (8, 8)
    model = build(config).to(torch.float64)
    name = next(n for n, p in model.named_parameters() if p.shape == (site.table_rows, site.dim))
    table = dict(model.named_parameters())[name].detach().numpy()
    grids = GRIDS if site.clips else IMAGES
    observed = added_rows(model, name, grids)
    expected = np.asarray(site.tokens(table, grids))
    assert observed.shape == expected.shape
    bound = tolerance(site, table, grids)
    assert np.max(np.abs(observed - expected)) <= bound
    other = 1 if site.merge > 1 else 2  # the other token order
    shuffled = np.asarray(packed_position_rows(lambda hw: site.reference(table, hw), grids, other))
    assert np.max(np.abs(observed - shuffled)) > bound  # the order is seen


def tolerance(site, table: np.ndarray, grids: list[list[int]]) -> float:
    """The way's float32 resampling bound, the largest over the images of ``grids``."""
    return max(grid_tolerance(GridInputs(table, (h, w), site.variant, prefix_tokens=site.prefix,
                                         source_grid=site.grid)) for _, h, w in grids)


def test_the_packed_anchor_fails_on_raster_order():
    """The anchor's comparison tells the tower's merge-block order from raster order (the check can fail)."""
    table = np.random.default_rng(1).standard_normal((64, 8))
    config = transformers.AutoConfig.for_model("qwen3_vl_vision", **{**QWEN, "hidden_size": 8})
    (site,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "grid"]
    merged = np.asarray(site.tokens(table, GRIDS))
    raster = np.asarray(packed_position_rows(lambda hw: site.reference(table, hw), GRIDS, 1))
    assert np.max(np.abs(merged - raster)) > 0.1
