"""Which 1-D sinusoid each transformers audio, time-series and video model uses: one record per variant.

A :class:`SinusoidVariant` names the keywords of :func:`refpos.encodings.sinusoid1d.sinusoid_1d` every model of
the variant uses (:attr:`~SinusoidVariant.parameters`), where the positions come from (``given`` positions, a
``relative`` span of signed distances, or ``padded``: fairseq's positions from a step mask), the amplitude
(``one``, ``inverse_sqrt_dim``, or a ``given`` weight), whether the table is standardised, the keywords a model
reads from its config (with the class default), and the transformers model types (5.25) that use it.
:meth:`SinusoidVariant.build` computes the table; nothing branches on a model name.

Examples
--------
>>> import numpy as np
>>> table = SINUSOID_1D_VARIANTS["whisper"].build(8, positions=np.arange(3))
>>> table.shape
(3, 8)
>>> SINUSOID_1D_VARIANTS["espnet_relative"].build(4, left=1, right=1).shape
(3, 4)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from refpos.backend import Array
from refpos.encodings.sinusoid1d import padded_sinusoid, relative_positions, sinusoid_1d, standardized
from refpos.validation import check_float

#: where a variant's positions come from
POSITION_SOURCES = ("given", "relative", "padded")
#: what a variant multiplies its table by
AMPLITUDES = ("one", "inverse_sqrt_dim", "given")


@dataclass(frozen=True)
class SinusoidVariant:
    """One 1-D sinusoid variant: the sinusoid's keywords, its positions, amplitude and models."""

    name: str
    parameters: Mapping[str, Any]
    positions: str
    amplitude: str
    inputs: str
    models: tuple[str, ...]
    source: str
    description: str
    standardize: bool = False
    #: sinusoid_1d keyword -> (config key, the config class's default), given to :meth:`build` as inputs
    config_keys: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    #: config key -> the value the model must hold for this variant to be the one it runs
    requires: Mapping[str, Any] = field(default_factory=dict)

    def build(self, dim: int, **inputs: Any) -> Array:
        """The table of width ``dim``: ``positions=`` (given), ``left=, right=`` (relative) or ``mask=,
        padding_idx=[, past=]`` (padded); ``amplitude=`` when the amplitude is given; the config keywords."""
        wanted = {"given": {"positions"}, "relative": {"left", "right"}, "padded": {"mask", "padding_idx"}}
        allowed = wanted[self.positions] | ({"past"} if self.positions == "padded" else set()) \
            | ({"amplitude"} if self.amplitude == "given" else set()) | set(self.config_keys)
        missing, unknown = sorted(wanted[self.positions] - set(inputs)), sorted(set(inputs) - allowed)
        if missing or unknown:
            raise ValueError(f"variant {self.name!r} takes {sorted(allowed)}; missing {missing}, unknown {unknown}")
        options = {k: inputs[k] for k in self.config_keys if k in inputs}
        if self.positions == "padded":
            return padded_sinusoid(inputs["mask"], dim, inputs["padding_idx"], past=inputs.get("past", 0),
                                   **self.parameters)
        scale = {"one": 1.0, "inverse_sqrt_dim": float(dim) ** -0.5}.get(self.amplitude)
        if scale is None:
            scale = check_float("amplitude", inputs.get("amplitude"))
        positions = inputs["positions"] if self.positions == "given" else relative_positions(inputs["left"],
                                                                                                inputs["right"])
        table = sinusoid_1d(positions, dim, amplitude=scale, **self.parameters, **options)
        return standardized(table) if self.standardize else table


def _variant(name: str, parameters: dict[str, Any], positions: str, amplitude: str, inputs: str,
             models: tuple[str, ...], source: str, description: str, **extra: Any) -> tuple[str, SinusoidVariant]:
    frozen = {k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in extra.items()}
    return name, SinusoidVariant(name, MappingProxyType(parameters), positions, amplitude, inputs, models, source,
                                 description, **frozen)


_TF = "transformers models/"
_T2T_CONCAT = {"spacing": "tensor2tensor", "layout": "concat", "first": "sin"}
_PAPER_CONCAT = {"spacing": "paper", "layout": "concat", "first": "sin"}
_PAPER_INTERLEAVED = {"spacing": "paper", "layout": "interleaved", "first": "sin"}

#: variant name -> record (transformers 5.25)
SINUSOID_1D_VARIANTS: Mapping[str, SinusoidVariant] = MappingProxyType(dict([
    _variant("whisper", dict(_T2T_CONCAT, base=10000.0), "given", "one",
             "frame positions 0 … T−1 of the encoder (after the convolutions)",
             ("whisper", "qwen2_5_omni_audio_encoder", "qwen3_omni_moe_audio_encoder", "qwen3_asr_encoder"),
             _TF + "whisper/modeling_whisper.py: sinusoids; qwen3_omni_moe: SinusoidsPositionEmbedding",
             "log-timescale increment ln(10000)/(d/2 − 1), [sin | cos] (Whisper loads it into a frozen table)"),
    _variant("fun_asr_nano", dict(_T2T_CONCAT, base=10000.0), "given", "one", "frame positions 1 … T",
             ("fun_asr_nano_encoder",), _TF + "fun_asr_nano/modeling_fun_asr_nano.py: FunAsrNanoPositionEmbedding",
             "Whisper's table read from row 1"),
    _variant("canary", dict(_PAPER_CONCAT, base=10000.0), "given", "inverse_sqrt_dim",
             "decoder position ids", ("canary_decoder",),
             _TF + "canary/modeling_canary.py: CanaryPositionalEmbedding",
             "max_timescale 10000^((d−2)/d) makes the increment 2·ln(10000)/d (the paper's ω), divided by √d"),
    _variant("time_series", dict(_PAPER_CONCAT, base=10000.0), "given", "one",
             "time steps past … past + T − 1 (the decoder continues after the context)",
             ("informer", "autoformer", "time_series_transformer"),
             _TF + "informer/modeling_informer.py: InformerSinusoidalPositionalEmbedding.create_weight",
             "the paper's ω, [sin | cos] (XLM's table not interleaved), built in float64"),
    _variant("musicgen", dict(_T2T_CONCAT, first="cos", base=10000.0), "given", "one",
             "decoder steps cache … cache + T − 1", ("musicgen_decoder", "musicgen_melody_decoder"),
             _TF + "musicgen/modeling_musicgen.py: MusicgenSinusoidalPositionalEmbedding.get_embedding",
             "tensor2tensor spacing with the cosines first, [cos | sin]"),
    _variant("fairseq_padded", {"spacing": "tensor2tensor", "layout": "concat"}, "padded", "one",
             "a step mask (Speech2Text's encoder: attention_mask; decoders: input_ids != pad), padding_idx = "
             "pad_token_id (1)", ("speech_to_text", "speecht5"),
             _TF + "speech_to_text/modeling_speech_to_text.py: Speech2TextSinusoidalPositionalEmbedding",
             "positions from padding_idx + 1 over real steps, the padding_idx row zero"),
    _variant("espnet_relative", dict(_PAPER_INTERLEAVED, base=10000.0), "relative", "one",
             "left = right = L − 1 for L keys (Nemotron streaming: L counts the cached frames)",
             ("wav2vec2_conformer", "wav2vec2_bert", "seamless_m4t", "fastspeech2_conformer",
              "parakeet_encoder", "nemotron_asr_streaming_encoder"),
             _TF + "wav2vec2_conformer/modeling_wav2vec2_conformer.py: Wav2Vec2ConformerRelPositionalEmbedding; "
             "parakeet/modeling_parakeet.py: ParakeetEncoderRelPositionalEncoding",
             "the paper's interleaved sinusoid at distances L−1 … −(L−1)",
             requires={"position_embeddings_type": "relative"}),
    _variant("gemma3n_audio", dict(_T2T_CONCAT, base=10000.0), "relative", "one",
             "left = conf_attention_context_left − 1, right = conf_attention_context_right", ("gemma3n_audio",),
             _TF + "gemma3n/modeling_gemma3n.py: Gemma3nAudioRelativePositionEmbedding",
             "timescales 1 … 10000 (tensor2tensor) at distances left … −right, projected per head after"),
    _variant("gemma4_audio", dict(_T2T_CONCAT, base=10000.0), "relative", "one",
             "left = context_size // 2, right = 0 (context_size = chunk + left − 1 + right)", ("gemma4_audio",),
             _TF + "gemma4/modeling_gemma4.py: Gemma4AudioRelPositionalEncoding",
             "timescales 1 … 10000 at distances context_size//2 … 0"),
    _variant("timesfm", dict(_T2T_CONCAT), "given", "one", "patch positions 0 … T−1", ("timesfm",),
             _TF + "timesfm/modeling_timesfm.py: TimesFmPositionalEmbedding",
             "min_timescale · exp(−k·ln(max/min)/(d/2 − 1)): base max/min, every ω times min_timescale",
             config_keys={"base": ("max_timescale / min_timescale", 10000.0),
                          "frequency_scale": ("min_timescale", 1.0)},
             requires={"use_positional_embedding": True}),
    _variant("patchtst", dict(_PAPER_INTERLEAVED, base=10000.0), "given", "one",
             "patch positions 0 … N−1 (N counts the CLS token when use_cls_token)", ("patchtst", "patchtsmixer"),
             _TF + "patchtst/modeling_patchtst.py: PatchTSTPositionalEncoding._init_pe",
             "the paper's interleaved table, standardised over all its entries and divided by 10",
             standardize=True, requires={"positional_encoding_type": "sincos"}),
    _variant("speecht5_scaled", dict(_PAPER_INTERLEAVED, base=10000.0), "given", "given",
             "steps 0 … T−1 of the speech decoder prenet and text encoder prenet; amplitude = the learned alpha",
             ("speecht5",), _TF + "speecht5/modeling_speecht5.py: SpeechT5ScaledPositionalEncoding",
             "the paper's interleaved table times a learned scalar α"),
    _variant("videomae", dict(_PAPER_INTERLEAVED, base=10000.0), "given", "one",
             "token positions 0 … N−1 of the flattened (frame, row, column) tubelets; Florence-2: frames",
             ("videomae", "florence2"), _TF + "videomae/modeling_videomae.py: get_sinusoid_encoding_table",
             "the paper's interleaved table (refpos.encodings.sinusoidal) over vision tokens"),
]))


def sinusoid1d_variant(name: str) -> SinusoidVariant:
    """The record of variant ``name`` (a ``ValueError`` naming the known ones otherwise)."""
    if not isinstance(name, str) or name not in SINUSOID_1D_VARIANTS:
        raise ValueError(f"variant must be one of {tuple(SINUSOID_1D_VARIANTS)}, got {name!r}")
    return SINUSOID_1D_VARIANTS[name]
