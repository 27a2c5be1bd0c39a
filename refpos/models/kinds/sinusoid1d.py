r"""The 1-D sinusoid kind of audio, time-series and video models where it differs from the text sinusoid: the
variant a family's code computes, where it adds it and with what width (:class:`Sinusoid1dFacts`), the record
(:class:`Sinusoid1dLayer`) and the builder.

The formulas are :mod:`refpos.encodings.sinusoid1d` (docs/sinusoid1d.md#the-math); the variants are the records of
:data:`refpos.encodings.sinusoid1d_variants.SINUSOID_1D_VARIANTS`. A family whose sinusoid is the text one
(Whisper's encoder: tensor2tensor spacing, ``[sin | cos]``, positions from 0) keeps the ``sinusoidal`` kind
(:mod:`refpos.models.kinds.absolute`). Where a family adds it decides the records:

* ``at = "input"`` — once, added to the frames, time steps or tokens before the first layer (Informer,
  MusicGen, TimesFM, PatchTST, VideoMAE): the stack's input site;
* ``at = "relative"`` — the table of signed distances every attention layer projects into its relative terms
  (the ESPnet conformers: Wav2Vec2-Conformer, FastSpeech2-Conformer, SeamlessM4T's speech encoder): one record
  per layer.

Examples
--------
>>> from refpos.models import model_positions
>>> informer = {"model_type": "informer", "encoder_layers": 2, "decoder_layers": 1, "encoder_attention_heads": 2,
...             "decoder_attention_heads": 2, "d_model": 16, "context_length": 48}
>>> print(model_positions(informer).summary())
encoder input: sinusoid1d(time_series)
encoder layers 0-1: none ×2
decoder input: sinusoid1d(time_series)
decoder layers 0-0: none ×1
>>> [(r.stack, r.past) for r in model_positions(informer) if r.kind == "sinusoid1d"]
[('encoder.input', 0), ('decoder.input', 48)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.backend import Array
from refpos.encodings.sinusoid1d_variants import SINUSOID_1D_VARIANTS, SinusoidVariant
from refpos.models.kinds.record import EncodingKind, Stack, check_fact, layer_count, stack_width
from refpos.models.kinds.variant_keys import config_value, unmet, variant_values
from refpos.models.records import LayerRecord
from refpos.validation import check_int

#: where a family adds the sinusoid (module docstring)
SINUSOID_SITES = ("input", "relative")
#: variant -> what its positions are read from (keys of :data:`refpos.models.sources.INPUTS`, first given wins): the
#: token's slot (MusicGen: ``arange(T) + cache_length``), the position ids else the slot (Canary's decoder), the
#: frames, time steps or patches in order (Whisper's encoder; Informer's ``arange(T)`` after the ``past`` fact, its
#: ``context_length`` whatever the cache holds; TimesFM, PatchTST), a video's tubelets (VideoMAE), the mask's running
#: count (Speech2Text), or the keys' indices (a relative table over the keys' distances)
VARIANT_READS: dict[str, tuple[str, ...]] = {
    "whisper": ("frames",), "fun_asr_nano": ("frames",), "canary": ("position_ids", "cache_position"),
    "time_series": ("frames",), "musicgen": ("cache_position",), "fairseq_padded": ("mask_cumsum",),
    "espnet_relative": ("key_index",), "gemma3n_audio": ("key_index",), "gemma4_audio": ("key_index",),
    "timesfm": ("frames",), "patchtst": ("frames",), "speecht5_scaled": ("frames",), "videomae": ("video_grid",)}


@dataclass(frozen=True)
class Sinusoid1dFacts:
    """``variant``: a record of :data:`~refpos.encodings.sinusoid1d_variants.SINUSOID_1D_VARIANTS`; ``at``: one of
    :data:`SINUSOID_SITES` (a ``relative`` variant is added in every layer); ``width``: the key of the table's width
    (absent: the stack's width); ``past``: the config key (or difference of keys) where the positions start
    (a time-series decoder continues after the context: Informer's ``context_length``; absent: 0)."""

    variant: str = "time_series"
    at: str = "input"
    width: str | None = None
    past: str | None = None

    def check(self, where: str) -> None:
        check_fact(where, self.variant in SINUSOID_1D_VARIANTS, "sinusoid1d.variant", self.variant)
        check_fact(where, self.at in SINUSOID_SITES, "sinusoid1d.at", self.at)
        if self.variant in SINUSOID_1D_VARIANTS:
            relative = SINUSOID_1D_VARIANTS[self.variant].positions == "relative"
            check_fact(where, relative == (self.at == "relative"), "sinusoid1d.at (relative variants only)",
                       self.at)


@dataclass(frozen=True)
class Sinusoid1dLayer(LayerRecord):
    """A stack's (``at = "input"``) or one layer's (``at = "relative"``) sinusoid: the variant, the table's width
    ``dim``, the values the variant reads from the config (``settings``) and the position the first step has
    (``past``; ``None`` when the config does not state it, reported as not modelled)."""

    variant: str = "time_series"
    at: str = "input"
    dim: int = 64
    settings: tuple[tuple[str, Any], ...] = ()
    past: int | None = 0
    kind: ClassVar[str] = "sinusoid1d"

    @property
    def label(self) -> str:
        return f"sinusoid1d({self.variant})"

    @property
    def record(self) -> SinusoidVariant:
        """The variant's record."""
        return SINUSOID_1D_VARIANTS[self.variant]

    def params(self) -> dict[str, Any]:
        record = self.record
        return {"variant": self.variant, "at": self.at, "dim": self.dim, "past": self.past, **dict(self.settings),
                **{key: value for key, value in record.parameters.items()}, "amplitude": record.amplitude,
                "standardize": record.standardize}

    def reference(self, **inputs: Any) -> Array:
        """The table: the variant's :meth:`~SinusoidVariant.build` with the record's width and settings and
        ``inputs`` (``positions=``; ``left=, right=`` for a relative table; ``mask=, padding_idx=``)."""
        if self.past is None:
            raise ValueError(f"{self.stack}: the first position is not stated by the config")
        return self.record.build(self.dim, **dict(self.settings), **inputs)

    def _why_not(self) -> str:
        return "a variant of the 1-D sinusoid the text pipeline does not run: Sinusoid1dLayer.reference computes it"


def build(stack: Stack) -> list[LayerRecord]:
    """One record at the input, else one per layer (module docstring)."""
    facts: Sinusoid1dFacts = stack.facts
    view, variant = stack.view, SINUSOID_1D_VARIANTS[facts.variant]
    wrong = unmet(view, variant.requires)
    if wrong:
        raise ValueError(f"{stack.name}: the {facts.variant} sinusoid needs {dict(variant.requires)}, the config "
                         f"has {wrong}")
    dim = stack_width(view, stack.role) if facts.width is None else view.int(facts.width, minimum=2)
    settings = tuple(sorted(variant_values(view, variant.config_keys).items()))
    past: int | None = 0
    if facts.past is not None:
        try:
            past = check_int(facts.past, config_value(view, facts.past, None), minimum=0)
        except (TypeError, ValueError):  # a config without its context: the first position is not known
            past = None
            stack.not_modelled[view.name(facts.past.split(" ")[0])] = (
                f"the first position of the {stack.name.removesuffix('.input')} stack ({facts.past}) is not stated")
    use = "rows" if facts.at == "input" else "key"  # added to the input, or a table over the keys' distances
    record = {"variant": facts.variant, "at": facts.at, "dim": dim, "settings": settings, "past": past,
              "reads": ((use, VARIANT_READS[facts.variant]),)}
    if facts.at == "input":
        return [Sinusoid1dLayer(stack.name, 0, None, **record)]
    return [Sinusoid1dLayer(stack.name, i, None, **record) for i in range(layer_count(view, stack.role))]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"variant": draw(st.sampled_from(tuple(SINUSOID_1D_VARIANTS))), "dim": 2 * draw(st.integers(2, 32))}


SINUSOID1D = EncodingKind(
    name="sinusoid1d", summary="a 1-D sinusoid of frames, time steps or signed distances in a variant of the text one "
    "(Informer, MusicGen, TimesFM, the conformers)", record=Sinusoid1dLayer, build=build, hook="input",
    reads=tuple(dict.fromkeys(name for source in VARIANT_READS.values() for name in source)),
    doc="docs/sinusoid1d.md#the-math", facts=Sinusoid1dFacts,
    contract=("sinusoid_1d", "padded_sinusoid"), spec="spec_tests/test_sinusoid1d.py", draw=_draw,
    modalities=("audio", "vision"),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}, "facts": {}},
    check="sinusoid1d", golden="sinusoid1d",
    inert=("lengths", "rotary"))

__all__ = ["SINUSOID1D", "SINUSOID_SITES", "VARIANT_READS", "Sinusoid1dFacts", "Sinusoid1dLayer", "build"]
