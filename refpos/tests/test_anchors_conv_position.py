r"""refpos.encodings.conv_position against transformers 5.25's positional convolutions (torch CPU), every variant.

Each model type's module (``pos_conv_embed``; OmniASR's ``encode_positions``), built from a small config in
float32 and in float64 with every parameter drawn, is run on seeded frames; refpos computes the embedding from
the module's own parameters (the weight norm's ``original1`` = v and ``original0`` = g where the module has
one). Variants: the weight-normalised kernel (wav2vec2, hubert, wavlm, unispeech, unispeech-sat, speecht5),
the strided one (sew, sew-d: ``squeeze_factor``), HuBERT's ``conv_pos_batch_norm`` (batch norm, plain kernel),
Data2Vec-audio's stacked layers with layer norm, OmniASR's plain kernel added inside the module; even and odd
kernels; tanh-GELU, ReLU and SiLU activations besides the exact GELU. SEW's sum with the frames is compared
against torch's ``AvgPool1d`` (the layer its encoder pools with).

Tolerance: :func:`refpos.encodings.conv_position_mistakes.embedding_bound` with the unit of the module's dtype
(``2⁻²⁴`` float32, ``2⁻⁵³`` float64): a sum of ``K·C/G`` products in any order, the weight norm's sum of squares,
the batch or layer norm, the activation's slope and evaluation (its docstring derives each term).
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.backend import to_numpy
from refpos.encodings.conv_position import add_conv_positions
from refpos.encodings.conv_position_mistakes import ConvPositionInputs, embedding_bound

torch = pytest.importorskip("torch", reason="conv position anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="conv position anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

UNIT = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}
HIDDEN, GROUPS, FRAMES = 32, 4, 37


def _np(t) -> np.ndarray:
    return t.detach().double().numpy()


def _module(model_type: str, kernel: int, activation: str):
    """``(module, channels_first, settings)``: the model type's positional convolution from a small config."""
    import transformers as tf

    common = {"hidden_size": HIDDEN, "num_conv_pos_embedding_groups": GROUPS}
    if model_type == "data2vec-audio":
        config = tf.Data2VecAudioConfig(conv_pos_kernel_size=kernel, num_conv_pos_embeddings=3,
                                        feat_extract_activation=activation, **common)
        from transformers.models.data2vec.modeling_data2vec_audio import Data2VecAudioPositionalConvEmbedding
        return Data2VecAudioPositionalConvEmbedding(config), False, {}
    if model_type == "omniasr":
        config = tf.OmniASRAudioConfig(num_conv_pos_embeddings=kernel, hidden_act=activation, **common)
        from transformers.models.omniasr.modeling_omniasr import OmniASRPositionalConvEmbedding
        return OmniASRPositionalConvEmbedding(config), False, {}
    specs = {  # model type -> (config class, module path, module class, channels first, extra config)
        "wav2vec2": ("Wav2Vec2Config", "wav2vec2.modeling_wav2vec2", "Wav2Vec2PositionalConvEmbedding", False, {}),
        "hubert": ("HubertConfig", "hubert.modeling_hubert", "HubertPositionalConvEmbedding", False, {}),
        "hubert (conv_pos_batch_norm)": ("HubertConfig", "hubert.modeling_hubert", "HubertPositionalConvEmbedding",
                                         False, {"conv_pos_batch_norm": True}),
        "wavlm": ("WavLMConfig", "wavlm.modeling_wavlm", "WavLMPositionalConvEmbedding", False, {}),
        "unispeech": ("UniSpeechConfig", "unispeech.modeling_unispeech", "UniSpeechPositionalConvEmbedding", False,
                      {}),
        "unispeech-sat": ("UniSpeechSatConfig", "unispeech_sat.modeling_unispeech_sat",
                          "UniSpeechSatPositionalConvEmbedding", False, {}),
        "speecht5": ("SpeechT5Config", "speecht5.modeling_speecht5", "SpeechT5PositionalConvEmbedding", False, {}),
        "sew": ("SEWConfig", "sew.modeling_sew", "SEWPositionalConvEmbedding", True, {"squeeze_factor": 2}),
        "sew-d": ("SEWDConfig", "sew_d.modeling_sew_d", "SEWDPositionalConvEmbedding", True, {"squeeze_factor": 3}),
    }
    config_name, path, class_name, channels_first, extra = specs[model_type]
    import importlib

    config = getattr(tf, config_name)(num_conv_pos_embeddings=kernel, feat_extract_activation=activation,
                                      **common, **extra)
    module = getattr(importlib.import_module(f"transformers.models.{path}"), class_name)(config)
    return module, channels_first, {"stride": extra.get("squeeze_factor", 1)}


def _drawn(module, dtype):
    torch.manual_seed(0)
    module = module.to(dtype).eval()
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if name.endswith("original0"):  # g: positive magnitudes
                parameter.uniform_(0.5, 1.5)
            else:
                parameter.normal_(0.0, 0.3 if "weight" in name else 0.1)
        for name, buffer in module.named_buffers():
            if name.endswith("running_var"):
                buffer.uniform_(0.5, 2.0)
            elif name.endswith("running_mean"):
                buffer.normal_(0.0, 0.3)
    return module


def _inputs(model_type: str, module, x: np.ndarray, activation: str, stride: int) -> ConvPositionInputs:
    if model_type == "data2vec-audio":
        layers = module.layers
        return ConvPositionInputs("stacked", x, tuple(_np(layer.conv.weight) for layer in layers),
                                  tuple(_np(layer.conv.bias) for layer in layers), GROUPS, activation,
                                  eps=layers[0].layer_norm.eps)
    conv = module.conv
    if hasattr(conv, "parametrizations"):
        weight = conv.parametrizations.weight
        return ConvPositionInputs("weight_norm", x, (_np(weight.original1),), (_np(conv.bias),), GROUPS, activation,
                                  stride=stride, weight_g=_np(weight.original0).reshape(-1))
    if getattr(module, "batch_norm", None) is not None:
        bn = module.batch_norm
        stats = (_np(bn.running_mean), _np(bn.running_var), _np(bn.weight), _np(bn.bias), bn.eps)
        return ConvPositionInputs("batch_norm", x, (_np(conv.weight),), (_np(conv.bias),), GROUPS, activation,
                                  batch_norm=stats)
    return ConvPositionInputs("plain", x, (_np(conv.weight),), (_np(conv.bias),), GROUPS, activation, stride=stride)


MODEL_TYPES = ["wav2vec2", "hubert", "hubert (conv_pos_batch_norm)", "wavlm", "unispeech", "unispeech-sat", "speecht5",
               "sew", "sew-d", "data2vec-audio", "omniasr"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kernel", [4, 7, 16])
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_embedding_equals_transformers(model_type, kernel, dtype):
    if model_type == "omniasr" and kernel % 2:
        pytest.skip("OmniASR removes the last frame whatever the kernel: an odd kernel's output cannot be added")
    module, channels_first, settings = _module(model_type, kernel, "gelu")
    module = _drawn(module, dtype)
    x = np.random.default_rng(kernel).standard_normal((2, FRAMES, HIDDEN))
    frames = torch.from_numpy(x).to(dtype)
    with torch.no_grad():
        theirs = module(frames.transpose(1, 2) if channels_first else frames)
    theirs = _np(theirs.transpose(1, 2) if channels_first else theirs)
    inputs = _inputs(model_type, module, x, "gelu", settings.get("stride", 1))
    ours, bound = inputs.embedding(), embedding_bound(inputs, unit=UNIT[dtype])
    if model_type == "omniasr":  # the module returns x + e
        ours, bound = x + ours, bound + UNIT[dtype] * np.abs(x + ours)
    assert ours.shape == theirs.shape
    assert np.all(np.abs(ours - theirs) <= bound), np.abs(ours - theirs).max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("activation", ["gelu_new", "relu", "swish"])
@pytest.mark.parametrize("model_type", ["wav2vec2", "data2vec-audio"])
def test_other_activations_equal_transformers(model_type, activation, dtype):
    module, _, _ = _module(model_type, 8, activation)
    module = _drawn(module, dtype)
    x = np.random.default_rng(3).standard_normal((1, FRAMES, HIDDEN))
    with torch.no_grad():
        theirs = _np(module(torch.from_numpy(x).to(dtype)))
    inputs = _inputs(model_type, module, x, activation, 1)
    ours, bound = inputs.embedding(), embedding_bound(inputs, unit=UNIT[dtype])
    assert np.all(np.abs(ours - theirs) <= bound), np.abs(ours - theirs).max()


@pytest.mark.parametrize("stride", [2, 3])
def test_sew_sum_equals_the_pooled_frames_plus_the_embedding(stride):
    """``add_conv_positions`` against ``AvgPool1d(s, s)`` of the frames plus the embedding, cut to the shorter."""
    rng = np.random.default_rng(stride)
    x, e = rng.standard_normal((2, FRAMES, HIDDEN)), rng.standard_normal((2, FRAMES // stride + 1, HIDDEN))
    pooled = _np(torch.nn.AvgPool1d(stride, stride)(torch.from_numpy(x).transpose(1, 2)).transpose(1, 2))
    length = min(pooled.shape[1], e.shape[1])
    expected = pooled[:, :length] + e[:, :length]
    np.testing.assert_allclose(to_numpy(add_conv_positions(x, e, stride=stride)), expected, rtol=4 * 2.0**-53,
                               atol=(stride + 2) * 2.0**-53 * np.abs(x).max())
