"""model_positions and ``refpos positions`` on vision, audio and time-series configs: each stack named for what it
is, its input site and layers, what its positions are computed from, a tower refpos does not model refused by
name, and the records' reference computations (the API the ``refpos check`` targets call).

The anchors against transformers' modules are refpos/tests/test_anchors_vision_grid.py and
test_anchors_vision_models.py; these tests need neither torch nor transformers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import refpos
from refpos.cli import main
from refpos.encodings.grid_variants import GRID_VARIANTS
from refpos.encodings.sincos2d import sincos_2d_grid
from refpos.encodings.sinusoid1d_variants import SINUSOID_1D_VARIANTS
from refpos.models.kinds.sinusoid1d import VARIANT_READS
from refpos.models.sources import INPUTS

VIT = {"model_type": "vit", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16, "image_size": 64,
       "patch_size": 16}
TEXT = {"model_type": "clip_text_model", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
        "max_position_embeddings": 77}
SAM = {"model_type": "sam", "vision_config": {"num_hidden_layers": 4, "num_attention_heads": 2, "hidden_size": 16,
                                              "window_size": 2, "global_attn_indexes": [1, 3], "image_size": 64},
       "prompt_encoder_config": {"hidden_size": 16}, "mask_decoder_config": {"num_hidden_layers": 2,
                                                                           "num_attention_heads": 2,
                                                                           "hidden_size": 16}}


def test_a_vision_tower_is_its_input_site_and_its_layers():
    positions = refpos.model_positions(VIT)
    assert positions.summary().splitlines() == ["vision input: grid(bicubic)", "vision layers 0-1: none ×2"]
    (site,) = positions.stack("vision.input")
    assert (site.grid, site.prefix, site.table_rows, site.dim) == ((4, 4), 1, 17, 16)
    assert positions.needs()["vision.input"] == {"image_grid": INPUTS["image_grid"]}
    assert positions.complete


def test_a_config_without_its_defaults_reads_the_class_defaults():
    """A config.json leaves out a value equal to its class default (ViT: 224 / 16): the row states them."""
    bare = {key: value for key, value in VIT.items() if key not in ("image_size", "patch_size")}
    assert refpos.model_positions(bare).stack("vision.input")[0].grid == (14, 14)


def test_a_composite_names_every_tower_and_what_it_needs(tmp_path, capsys):
    config = {"model_type": "clip", "text_config": TEXT, "vision_config": {**VIT, "model_type": "clip_vision_model"}}
    positions = refpos.model_positions(config)
    assert positions.stacks == ("encoder", "vision.input", "vision") and positions.complete
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf8")
    assert main(["positions", str(path)]) == 0
    out = capsys.readouterr().out
    assert "part vision: vision_config (clip_vision_model)" in out
    assert "needs image_grid: the patch grid of each image" in out and "way: 'bicubic'" in out
    assert "reads: rows ← image_grid" in out
    assert main(["positions", str(path), "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["needs"]) == {"encoder", "vision.input"}


def test_sam_is_three_networks_each_with_its_kind():
    positions = refpos.model_positions(SAM)
    assert positions.summary().splitlines() == [
        "vision input: grid(fixed)",
        "vision layers 0-3: decomposed(window) ×2 (0, 2), decomposed(global) ×2 (every 2nd)",
        "prompt_encoder input: fourier(sam_prompts)", "prompt_encoder layers 0-0: conv ×1",
        "mask_decoder layers 0-1: fourier(sam_image_grid) ×2"]
    windowed, global_ = positions.stack("vision")[:2]
    assert (windowed.grid, windowed.table_rows, global_.grid, global_.table_rows) == ((2, 2), (3, 3), (4, 4), (7, 7))
    assert positions.complete


def test_a_switch_value_or_a_stack_refpos_does_not_model_is_refused_by_name():
    detr = {"model_type": "detr", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
            "decoder_attention_heads": 2, "d_model": 16}
    learned = refpos.model_positions({**detr, "position_embedding_type": "learned"})
    assert {r.kind for r in learned} == {"refused"} and "position_embedding_type" in learned.not_modelled
    conditional = refpos.model_positions({**detr, "model_type": "conditional_detr"})
    assert [r.kind for r in conditional] == ["sincos2d", "refused"]
    assert "concatenates" in conditional.stack("decoder")[0].reason and not conditional.complete
    timm = refpos.model_positions({"model_type": "timm_wrapper", "architecture": "vit_base_patch16_224"})
    assert "architecture=vit_base_patch16_224" in timm.not_modelled["architecture"] and not timm.complete
    repvit = refpos.model_positions({"model_type": "timm_wrapper", "architecture": "repvit_m1"})
    assert [r.kind for r in repvit] == ["no_attention"] and repvit.complete


def test_a_time_series_decoder_continues_after_its_context():
    config = {"model_type": "time_series_transformer", "encoder_layers": 1, "decoder_layers": 1,
              "encoder_attention_heads": 2, "decoder_attention_heads": 2, "d_model": 16, "context_length": 24}
    sites = {r.stack: r for r in refpos.model_positions(config) if r.kind == "sinusoid1d"}
    assert (sites["encoder.input"].past, sites["decoder.input"].past) == (0, 24)
    unstated = refpos.model_positions({**config, "context_length": None})
    assert "context_length" in unstated.not_modelled and not unstated.complete
    with pytest.raises(ValueError, match="not stated"):
        unstated.stack("decoder.input")[0].reference(positions=np.arange(3))


def test_the_records_compute_their_reference():
    """Each record's reference() is its formula module's, with the record's parameters (what a check target
    compares a candidate with)."""
    site = refpos.model_positions(VIT).stack("vision.input")[0]
    table = np.random.default_rng(0).normal(size=(site.table_rows, site.dim))
    np.testing.assert_array_equal(site.reference(table, (4, 4)), table)  # its own grid: unchanged
    expected = GRID_VARIANTS["bicubic"].resample(table, (3, 5), prefix_tokens=1)
    np.testing.assert_array_equal(site.reference(table, (3, 5)), expected)
    with pytest.raises(ValueError, match="table must have shape"):
        site.reference(table[1:], (3, 5))
    mae = refpos.model_positions({**VIT, "model_type": "vit_mae"}).stack("vision.input")[0]
    native = np.asarray(mae.reference(height=4, width=4))
    np.testing.assert_array_equal(native, sincos_2d_grid(4, 4, 16, axes="xy", cls_rows=1))
    assert np.asarray(mae.reference(height=3, width=5)).shape == (16, 16)  # resampled bicubic, CLS kept apart
    fixed = refpos.model_positions(SAM).stack("vision.input")[0]
    with pytest.raises(ValueError, match="native grid"):
        fixed.reference(np.zeros((fixed.table_rows, fixed.dim)), (3, 3))


def test_a_network_without_attention_is_one_record():
    positions = refpos.model_positions({"model_type": "convnext", "depths": [3, 3, 9, 3], "num_hidden_layers": 4})
    assert positions.summary() == "vision layers 0-0: conv ×1" and positions.complete


def test_what_a_stack_needs_is_what_its_records_read():
    """needs() gathers the inputs of every record's ``reads``: DETR's sine reads the pixel mask on the encoder's
    queries and keys and the decoder's cross-attention keys, SAM's prompt encoder the points, its mask decoder the
    image grid, its windowed layers the place inside the window; MusicGen's sinusoid the token's slot."""
    detr = refpos.model_positions({"model_type": "detr", "encoder_layers": 1, "decoder_layers": 1,
                                   "encoder_attention_heads": 2, "decoder_attention_heads": 2, "d_model": 16})
    assert detr.stack("encoder")[0].reads == (("query", ("pixel_mask",)), ("key", ("pixel_mask",)))
    assert detr.stack("decoder")[0].reads == (("key", ("pixel_mask",)),)  # the object queries: a learned table
    assert detr.needs() == {"encoder": {"pixel_mask": INPUTS["pixel_mask"]},
                            "decoder": {"pixel_mask": INPUTS["pixel_mask"]}}
    sam = refpos.model_positions(SAM).needs()
    assert (set(sam["vision"]), set(sam["prompt_encoder.input"]), set(sam["mask_decoder"])) == (
        {"window", "image_grid"}, {"points"}, {"image_grid"})
    musicgen = refpos.model_positions({"model_type": "musicgen_decoder", "num_hidden_layers": 1,
                                       "num_attention_heads": 2, "hidden_size": 16})
    assert musicgen.stack("decoder.input")[0].reads == (("rows", ("cache_position",)),) and musicgen.complete
    assert "decoder" not in musicgen.needs()  # attention without positions reads nothing


def test_every_sinusoid_variant_says_what_it_reads():
    assert set(VARIANT_READS) == set(SINUSOID_1D_VARIANTS)
    assert all(set(source) <= set(refpos.models.kinds.KINDS["sinusoid1d"].reads) for source in VARIANT_READS.values())
