r"""M-RoPE position ids ``(3, T)`` of a multimodal token sequence: text, images, videos, audio.

A sequence is a list of spans, each :class:`Text`, :class:`Image`, :class:`Video` or :class:`Audio`.
Positions are built left to right, one *piece* of ids per span, as transformers 5.24 does in each
family's ``get_rope_index`` (``transformers/models/*/modeling_*.py``; the rule of each family is one
record of :data:`MM_RULES`, which cites it). Two styles place the pieces:

**Running start** (``tmrope=None``: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4.1V, Qwen3.5, ERNIE-4.5-VL,
PaddleOCR-VL, GLM-OCR), from a start ``s`` (0 at the beginning):

* **text** of ``n`` tokens: :math:`p_t = p_h = p_w = s, s+1, \dots, s+n-1`; then :math:`s \mathrel{+}= n`;
* **image or video** with patch grid :math:`(g_t, g_h, g_w)` and spatial merge ``k`` (the vision tower
  merges ``k × k`` patches into one token): the LLM grid is :math:`(g_t, g_h/k, g_w/k)`, one token per cell
  in row-major ``(t, h, w)`` order, at

  .. math:: p_t = s + \lfloor i_t\,\Delta \rfloor,\qquad p_h = s + i_h,\qquad p_w = s + i_w ,

  with the temporal spacing :math:`\Delta` = 1 except for Qwen2.5-VL videos:
  :math:`\Delta = \text{tokens\_per\_second} \times \text{seconds\_per\_grid}` (seconds between two temporal
  patches); then :math:`s \mathrel{+}= \max(g_h, g_w)/k`. The temporal extent does **not** advance ``s``
  (transformers 5.24; transformers 4.x continued after the largest id instead).
* Qwen3-VL, GLM-4.1V, GLM-OCR and Qwen3.5 place a video frame by frame: :math:`g_t` grids :math:`(1, g_h, g_w)` one
  after the other (in their prompts timestamp text separates the frames; give it as :class:`Text` spans
  between one-frame :class:`Video` spans to reproduce a prompt exactly).
* ERNIE-4.5-VL merges ``temporal_merge_size`` (2) temporal patches of a video into one token: its LLM grid is
  :math:`(g_t/m_t, g_h/k, g_w/k)` (images are not merged in time).

**After the largest id** (a :class:`TimeRule` in ``tmrope``: the Qwen2.5-Omni and Qwen3-Omni thinkers, TMRoPE): every
piece starts at one more than the largest id of the piece before it (0 first). Text and audio tokens
count up by one (an audio token stands for a fixed slice of time); an image or video grid sits at
:math:`(s + \text{time}, s + i_h, s + i_w)` with the time of temporal patch ``i`` being
:math:`i \times \text{seconds\_per\_grid} \times \text{position\_id\_per\_seconds}` (an image's patches
:math:`i \times \text{position\_id\_per\_seconds}`). A video with its audio track interleaves the two
streams by time (:mod:`refpos.models.mm_omni`, which also counts audio tokens).

The start and end markers around an image, video or audio (``<|vision_start|>``, ``<|audio_end|>``, …) are
text tokens: give them as :class:`Text` spans. A :class:`Video` with ``audio_tokens`` (a video with its audio
track, Omni's ``use_audio_in_video``) holds its four markers itself, because the two families place them
differently.

Example (Qwen2-VL, ``k = 2``): ``[Text(2), Image((1, 4, 6)), Text(2)]`` gives text 0, 1; a 2 × 3 image
grid at ``s = 2``, ``p_h ∈ {2, 3}``, ``p_w ∈ {2, 3, 4}``, ``p_t = 2``; then ``s = 2 + 3 = 5``: text 5, 6.

>>> mm_position_ids([Text(2), Image((1, 4, 6)), Text(2)], family="qwen2_vl").tolist()
[[0, 1, 2, 2, 2, 2, 2, 2, 5, 6], [0, 1, 2, 2, 2, 3, 3, 3, 5, 6], [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from refpos.backend import get_xp
from refpos.models.hf_files import check_sub_configs
from refpos.models.mm_omni import tmrope_pieces
from refpos.models.mm_spans import (
    MAX_PIECES,
    Audio,
    IdRule,
    Image,
    Span,
    Text,
    TimeRule,
    Video,
    cell_times,
    check_token_total,
    text_ids,
    vision_ids,
)
from refpos.validation import MAX_EXACT_POSITION, check_choice, check_float, check_int

__all__ = ["MM_FAMILIES", "MM_RULES", "Audio", "IdRule", "Image", "Span", "Text", "TimeRule", "Video", "id_family_of",
           "mm_position_ids", "mm_settings_from_config", "rope_delta", "text_ids", "token_count", "vision_ids"]


_QWEN3_VL = "qwen3_vl/modeling_qwen3_vl.py: Qwen3VLModel.get_rope_index"
#: family -> its rule; the names are :data:`MM_FAMILIES`
MM_RULES: dict[str, IdRule] = {rule.family: rule for rule in (
    IdRule("qwen2_vl", "qwen2_vl/modeling_qwen2_vl.py: Qwen2VLModel.get_rope_index"),
    IdRule("qwen2_5_vl", "qwen2_5_vl/modeling_qwen2_5_vl.py: Qwen2_5_VLModel.get_rope_index",
           spacing="tokens_per_second", reads=("tokens_per_second",)),
    IdRule("qwen3_vl", _QWEN3_VL, frames="one_by_one"),
    IdRule("glm4v", "glm4v/modeling_glm4v.py: Glm4vModel.get_rope_index", frames="one_by_one"),
    IdRule("qwen3_5", "qwen3_5/modeling_qwen3_5.py: Qwen3_5Model.get_rope_index", frames="one_by_one"),
    IdRule("paddleocr_vl", "paddleocr_vl/modeling_paddleocr_vl.py: PaddleOCRVLModel.get_rope_index"),
    IdRule("glm_ocr", "glm_ocr/modeling_glm_ocr.py: GlmOcrModel.get_rope_index", frames="one_by_one"),
    IdRule("ernie4_5_vl_moe", "ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py: Ernie4_5_VLMoeModel.get_rope_index",
           temporal_merge=True, reads=("temporal_merge_size",)),
    IdRule("qwen2_5_omni", "qwen2_5_omni/modeling_qwen2_5_omni.py: "
           "Qwen2_5OmniPreTrainedModelForConditionalGeneration.get_rope_index",
           tmrope=TimeRule(rounding="floor", interleave="chunks", shared_markers=True),
           spacing="position_id_per_seconds", reads=("position_id_per_seconds", "seconds_per_chunk")),
    IdRule("qwen3_omni_moe", "qwen3_omni_moe/modeling_qwen3_omni_moe.py: "
           "Qwen3OmniMoePreTrainedModelForConditionalGeneration.get_rope_index",
           tmrope=TimeRule(rounding="exact", interleave="by_time", shared_markers=False),
           spacing="position_id_per_seconds", reads=("position_id_per_seconds",)),
)}
#: families whose get_rope_index this module reproduces
MM_FAMILIES = tuple(MM_RULES)
#: model types whose ids are another family's (the MoE variants share their dense model's method)
_ALIASES = {"qwen3_vl_moe": "qwen3_vl", "glm4v_moe": "glm4v", "qwen3_5_moe": "qwen3_5",
            "qwen2_5_omni_thinker": "qwen2_5_omni", "qwen3_omni_moe_thinker": "qwen3_omni_moe"}
#: keyword arguments a family may read, in the order of mm_position_ids
_SETTINGS = ("tokens_per_second", "position_id_per_seconds", "seconds_per_chunk", "temporal_merge_size")


def id_family_of(model_type: Any) -> str | None:
    """The :data:`MM_FAMILIES` name whose ids a ``model_type`` uses (``qwen3_vl_moe_text`` → ``qwen3_vl``), or
    ``None``."""
    if not isinstance(model_type, str):
        return None
    for suffix in ("_text", "_vision"):
        if model_type.endswith(suffix):
            model_type = model_type[: -len(suffix)]
    model_type = _ALIASES.get(model_type, model_type)
    return model_type if model_type in MM_RULES else None


def _temporal_times(n_t: int, spacing: float, index: int) -> np.ndarray:
    r"""The time of each of ``n_t`` temporal cells, :math:`\lfloor i_t\,\Delta \rfloor` (float64 product)."""
    return np.floor(cell_times(n_t, spacing, index, "tokens_per_second × seconds_per_grid")).astype(np.int64)


def _side_pieces(spans: Sequence[Span], rule: IdRule, merge: int, settings: dict[str, Any]) -> list[np.ndarray]:
    """Pieces of the running-start families (module docstring)."""
    start, pieces = 0, []
    for index, span in enumerate(spans):
        if isinstance(span, Text):
            pieces.append(text_ids(start, span.length))
            start += span.length
            continue
        g_t, g_h, g_w = span.grid  # type: ignore[union-attr]
        spacing = 1.0
        if isinstance(span, Video) and rule.spacing == "tokens_per_second":
            spacing = settings["tokens_per_second"] * span.seconds_per_grid  # Δ between temporal patches
        cells_t = g_t // settings["temporal_merge_size"] if isinstance(span, Video) and rule.temporal_merge else g_t
        frames = [1] * cells_t if isinstance(span, Video) and rule.frames == "one_by_one" else [cells_t]
        for n_t in frames:
            times = _temporal_times(n_t, spacing, index)
            pieces.append(vision_ids(start, span.grid, merge, times))  # type: ignore[union-attr]
            start += max(g_h, g_w) // merge  # the temporal extent does not advance the start
    return pieces


# ------------------------------------------------------------------------------------------------ checks
def _check_settings(rule: IdRule, settings: dict[str, Any]) -> dict[str, Any]:
    """The keyword settings, each checked; one a family does not read is an error."""
    out: dict[str, Any] = {}
    for name in _SETTINGS:
        value = settings[name]
        if value is None:
            continue
        if name not in rule.reads:
            readers = [f.family for f in MM_RULES.values() if name in f.reads]
            which = "family " + ", ".join(repr(f) for f in readers)
            raise ValueError(f"{name} is read by {which} only, not {rule.family!r}")
        if name == "temporal_merge_size":
            out[name] = check_int(name, value, minimum=1)
        else:
            out[name] = check_float(name, value, positive=True)
    return out


def _need(rule: IdRule, settings: dict[str, Any], name: str, what: str) -> None:
    if name not in settings:
        raise ValueError(f"a {rule.family} {what} needs {name} (the config's {_CONFIG_KEY[name]})")


_CONFIG_KEY = {"tokens_per_second": "vision_config.tokens_per_second",
               "position_id_per_seconds": "thinker_config.position_id_per_seconds",
               "seconds_per_chunk": "thinker_config.seconds_per_chunk",
               "temporal_merge_size": "vision_config.temporal_merge_size"}


def _check_span(index: int, span: Any, rule: IdRule, merge: int, settings: dict[str, Any]) -> None:
    """A span the family can place: its type, its grid against the merges, the settings it needs."""
    if not isinstance(span, (Text, Image, Video, Audio)):
        raise TypeError(f"spans[{index}] must be Text, Image, Video or Audio, got {type(span).__name__}")
    omni = rule.tmrope is not None
    if isinstance(span, Audio) and not omni:
        raise ValueError(f"spans[{index}]: family {rule.family!r} has no audio input (Audio spans are for "
                         f"{', '.join(f.family for f in MM_RULES.values() if f.tmrope is not None)})")
    if isinstance(span, Video) and span.audio_tokens is not None and not omni:
        raise ValueError(f"spans[{index}]: a video with audio_tokens (its audio track) is for the Omni families, "
                         f"not {rule.family!r}")
    if not isinstance(span, (Image, Video)):
        return
    g_t, g_h, g_w = span.grid
    if g_h % merge or g_w % merge:
        raise ValueError(f"spans[{index}]: grid (h, w) = ({g_h}, {g_w}) is not a multiple of "
                         f"spatial_merge_size={merge} (the vision tower merges {merge} × {merge} patches)")
    if isinstance(span, Video) and rule.spacing is not None:
        _need(rule, settings, rule.spacing, "video")
    if isinstance(span, Image) and omni and g_t > 1:
        _need(rule, settings, "position_id_per_seconds", "image of several temporal patches")
    if isinstance(span, Video) and rule.temporal_merge:
        _need(rule, settings, "temporal_merge_size", "video")
        if g_t % settings["temporal_merge_size"]:
            raise ValueError(f"spans[{index}]: grid t = {g_t} is not a multiple of temporal_merge_size="
                             f"{settings['temporal_merge_size']} (the vision tower merges that many temporal "
                             f"patches into one token)")
    if isinstance(span, Video) and span.audio_tokens is not None and "seconds_per_chunk" in rule.reads:
        _need(rule, settings, "seconds_per_chunk", "video with its audio track")


# ------------------------------------------------------------------------------------------------ public
def mm_position_ids(
    spans: Sequence[Span],
    *,
    family: str,
    spatial_merge_size: int = 2,
    tokens_per_second: float | None = None,
    xp: ModuleType | None = None,
    position_id_per_seconds: float | None = None,
    seconds_per_chunk: float | None = None,
    temporal_merge_size: int | None = None,
) -> Any:
    """The ``(3, T)`` M-RoPE position ids (rows t, h, w) of a sequence of spans.

    Parameters
    ----------
    spans : sequence of :class:`Text`, :class:`Image`, :class:`Video`, :class:`Audio`
    family : one of :data:`MM_FAMILIES`
        Whose ``get_rope_index`` to follow (:data:`MM_RULES`; :func:`id_family_of` maps a model type).
    spatial_merge_size : int
        ``k`` of the vision config (2 in every released model); grid ``h`` and ``w`` must be multiples.
    tokens_per_second : float, optional
        Qwen2.5-VL's ``vision_config.tokens_per_second`` (2 in the released models); required for a
        Qwen2.5-VL video.
    xp : namespace, optional
        Namespace of the result (default: the current backend).
    position_id_per_seconds : float, optional
        The Omni thinkers' ids per second of video time (``thinker_config.position_id_per_seconds``);
        required for an Omni video.
    seconds_per_chunk : float, optional
        Qwen2.5-Omni's chunk length when a video is interleaved with its audio track
        (``thinker_config.seconds_per_chunk``); required there.
    temporal_merge_size : int, optional
        ERNIE-4.5-VL's temporal patches per video token (``vision_config.temporal_merge_size``, 2); required
        for an ERNIE-4.5-VL video.

    A setting the family does not read is an error (so is one it needs and does not get).

    Returns
    -------
    int64 array ``(3, T)``, ``T`` = :func:`token_count` of the spans.
    """
    rule = MM_RULES[check_choice("family", family, MM_FAMILIES)]
    merge = check_int("spatial_merge_size", spatial_merge_size, minimum=1)
    settings = _check_settings(rule, {"tokens_per_second": tokens_per_second, "seconds_per_chunk": seconds_per_chunk,
                                      "position_id_per_seconds": position_id_per_seconds,
                                      "temporal_merge_size": temporal_merge_size})
    if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence) or not spans:
        raise TypeError("spans must be a non-empty list of Text, Image, Video and Audio spans")
    for index, span in enumerate(spans):
        _check_span(index, span, rule, merge, settings)
    temporal = settings.get("temporal_merge_size", 1) if rule.temporal_merge else 1
    check_token_total(token_count(spans, spatial_merge_size=merge, temporal_merge_size=temporal), "spans")
    frames = sum(s.grid[0] // temporal - 1 for s in spans if isinstance(s, Video)) if rule.frames == "one_by_one" else 0
    if len(spans) + frames > MAX_PIECES:
        raise ValueError(f"spans make {len(spans) + frames} pieces of ids (a span each, and each frame of a video "
                         f"{rule.family} places frame by frame), more than the {MAX_PIECES} (2**16) a layout may have")
    if rule.tmrope is not None:
        pieces = tmrope_pieces(spans, rule, merge, settings)
    else:
        pieces = _side_pieces(spans, rule, merge, settings)
    ids = np.concatenate(pieces, axis=1)  # (3, T)
    if int(ids.max()) > MAX_EXACT_POSITION:
        raise ValueError(f"spans place a position id at {int(ids.max())}: ids must be at most 2**53 (float64 angles "
                         "p·ω are exact only up to there)")
    return get_xp(xp).asarray(ids.astype(np.int64))


#: setting -> (where transformers' config holds it: "vision" or "wrapper", its key, its config-class default)
_FROM_CONFIG = {"spatial_merge_size": ("vision", "spatial_merge_size", 2),
                "tokens_per_second": ("vision", "tokens_per_second", 4),
                "position_id_per_seconds": ("wrapper", "position_id_per_seconds", 25),
                "seconds_per_chunk": ("wrapper", "seconds_per_chunk", 2),
                "temporal_merge_size": ("vision", "temporal_merge_size", 2)}


def mm_settings_from_config(config: Mapping[str, Any], *, default_family: str | None = None
                            ) -> tuple[str, dict[str, Any], dict[str, str]]:
    """``(family, settings, provenance)`` for :func:`mm_position_ids` from a multimodal ``config.json`` dict.

    The family is :func:`id_family_of` the top-level ``model_type`` (else its ``text_config``'s); the settings are
    the keyword arguments the family reads (:data:`MM_RULES`) plus ``spatial_merge_size``, each from the
    ``vision_config`` (inside ``thinker_config`` for the Omni models) or the wrapper (``thinker_config``, else the
    top level), or transformers' config-class default when absent; ``provenance`` says which
    (``"config"`` or ``"default"``) per setting, and for ``"family"``. :func:`setting_path` names the key.

    Raises
    ------
    ValueError
        The config's model type has no :data:`MM_RULES` family and no ``default_family`` is given.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (config.json as a dict), got {type(config).__name__}")
    check_sub_configs(config)
    wrapper = config.get("thinker_config") if isinstance(config.get("thinker_config"), Mapping) else config
    text = wrapper.get("text_config") if isinstance(wrapper.get("text_config"), Mapping) else {}
    family = id_family_of(config.get("model_type")) or id_family_of(text.get("model_type"))
    provenance: dict[str, str] = {"family": "config"}
    if family is None:
        if default_family is None:
            raise ValueError(f"model_type {config.get('model_type')!r} has no M-RoPE position rules in refpos: it "
                             f"follows the get_rope_index of {list(MM_FAMILIES)} (and their _moe/_text variants)")
        family, provenance["family"] = check_choice("default_family", default_family, MM_FAMILIES), "default"
    vision = wrapper.get("vision_config") if isinstance(wrapper.get("vision_config"), Mapping) else {}
    places = {"vision": vision, "wrapper": wrapper}
    settings: dict[str, Any] = {}
    for name, (place, key, default) in _FROM_CONFIG.items():
        if name != "spatial_merge_size" and name not in MM_RULES[family].reads:
            continue
        stated = places[place].get(key)
        settings[name] = default if stated is None else stated
        provenance[name] = "default" if stated is None else "config"
    return family, settings, provenance


def setting_path(config: Mapping[str, Any], setting: str) -> str:
    """Where a ``config.json`` holds one of :func:`mm_settings_from_config`'s settings
    (``thinker_config.vision_config.spatial_merge_size`` for an Omni model)."""
    place, key, _ = _FROM_CONFIG[check_choice("setting", setting, tuple(_FROM_CONFIG))]
    wrapper = "thinker_config." if isinstance(config.get("thinker_config"), Mapping) else ""
    return f"{wrapper}{'vision_config.' if place == 'vision' else ''}{key}"


def rope_delta(position_ids: Any) -> int:
    """``max(ids) + 1 − T``: what decoding adds to the token index to continue the sequence (HF ``rope_deltas``)."""
    ids = np.asarray(position_ids)
    if ids.ndim != 2 or ids.shape[0] != 3 or ids.shape[1] == 0:
        raise ValueError(f"position_ids must have shape (3, T) with T >= 1, got {ids.shape}")
    return int(ids.max()) + 1 - int(ids.shape[1])


def token_count(spans: Sequence[Span], *, spatial_merge_size: int = 2, temporal_merge_size: int = 1) -> int:
    """Tokens the spans occupy: text lengths, ``g_t·g_h·g_w / k²`` per image, ``/ m_t`` more per video
    (ERNIE-4.5-VL's ``temporal_merge_size``), audio tokens; a video with its audio track adds its audio tokens
    and four markers."""
    merge = check_int("spatial_merge_size", spatial_merge_size, minimum=1)
    temporal = check_int("temporal_merge_size", temporal_merge_size, minimum=1)
    total = 0
    for span in spans:
        if isinstance(span, Text):
            total += span.length
        elif isinstance(span, Audio):
            total += span.tokens
        elif isinstance(span, Video):
            total += math.prod(span.grid) // merge**2 // temporal
            total += 0 if span.audio_tokens is None else span.audio_tokens + 4
        else:
            total += math.prod(span.grid) // merge**2
    return total
