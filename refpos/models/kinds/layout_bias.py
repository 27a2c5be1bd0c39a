r"""The layout-bias kind: a document model's relative attention bias over T5 buckets of the token distance and of
the boxes' x and y distances (LayoutLMv3) — the config keys and the module names (:class:`LayoutBiasFacts`), the
layer record (:class:`LayoutBiasLayer`) and the builder.

The formula is :mod:`refpos.encodings.layout_bias` (docs/layout-bias.md#the-math): a function of the checkpoint's
three bucket tables, of each token's place and of its box. The stack computes the bias once and every layer adds it
to its logits; each layer's record states the same bias.

Examples
--------
>>> from refpos.models import model_positions
>>> layoutlmv3 = {"model_type": "layoutlmv3", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 12,
...               "coordinate_size": 2, "shape_size": 2, "max_position_embeddings": 64, "pad_token_id": 1,
...               "max_2d_position_embeddings": 32}
>>> print(model_positions(layoutlmv3).summary())
encoder input: box_tables(4 tables × 32 rows, concatenated), learned, grid(fixed)
encoder layers 0-1: layout_bias(32 buckets to 128; x, y: 64 to 256) ×2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.backend import to_numpy
from refpos.encodings.layout_bias import (
    X_CORNER,
    Y_CORNER,
    joint_positions,
    layout_bias,
    layout_buckets,
    visual_boxes,
)
from refpos.encodings.t5 import check_bucket_args
from refpos.models.kinds.record import EXAMPLE_GEOMETRY, EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.models.sources import SLOT_AGAINST_INDEX, Given
from refpos.validation import check_table_shapes

#: the box coordinate each axis may read (x0, y0, x1, y1)
CORNERS = (0, 1, 2, 3)


@dataclass(frozen=True)
class LayoutBiasFacts:
    """The config keys of the 1-D buckets (``buckets``, ``distance``), of the x and y buckets (``buckets_2d``,
    ``distance_2d``) with their class defaults, the bool key that turns the x and y part on (``spatial``, default
    ``spatial_default``); the box coordinate the x and the y buckets read (``x_corner``, ``y_corner``: LayoutLMv3's
    x0 and y1); the names of the modules holding the three tables (``rel``, ``x``, ``y``); the bool key that lets
    an image join the text (``image``, on where absent) and the keys of the image and patch sizes (``image_size``,
    ``patch``, class defaults ``image_defaults``), whose patches a side the joined sequence holds."""

    buckets: str = "rel_pos_bins"
    buckets_default: int = 32
    distance: str = "max_rel_pos"
    distance_default: int = 128
    buckets_2d: str = "rel_2d_pos_bins"
    buckets_2d_default: int = 64
    distance_2d: str = "max_rel_2d_pos"
    distance_2d_default: int = 256
    spatial: str = "has_spatial_attention_bias"
    spatial_default: bool = True
    x_corner: int = X_CORNER
    y_corner: int = Y_CORNER
    rel: str = "rel_pos_bias"
    x: str = "rel_pos_x_bias"
    y: str = "rel_pos_y_bias"
    image: str = "visual_embed"
    image_size: str = "input_size"
    patch: str = "patch_size"
    image_defaults: tuple[int, int] = (224, 16)

    def check(self, where: str) -> None:
        check_fact(where, self.x_corner in CORNERS and self.y_corner in CORNERS, "layout_bias corners",
                   (self.x_corner, self.y_corner))
        check_fact(where, isinstance(self.spatial_default, bool), "layout_bias.spatial_default", self.spatial_default)
        check_fact(where, len({self.rel, self.x, self.y}) == 3, "layout_bias module names", (self.rel, self.x, self.y))
        for value in (self.buckets_default, self.distance_default, self.buckets_2d_default, self.distance_2d_default):
            check_fact(where, isinstance(value, int) and value >= 1, "layout_bias defaults", value)


@dataclass(frozen=True)
class LayoutBiasLayer(LayerRecord):
    """The bias a layer adds to its logits (:func:`~refpos.encodings.layout_bias.layout_bias`): ``num_buckets``
    1-D buckets to ``max_distance`` and, where ``spatial``, ``num_2d_buckets`` x and y buckets to
    ``max_2d_distance`` read at box coordinates ``x_corner`` and ``y_corner``, over ``n_heads`` heads of width
    ``head_dim``; the tables are held by the modules ``rel``, ``x``, ``y`` of the stack, which computes the bias once
    for all its layers. ``image_side``: the patches a side of an image that may join the text (0: none), whose
    places and boxes :meth:`joined` gives."""

    n_heads: int = 1
    head_dim: int = 64
    num_buckets: int = 32
    max_distance: int = 128
    spatial: bool = True
    num_2d_buckets: int = 64
    max_2d_distance: int = 256
    x_corner: int = X_CORNER
    y_corner: int = Y_CORNER
    rel: str = "rel_pos_bias"
    x: str = "rel_pos_x_bias"
    y: str = "rel_pos_y_bias"
    image_side: int = 0
    kind: ClassVar[str] = "layout_bias"

    @property
    def label(self) -> str:
        spatial = f"; x, y: {self.num_2d_buckets} to {self.max_2d_distance}" if self.spatial else ""
        return f"layout_bias({self.num_buckets} buckets to {self.max_distance}{spatial})"

    def params(self) -> dict[str, Any]:
        return {"n_heads": self.n_heads, "head_dim": self.head_dim, "num_buckets": self.num_buckets,
                "max_distance": self.max_distance, "spatial": self.spatial, "num_2d_buckets": self.num_2d_buckets,
                "max_2d_distance": self.max_2d_distance, "x_corner": self.x_corner, "y_corner": self.y_corner,
                "rel": self.rel, "x": self.x, "y": self.y, "image_side": self.image_side}

    def modules(self) -> dict[str, str]:
        """Table (``"1d"``, and ``"x"``, ``"y"`` where spatial) -> the module holding it."""
        return {"1d": self.rel, **({"x": self.x, "y": self.y} if self.spatial else {})}

    def places(self, positions: Any = None, *, cache_position: Any = None, attention_mask: Any = None) -> np.ndarray:
        """Each token's place in a call, read as ``reads`` says (the key's index: a call giving only
        ``positions`` is refused)."""
        given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask)
        return np.asarray(to_numpy(self.read("key", "key", given)), dtype=np.int64)

    def buckets_at(self, places: Any, bbox: Any = None) -> dict[str, np.ndarray]:
        """The bucket of every (query, key) pair at places already read and the boxes
        (:func:`~refpos.encodings.layout_bias.layout_buckets`)."""
        return layout_buckets(places, bbox if self.spatial else None, num_buckets=self.num_buckets,
                              max_distance=self.max_distance, num_2d_buckets=self.num_2d_buckets,
                              max_2d_distance=self.max_2d_distance, x_corner=self.x_corner, y_corner=self.y_corner)

    def joined(self, places: Any, bbox: Any) -> tuple[np.ndarray, np.ndarray]:
        """The places and boxes of the text (``(T,)``, ``(1, T, 4)``) joined by an image's class token and patches:
        the places restarting at 0, the patch grid's boxes
        (:func:`~refpos.encodings.layout_bias.joint_positions`, :func:`~refpos.encodings.layout_bias.visual_boxes`).
        """
        if not self.image_side:
            raise ValueError("the record's model takes no image (image_side 0)")
        text = np.asarray(places, dtype=np.int64).reshape(-1)
        patches = visual_boxes(self.image_side)
        boxes = np.concatenate([np.asarray(bbox, dtype=np.int64).reshape(-1, 4), patches])[None]
        return joint_positions(text.size, patches.shape[0] - 1), boxes

    def bias_at(self, rel_table: Any, x_table: Any, y_table: Any, places: Any, bbox: Any = None) -> np.ndarray:
        """The bias ``(..., H, T, T)`` at places already read and the boxes; the tables ``(buckets, n_heads)``
        (transformers' ``Linear`` weights transposed) checked against the record."""
        expect = {"rel_table": (rel_table, (self.num_buckets, self.n_heads))}
        if self.spatial:
            expect.update(x_table=(x_table, (self.num_2d_buckets, self.n_heads)),
                          y_table=(y_table, (self.num_2d_buckets, self.n_heads)))
        check_table_shapes(expect)
        return layout_bias(rel_table, x_table if self.spatial else None, y_table if self.spatial else None, places,
                           bbox, max_distance=self.max_distance, max_2d_distance=self.max_2d_distance,
                           head_dim=self.head_dim, x_corner=self.x_corner, y_corner=self.y_corner)

    def _why_not(self) -> str:
        return ("the bias is a function of each token's box as well as of its place, which Encoding.bias is not "
                "given: LayoutBiasLayer.bias_at computes it")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`LayoutBiasLayer` per layer, every one stating the bias the stack computes once."""
    facts: LayoutBiasFacts = stack.facts
    view = stack.view
    shape = stack.geometry()
    spatial = view.bool(facts.spatial, facts.spatial_default)
    buckets = view.int(facts.buckets, facts.buckets_default, minimum=4)
    distance = view.int(facts.distance, facts.distance_default, minimum=1)
    buckets_2d = view.int(facts.buckets_2d, facts.buckets_2d_default, minimum=4)
    distance_2d = view.int(facts.distance_2d, facts.distance_2d_default, minimum=1)
    side = 0
    if view.bool(facts.image, True):
        size, patch = (view.int(key, default, minimum=1) for key, default in
                       zip((facts.image_size, facts.patch), facts.image_defaults, strict=True))
        side = size // patch
    check_bucket_args(True, buckets, distance)
    if spatial:
        check_bucket_args(True, buckets_2d, distance_2d)
    return [LayoutBiasLayer(stack.name, i, None, n_heads=shape.heads, head_dim=shape.head_dim, num_buckets=buckets,
                            max_distance=distance, spatial=spatial, num_2d_buckets=buckets_2d,
                            max_2d_distance=distance_2d, x_corner=facts.x_corner, y_corner=facts.y_corner,
                            rel=facts.rel, x=facts.x, y=facts.y, image_side=side, reads=SLOT_AGAINST_INDEX)
            for i in range(shape.layers)]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    buckets, buckets_2d = 4 * draw(st.integers(1, 16)), 4 * draw(st.integers(1, 32))
    return {"num_buckets": buckets, "max_distance": draw(st.integers(buckets // 4 + 1, 4 * buckets + 8)),
            "num_2d_buckets": buckets_2d, "max_2d_distance": draw(st.integers(buckets_2d // 4 + 1, 8 * buckets_2d)),
            "heads": draw(st.integers(1, 4)), "head_dim": draw(st.integers(1, 64)), "tokens": draw(st.integers(1, 12))}


LAYOUT_BIAS = EncodingKind(
    name="layout_bias", summary="a learned bias per head over T5 buckets of the token distance and of the boxes' x "
    "and y distances, divided by √d (LayoutLMv3)", record=LayoutBiasLayer, build=build, hook="bias",
    reads=("cache_position", "key_index", "bbox"), doc="docs/layout-bias.md#the-math", facts=LayoutBiasFacts,
    check="layout_bias", golden="layout_bias", contract=("layout_bias",), spec="spec_tests/test_layout_bias.py",
    draw=_draw, example={"config": {**EXAMPLE_GEOMETRY, "rel_pos_bins": 32, "max_rel_pos": 128}, "facts": {}},
    inert=("rotary",))

__all__ = ["CORNERS", "LAYOUT_BIAS", "LayoutBiasFacts", "LayoutBiasLayer", "build"]
