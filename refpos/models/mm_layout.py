"""M-RoPE position ids of a written token layout, with the family's rules read from a model's config.

A layout is written as comma-separated spans, each ``KIND:SIZE``:

* ``text:N`` — ``N`` text tokens;
* ``image:TxHxW`` — an image of ``T × H × W`` patches (``image_grid_thw``, before the spatial merge);
* ``video:TxHxW``, ``video:TxHxW@S`` — a video, ``S`` seconds between two temporal patches (default 1;
  ``second_per_grid_ts``); ``video:TxHxW@S+audio:N`` — with its audio track of ``N`` audio tokens
  (the Omni thinkers' ``use_audio_in_video``);
* ``audio:N`` — ``N`` audio tokens (the Omni thinkers).

:func:`config_rules` reads what :func:`refpos.models.mm_positions.mm_position_ids` needs from the config
(:func:`refpos.models.mm_positions.mm_settings_from_config`): the family (``model_type``, or the
``text_config``'s) and the settings it reads (``spatial_merge_size`` always; ``tokens_per_second``,
``position_id_per_seconds``, ``seconds_per_chunk``, ``temporal_merge_size`` by family), each with where it came
from (the config's key, or transformers' config-class default when the config does not state it). A family
refpos has no position rules for is a ``ValueError``, as is a span its family has no input for (audio for a
vision-language model). :func:`config_position_ids` gives the ``(3, T)`` ids.

>>> parse_layout("text:3,image:1x8x12,text:2,audio:4,video:2x4x4@0.5+audio:6")  # doctest: +NORMALIZE_WHITESPACE
[Text(length=3), Image(grid=(1, 8, 12)), Text(length=2), Audio(tokens=4),
 Video(grid=(2, 4, 4), seconds_per_grid=0.5, audio_tokens=6)]
>>> ids, rules = config_position_ids({"model_type": "qwen2_vl"}, parse_layout("text:2,image:1x4x6,text:2"))
>>> ids.tolist()[1], rules["spatial_merge_size"]
([0, 1, 2, 2, 2, 3, 3, 3, 5, 6], (2, 'default: the config has no vision_config.spatial_merge_size'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from refpos.bounds import parse_float
from refpos.models.mm_positions import (
    Audio,
    Image,
    Span,
    Text,
    Video,
    mm_position_ids,
    mm_settings_from_config,
    setting_path,
)
from refpos.models.mm_spans import MAX_PIECES, TOKENS

#: the span kinds of a written layout
SPAN_KINDS = ("text", "image", "video", "audio")
_USAGE = "comma-separated spans text:N, image:TxHxW, video:TxHxW[@S][+audio:N], audio:N"


def _grid(kind: str, text: str) -> tuple[int, int, int]:
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"--layout: {kind}:{text} must be {kind}:TxHxW (three patch counts in ASCII digits, e.g. "
                         f"{kind}:1x8x12)")
    return tuple(TOKENS.parse(f"--layout: {kind}:{text}: a patch count", p) for p in parts)  # type: ignore[return-value]


def _count(item: str, size: str) -> int:
    if not (size.isascii() and size.isdigit()):
        raise ValueError(f"--layout: {item!r} takes a token count in ASCII digits, e.g. {item.partition(':')[0]}:6")
    return TOKENS.parse(f"--layout: {item!r}: the token count", size)


def _video(item: str, size: str) -> Video:
    size, plus, track = size.partition("+")
    grid, at, seconds = size.partition("@")
    if plus and not track.startswith("audio:"):
        raise ValueError(f"--layout: {item!r}: a video's track is written +audio:N (N audio tokens)")
    try:
        return Video(_grid("video", grid), _seconds(item, seconds) if at else 1.0,
                     _count(track, track[len("audio:"):]) if plus else None)
    except ValueError as exc:
        raise ValueError(exc.args[0] if str(exc).startswith("--layout") else f"--layout: {item!r}: {exc}") from None


def _seconds(item: str, text: str) -> float:
    """The ``S`` of ``video:TxHxW@S``: a finite number >= 0 in ASCII (``parse_float``)."""
    try:
        return parse_float(text)
    except ValueError:
        raise ValueError(f"--layout: {item!r}: the seconds between temporal patches must be a number such as 0.5, got "
                         f"{text!r}") from None


def parse_layout(text: str) -> list[Span]:
    """The spans of a written layout (the module docstring); a ``ValueError`` naming the bad span otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"--layout must be {_USAGE}")
    if text.count(",") >= MAX_PIECES:
        raise ValueError(f"--layout holds {text.count(',') + 1} spans, more than the {MAX_PIECES} (2**16) a layout "
                         "may have")
    spans: list[Span] = []
    for item in (part.strip() for part in text.split(",")):
        kind, sep, size = item.partition(":")
        if not sep or kind not in SPAN_KINDS:
            raise ValueError(f"--layout: {item!r} is not KIND:SIZE with KIND one of {list(SPAN_KINDS)}")
        try:
            if kind == "text":
                spans.append(Text(_count(item, size)))
            elif kind == "audio":
                spans.append(Audio(_count(item, size)))
            elif kind == "image":
                spans.append(Image(_grid(kind, size)))
            else:
                spans.append(_video(item, size))
        except ValueError as exc:  # a zero count or grid
            raise ValueError(exc.args[0] if str(exc).startswith("--layout") else f"--layout: {item!r}: {exc}"
                             ) from None
    return spans


def config_rules(config: Mapping[str, Any], *, default_family: str | None = None) -> dict[str, tuple[Any, str]]:
    """``{"family", "spatial_merge_size", ...the settings the family reads}``, each ``(value, where it came from)``.

    A config of no M-RoPE family is a ``ValueError`` unless ``default_family`` names the rules to follow.
    """
    family, settings, provenance = mm_settings_from_config(config, default_family=default_family)
    rules: dict[str, tuple[Any, str]] = {"family": (family, "config: model_type" if provenance["family"] == "config"
                                                    else "default: the config names no M-RoPE family")}
    for name, value in settings.items():
        path = setting_path(config, name)
        rules[name] = (value, f"config: {path}" if provenance[name] == "config" else
                       f"default: the config has no {path}")
    return rules


def config_position_ids(config: Mapping[str, Any], spans: list[Span], *, default_family: str | None = None
                        ) -> tuple[np.ndarray, dict[str, tuple[Any, str]]]:
    """The ``(3, T)`` M-RoPE ids of ``spans`` under the config's rules, and the rules (:func:`config_rules`)."""
    from refpos.backend import get_xp

    rules = config_rules(config, default_family=default_family)
    settings = {name: value for name, (value, _) in rules.items() if name != "family"}
    ids = mm_position_ids(spans, family=rules["family"][0], xp=get_xp("numpy"), **settings)
    return np.asarray(ids), rules
