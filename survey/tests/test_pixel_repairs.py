"""The pixel side's repairs (:mod:`survey.pixel_repairs`): each states only the fields its model type's forward
cannot run without, the fields its class derives from them derived anew, and leaves every other model type's config
as it is; a VQ model without a forward is run by its ``encode`` (:func:`survey.pixels.encoding`)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="builds transformers' configs and modules: pip install torch transformers")
pytest.importorskip("transformers", reason="builds transformers' configs")

import torch
from transformers import CONFIG_MAPPING

from survey import tiny
from survey.pixel_repairs import PIXEL_REPAIRS, repair
from survey.pixels import encoding


def _shrunk(model_type: str):
    return tiny.shrink(CONFIG_MAPPING[model_type](), "tiny")


def test_every_repair_says_why():
    assert all(entry.why and callable(entry.fields) for entry in PIXEL_REPAIRS.values())


def test_a_model_type_without_a_repair_keeps_its_config():
    config = _shrunk("vit")
    assert repair(config) is config


def test_lw_detr_gets_one_projector_level_and_derives_its_level_count():
    config = repair(_shrunk("lw_detr"))
    assert list(config.projector_scale_factors) == [1.0]
    assert config.num_feature_levels == 1 and list(config.projector_in_channels) == [config.d_model]
    assert repair(config).to_dict() == config.to_dict()  # a repaired config needs no more


def test_janus_latent_grid_and_deepseek_neck():
    janus = repair(_shrunk("janus_vqgan"))
    assert janus.num_patches == 64 // 2 ** (len(janus.channel_multiplier) - 1)
    ocr = repair(_shrunk("deepseek_ocr2_vision"))
    assert ocr.sam_config.downsample_channels[-1] == ocr.encoder_config.hidden_size


def test_pp_ocr_mobile_detector_keeps_a_width_per_backbone_output():
    config = repair(_shrunk("pp_ocrv5_mobile_det"))
    assert list(config.layer_list_out_channels) == [12, 18, 42, 360]
    backbone = CONFIG_MAPPING["pp_ocrv5_mobile_det"]().backbone_config
    assert len(config.layer_list_out_channels) == len(backbone.out_indices)


def test_a_module_without_a_forward_runs_its_encode_and_others_are_left_alone():
    class Tokenizer(torch.nn.Module):
        def encode(self, pixel_values):
            return pixel_values * 2

    class Plain(torch.nn.Module):
        def forward(self, pixel_values):
            return pixel_values

        def encode(self, pixel_values):
            return pixel_values * 3

    x = torch.ones(1, 3, 2, 2)
    assert torch.equal(encoding(Tokenizer())(pixel_values=x), 2 * x)
    assert torch.equal(encoding(Plain())(pixel_values=x), x)
    with pytest.raises(NotImplementedError):
        torch.nn.Module()(x)  # the placeholder encoding replaces
