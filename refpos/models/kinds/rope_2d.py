r"""The 2-D RoPE kind: GLM's two position axes, one RoPE per half of each head (:mod:`refpos.rope.two_d`,
docs/rope.md#glm-2-d-positions), as ChatGLM-6B's code runs them — its facts (:class:`Rope2DFacts`), the layer record
(:class:`Rope2DLayer`) and the builder from a config.

Examples
--------
>>> from refpos.models import model_positions
>>> glm = {"model_type": "chatglm", "num_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
...        "position_encoding_2d": True}
>>> layer = model_positions(glm).layers[0]
>>> layer.kind, layer.rope.head_dim, layer.rope.theta, layer.rope.layout
('rope_2d', 4, 10000.0, 'half')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.backend import Array
from refpos.encoding import Encoding
from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.rope.config import RopeConfig
from refpos.rope.two_d import GLM_AXES, apply_rope_2d


@dataclass(frozen=True)
class Rope2DFacts:
    """What the family's code fixes about its two RoPEs: the base ``theta`` (ChatGLM-6B hard-codes 10000) and the
    pair ``layout`` inside each half (``"half"``: ``rotate_half`` on the half's channels)."""

    theta: float = 10000.0
    layout: str = "half"

    def check(self, where: str) -> None:
        check_fact(where, isinstance(self.theta, (int, float)) and not isinstance(self.theta, bool)
                   and self.theta > 1, "rope_2d.theta", self.theta)
        check_fact(where, self.layout in ("half", "interleaved"), "rope_2d.layout", self.layout)


@dataclass(frozen=True)
class Rope2DLayer(LayerRecord):
    r"""Two RoPEs per head: channels ``0 … D/2 − 1`` rotated by the position, ``D/2 … D − 1`` by the block position,
    each by ``rope`` (its ``head_dim`` is ``D/2``; :func:`refpos.rope.two_d.apply_rope_2d`)."""

    rope: RopeConfig | None = None
    kind: ClassVar[str] = "rope_2d"

    def params(self) -> dict[str, Any]:
        assert self.rope is not None
        return {"rope": self.rope.to_params(), "axes": list(GLM_AXES), "head_dim": 2 * self.rope.head_dim}

    def encoding(self, **weights: Any) -> Encoding:
        assert self.rope is not None
        return _TwoAxes(self.rope)


class _TwoAxes(Encoding):
    """The rotation of a :class:`Rope2DLayer` as a pipeline encoding: positions ``(2, …, T)``, one row per axis."""

    name = "rope_2d"

    def __init__(self, rope: RopeConfig) -> None:
        self.rope = rope

    def rotate(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> tuple[Array, Array]:
        return apply_rope_2d(q, q_positions, self.rope), apply_rope_2d(k, k_positions, self.rope)

    def __repr__(self) -> str:
        return f"_TwoAxes({self.rope!r})"


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`Rope2DLayer` per layer: each half of the stack's heads a RoPE of the family's base and layout."""
    shape, facts = stack.geometry(), stack.facts
    if shape.head_dim % 4:
        raise ValueError(f"{stack.view.name('hidden_size')}: heads of {shape.head_dim} channels cannot hold two "
                         "RoPEs of whole pairs (2-D positions need a head size divisible by 4)")
    rope = RopeConfig(head_dim=shape.head_dim // 2, theta=float(facts.theta), layout=facts.layout)
    reads = (("rotation", ("position_ids",)), ("block", ("block_position_ids",)))  # GLMBlock: position_ids[:, 0|1]
    return [Rope2DLayer(stack.name, i, None, rope=rope, reads=reads) for i in range(shape.layers)]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    pairs = draw(st.integers(1, 32))
    return {"theta": draw(st.floats(2.0, 1e6)), "head_dim": 4 * pairs}


ROPE_2D = EncodingKind(
    name="rope_2d", summary="two RoPEs side by side in each head, one turned by the position and one by the block "
    "position (GLM's 2-D positions)", record=Rope2DLayer, build=build, hook="rotate",
    reads=("position_ids", "block_position_ids"), doc="docs/rope.md#glm-2-d-positions", facts=Rope2DFacts,
    draw=_draw, example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16},
                         "facts": {"theta": 10000.0}},
    absent={"check": "no `refpos check` target reads two axes yet: each half is a RoPE, so `refpos check rope` "
                     "compares a candidate one half at a time (that half's channels, that axis's positions)",
            "golden": "no golden cases of two axes yet: each half's cases are RoPE's (rope/…)",
            "contract": "the adapter contract has no two-axis function: each half is apply_rope at its own axis",
            "spec": "the spec suite tests each half as a RoPE (spec_tests/test_rope_properties.py); the split into "
                    "halves is tested in refpos/tests/test_rope_2d.py"},
    inert=("lengths",))

__all__ = ["ROPE_2D", "Rope2DFacts", "Rope2DLayer", "build"]
