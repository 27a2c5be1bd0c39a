"""The vision towers that rotate their patches: the RoPE of a config's first such tower.

A vision tower is a part of a composite config (:mod:`refpos.models.parts`), or a vision model of its own
(Pixtral, V-JEPA 2), whose family row's kind is ``vision_rope`` (:mod:`refpos.models.kinds.vision_rope`).
:func:`refpos.model_positions` lists every layer of every tower; this module answers the one question the M-RoPE
goldens and anchors ask of a multimodal config: which RoPE does its vision tower rotate with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refpos.models.facts import STACKS
from refpos.models.families import FAMILY_ROWS, family_of
from refpos.models.kinds.record import Stack
from refpos.models.kinds.vision_rope import tower_rope
from refpos.models.parts import parts_of
from refpos.models.view import ConfigView
from refpos.rope.vision import VisionRope
from refpos.rope.vision3d import VisionRope3D


def vision_rope_from_hf_config(config: Mapping[str, Any]) -> VisionRope | VisionRope3D:
    """The RoPE of a config's first vision tower that rotates its patches (a part of the config whose family row's
    kind is ``vision_rope``, :mod:`refpos.models.parts`): a :class:`VisionRope` (2-D) or :class:`VisionRope3D`
    (3-D).

    Head size: ``head_dim``, else the tower's width (Qwen2-VL: ``embed_dim``) over ``num_heads`` /
    ``num_attention_heads``; θ: the vision config's ``rope_parameters`` / ``rope_theta``, else 10000
    (transformers' default for every family here).

    Raises
    ------
    ValueError
        No vision tower, or a vision model type whose RoPE refpos does not model (named).
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (config.json as a dict), got {type(config).__name__}")
    top = ConfigView.load(config)
    candidates = [(part.view, part.model_type) for part in parts_of(top)] + [(top, top.raw.get("model_type"))]
    for view, model_type in candidates:
        family = family_of(model_type) if isinstance(model_type, str) else None
        if family is None or not STACKS[family.stacks]:
            continue
        name = STACKS[family.stacks][0]
        if family.stack(name).encoding == "vision_rope":
            return tower_rope(Stack(view, name, "single", family, family.stack(name).facts_of("vision_rope")))
    if len(candidates) == 1:
        raise ValueError("config has no vision_config: there is no vision tower to resolve")
    modelled = sorted(row.model_type for row in FAMILY_ROWS if "vision_rope" in row.encodings)
    raise ValueError(f"vision RoPE of model_type {candidates[0][1]!r} is not modelled; refpos knows {modelled}")

__all__ = ["vision_rope_from_hf_config"]
