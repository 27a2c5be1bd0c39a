"""M-RoPE position ids of a written token layout, with the family's rules read from a model's config.

A layout is written as comma-separated spans, each ``KIND:SIZE``:

* ``text:N`` — ``N`` text tokens;
* ``image:TxHxW`` — an image of ``T × H × W`` patches (``image_grid_thw``, before the spatial merge);
* ``video:TxHxW`` or ``video:TxHxW@S`` — a video, ``S`` seconds between two temporal patches (default 1;
  Qwen2.5-VL's ``second_per_grid_ts``).

:func:`config_rules` reads what :func:`refpos.models.mm_positions.mm_position_ids` needs from the config: the
family (``model_type``, or the ``text_config``'s), ``vision_config.spatial_merge_size`` and, for Qwen2.5-VL,
``vision_config.tokens_per_second``; each with where it came from (the config, or the family's default when
the config does not state it). :func:`config_position_ids` gives the ``(3, T)`` ids.

>>> parse_layout("text:3,image:1x8x12,text:2")
[Text(length=3), Image(grid=(1, 8, 12)), Text(length=2)]
>>> ids, rules = config_position_ids({"model_type": "qwen2_vl"}, parse_layout("text:2,image:1x4x6,text:2"))
>>> ids.tolist()[1], rules["spatial_merge_size"]
([0, 1, 2, 2, 2, 3, 3, 3, 5, 6], (2, 'default: the config has no vision_config.spatial_merge_size'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from refpos.models.mm_positions import MM_FAMILIES, MM_RULES, Image, Span, Text, Video, mm_position_ids
from refpos.models.mrope_hf import family_of

#: M-RoPE model types -> the family whose position rules they follow (the MoE and text variants share them)
POSITION_FAMILY = {"qwen2_vl": "qwen2_vl", "qwen2_5_vl": "qwen2_5_vl", "qwen3_vl": "qwen3_vl",
                   "qwen3_vl_moe": "qwen3_vl", "glm4v": "glm4v", "glm4v_moe": "glm4v"}
#: what the released models of every family use where a config does not say (mm_positions' defaults)
DEFAULT_MERGE, DEFAULT_TOKENS_PER_SECOND = 2, 2.0
#: the span kinds of a written layout
SPAN_KINDS = ("text", "image", "video")


def _grid(kind: str, text: str) -> tuple[int, int, int]:
    parts = text.split("x")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--layout: {kind}:{text} must be {kind}:TxHxW (three patch counts, e.g. {kind}:1x8x12)")
    return tuple(int(p) for p in parts)  # type: ignore[return-value]


def parse_layout(text: str) -> list[Span]:
    """The spans of a written layout (the module docstring); a ``ValueError`` naming the bad span otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("--layout must be comma-separated spans text:N, image:TxHxW, video:TxHxW[@S]")
    spans: list[Span] = []
    for item in text.split(","):
        kind, sep, size = item.strip().partition(":")
        if not sep or kind not in SPAN_KINDS:
            raise ValueError(f"--layout: {item.strip()!r} is not KIND:SIZE with KIND one of {list(SPAN_KINDS)}")
        if kind == "text":
            if not size.strip().isdigit():
                raise ValueError(f"--layout: {item.strip()!r}: text takes a token count, e.g. text:6")
            spans.append(Text(int(size)))
        elif kind == "image":
            spans.append(Image(_grid(kind, size)))
        else:
            grid, at, seconds = size.partition("@")
            try:
                spans.append(Video(_grid(kind, grid), float(seconds) if at else 1.0))
            except ValueError as exc:
                raise ValueError(f"--layout: {item.strip()!r}: {exc}") from None
    return spans


def _family(config: Mapping[str, Any]) -> str | None:
    text_config = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else {}
    found = family_of(config.get("model_type")) or family_of(text_config.get("model_type"))
    return POSITION_FAMILY.get(found or "")


def config_rules(config: Mapping[str, Any], *, default_family: str | None = None) -> dict[str, tuple[Any, str]]:
    """``{"family", "spatial_merge_size", "tokens_per_second"}``, each ``(value, where it came from)``.

    A config of no M-RoPE family is a ``ValueError`` unless ``default_family`` names the rules to follow.
    """
    vision = config.get("vision_config") if isinstance(config.get("vision_config"), Mapping) else {}
    family = _family(config)
    if family is None:
        if default_family is None:
            raise ValueError(f"model_type {config.get('model_type')!r} has no M-RoPE position rules in refpos (known: "
                             f"{', '.join(MM_FAMILIES)} and their _moe/_text variants)")
        rules: dict[str, tuple[Any, str]] = {"family": (default_family, "default: the config names no M-RoPE family")}
    else:
        rules = {"family": (family, "config: model_type")}
    merge = vision.get("spatial_merge_size")
    rules["spatial_merge_size"] = (merge, "config: vision_config.spatial_merge_size") if merge is not None else (
        DEFAULT_MERGE, "default: the config has no vision_config.spatial_merge_size")
    if "tokens_per_second" in MM_RULES[rules["family"][0]].reads:
        tps = vision.get("tokens_per_second")
        rules["tokens_per_second"] = (tps, "config: vision_config.tokens_per_second") if tps is not None else (
            DEFAULT_TOKENS_PER_SECOND, "default: the config has no vision_config.tokens_per_second")
    else:
        rules["tokens_per_second"] = (None, f"not read by {rules['family'][0]}")
    return rules


def config_position_ids(config: Mapping[str, Any], spans: list[Span], *, default_family: str | None = None
                        ) -> tuple[np.ndarray, dict[str, tuple[Any, str]]]:
    """The ``(3, T)`` M-RoPE ids of ``spans`` under the config's rules, and the rules (:func:`config_rules`)."""
    from refpos.backend import get_xp

    rules = config_rules(config, default_family=default_family)
    ids = mm_position_ids(spans, family=rules["family"][0], spatial_merge_size=rules["spatial_merge_size"][0],
                          tokens_per_second=rules["tokens_per_second"][0], xp=get_xp("numpy"))
    return np.asarray(ids), rules
