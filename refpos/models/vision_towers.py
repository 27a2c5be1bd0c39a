"""The vision towers whose RoPE refpos models: where a config keeps each tower, and its RoPE per layer.

One :class:`Tower` record per tower a model type has (:data:`VISION_TOWERS`): the stack it is reported as, the
path of its config inside the model's config, the facts of its RoPE (:class:`~refpos.models.kinds.vision_rope.
VisionRopeFacts`: its form — 2-D, :data:`refpos.rope.vision.VISION_ROPES`; 3-D,
:data:`refpos.rope.vision3d.VISION_ROPES_3D` — and its geometry keys) and the code it was read from. The layers
are built by the vision-RoPE kind (:mod:`refpos.models.kinds.vision_rope`).

==================  ==========================================  ==============  ===================================
model_type          tower (config path)                         form            transformers 5.24
==================  ==========================================  ==============  ===================================
qwen2_vl, …         ``vision`` (``vision_config``)              ``qwen2_vl``    ``Qwen2VLVisionRotaryEmbedding``, …
qwen2_5_omni, …     ``vision`` (``thinker_config.vision_config``) ``qwen2_vl``  ``Qwen2_5OmniVisionRotaryEmbedding``
mistral3, pixtral   ``vision`` (``vision_config``)              ``pixtral``     ``PixtralVisionRotaryEmbedding``
llama4              ``vision`` (``vision_config``)              ``llama4``      ``Llama4VisionRotaryEmbedding``
minimax_m3_vl       ``vision`` (``vision_config``)              ``minimax_m3_vl`` ``MiniMaxM3VLVisionRotaryEmbedding``
vjepa2              ``encoder`` and ``predictor`` (top level)    ``vjepa2``      ``VJEPA2RopeAttention``
==================  ==========================================  ==============  ===================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from refpos.models.kinds.record import Stack
from refpos.models.kinds.vision_rope import VISION_ROPE, VisionRopeFacts, VisionRopeLayer
from refpos.models.view import ConfigView
from refpos.rope.vision import VisionRope
from refpos.rope.vision3d import VisionRope3D


@dataclass(frozen=True)
class Tower:
    """One vision tower of a model type: its stack name, config path, RoPE facts and source."""

    stack: str
    path: tuple[str, ...]
    source: str
    facts: VisionRopeFacts = field(default_factory=VisionRopeFacts)

    @property
    def form(self) -> str:
        return self.facts.form

    @property
    def where(self) -> str:
        """The dotted config path of the tower's keys (empty: the top level)."""
        return "".join(f"{part}." for part in self.path)


def _qwen(module: str, cls: str) -> tuple[Tower, ...]:
    return (Tower("vision", ("vision_config",), f"{module}/modeling_{module}.py: {cls}"),)


def _thinker(module: str, cls: str) -> tuple[Tower, ...]:
    return (Tower("vision", ("thinker_config", "vision_config"), f"{module}/modeling_{module}.py: {cls}"),)


#: model_type (of the model, or of its vision_config) -> its towers
VISION_TOWERS: dict[str, tuple[Tower, ...]] = {
    "qwen2_vl": _qwen("qwen2_vl", "Qwen2VLVisionRotaryEmbedding"),
    "qwen2_5_vl": _qwen("qwen2_5_vl", "Qwen2_5_VLVisionRotaryEmbedding"),
    "qwen3_vl": _qwen("qwen3_vl", "Qwen3VLVisionRotaryEmbedding"),
    "qwen3_vl_moe": _qwen("qwen3_vl_moe", "Qwen3VLMoeVisionRotaryEmbedding"),
    "glm4v": _qwen("glm4v", "Glm4vVisionRotaryEmbedding"),
    "glm4v_moe": _qwen("glm4v_moe", "Glm4vMoeVisionRotaryEmbedding"),
    "qwen3_5": _qwen("qwen3_5", "Qwen3_5VisionRotaryEmbedding"),
    "qwen3_5_moe": _qwen("qwen3_5_moe", "Qwen3_5MoeVisionRotaryEmbedding"),
    "ernie4_5_vl_moe": _qwen("ernie4_5_vl_moe", "Ernie4_5_VLMoeVisionRotaryEmbedding"),
    "qwen2_5_omni": _thinker("qwen2_5_omni", "Qwen2_5OmniVisionRotaryEmbedding"),
    "qwen3_omni_moe": _thinker("qwen3_omni_moe", "Qwen3OmniMoeVisionRotaryEmbedding"),
    "pixtral": (Tower("vision", ("vision_config",), "pixtral/modeling_pixtral.py: PixtralVisionRotaryEmbedding",
                      VisionRopeFacts("pixtral")),),
    "llama4": (Tower("vision", ("vision_config",), "llama4/modeling_llama4.py: Llama4VisionRotaryEmbedding",
                     VisionRopeFacts("llama4")),),
    "minimax_m3_vl": (Tower("vision", ("vision_config",), "minimax_m3_vl/modeling_minimax_m3_vl.py: "
                            "MiniMaxM3VLVisionRotaryEmbedding, apply_rotary_pos_emb_vision",
                            VisionRopeFacts("minimax_m3_vl")),),
    "vjepa2": (Tower("encoder", (), "vjepa2/modeling_vjepa2.py: VJEPA2RopeAttention, rotate_queries_or_keys",
                     VisionRopeFacts("vjepa2", ("num_hidden_layers",), ("hidden_size",), ("num_attention_heads",))),
               Tower("predictor", (), "vjepa2/modeling_vjepa2.py: VJEPA2RopeAttention (the predictor's)",
                     VisionRopeFacts("vjepa2", ("pred_num_hidden_layers",), ("pred_hidden_size",),
                                     ("pred_num_attention_heads",)))),
}
VISION_TOWERS["mistral3"] = VISION_TOWERS["pixtral"]


def _strip(model_type: Any) -> str | None:
    if not isinstance(model_type, str):
        return None
    for suffix in ("_vision_encoder", "_vision_model", "_vision", "_text"):
        if model_type.endswith(suffix):
            return model_type[: -len(suffix)]
    return model_type


def towers_of(config: Mapping[str, Any]) -> tuple[Tower, ...]:
    """The towers of a config's model type (or of its vision_config's), ``()`` for one without a modelled tower."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (config.json as a dict), got {type(config).__name__}")
    raw = config.raw if isinstance(config, ConfigView) else config
    top = _strip(raw.get("model_type"))
    if top in VISION_TOWERS:
        return VISION_TOWERS[top]
    vision = raw.get("vision_config")
    kind = _strip(vision.get("model_type")) if isinstance(vision, Mapping) else None
    return VISION_TOWERS.get(kind, ()) if kind else ()


def _section(view: ConfigView, tower: Tower) -> ConfigView | None:
    """The view of the tower's section, ``None`` when the config does not describe it."""
    section = view
    for part in tower.path:
        if not isinstance(section.raw.get(part), Mapping):
            return None
        section = section.section(part)
    return section


def _stack(config: Any, tower: Tower) -> Stack:
    view = ConfigView.load(config)
    section = _section(view, tower)
    if section is None:
        raise ValueError(f"{tower.where.rstrip('.')}: the config has no such section for its {tower.stack} tower")
    return Stack(section, tower.stack, "single", None, tower.facts)


def tower_rope(config: Any, tower: Tower) -> VisionRope | VisionRope3D:
    """The RoPE every layer of ``tower`` applies (head size, θ: :mod:`refpos.models.kinds.vision_rope`)."""
    from refpos.models.kinds.vision_rope import tower_rope as rope_of

    return rope_of(_stack(config, tower))


def tower_layers(config: Any, tower: Tower) -> int:
    """The layer count of ``tower``."""
    stack = _stack(config, tower)
    return stack.view.count(tower.facts.layers, "layer count")


def tower_records(config: Any) -> list[VisionRopeLayer]:
    """One :class:`~refpos.models.kinds.vision_rope.VisionRopeLayer` per layer of every tower the config describes
    (``[]`` for a model without a tower refpos models, or a config of its language model alone)."""
    view = ConfigView.load(config)
    records: list[VisionRopeLayer] = []
    for tower in towers_of(view):
        section = _section(view, tower)
        if section is not None:
            records += VISION_ROPE.build(Stack(section, tower.stack, "single", None, tower.facts))  # type: ignore[misc]
    return records


def standalone(config: Mapping[str, Any]) -> bool:
    """True for a vision model whose every tower is the model itself (V-JEPA 2): no language model to resolve."""
    towers = towers_of(config)
    return bool(towers) and all(not tower.path for tower in towers)


__all__ = ["VISION_TOWERS", "Tower", "standalone", "tower_layers", "tower_records", "tower_rope", "towers_of"]
