"""The position grids model_positions builds for the vision rows, against the models transformers builds from the
same config (anchors env).

For every family row whose input site is a grid (``input = {encoding = "grid", …}``), a small config of its class
is resolved by refpos and its model built by transformers (refpos.tests.model_anchors): the table the record
describes is the model's position table (``table_rows × dim``: the grid of ``image_size / patch_size`` with its
extra rows), the stack's layers are the model's attention modules in number and heads, and the way is the one the
model resamples by: an input of another size makes it call torch's ``interpolate`` with the record's mode,
``align_corners``, antialias, size form and dtype — on every call (``always``) or only with
``interpolate_pos_encoding=True``. Integers and names: exact.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import refpos
from refpos.models import families
from refpos.models.families import FAMILY_ROWS
from refpos.models.kinds.record import GEOMETRY_KEYS
from refpos.models.stages import stage_plan

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import (  # noqa: E402  (after the importorskip of torch)
    attention_modules,
    build,
    heads_of,
    interpolate_calls,
    position_tables,
    small_config,
)

#: towers no model class of transformers builds alone (IDEFICS's: refpos/tests/test_anchors_idefics_vision.py)
BUILT_APART = ("idefics_vision",)
GRID_ROWS = [row.model_type for row in FAMILY_ROWS if row.input is not None and row.input.encoding == "grid"
             and not row.unmodelled and not row.input.facts_of("grid").packed  # packed: test_anchors_packed_grid
             and not row.input.facts_of("grid").window  # two tables: test_anchors_grid_windowed
             and not row.input.facts_of("grid").clip  # a video clip's tables: test_anchors_video_grid
             and not row.input.facts_of("grid").stage_grids  # a table per stage: test_anchors_grid_fixed
             and row.model_type not in BUILT_APART]
#: an input of another size than the small configs' 32 × 32 (patch 8): a 6 × 5 patch grid
OTHER = (48, 40)
#: the window-bias rows' other size: a square grid their windows divide (Swin: 12 × 12 patches of 4)
OTHER_WINDOWED = (48, 48)


#: the window-bias rows' small geometries (per-stage lists), their absolute grid switched on
WINDOWED = {"swin": {"embed_dim": 16, "depths": [2, 1], "num_heads": [2, 4], "window_size": 4, "image_size": 32,
                     "patch_size": 4, "use_absolute_embeddings": True},
            "beit": {"image_size": 32, "patch_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "hidden_size": 16, "intermediate_size": 16, "use_absolute_position_embeddings": True}}


#: rows whose config class takes the patch as a pair (Hiera's 8 × 8 kernel moved 4 apart, padded 2: an 8 × 8 map)
PAIRS = {"hiera": {"patch_size": [8, 8], "patch_padding": [2, 2]}}
#: Hiera's other size: its tokens unroll into mask units, each side a multiple of 8 tokens (a 16 × 8 map)
OTHER_UNROLLED = (64, 32)


def _resolved(model_type: str):
    row = families.FAMILIES[model_type]
    if "bias_table" in row.encodings:
        beit = row.input_when[0] == "use_absolute_position_embeddings"
        config = small_config(model_type, **WINDOWED["beit" if beit else "swin"])
    else:
        config = small_config(model_type, **PAIRS.get(model_type, {}))
    positions = refpos.model_positions(config.to_dict())
    (site,) = [r for r in positions if r.kind == "grid"]
    return config, positions, site


def _table(model, site) -> tuple[int, int]:
    """The model's position table whose width is the record's (rows, width)."""
    shapes = [shape for shape in position_tables(model).values() if shape and shape[-1] == site.dim
              and int(np.prod(shape[:-1])) > 1]
    assert shapes, f"no position table of width {site.dim} in {sorted(position_tables(model))}"
    return int(np.prod(shapes[0][:-1])), shapes[0][-1]


def _input(model, config, size: tuple[int, int]) -> dict:
    """The model's main input at ``size`` pixels: the pixels, or, for a tower fed another network's feature map as
    its patches (``patch_embeds``: Unlimited-OCR's CLIP encoder), that map, one cell per patch."""
    if model.main_input_name == "patch_embeds":
        patch = config.patch_size
        return {"patch_embeds": torch.randn(1, config.hidden_size, size[0] // patch, size[1] // patch,
                                            dtype=torch.float64)}
    if "prompt_pixel_values" in inspect.signature(model.forward).parameters:
        # SegGPT: the prompt stacked over the image makes the config's image_size, the only size its patch embedding
        # takes; its table, of pretrain_image_size, is resampled to that map on every call
        half = (config.image_size[0] // 2, config.image_size[1])
        return {name: torch.randn(1, 3, *half, dtype=torch.float64)
                for name in ("pixel_values", "prompt_pixel_values", "prompt_masks")}
    return {"pixel_values": torch.randn(1, 3, *size, dtype=torch.float64)}


def _resampling(model, always: bool, size: tuple[int, int]) -> dict:
    """The interpolate call on the position table for an input of another size (with the flag when needed)."""
    fed = _input(model, model.config, size)
    with interpolate_calls() as calls:
        try:
            model(**fed)
        except (ValueError, RuntimeError):
            calls.clear()
    if not always:
        assert not calls, "the model resamples its grid without being asked: the row's always is false"
        with interpolate_calls() as calls:
            model(**fed, interpolate_pos_encoding=True)
    assert calls, "the model does not call interpolate on its position grid"
    return calls[0]


#: rows whose model takes a clip's frames as its batch, with a second attention per layer over the frames (X-CLIP's
#: tower): anchored in refpos/tests/test_anchors_xclip.py
FRAME_BATCHES = ("xclip_vision_model",)


@pytest.mark.parametrize("model_type", [t for t in GRID_ROWS if t not in FRAME_BATCHES])
def test_grid_records_are_the_model_s(model_type):
    config, positions, site = _resolved(model_type)
    model = build(config)
    assert _table(model, site) == (site.table_rows, site.dim)
    stack = site.stack.removesuffix(".input")
    layers = positions.stack(stack)
    attention = [(path, module) for path, module in attention_modules(model) if not path.startswith(MERGERS)]
    assert len(attention) == len(layers)
    heads = config.to_dict()[next(k for k in GEOMETRY_KEYS["single"]["heads"] if k in config.to_dict())]
    per_layer = [r.n_heads for r in layers] if all(hasattr(r, "n_heads") for r in layers) else [heads] * len(layers)
    if families.FAMILIES[model_type].stages is not None:  # stages of their own heads (Hiera): each layer its stage's
        per_layer = [stage.heads for stage in stage_plan(config.to_dict(), families.FAMILIES[model_type].stages)
                     for _ in range(stage.layers)]
    assert [heads_of(module) for _, module in attention] == per_layer
    if site.variant is None or model_type in SELF_RESAMPLING or site.variant.read == "buckets":
        return  # a gather, not a call of interpolate: anchored by value (refpos/tests/test_anchors_grid_buckets.py)
    call = _resampling(model, site.always, OTHER_WINDOWED if "bias_table" in families.FAMILIES[model_type].encodings
                       else OTHER_UNROLLED if model_type in PAIRS else OTHER)
    variant = site.variant
    assert call["shape"][-2:] == site.grid
    assert (call["mode"], call["align_corners"], call["antialias"]) == \
        (variant.mode, variant.align_corners, variant.antialias)
    assert (call["scale_factor"] is None) == (variant.scale_factor_offset is None)
    assert call["dtype"] == ("float32" if variant.computes_in == "float32" else "float64")


#: the attention after a tower's layers that merges its patches, adding no positions (MiniCPM's window-attention
#: merger, MiniCPMOcrViTWindowAttentionMerger), which the tower's layer records do not count
MERGERS = ("vit_merger",)
#: rows whose model resamples without torch's interpolate: computing the weights itself (anchored by value below), or
#: tiling the table (SAM 3's ViT: the tile way's anchor in refpos/tests/test_anchors_grid.py)
SELF_RESAMPLING = ("siglip2_vision_model", "sam3_vit_model")


def test_siglip2_resizes_as_its_way():
    """SigLIP2 resizes its grid per image with weights it computes itself; the record's way gives the same rows
    (float32 weights: within 1e-6 of the table's largest entry)."""
    config, _, site = _resolved("siglip2_vision_model")
    model = build(config)
    side = site.grid[0]
    embeddings = next(m for m in model.modules() if hasattr(m, "resize_positional_embeddings"))
    table = embeddings.position_embedding.weight.detach()
    shapes = torch.tensor([[3, 5], [side + 2, side - 1]])
    resized = type(embeddings).resize_positional_embeddings(
        table.reshape(side, side, -1), shapes, max_length=int(shapes.prod(-1).max()))
    for image, (h, w) in enumerate(shapes.tolist()):
        expected = np.asarray(site.reference(table.numpy(), (h, w)))
        np.testing.assert_allclose(resized[image, : h * w].numpy(), expected, rtol=0,
                                   atol=1e-6 * float(table.abs().max()))


def test_the_grid_anchor_fails_on_a_wrong_row(monkeypatch):
    """A row naming another way, or a wrong count of extra rows, fails the anchor above."""
    row = families.FAMILIES["deit"]
    for facts in ({"way": "bilinear", "prefix": 2}, {"way": "bicubic", "prefix": 1}):
        wrong = dataclasses.replace(row, input=dataclasses.replace(
            row.input, facts=(("grid", dataclasses.replace(row.input.facts_of("grid"), **facts)),)))
        monkeypatch.setitem(families.FAMILIES, "deit", wrong)
        with pytest.raises(AssertionError):
            test_grid_records_are_the_model_s("deit")


@pytest.mark.parametrize("model_type", GRID_ROWS)
def test_grid_defaults_are_the_config_class_s(model_type):
    """A config.json leaves out the values equal to its class's defaults: without them, the record's native grid
    is the one the class's defaults give (a square of ``num_patches`` where the config states the table)."""
    facts = families.FAMILIES[model_type].input.facts_of("grid")
    if facts.strides is not None:  # a spectrogram's grid (AST): refpos/tests/test_anchors_grid_fixed.py
        return
    defaults = transformers.AutoConfig.for_model(model_type).to_dict()
    # the patch size stays where another stack of the row reads it too (SAM 3's rotation)
    shared = facts.patch if "vision_rope" in families.FAMILIES[model_type].encodings else None
    bare = {k: v for k, v in small_config(model_type, **PAIRS.get(model_type, {})).to_dict().items()
            if k not in (facts.image, facts.patch, facts.positions) or k == shared}
    if families.FAMILIES[model_type].input_when is not None:  # the grid switched on
        bare[families.FAMILIES[model_type].input_when[0]] = True
    (site,) = [r for r in refpos.model_positions(bare) if r.kind == "grid"]
    if facts.positions is not None:
        assert site.grid[0] * site.grid[1] == defaults[facts.positions]
        return
    patch = bare[shared] if shared else defaults[facts.patch]
    pairs = [v if isinstance(v, (list, tuple)) else (v, v) for v in (defaults[facts.image], patch)]
    assert site.grid == (pairs[0][0] // pairs[1][0], pairs[0][1] // pairs[1][1])


@pytest.mark.parametrize("model_type", [row.model_type for row in FAMILY_ROWS if row.switch is not None
                                        and row.switch.key == "use_absolute_embeddings"])
def test_swin_variants_refused_with_their_absolute_table_cannot_run_it(model_type):
    """The rows that refuse use_absolute_embeddings: transformers' table has one row more than the patches, and the
    model fails on every input (when it runs, the row can name the grid as Swin's does)."""
    config = small_config(model_type, **{**WINDOWED["swin"], "num_channels": 3})
    assert {r.kind for r in refpos.model_positions(config.to_dict())} == {"refused"}
    model = build(config)
    for flag in ({}, {"interpolate_pos_encoding": True}):
        with pytest.raises(RuntimeError, match="must match the size"):
            model(pixel_values=torch.randn(1, 3, 32, 32, dtype=torch.float64), **flag)
