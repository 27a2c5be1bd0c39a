r"""The vision-RoPE kind: a vision tower that rotates each patch by its (h, w) — or (t, h, w) — position: the form its
code uses (:class:`VisionRopeFacts`), the layer record (:class:`VisionRopeLayer`) and the builder from the tower's
config section.

The formulas are :mod:`refpos.rope.vision` (2-D: Qwen2-VL, Pixtral, Llama 4, axial) and :mod:`refpos.rope.vision3d`
(3-D: MiniMax-M3-VL, V-JEPA 2), docs/mrope.md#vision-encoders-2-d-axial-rope. Every layer of a tower rotates its
patches with the same RoPE: head size ``head_dim``, else the width over the head count (Qwen2-VL names its width
``embed_dim``, beside an ``hidden_size`` that is the language model's); θ: the tower's ``rope_parameters`` /
``rope_theta``, else 10000 (transformers' default for each of them; V-JEPA 2 fixes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.rope.vision import VISION_ROPES, VisionRope
from refpos.rope.vision3d import VISION_ROPES_3D, VisionRope3D
from refpos.validation import check_int

#: the keys of a tower's layer count, width and head count, the first present wins
TOWER_LAYERS = ("depth", "num_hidden_layers")
TOWER_WIDTH = ("embed_dim", "hidden_size")
TOWER_HEADS = ("num_heads", "num_attention_heads")


@dataclass(frozen=True)
class VisionRopeFacts:
    """The form of a tower's RoPE (:data:`refpos.rope.vision.VISION_ROPES` or
    :data:`refpos.rope.vision3d.VISION_ROPES_3D`) and, where they are not the defaults, the keys of its layer
    count, width and head count (V-JEPA 2's predictor: ``pred_num_hidden_layers``, …)."""

    form: str = "qwen2_vl"
    layers: tuple[str, ...] = TOWER_LAYERS
    width: tuple[str, ...] = TOWER_WIDTH
    heads: tuple[str, ...] = TOWER_HEADS

    def __post_init__(self) -> None:
        for name in ("layers", "width", "heads"):
            value = getattr(self, name)
            if isinstance(value, (list, str)):
                object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))

    def check(self, where: str) -> None:
        check_fact(where, self.form in (*VISION_ROPES, *VISION_ROPES_3D), "vision_rope.form", self.form)


@dataclass(frozen=True)
class VisionRopeLayer(LayerRecord):
    """A vision tower's layer: its 2-D (:class:`~refpos.rope.vision.VisionRope`) or 3-D
    (:class:`~refpos.rope.vision3d.VisionRope3D`) RoPE, applied at each patch's (h, w) or (t, h, w)."""

    rope: VisionRope | VisionRope3D
    kind: ClassVar[str] = "vision_rope"

    @property
    def label(self) -> str:
        return f"vision_rope({self.rope.kind})"

    def params(self) -> dict[str, Any]:
        return {"form": self.rope.kind, "head_dim": self.rope.head_dim, "theta": self.rope.theta,
                "axes": 3 if isinstance(self.rope, VisionRope3D) else 2}

    def _why_not(self) -> str:
        return ("a vision tower rotates patches by their (h, w) or (t, h, w) positions: refpos.rope.vision and "
                "refpos.rope.vision3d apply it, not the 1-D attention pipeline")


def tower_rope(stack: Stack) -> VisionRope | VisionRope3D:
    """The RoPE every layer of the tower rotates with (module docstring: head size, θ)."""
    view, facts = stack.view, stack.facts
    if view.has("head_dim"):
        head_dim = view.int("head_dim", minimum=4)
    else:
        width = view.count(facts.width, "width")
        heads = view.count(facts.heads, "head count")
        if width % heads:
            raise ValueError(f"{view.path}: the width {width} is not a multiple of the head count {heads}")
        head_dim = width // heads
    theta: Any = 10000.0
    params = view.value("rope_parameters") or view.value("rope_scaling") or {}
    if isinstance(params, Mapping) and params.get("rope_theta") is not None:
        theta = params["rope_theta"]
    elif view.has("rope_theta"):
        theta = view.value("rope_theta")
    if facts.form in VISION_ROPES_3D:
        return VisionRope3D(facts.form, head_dim, theta=theta)
    return VisionRope(facts.form, head_dim, theta=theta)


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`VisionRopeLayer` per layer of the tower."""
    rope = tower_rope(stack)
    n = check_int(stack.view.name(stack.facts.layers[0]), stack.view.count(stack.facts.layers, "layer count"),
                  minimum=1)
    reads = (("rotation", ("video_grid",) if isinstance(rope, VisionRope3D) else ("image_grid",)),)
    return [VisionRopeLayer(stack.name, i, None, rope=rope, reads=reads) for i in range(n)]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"form": draw(st.sampled_from(("qwen2_vl", "pixtral", "llama4"))), "head_dim": 4 * draw(st.integers(1, 32))}


VISION_ROPE = EncodingKind(
    name="vision_rope", summary="each image patch's query and key rotated by its row and column (2-D RoPE), or its "
    "frame, row and column (3-D)", record=VisionRopeLayer, build=build, hook="rotate",
    reads=("image_grid", "video_grid"), doc="docs/mrope.md#vision-encoders-2-d-axial-rope", facts=VisionRopeFacts,
    golden="vision-rope", contract=("apply_vision_rope",), spec="spec_tests/test_vision_rope.py", draw=_draw,
    modalities=("vision",),
    example={"config": {"depth": 2, "embed_dim": 64, "num_heads": 4}, "facts": {"form": "qwen2_vl"}},
    absent={"check": "vision RoPE is checked through its golden cases (refpos check CASE) and the spec suite's "
                     "apply_vision_rope properties"})

__all__ = ["TOWER_HEADS", "TOWER_LAYERS", "TOWER_WIDTH", "VISION_ROPE", "VisionRopeFacts", "VisionRopeLayer", "build",
           "tower_rope"]
