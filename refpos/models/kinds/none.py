r"""The kinds without positions: attention that sees no position at all (NoPE, perhaps with a query scale), and
layers without attention (Mamba, convolutions, recurrences, linear attention), which have no positions either.

Both come from the layer schedule that RoPE's builder runs (:func:`refpos.models.kinds.rope.build_scheduled`):
a family whose stack has ``encoding = "none"`` or ``"no_attention"``, or the layers of a RoPE family that the
schedule says do not rotate or do not attend. Their records are :class:`~refpos.models.records.NoPositions` and
:class:`~refpos.models.records.NoAttention`.

Examples
--------
>>> from refpos.models import model_positions
>>> jamba = {"model_type": "jamba", "num_hidden_layers": 4, "num_attention_heads": 2, "hidden_size": 16,
...          "attn_layer_period": 2, "attn_layer_offset": 1}
>>> model_positions(jamba).summary()
'decoder layers 0-3: mamba ×2 (0, 2), none ×2 (every 2nd)'
"""

from __future__ import annotations

from refpos.models.kinds.record import EXAMPLE_GEOMETRY, EncodingKind
from refpos.models.kinds.rope import build_scheduled
from refpos.models.records import NoAttention, NoPositions

NONE = EncodingKind(
    name="none", summary="attention without positions (NoPE); a causal mask still lets it count", record=NoPositions,
    build=lambda stack: build_scheduled(stack, "none"), hook="none", reads=("cache_position", "position_ids"),
    doc="docs/nope-drope.md#the-idea",
    golden="attention", contract=("attention",), spec="spec_tests/test_attention.py",
    example={"config": dict(EXAMPLE_GEOMETRY)},
    absent={"facts": "nothing to fix: the layer adds no position", "check": "no position term to compare: `refpos "
            "check` compares attention itself through golden cases (refpos check CASE)",
            "draw": "attention inputs are drawn by the spec suite's attention strategies"},
    inert=("lengths", "rotary"))

NO_ATTENTION = EncodingKind(
    name="no_attention", summary="a layer without attention (Mamba, convolution, recurrence, linear attention): no "
    "positions", record=NoAttention, build=lambda stack: build_scheduled(stack, "no_attention"), hook="none", reads=(),
    doc="docs/families.md#layers", example={"config": dict(EXAMPLE_GEOMETRY)},
    absent={"facts": "nothing to fix: the layer has no attention", "check": "nothing to compare",
            "golden": "no attention, no position term", "contract": "no function to call", "spec": "nothing to test",
            "draw": "nothing to draw"}, inert=("lengths", "rotary"))

__all__ = ["NONE", "NO_ATTENTION"]
