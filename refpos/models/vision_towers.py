"""The vision towers whose RoPE refpos models: where a config keeps each tower, and its RoPE per layer.

One :class:`Tower` record per tower a model type has (:data:`VISION_TOWERS`): the stack it is reported as, the
path of its config inside the model's config, its form (2-D, :data:`refpos.rope.vision.VISION_ROPES`; 3-D,
:data:`refpos.rope.vision3d.VISION_ROPES_3D`) and the code it was read from. Every layer of a tower rotates its
patches with the same RoPE: head size ``head_dim``, else the width over the head count (the first present
key of each list: Qwen2-VL names its width ``embed_dim``, beside an ``hidden_size`` that is the language
model's); θ: the tower's ``rope_parameters`` / ``rope_theta``, else 10000 (transformers' default for each of
them; V-JEPA 2 fixes it).

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
from dataclasses import dataclass
from typing import Any

from refpos.models.records import VisionRopeLayer
from refpos.rope.vision import VisionRope
from refpos.rope.vision3d import VISION_ROPES_3D, VisionRope3D
from refpos.validation import check_int

_LAYERS = ("depth", "num_hidden_layers")
_WIDTH = ("embed_dim", "hidden_size")
_HEADS = ("num_heads", "num_attention_heads")


@dataclass(frozen=True)
class Tower:
    """One vision tower of a model type: its stack name, config path, RoPE form, keys and source."""

    stack: str
    path: tuple[str, ...]
    form: str
    source: str
    layers: tuple[str, ...] = _LAYERS
    width: tuple[str, ...] = _WIDTH
    heads: tuple[str, ...] = _HEADS

    @property
    def where(self) -> str:
        """The dotted config path of the tower's keys (empty: the top level)."""
        return "".join(f"{part}." for part in self.path)


def _qwen(module: str, cls: str) -> tuple[Tower, ...]:
    return (Tower("vision", ("vision_config",), "qwen2_vl", f"{module}/modeling_{module}.py: {cls}"),)


def _thinker(module: str, cls: str) -> tuple[Tower, ...]:
    return (Tower("vision", ("thinker_config", "vision_config"), "qwen2_vl", f"{module}/modeling_{module}.py: {cls}"),)


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
    "pixtral": (Tower("vision", ("vision_config",), "pixtral", "pixtral/modeling_pixtral.py: "
                      "PixtralVisionRotaryEmbedding"),),
    "llama4": (Tower("vision", ("vision_config",), "llama4",
                     "llama4/modeling_llama4.py: Llama4VisionRotaryEmbedding"),),
    "minimax_m3_vl": (Tower("vision", ("vision_config",), "minimax_m3_vl", "minimax_m3_vl/modeling_minimax_m3_vl.py: "
                            "MiniMaxM3VLVisionRotaryEmbedding, apply_rotary_pos_emb_vision"),),
    "vjepa2": (Tower("encoder", (), "vjepa2", "vjepa2/modeling_vjepa2.py: VJEPA2RopeAttention, rotate_queries_or_keys",
                     layers=("num_hidden_layers",), width=("hidden_size",), heads=("num_attention_heads",)),
               Tower("predictor", (), "vjepa2", "vjepa2/modeling_vjepa2.py: VJEPA2RopeAttention (the predictor's)",
                     layers=("pred_num_hidden_layers",), width=("pred_hidden_size",),
                     heads=("pred_num_attention_heads",))),
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
    top = _strip(config.get("model_type"))
    if top in VISION_TOWERS:
        return VISION_TOWERS[top]
    vision = config.get("vision_config")
    kind = _strip(vision.get("model_type")) if isinstance(vision, Mapping) else None
    return VISION_TOWERS.get(kind, ()) if kind else ()


def _section(config: Mapping[str, Any], tower: Tower) -> Mapping[str, Any]:
    section: Any = config
    for part in tower.path:
        section = section.get(part) if isinstance(section, Mapping) else None
    if not isinstance(section, Mapping):
        raise ValueError(f"{tower.where.rstrip('.')}: the config has no such section for its {tower.stack} tower")
    return section


def _first(section: Mapping[str, Any], tower: Tower, keys: tuple[str, ...], what: str) -> int:
    for key in keys:
        if section.get(key) is not None:
            return check_int(tower.where + key, section[key], minimum=1)
    raise ValueError(f"{tower.where}{keys[0]}: the {tower.stack} tower states no {what} (none of {list(keys)})")


def tower_rope(config: Mapping[str, Any], tower: Tower) -> VisionRope | VisionRope3D:
    """The RoPE every layer of ``tower`` applies (module docstring: head size, θ)."""
    section = _section(config, tower)
    if section.get("head_dim") is not None:
        head_dim = check_int(tower.where + "head_dim", section["head_dim"], minimum=4)
    else:
        width = _first(section, tower, tower.width, "width")
        heads = _first(section, tower, tower.heads, "head count")
        if width % heads:
            raise ValueError(f"{tower.where}: the width {width} is not a multiple of the head count {heads}")
        head_dim = width // heads
    theta = 10000.0
    params = section.get("rope_parameters") or section.get("rope_scaling") or {}
    if isinstance(params, Mapping) and params.get("rope_theta") is not None:
        theta = params["rope_theta"]
    elif section.get("rope_theta") is not None:
        theta = section["rope_theta"]
    if tower.form in VISION_ROPES_3D:
        return VisionRope3D(tower.form, head_dim, theta=theta)
    return VisionRope(tower.form, head_dim, theta=theta)


def tower_layers(config: Mapping[str, Any], tower: Tower) -> int:
    """The layer count of ``tower``."""
    return _first(_section(config, tower), tower, tower.layers, "layer count")


def _described(config: Mapping[str, Any], tower: Tower) -> bool:
    section: Any = config
    for part in tower.path:
        section = section.get(part) if isinstance(section, Mapping) else None
    return isinstance(section, Mapping)


def tower_records(config: Mapping[str, Any]) -> list[VisionRopeLayer]:
    """One :class:`~refpos.models.records.VisionRopeLayer` per layer of every tower the config describes (``[]``
    for a model without a tower refpos models, or a config of its language model alone)."""
    records: list[VisionRopeLayer] = []
    for tower in towers_of(config):
        if not _described(config, tower):
            continue
        rope = tower_rope(config, tower)
        records += [VisionRopeLayer(tower.stack, i, None, rope=rope) for i in range(tower_layers(config, tower))]
    return records


def standalone(config: Mapping[str, Any]) -> bool:
    """True for a vision model whose every tower is the model itself (V-JEPA 2): no language model to resolve."""
    towers = towers_of(config)
    return bool(towers) and all(not tower.path for tower in towers)
