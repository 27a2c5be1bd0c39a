"""wav2vec2-Conformer's positions: the relative sinusoid in every layer and nothing at the input — its encoder
builds a convolutional position module (``pos_conv_embed``) that ``Wav2Vec2ConformerEncoder.forward`` never calls,
so refpos claims no ``conv_position`` for it (the anchor shows transformers' output does not move when that module's
weights do)."""

from __future__ import annotations

import numpy as np
import pytest

import refpos

CONFORMER = {"model_type": "wav2vec2-conformer", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
             "num_conv_pos_embeddings": 4, "num_conv_pos_embedding_groups": 2}


def test_the_conformer_claims_the_relative_sinusoid_and_no_convolution_at_the_input():
    answer = refpos.model_positions(CONFORMER)
    assert [r.kind for r in answer.layers] == ["sinusoid1d", "sinusoid1d"]
    assert {r.at for r in answer.layers} == {"relative"} and not answer.not_modelled


def test_the_conformer_with_rotary_positions_is_still_refused():
    answer = refpos.model_positions({**CONFORMER, "position_embeddings_type": "rotary"})
    assert {r.kind for r in answer.layers} == {"refused"} and "position_embeddings_type" in answer.not_modelled


@pytest.mark.anchors
def test_transformers_conformer_encoder_does_not_read_its_convolutional_positions():
    torch = pytest.importorskip("torch", reason="the anchor runs transformers' code: pip install torch transformers")
    transformers = pytest.importorskip("transformers", reason="the anchor runs transformers' code")
    config = transformers.Wav2Vec2ConformerConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, conv_dim=(16,),
        conv_stride=(5,), conv_kernel=(10,), num_feat_extract_layers=1, num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, conv_depthwise_kernel_size=3)
    torch.manual_seed(0)
    model = transformers.Wav2Vec2ConformerModel(config).eval().double()
    audio = torch.randn(1, 400, dtype=torch.float64)
    with torch.no_grad():
        before = model(audio).last_hidden_state.numpy()
        for parameter in model.encoder.pos_conv_embed.parameters():
            parameter.normal_()
        after = model(audio).last_hidden_state.numpy()
    np.testing.assert_array_equal(before, after)
