r"""refpos.encodings.sinusoid1d against transformers 5.25: the 1-D sinusoid of every audio, time-series and video
model that has one, each variant through its model's own function or module.

Tolerance: the kind's bound (refpos/encodings/sinusoid1d_mistakes.py, module docstring), derived per row for a
float32 computation (``u = 2⁻²⁴``); where every step ran in float64 (Whisper's ``sinusoids`` and PatchTST's table
follow torch's default dtype, set to float64 for that run) the same derivation with ``u = 2⁻⁵³``. Informer's table is
computed in float64 by NumPy but stored through ``torch.FloatTensor``: a float32 anchor.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.encodings.sinusoid1d_mistakes import Sinusoid1dInputs
from refpos.tests.kind_checks import Anchor, anchor_ids
from refpos.tests.kind_checks import transformers_object as _import

torch = pytest.importorskip("torch", reason="sinusoid anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="sinusoid anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors




def _float64_default(call: Callable[[], object]) -> object:
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return call()
    finally:
        torch.set_default_dtype(before)


def _given(name: str, dim: int, n: int, start: int = 0, **extra: object) -> Sinusoid1dInputs:
    return Sinusoid1dInputs(name, dim, {"positions": np.arange(start, start + n), **extra})


def _absolute_anchors() -> list[Anchor]:
    whisper = _import("whisper.modeling_whisper:sinusoids")
    anchors = [
        Anchor("whisper: sinusoids(1500, 384) (float32)", _given("whisper", 384, 1500), lambda: whisper(1500, 384),
               "float32"),
        Anchor("whisper: sinusoids(1500, 384), default dtype float64 (float64)", _given("whisper", 384, 1500),
               lambda: _float64_default(lambda: whisper(1500, 384)), "float64"),
    ]
    for model, path in [("qwen2_5_omni", "qwen2_5_omni.modeling_qwen2_5_omni:SinusoidsPositionEmbedding"),
                        ("qwen3_omni_moe", "qwen3_omni_moe.modeling_qwen3_omni_moe:SinusoidsPositionEmbedding"),
                        ("qwen3_asr", "qwen3_asr.modeling_qwen3_asr:SinusoidsPositionEmbedding")]:
        anchors.append(Anchor(f"{model}: SinusoidsPositionEmbedding(1500, 128) (float32)", _given("whisper", 128, 1500),
                              lambda p=path: _import(p)(1500, 128)(1500), "float32"))
    fun = _import("fun_asr_nano.modeling_fun_asr_nano:FunAsrNanoPositionEmbedding")(600, 64)
    canary = _import("canary.modeling_canary:CanaryPositionalEmbedding")(512, 64)
    anchors += [
        Anchor("fun_asr_nano: FunAsrNanoPositionEmbedding, rows 1 … 300 (float32)", _given("fun_asr_nano", 64, 300, 1),
               lambda: fun(torch.zeros(1, 300, 64)), "float32"),
        Anchor("canary: CanaryPositionalEmbedding (float32)", _given("canary", 64, 512),
               lambda: canary(torch.arange(512)), "float32"),
    ]
    for model in ("informer", "autoformer", "time_series_transformer"):
        cls = {"informer": "InformerSinusoidalPositionalEmbedding",
               "autoformer": "AutoformerSinusoidalPositionalEmbedding",
               "time_series_transformer": "TimeSeriesSinusoidalPositionalEmbedding"}[model]
        module = _import(f"{model}.modeling_{model}:{cls}")(300, 32)
        anchors.append(Anchor(f"{model}: {cls}.create_weight, steps 20 … 59 (float32 storage)",
                              _given("time_series", 32, 40, 20),
                              lambda m=module: m.create_weight()[20:60], "float32"))
    for model in ("musicgen", "musicgen_melody"):
        cls = _import(f"{model}.modeling_{model}:{''.join(p.title() for p in model.split('_'))}"
                      "SinusoidalPositionalEmbedding")
        anchors.append(Anchor(f"{model}: get_embedding(400, 64) (float32)", _given("musicgen", 64, 400),
                              lambda c=cls: c.get_embedding(400, 64), "float32"))
    timesfm = _import("timesfm.modeling_timesfm:TimesFmPositionalEmbedding")(
        SimpleNamespace(min_timescale=2, max_timescale=5000, hidden_size=64))
    anchors.append(Anchor("timesfm: TimesFmPositionalEmbedding, timescales 2 … 5000 (float32)",
                          _given("timesfm", 64, 100, base=2500.0, frequency_scale=2.0), lambda: timesfm(100)[0],
                          "float32"))
    for model, cls in (("patchtst", "PatchTSTPositionalEncoding"), ("patchtsmixer", "PatchTSMixerPositionalEncoding")):
        init = _import(f"{model}.modeling_{model}:{cls}")._init_pe
        config = SimpleNamespace(positional_encoding_type="sincos", d_model=32, num_patches=42)
        table = (lambda i=init, c=config: i(c, 42)) if model == "patchtst" else (lambda i=init, c=config: i(c))
        for dtype in ("float32", "float64"):
            anchors.append(Anchor(f"{model}: {cls}._init_pe, 42 patches ({dtype})", _given("patchtst", 32, 42),
                                  (lambda t=table: _float64_default(t)) if dtype == "float64" else table, dtype))
    scaled = _import("speecht5.modeling_speecht5:SpeechT5ScaledPositionalEncoding")(0.0, 32, 100)
    with torch.no_grad():
        scaled.alpha.fill_(0.7)
    video = _import("videomae.modeling_videomae:get_sinusoid_encoding_table")
    florence = _import("florence2.modeling_florence2:Florence2VisionPositionalEmbeddingCosine1D")
    anchors += [
        Anchor("speecht5: SpeechT5ScaledPositionalEncoding, α = 0.7 (float32)", _given("speecht5_scaled", 32, 60,
                                                                                        amplitude=0.7),
               lambda: scaled(torch.zeros(1, 60, 32))[0], "float32"),
        Anchor("videomae: get_sinusoid_encoding_table(1568, 96) (float32 storage)", _given("videomae", 96, 1568),
               lambda: video(1568, 96)[0], "float32"),
        Anchor("florence2: Florence2VisionPositionalEmbeddingCosine1D (float32)", _given("videomae", 64, 100),
               lambda: florence(SimpleNamespace(vision_config=SimpleNamespace(embed_dim=[64],
                                                                               max_temporal_embeddings=100)))
               (torch.zeros(1, 100, 64)), "float32"),
    ]
    return anchors


def _padded_anchors() -> list[Anchor]:
    mask = np.ones((2, 12), dtype=bool)
    mask[0, 9:] = False
    mask[1, :3] = False
    anchors = []
    for model, path in (("speech_to_text",
                         "speech_to_text.modeling_speech_to_text:Speech2TextSinusoidalPositionalEmbedding"),
                        ("speecht5", "speecht5.modeling_speecht5:SpeechT5SinusoidalPositionalEmbedding")):
        module = _import(path)(100, 32, 1)
        ids = torch.from_numpy(np.where(mask, 7, 1))
        anchors.append(Anchor(f"{model}: {path.split(':')[1]} of token ids with padding (float32)",
                              Sinusoid1dInputs("fairseq_padded", 32, {"mask": mask, "padding_idx": 1}),
                              lambda m=module, i=ids: m(i), "float32"))
    encoder_mask = torch.from_numpy(np.where(mask, 0, 1))  # Speech2TextEncoder: attention_mask.ne(1), 1 on padding
    module = _import("speech_to_text.modeling_speech_to_text:Speech2TextSinusoidalPositionalEmbedding")(100, 32, 1)
    anchors.append(Anchor("speech_to_text: the encoder's positions from its attention mask (float32)",
                          Sinusoid1dInputs("fairseq_padded", 32, {"mask": mask, "padding_idx": 1}),
                          lambda: module(encoder_mask), "float32"))
    return anchors


def _relative_anchors() -> list[Anchor]:
    length = 50
    espnet = Sinusoid1dInputs("espnet_relative", 32, {"left": length - 1, "right": length - 1})
    hidden = torch.zeros(1, length, 32)
    config = SimpleNamespace(max_source_positions=64, hidden_size=32, max_position_embeddings=5000)
    anchors = []
    for model, path in (("wav2vec2_conformer",
                         "wav2vec2_conformer.modeling_wav2vec2_conformer:Wav2Vec2ConformerRelPositionalEmbedding"),
                        ("wav2vec2_bert", "wav2vec2_bert.modeling_wav2vec2_bert:Wav2Vec2BertRelPositionalEmbedding"),
                        ("seamless_m4t",
                         "seamless_m4t.modeling_seamless_m4t:SeamlessM4TConformerRelPositionalEmbedding"),
                        ("parakeet", "parakeet.modeling_parakeet:ParakeetEncoderRelPositionalEncoding"),
                        ("nemotron_asr_streaming", "nemotron_asr_streaming.modeling_nemotron_asr_streaming:"
                                                   "NemotronAsrStreamingEncoderRelPositionalEncoding")):
        anchors.append(Anchor(f"{model}: {path.split(':')[1]}, 50 frames (float32)", espnet,
                              lambda p=path: _import(p)(config)(hidden)[0], "float32"))
    fastspeech = _import("fastspeech2_conformer.modeling_fastspeech2_conformer:"
                         "FastSpeech2ConformerRelPositionalEncoding")
    fs_config = SimpleNamespace(hidden_size=32)
    anchors.append(Anchor("fastspeech2_conformer: FastSpeech2ConformerRelPositionalEncoding, 50 frames (float32)",
                          espnet, lambda: fastspeech(fs_config, {"positional_dropout_rate": 0.0})(hidden)[1][0],
                          "float32"))
    streaming = _import("nemotron_asr_streaming.modeling_nemotron_asr_streaming:"
                        "NemotronAsrStreamingEncoderRelPositionalEncoding")(config)
    anchors.append(Anchor("nemotron_asr_streaming: 20 frames after 30 cached (float32)", espnet,
                          lambda: streaming(torch.zeros(1, 20, 32), cached_frames=30)[0], "float32"))
    from transformers import Gemma3nAudioConfig

    gemma3n = _import("gemma3n.modeling_gemma3n:Gemma3nAudioRelativePositionEmbedding")(Gemma3nAudioConfig())
    left, right = gemma3n.max_backward, gemma3n.max_forward
    span = torch.arange(left, -right - 1, -1)[None]
    gemma4 = _import("gemma4.modeling_gemma4:Gemma4AudioRelPositionalEncoding")(SimpleNamespace(
        hidden_size=64, attention_chunk_size=12, attention_context_left=13, attention_context_right=0))
    anchors += [
        Anchor(f"gemma3n: Gemma3nAudioRelativePositionEmbedding timing signal, {left} … −{right} (float32)",
               Sinusoid1dInputs("gemma3n_audio", gemma3n.channels, {"left": left, "right": right}),
               lambda: gemma3n._get_timing_signal_1d_pos(span, torch.float32)[0], "float32"),
        Anchor("gemma4: Gemma4AudioRelPositionalEncoding, context 24 (float32)",
               Sinusoid1dInputs("gemma4_audio", 64, {"left": 12, "right": 0}),
               lambda: gemma4(torch.zeros(1, 5, 64))[0], "float32"),
    ]
    return anchors


ANCHORS = _absolute_anchors() + _padded_anchors() + _relative_anchors()


@pytest.mark.parametrize("anchor", ANCHORS, ids=anchor_ids(ANCHORS))
def test_refpos_equals_the_library_within_the_bound(anchor):
    _, ratio = anchor.error()
    assert ratio <= 1.0, f"{anchor.name}: error {ratio:.3g} times the bound"


def test_every_variant_has_an_anchor():
    from refpos.encodings.sinusoid1d_variants import SINUSOID_1D_VARIANTS

    assert {a.inputs.variant for a in ANCHORS} == set(SINUSOID_1D_VARIANTS)


def largest_errors() -> dict[str, tuple[str, float, float]]:
    """anchor name -> (dtype, largest error, largest error / bound): the numbers docs/sinusoid1d.md reports."""
    return {a.name: (a.dtype, *a.error()) for a in ANCHORS}
