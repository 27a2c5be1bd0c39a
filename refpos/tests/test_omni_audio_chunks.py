"""Qwen-Omni's audio encoders add their sinusoid to each chunk of ``2·n_window`` frames, so the positions restart
at 0 in every chunk: refpos, which models one run of positions over the clip, refuses them by name (the anchor shows
transformers' first layer reading row 0 again at the second chunk)."""

from __future__ import annotations

import numpy as np
import pytest

import refpos


@pytest.mark.parametrize("model_type", ["qwen2_5_omni_audio_encoder", "qwen3_omni_moe_audio_encoder"])
def test_the_chunked_sinusoid_is_refused_by_name(model_type):
    config = {"model_type": model_type, "encoder_layers": 1, "encoder_attention_heads": 2, "d_model": 16,
              "max_source_positions": 64, "num_mel_bins": 8}
    answer = refpos.model_positions(config)
    assert "restart at 0 in every chunk" in answer.not_modelled["model_type"]
    assert {r.kind for r in answer.layers if r.stack == "audio"} == {"refused"}


@pytest.mark.anchors
def test_transformers_restarts_the_positions_in_every_chunk():
    torch = pytest.importorskip("torch", reason="the anchor runs transformers' code: pip install torch transformers")
    transformers = pytest.importorskip("transformers", reason="the anchor runs transformers' code")
    from transformers.models.qwen2_5_omni.modeling_qwen2_5_omni import Qwen2_5OmniAudioEncoder

    config = transformers.models.qwen2_5_omni.configuration_qwen2_5_omni.Qwen2_5OmniAudioEncoderConfig(
        d_model=16, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=32, num_mel_bins=8,
        max_source_positions=64, n_window=4, output_dim=16)
    torch.manual_seed(0)
    encoder = Qwen2_5OmniAudioEncoder(config).eval().double()
    seen = []
    encoder.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    features = torch.randn(8, 32, dtype=torch.float64)  # 32 frames: four chunks of 2·n_window = 8
    with torch.no_grad():
        encoder(features, feature_lens=torch.tensor([32]))
        encoder.positional_embedding.positional_embedding.zero_()
        encoder(features, feature_lens=torch.tensor([32]))
    added = (seen[0] - seen[1]).reshape(-1, 16).numpy()  # 4 positions per chunk after the stride-2 convolution
    np.testing.assert_allclose(added[4:8], added[0:4], rtol=0, atol=1e-12)
    assert np.abs(added[4] - added[1]).max() > 0.1
