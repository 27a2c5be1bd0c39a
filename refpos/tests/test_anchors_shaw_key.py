r"""refpos.encodings.shaw_key against transformers 5.25's speech encoders (torch CPU, float32).

* Granite Speech's conformer attention (``GraniteSpeechConformerAttention``, and Granite Speech 5's
  ``GraniteSpeech5EncoderAttention``): the ``attn_mask`` its forward hands to ``scaled_dot_product_attention`` (or
  to its eager attention), block by block, at 11 frames in blocks of 4 (the last one partial), with the queries of
  that same call;
* wav2vec2-BERT's ``_apply_relative_key_position_encoding``: the bias it returns for 11 frames at an asymmetric clip
  (3 below, 2 above);
* SpeechT5's encoder (``SpeechT5RelativePositionalEncoding`` and ``SpeechT5Attention``): the softmax input of its
  first layer's attention, the key projection zero, at 11 frames of a table of ``2M`` rows (``M = 3``: distances
  query minus key, clipped to ``−3 … 2``), with the scaled queries of that call.

Tolerance: the float32 bound per entry of :meth:`refpos.encodings.shaw_key_mistakes.ShawKeyInputs.bound`
(:math:`\gamma_{d+3}\,\sigma\sum_k |q_k||E_k|`: the scale stored and applied, the ``d`` products and their sums), the
queries and table being float32 values (exact in float64). Each form's output is named nothing by
:func:`refpos.encodings.shaw_key_mistakes.identify_shaw_key`, and a wrong variant (the distance's other sign, blocks
one frame longer, the clip exchanged) lies outside the bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.shaw_key_mistakes import ShawKeyInputs, identify_shaw_key

torch = pytest.importorskip("torch", reason="shaw_key anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="shaw_key anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

FRAMES, BLOCK, HEADS, DIM = 11, 4, 2, 8
#: the mask value of a padded pair: below it, a logit is masked
MASKED = -1e30


def _recorded(module, hidden, call):
    """The first ``scaled_dot_product_attention`` (or ``softmax``) the module's forward makes: its query (or None)
    and its additive mask (the softmax input with the key projection zero)."""
    from torch.overrides import TorchFunctionMode

    found = {}

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.nn.functional.scaled_dot_product_attention and "mask" not in found:
                found["query"], found["mask"] = args[0], kwargs.get("attn_mask")
            if func in (torch.softmax, torch.nn.functional.softmax) and "mask" not in found:
                found["mask"] = args[0]
            return func(*args, **kwargs)

    with torch.no_grad():
        module.k_proj.weight.zero_() if hasattr(module, "k_proj") else module.to_kv.weight.zero_()
        with Recorder():
            call()
    return found


def _laid(blocks: np.ndarray, frames: int) -> np.ndarray:
    """``(count, H, c, c)`` blocks as ``(H, T, T)``: 0 off the blocks and at the masked pairs."""
    count, heads, size = blocks.shape[0], blocks.shape[1], blocks.shape[-1]
    full = np.zeros((heads, count * size, count * size))
    for b in range(count):
        full[:, b * size:(b + 1) * size, b * size:(b + 1) * size] = blocks[b]
    full = full[:, :frames, :frames]
    return np.where(full <= MASKED, 0.0, full)


def _queries(query: np.ndarray, frames: int) -> np.ndarray:
    """The ``(count·B, H, c, d)`` block queries as ``(H, T, d)``."""
    count, heads, size, dim = query.shape
    return query.transpose(1, 0, 2, 3).reshape(heads, count * size, dim)[:, :frames]


def _check(observed: np.ndarray, inputs: ShawKeyInputs, wrong: dict) -> float:
    reference, bound = inputs.reference()
    error = np.abs(observed - reference)
    assert np.all(error <= bound), float(np.max(error - bound))
    assert identify_shaw_key(observed, inputs) is None
    for name, changed in wrong.items():
        variant = inputs.output(**changed)
        assert np.any(np.abs(variant - observed) > bound), name
    return float(np.max(error))


def test_granite_speech_blocks_are_refpos_s_terms():
    from transformers.models.granite_speech.configuration_granite_speech import GraniteSpeechEncoderConfig
    from transformers.models.granite_speech.modeling_granite_speech import GraniteSpeechCTCEncoder

    config = GraniteSpeechEncoderConfig(input_dim=6, num_layers=1, hidden_dim=16, num_heads=HEADS, dim_head=DIM,
                                        context_size=BLOCK, max_pos_emb=6, output_dim=5)
    torch.manual_seed(0)
    encoder = GraniteSpeechCTCEncoder(config).eval()
    attention = encoder.layers[0].attn
    with torch.no_grad():
        attention.rel_pos_emb.weight.normal_()
    hidden = torch.randn(1, FRAMES, 16)
    found = _recorded(attention, hidden, lambda: attention(hidden, attention_dists=encoder.attention_dists))
    mask = found["mask"].detach().double().numpy()  # (count, H, c, c)
    assert mask.shape == (3, HEADS, BLOCK, BLOCK) and np.all(mask[-1, :, :, 3:] <= MASKED)
    table = attention.rel_pos_emb.weight.detach().double().numpy()
    inputs = ShawKeyInputs(_queries(found["query"].detach().double().numpy(), FRAMES), table, BLOCK, BLOCK, 6,
                           "query_minus_key", BLOCK)
    error = _check(_laid(mask, FRAMES), inputs, {"sign": {"sign": "key_minus_query"}, "block": {"block": BLOCK + 1},
                                                 "offset": {"offset": 5}})
    assert error < 1e-5


def test_granite_speech5_blocks_are_refpos_s_terms():
    from transformers.models.granite_speech5.configuration_granite_speech5 import GraniteSpeech5EncoderConfig
    from transformers.models.granite_speech5.modeling_granite_speech5 import GraniteSpeech5Encoder

    config = GraniteSpeech5EncoderConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=HEADS,
                                         head_dim=DIM, context_size=BLOCK, max_position_embeddings=6,
                                         intermediate_size=32, num_mel_bins=4, vocab_size=8)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    encoder = GraniteSpeech5Encoder(config).eval()
    attention = encoder.layers[0].self_attn if hasattr(encoder.layers[0], "self_attn") else encoder.layers[0].attn
    with torch.no_grad():
        attention.rel_pos_emb.weight.normal_()
        attention.q_proj.weight.zero_()
        attention.q_proj.bias = torch.nn.Parameter(torch.randn(HEADS * DIM))  # every query c
    hidden = torch.randn(1, FRAMES, 16)
    found = _recorded(attention, hidden, lambda: attention(hidden, position_embeddings=encoder.attention_dists))
    mask = found["mask"].detach().double().numpy()  # the softmax input: the bias, the key projection zero
    c = attention.q_proj.bias.detach().double().numpy().reshape(HEADS, 1, DIM)
    table = attention.rel_pos_emb.weight.detach().double().numpy()
    inputs = ShawKeyInputs(np.broadcast_to(c, (HEADS, FRAMES, DIM)), table, BLOCK, BLOCK, 6, "query_minus_key", BLOCK)
    error = _check(_laid(mask, FRAMES), inputs, {"sign": {"sign": "key_minus_query"}, "block": {"block": BLOCK - 1},
                                                 "unblocked": {"block": None}})
    assert error < 1e-5


def test_wav2vec2_bert_relative_key_is_refpos_s_terms():
    from transformers.models.wav2vec2_bert.configuration_wav2vec2_bert import Wav2Vec2BertConfig
    from transformers.models.wav2vec2_bert.modeling_wav2vec2_bert import (
        Wav2Vec2BertSelfAttention,
        _apply_relative_key_position_encoding,
    )

    config = Wav2Vec2BertConfig(hidden_size=HEADS * DIM, num_attention_heads=HEADS, left_max_position_embeddings=3,
                                right_max_position_embeddings=2, position_embeddings_type="relative_key")
    torch.manual_seed(0)
    module = Wav2Vec2BertSelfAttention(config).eval()
    with torch.no_grad():
        module.distance_embedding.weight.normal_()
        query = torch.randn(1, HEADS, FRAMES, DIM)
        _, bias = _apply_relative_key_position_encoding(module, query, query)
    table = module.distance_embedding.weight.detach().double().numpy()
    inputs = ShawKeyInputs(query[0].double().numpy(), table, 3, 2, 3, "key_minus_query")
    error = _check(bias[0].double().numpy(), inputs, {"sign": {"sign": "query_minus_key"},
                                                       "narrow": {"left": 2, "right": 1}})
    assert error < 1e-5


def test_speecht5_encoder_relative_table_is_refpos_s_terms():
    from transformers.models.speecht5.configuration_speecht5 import SpeechT5Config
    from transformers.models.speecht5.modeling_speecht5 import SpeechT5EncoderWithoutPrenet

    clip = 3
    config = SpeechT5Config(hidden_size=HEADS * DIM, encoder_attention_heads=HEADS, encoder_layers=1,
                            encoder_ffn_dim=32, encoder_max_relative_position=clip)
    torch.manual_seed(0)
    encoder = SpeechT5EncoderWithoutPrenet(config).eval()
    attention = encoder.wrapped_encoder.layers[0].attention
    with torch.no_grad():
        encoder.wrapped_encoder.embed_positions.pe_k.weight.normal_()
        attention.q_proj.weight.zero_()
        attention.q_proj.bias.normal_()  # every query c
    hidden = torch.randn(1, FRAMES, HEADS * DIM)
    found = _recorded(attention, hidden, lambda: encoder(hidden))
    logits = found["mask"].detach().double().numpy()  # (H, T, T): the softmax input, the key projection zero
    c = attention.q_proj.bias.detach().double().numpy().reshape(HEADS, 1, DIM)
    table = encoder.wrapped_encoder.embed_positions.pe_k.weight.detach().double().numpy()
    assert table.shape == (2 * clip, DIM)
    inputs = ShawKeyInputs(np.broadcast_to(c, (HEADS, FRAMES, DIM)), table, clip, clip - 1, clip, "query_minus_key")
    error = _check(logits, inputs, {"sign": {"sign": "key_minus_query"}, "narrow": {"left": clip - 1},
                                    "unscaled": {"scale": 1.0}})
    assert error < 1e-5


def _phi4_masks(frames: int, chunk: int, left: int):
    """The additive masks Phi-4's audio encoder feeds its first attention at ``frames`` subsampled frames, its
    table, and the encoder's config."""
    from transformers.models.phi4_multimodal.configuration_phi4_multimodal import Phi4MultimodalAudioConfig
    from transformers.models.phi4_multimodal.modeling_phi4_multimodal import Phi4MultimodalAudioModel

    config = Phi4MultimodalAudioConfig(hidden_size=16, intermediate_size=16, num_blocks=1, num_attention_heads=HEADS,
                                       chunk_size=chunk, left_chunk=left, input_size=8, time_reduction=8,
                                       bias_max_distance=7, nemo_conv_channels=8, ext_pw_out_channel=16,
                                       depthwise_separable_out_channel=16)
    torch.manual_seed(0)
    model = Phi4MultimodalAudioModel(config).eval()
    with torch.no_grad():
        model.relative_attention_bias_layer.bias_values.weight.normal_()
    found = []
    model.encoders[0].self_attn.register_forward_pre_hook(lambda m, a: found.append(a[1]))
    with torch.no_grad():
        model(torch.randn(1, 8 * frames, 8), None)
    table = model.relative_attention_bias_layer.bias_values.weight.detach().double().numpy()
    return found[0].double().numpy(), table, config


def _summed(observed: np.ndarray, terms: np.ndarray) -> bool:
    """Whether a float32 port's bias plus window is ``terms``: the table's float32 values gathered (exact), the
    window's 0 or 1 added (one rounding, ``2⁻²⁴·|e|``)."""
    return bool(np.all(np.abs(observed - terms) <= 2.0**-24 * np.abs(terms)))


@pytest.mark.parametrize(("frames", "chunk", "left"), [(11, -1, 18), (11, 3, 1), (13, 4, 0)])
def test_phi4_audio_bias_and_streaming_window_are_refpos_s(frames, chunk, left):
    from refpos.encodings.shaw_key_bias import shaw_bias_terms, wrong_windows

    mask, table, _ = _phi4_masks(frames, chunk, left)
    assert table.shape == (14, HEADS) and mask.shape == (1, HEADS, frames, frames)
    terms = shaw_bias_terms(table, frames, left=7, right=6, offset=7, sign="key_minus_query", block=500,
                            window=(chunk, left))
    assert _summed(mask[0], terms)
    for wrong in (dict(sign="query_minus_key"), dict(offset=6, left=6)):  # the distance mirrored, row 0 one before
        changed = shaw_bias_terms(table, frames, **{"left": 7, "right": 6, "offset": 7, "sign": "key_minus_query",
                                                    **wrong}, window=(chunk, left))
        assert not np.allclose(changed, mask[0])
    for window in wrong_windows(frames, (chunk, left)).values():
        assert not np.allclose(terms - shaw_bias_terms(table, frames, left=7, right=6, offset=7,
                                                       sign="key_minus_query") + window - mask[0], 0)


def test_phi4_audio_past_500_frames_attends_in_blocks_of_500():
    from refpos.encodings.shaw_key_bias import shaw_bias_terms

    mask, table, _ = _phi4_masks(503, 100, 1)
    assert mask.shape == (2, HEADS, 500, 500)  # two blocks, the second padded from 3 frames to 500
    terms = shaw_bias_terms(table, 503, left=7, right=6, offset=7, sign="key_minus_query", block=500,
                            window=(100, 1))
    assert _summed(mask[0], terms[:, :500, :500])
    assert _summed(mask[1][:, :3, :3], terms[:, 500:, 500:])
    assert np.all(np.isneginf(terms[:, :500, 500:]))
