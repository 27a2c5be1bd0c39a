"""A model type's default config shrunk to a tiny geometry, with what positions depend on kept.

:func:`shrink` builds a config of the same class from the defaults shrunk at one of :data:`STRENGTHS`: each
config dict by the rules of :mod:`survey.tiny_rules`, then a model type's repairs (:mod:`survey.tiny_repairs`).
Sub-configs (``text_config``, ``vision_config`` ..., and a config held in a field the class does not declare:
RAG's ``generator``, :func:`sub_config_names`) are shrunk by the same rules, and a width named after another
config's (``audio_hidden_size``, ``backbone_hidden_size``, ``cross_hidden_size``) follows that one
(:func:`_follow_widths`). A sub-config's model type built alone takes the fields its composite would have
stated on it (:func:`composite_fields`: Pix2Struct's ``initializer_range`` on its text config).

M-RoPE sections are read by the rotary module, from the config or from its own default; where the shrunk or
default geometry leaves them summing to other than the module's frequency count (Qwen3-Omni's text model
assumes 128-wide heads; GLM-4.1V's class defaults rotate the whole head against sections for half of it), the
survey states them scaled to it in the config (:func:`fit_sections`), so both sides read the same sections.
"""

from __future__ import annotations

import importlib
from typing import Any

from survey.tiny_repairs import OVERRIDES, repaired
from survey.tiny_rules import (
    EXPERTS,
    FFN,
    HEADS,
    LAYERS,
    NAMED_WIDTH_KEY,
    STRENGTHS,
    VOCAB,
    WIDTH,
    WIDTH_KEY,
    is_int,
    scaled_sections,
    shrink_values,
)

__all__ = [
    "EXPERTS",
    "FFN",
    "HEADS",
    "LAYERS",
    "OVERRIDES",
    "STRENGTHS",
    "VOCAB",
    "WIDTH",
    "composite_fields",
    "configs_of",
    "fit_sections",
    "repaired",
    "scaled_sections",
    "shrink",
    "shrink_dict",
]


def shrink_dict(values: dict[str, Any], strength: str) -> dict[str, Any]:
    """The config dict ``values`` shrunk at ``strength`` (:func:`survey.tiny_rules.shrink_values`), with its model
    type's repairs (:func:`survey.tiny_repairs.repaired`)."""
    return repaired(shrink_values(values, strength))


def sub_config_names(config: Any) -> list[str]:
    """The fields of ``config`` that hold a config: those its class declares (``sub_configs``), then any other
    whose value is a config (RAG's ``question_encoder`` and ``generator``, which its class does not declare)."""
    declared = list(getattr(config, "sub_configs", {}) or {})
    held = [name for name, value in vars(config).items() if name not in declared
            and hasattr(value, "to_dict") and hasattr(value, "model_type")]  # read as stored: no property runs
    return declared + held


def _shrunk_values(config: Any, strength: str) -> dict[str, Any]:
    """``config.to_dict()`` shrunk, with every sub-config (and theirs: Qwen2.5-Omni's
    ``thinker_config.text_config``) shrunk alike."""
    values = config.to_dict()
    for name in sub_config_names(config):
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            values[name] = {**_shrunk_values(sub, strength), "model_type": sub.model_type}
    return shrink_dict(values, strength)


def _width_pairs(original: dict[str, Any], shrunk: dict[str, Any]) -> set[tuple[int, int]]:
    """Every ``(default, shrunk)`` pair of a width (:data:`WIDTH_KEY`) the shrink changed, sub-configs too."""
    pairs = set()
    for key, value in original.items():
        new = shrunk.get(key)
        if isinstance(value, dict) and isinstance(new, dict):
            pairs |= _width_pairs(value, new)
        elif isinstance(key, str) and WIDTH_KEY.fullmatch(key) and is_int(value) and is_int(new) and new != value:
            pairs.add((value, new))
    return pairs


def _follow_widths(original: dict[str, Any], shrunk: dict[str, Any], pairs: set[tuple[int, int]]) -> None:
    """Widths that name another config's width (:data:`NAMED_WIDTH_KEY`: NeMo's ``head_config.audio_hidden_size``
    is its audio encoder's, CSM's ``backbone_hidden_size`` its backbone's, BLT's ``hidden_size_global`` its
    global model's, Dots3's vision ``adapter_in_dim`` its tower's), which validators or shapes require equal:
    where the default equals a width the shrink changed, and every width of that default became the same, that
    one's shrunk value."""
    for key, value in original.items():
        new = shrunk.get(key)
        if isinstance(value, dict) and isinstance(new, dict):
            _follow_widths(value, new, pairs)
        elif isinstance(key, str) and NAMED_WIDTH_KEY.fullmatch(key) and is_int(value) and new == value:
            targets = {n for old, n in pairs if old == value}
            if len(targets) == 1:
                shrunk[key] = targets.pop()


def composite_fields(config: Any) -> dict[str, Any]:
    """Fields a composite config states on ``config``'s class as its sub-config and that class alone lacks.

    A composite's ``__post_init__`` may copy its own fields onto its sub-configs (Pix2Struct's
    ``initializer_range`` onto its text config, T5Gemma2's ``dropout_rate`` onto its decoder), whose modules then
    read them; a sub-config's model type built alone lacks them. Each composite of the sub-config's own
    configuration module is built from its defaults; the fields its instance of ``config``'s class holds beyond
    ``config``'s are returned, of every composite (the outermost states them: T5Gemma2's encoder config holds a
    text config, which only T5Gemma2's config gives a ``dropout_rate``), a field's first value found."""
    own, found = config.to_dict(), {}
    module = importlib.import_module(type(config).__module__)
    for holder in vars(module).values():
        if not (isinstance(holder, type) and holder is not type(config) and getattr(holder, "sub_configs", None)):
            continue
        try:
            held = [c for c in configs_of(holder()) if type(c) is type(config)]
        except Exception:  # a composite whose defaults do not build holds nothing to take
            continue
        for sub in held:
            found.update({k: v for k, v in sub.to_dict().items() if k not in own and k not in found})
    return found


def shrink(config: Any, strength: str) -> Any:
    """A new config of ``type(config)`` from its ``to_dict()`` shrunk at ``strength``, sub-configs too, with the
    fields a composite would have stated on it (:func:`composite_fields`)."""
    values = {**composite_fields(config), **_shrunk_values(config, strength)}
    original = config.to_dict()
    _follow_widths(original, values, _width_pairs(original, values))
    return type(config).from_dict(values)


def configs_of(config: Any) -> list[Any]:
    """``config`` and its sub-configs, theirs too."""
    subs = [getattr(config, name, None) for name in sub_config_names(config)]
    return [config, *(c for sub in subs if sub is not None and hasattr(sub, "to_dict") for c in configs_of(sub))]



def fit_sections(model: Any, config: Any) -> bool:
    """Keep M-RoPE sections consistent with the shrunk head width.

    A rotary module's ``mrope_section`` (the config's, or the module's own default where the config names
    none: Qwen3-Omni's text model assumes 128-wide heads, GLM-4.1V a rotary half of the head) must sum to its
    frequency count ``inv_freq.shape[-1]``; where the shrunk (or default) geometry breaks that, the sections
    scaled to it (:func:`scaled_sections`) are stated in that config's rope dict, so transformers and refpos
    read the same sections. Returns whether a config changed (the model must then be built anew)."""
    changed = False
    for module in model.modules():
        sections, inv_freq = getattr(module, "mrope_section", None), getattr(module, "inv_freq", None)
        if not isinstance(sections, (list, tuple)) or inv_freq is None or sum(sections) == inv_freq.shape[-1]:
            continue
        for owner in configs_of(config):
            rope = getattr(owner, "rope_parameters", None)
            if type(owner) is type(getattr(module, "config", None)) and isinstance(rope, dict) and "rope_type" in rope:
                rope["mrope_section"] = scaled_sections(list(sections), int(inv_freq.shape[-1]))
                changed = True
    return changed
