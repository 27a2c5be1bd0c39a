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
               and not row.unmodelled and row.input.facts_of("grid").packed
               and not row.input.facts_of("grid").frames  # Kimi K2.5: test_kimi_s_clip_frames_add_their_sinusoid
               and not row.input.facts_of("grid").class_row]  # Inkling2: test_inkling2_s_images_start_with_a_class_row
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
          "muse_spark_vision": {"pos_emb_height": 8, "pos_emb_width": 8, "patch_size": 4},
          "kimi_k25_vision": {"pos_emb_height": 8, "pos_emb_width": 8, "pos_emb_time": 4, "patch_size": 4}}
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


def test_kimi_s_clip_frames_add_their_sinusoid():
    """Kimi K2.5's tower adds a fixed sinusoid over a clip's frames beside its grid (time_position_embeddings: frame f
    of a clip of t > 1 frames reads row f + 1, an image the zero row): what table and sinusoid add together — the
    position module's output minus its output with both zeroed — is refpos's tokens within the grid's float32 bound
    plus the float32 sinusoid's (the angle f·ω and its sine rounded: 2u(t + 1)); the grid alone is outside it."""
    config = small("kimi_k25_vision")
    (site,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "grid"]
    assert site.frames == config.pos_emb_time
    model = build(config).to(torch.float64)
    module = next(m for m in model.modules() if hasattr(m, "time_position_embeddings"))
    name = next(n for n, p in model.named_parameters() if p.shape[:2] == site.grid and p.shape[-1] == site.dim)
    table = dict(model.named_parameters())[name]
    tokens = sum(t * h * w for t, h, w in GRIDS)
    channels = getattr(config, "num_channels", 3)
    patches = torch.randn(tokens, channels, config.patch_size, config.patch_size, dtype=torch.float64,
                          generator=torch.Generator().manual_seed(0))  # one image patch per token
    seen = []
    handle = module.register_forward_hook(lambda m, args, out: seen.append(out.clone()))
    with torch.no_grad():
        model(patches, torch.tensor(GRIDS))
        kept, frames = table.clone(), module.time_position_embeddings.clone()
        table.zero_()
        module.time_position_embeddings.zero_()
        model(patches, torch.tensor(GRIDS))
        table.copy_(kept)
        module.time_position_embeddings.copy_(frames)
    handle.remove()
    observed = (seen[0] - seen[1]).reshape(tokens, -1).numpy()
    flat = kept.reshape(-1, site.dim).numpy()
    expected = np.asarray(site.tokens(flat, GRIDS))
    bound = tolerance(site, flat, GRIDS) + 2 * 2.0**-24 * (max(t for t, _, _ in GRIDS) + 1)
    assert np.max(np.abs(observed - expected)) <= bound
    grid_alone = np.asarray(packed_position_rows(lambda hw: site.reference(flat, hw), GRIDS, site.merge))
    assert np.max(np.abs(observed - grid_alone)) > bound  # the frames' sinusoid is seen


def test_inkling2_s_images_start_with_a_class_row():
    """Inkling2's embeddings put a class token before each image, carrying the learned cls_position_embedding, then
    the image's patches with the grid resampled in merge blocks (Inkling2VisionEmbeddings.forward): what the table
    and the class position add together — the output minus the output with both zeroed — is refpos's tokens given
    that weight, within the grid's float32 bound; without the class rows the shapes differ."""
    config = transformers.AutoConfig.for_model("inkling2_vision", **{**SMALL, "posemb_grid_size": 8, "patch_size": 4,
                                                                      "spatial_merge_size": 2})
    (site,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "grid"]
    assert site.class_row == "cls_position_embedding" and site.merge == 2
    from transformers.models.inkling2.modeling_inkling2 import Inkling2VisionEmbeddings

    module = Inkling2VisionEmbeddings(config).to(torch.float64)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in (module.position_embedding.weight, module.cls_position_embedding, module.class_embedding):
            parameter.copy_(torch.randn(parameter.shape, dtype=torch.float64, generator=generator))
    grids = torch.tensor(GRIDS)
    counts = grids.prod(-1)
    # pixels in merge blocks of patches, channels last: (patches · p², C)
    patches = torch.randn(int(counts.sum()) * config.patch_size ** 2, config.num_channels, dtype=torch.float64,
                          generator=generator)
    patch_index = torch.arange(int(counts.sum())) + torch.repeat_interleave(torch.arange(1, len(GRIDS) + 1), counts)
    with torch.no_grad():
        out = module(patches, grids, patch_index)
        kept = module.position_embedding.weight.clone(), module.cls_position_embedding.clone()
        module.position_embedding.weight.zero_()
        module.cls_position_embedding.zero_()
        zeroed = module(patches, grids, patch_index)
    observed = (out - zeroed).numpy()
    table, class_row = kept[0].numpy(), kept[1].numpy()
    expected = np.asarray(site.tokens(table, GRIDS, class_row))
    assert observed.shape == expected.shape
    assert np.max(np.abs(observed - expected)) <= tolerance(site, table, GRIDS)
    assert np.asarray(site.tokens(table, GRIDS, np.zeros_like(class_row))).shape == observed.shape
    assert np.max(np.abs(observed - np.asarray(site.tokens(table, GRIDS, np.zeros_like(class_row))))) > 0.1
    with pytest.raises(ValueError, match=r"class_row: the vision\.input tower's class tokens carry"):
        site.tokens(table, GRIDS)
