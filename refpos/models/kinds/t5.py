r"""The T5 kind: bucketed relative positions (:mod:`refpos.encodings.t5`, docs/relative.md#t5-buckets-raffel-et-al-2020)
as a family's stack holds them: which layers own a bucket table (:class:`T5Facts`), the layer record
(:class:`T5Layer`) and the builder from a config.

Examples
--------
>>> from refpos.models import model_positions
>>> t5 = {"model_type": "t5", "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4, "d_model": 32,
...       "relative_attention_num_buckets": 32}
>>> [(r.stack, r.index, r.owns_table, r.bidirectional) for r in model_positions(t5)]
[('encoder', 0, True, True), ('encoder', 1, False, True), ('decoder', 0, True, False), ('decoder', 1, False, False)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.backend import Array, to_numpy
from refpos.encoding import Encoding
from refpos.encodings.t5 import T5, check_bucket_args, t5_bias, t5_bucket
from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.models.sources import SLOT_AGAINST_INDEX, Given
from refpos.validation import check_int

#: which layers of a stack own a bucket table: layer 0 (T5) or every layer (umT5)
T5_TABLES = ("first", "every")
#: T5's bucket keys and the default its config class gives the distance
T5_KEYS = ("relative_attention_num_buckets", "relative_attention_max_distance")
T5_MAX_DISTANCE_DEFAULT = 128


@dataclass(frozen=True)
class T5Facts:
    """Which layers of a stack own a bucket table: ``"first"`` (layer 0 of each stack owns it, the others reuse
    it: T5) or ``"every"`` (every layer owns one: umT5)."""

    tables: str = "first"

    def check(self, where: str) -> None:
        check_fact(where, self.tables in T5_TABLES, "t5.tables", self.tables)


@dataclass(frozen=True)
class T5Layer(LayerRecord):
    """T5's bucketed relative bias: ``table_layer`` is the layer of the stack whose table this layer uses
    (itself when ``owns_table``); the logits are not scaled."""

    n_heads: int = 1
    bidirectional: bool = True
    num_buckets: int = 32
    max_distance: int = 128
    owns_table: bool = True
    table_layer: int = 0
    kind: ClassVar[str] = "t5"

    def params(self) -> dict[str, Any]:
        return {"n_heads": self.n_heads, "bidirectional": self.bidirectional, "num_buckets": self.num_buckets,
                "max_distance": self.max_distance, "owns_table": self.owns_table, "table_layer": self.table_layer}

    def buckets(self, positions: Any = None, *, cache_position: Any = None, attention_mask: Any = None) -> np.ndarray:
        """Bucket of every (query, key) pair of a call ``(T, T_k)``: the query's slot against the key's index
        (``reads``; the position ids are not read: a call that gives only ``positions`` is refused)."""
        return self.buckets_at(*self._read(positions, cache_position, attention_mask))

    def _read(self, positions: Any, cache_position: Any, attention_mask: Any) -> tuple[Any, Any]:
        given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask)
        return self.read("query", "query", given), self.read("key", "key", given)

    def buckets_at(self, q_positions: Any, k_positions: Any) -> np.ndarray:
        """Bucket of every (query, key) pair ``(Tq, Tk)`` at positions already read: ``bucket(k − q)``."""
        q = np.asarray(to_numpy(q_positions), dtype=np.int64)
        k = np.asarray(to_numpy(k_positions), dtype=np.int64)
        return np.asarray(t5_bucket(k[..., None, :] - q[..., :, None], bidirectional=self.bidirectional,
                                    num_buckets=self.num_buckets, max_distance=self.max_distance))

    def bias(self, table: Any, positions: Any = None, *, cache_position: Any = None,
             attention_mask: Any = None) -> Array:
        """``table[bucket(k − q)]`` of a call as ``(H, T, T_k)``, read as :meth:`buckets` reads; ``table`` is
        ``(num_buckets, n_heads)``."""
        return self.bias_at(table, *self._read(positions, cache_position, attention_mask))

    def bias_at(self, table: Any, q_positions: Any, k_positions: Any) -> Array:
        """``table[bucket(k − q)]`` as ``(H, Tq, Tk)`` at positions already read."""
        self._check_table(table)
        return t5_bias(table, q_positions, k_positions, bidirectional=self.bidirectional,
                       max_distance=self.max_distance)

    def _check_table(self, table: Any) -> None:
        if tuple(table.shape) != (self.num_buckets, self.n_heads):
            raise ValueError(f"table must be (num_buckets, n_heads) = ({self.num_buckets}, {self.n_heads}), got "
                             f"{tuple(table.shape)}")

    def _encoding(self, **weights: Any) -> Encoding:
        if "table" not in weights:
            raise ValueError(f"{self.stack} layer {self.index} (t5): pass table=, the bucket embedding of layer "
                             f"{self.table_layer} ({self.num_buckets}, {self.n_heads})")
        self._check_table(weights["table"])
        return T5(weights["table"], bidirectional=self.bidirectional, max_distance=self.max_distance)


def build(stack: Stack) -> list[LayerRecord]:
    """T5 layers: ``relative_attention_num_buckets`` (required) and ``relative_attention_max_distance``
    (default 128, as T5's config class); bidirectional except in the decoder of an encoder–decoder model."""
    shape = stack.geometry()
    facts: T5Facts = stack.facts
    bidirectional = stack.name != "decoder" or stack.family.stacks == "encoder"
    buckets = stack.view.count((T5_KEYS[0],), "bucket count", minimum=2)
    distance = check_int(stack.view.name(T5_KEYS[1]), stack.view.value(T5_KEYS[1], T5_MAX_DISTANCE_DEFAULT),
                         minimum=1)
    check_bucket_args(bidirectional, buckets, distance)
    return [T5Layer(stack.name, i, None, n_heads=shape.heads, bidirectional=bidirectional, num_buckets=buckets,
                    max_distance=distance, owns_table=facts.tables == "every" or i == 0,
                    table_layer=i if facts.tables == "every" else 0, reads=SLOT_AGAINST_INDEX)
            for i in range(shape.layers)]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    bidirectional = draw(st.booleans())
    step = 4 if bidirectional else 2
    buckets = step * draw(st.integers(2, 32))
    exact = buckets // step
    return {"bidirectional": bidirectional, "num_buckets": buckets,
            "max_distance": draw(st.integers(exact + 1, 4 * buckets + 8))}


T5_KIND = EncodingKind(
    name="t5", summary="a learned bias per head, read at the bucket of the relative position (T5)", record=T5Layer,
    build=build, hook="bias", reads=("cache_position", "key_index"),
    doc="docs/relative.md#t5-buckets-raffel-et-al-2020", facts=T5Facts, check="t5", golden="t5",
    contract=("t5_bucket", "t5_bias"), spec="spec_tests/test_t5.py", draw=_draw,
    example={"config": {"num_layers": 2, "num_heads": 4, "d_model": 32, "relative_attention_num_buckets": 32},
             "facts": {"tables": "first"}}, inert=("lengths", "rotary"))


__all__ = ["T5_KEYS", "T5_KIND", "T5_TABLES", "T5Facts", "T5Layer", "build"]
