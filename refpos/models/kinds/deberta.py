r"""The DeBERTa kind: disentangled relative positions (:mod:`refpos.encodings.deberta`, docs/deberta.md) as a family's
code runs them — which version (:class:`DebertaFacts`), the keys its config class and attention read, the layer
record (:class:`DebertaLayer`) and the builder from a config.

Examples
--------
>>> from refpos.models import model_positions
>>> cfg = {"model_type": "deberta-v2", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
...        "relative_attention": True, "position_buckets": 256, "max_relative_positions": -1,
...        "pos_att_type": ["p2c", "c2p"]}
>>> layer = model_positions(cfg).layers[0]
>>> layer.kind, layer.position_buckets, layer.pos_att_type
('deberta', 256, ('p2c', 'c2p'))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.backend import to_numpy
from refpos.encoding import Encoding
from refpos.encodings.deberta import (
    DeBERTa,
    deberta_attention_span,
    deberta_pos_att_type,
    deberta_relative_index,
    deberta_softmax_scale,
)
from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.models.sources import SLOT_AGAINST_INDEX, Given
from refpos.validation import check_bool, check_int

#: DeBERTa's keys with the defaults its config class and attention code give them
DEBERTA_DEFAULTS = {"relative_attention": False, "position_buckets": -1, "max_relative_positions": -1,
                    "max_position_embeddings": 512, "pos_att_type": None, "share_att_key": False,
                    "position_biased_input": True}


@dataclass(frozen=True)
class DebertaFacts:
    """Which DeBERTa attention the family's code runs: ``"v2"`` (DeBERTa-v2/v3: log buckets
    ``position_buckets`` and ``share_att_key`` are read) or ``"v1"`` (its code reads neither)."""

    version: str = "v2"

    def check(self, where: str) -> None:
        check_fact(where, self.version in ("v1", "v2"), "deberta.version", self.version)


@dataclass(frozen=True)
class DebertaLayer(LayerRecord):
    r"""DeBERTa's disentangled relative attention (:mod:`refpos.encodings.deberta`): the parameters are the
    config's keys as the family's code reads them (v1 reads no ``position_buckets`` nor ``share_att_key``).

    Each (query, key) pair reads row :math:`\mathrm{idx}_{ij}` of the projected relative table
    (:meth:`relative_index`); the logits are scaled by :math:`(d\,(1 + n))^{-1/2}` with ``n`` the terms of
    ``pos_att_type``; ``position_biased_input`` adds a learned absolute table of ``max_position_embeddings``
    rows to the input as well.
    """

    pos_att_type: tuple[str, ...] = ()
    position_buckets: int = -1
    max_relative_positions: int = -1
    max_position_embeddings: int = 512
    share_att_key: bool = False
    relative_attention: bool = False
    position_biased_input: bool = True
    n_heads: int = 1
    head_dim: int = 1
    version: str = "v2"
    kind: ClassVar[str] = "deberta"

    def params(self) -> dict[str, Any]:
        span, m = deberta_attention_span(self.position_buckets, self.max_relative_positions,
                                         self.max_position_embeddings)
        return {"version": self.version, "pos_att_type": list(self.pos_att_type),
                "position_buckets": self.position_buckets, "max_relative_positions": self.max_relative_positions,
                "max_position_embeddings": self.max_position_embeddings, "share_att_key": self.share_att_key,
                "relative_attention": self.relative_attention,
                "position_biased_input": self.position_biased_input, "n_heads": self.n_heads,
                "head_dim": self.head_dim, "attention_span": span, "relative_range": m,
                "softmax_scale": self.softmax_scale}

    @property
    def softmax_scale(self) -> float:
        """:math:`(d (1 + n))^{-1/2}`."""
        return deberta_softmax_scale(self.head_dim, self.pos_att_type)

    def relative_index(self, positions: Any = None, *, cache_position: Any = None,
                       attention_mask: Any = None) -> np.ndarray:
        """The relative-table row of every (query, key) pair of a call, int64 ``(T, T_k)``: DeBERTa's
        ``build_relative_position`` reads the query's and the key's index (``arange``), never the position ids
        (a call that gives only ``positions`` is refused)."""
        given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask)
        return self.relative_index_at(self.read("query", "query", given), self.read("key", "key", given))

    def relative_index_at(self, q_positions: Any, k_positions: Any) -> np.ndarray:
        """The relative-table row of every (query, key) pair at positions already read, int64 ``(Tq, Tk)``."""
        return np.asarray(deberta_relative_index(
            np.asarray(to_numpy(q_positions), dtype=np.int64), np.asarray(to_numpy(k_positions), dtype=np.int64),
            position_buckets=self.position_buckets, max_relative_positions=self.max_relative_positions,
            max_position_embeddings=self.max_position_embeddings))

    def _encoding(self, **weights: Any) -> Encoding:
        """:class:`refpos.encodings.deberta.DeBERTa` with the record's keys; ``weights`` are its tensors
        (``rel_embeddings``, the projections, ``position_embeddings``)."""
        return DeBERTa(pos_att_type=list(self.pos_att_type), position_buckets=self.position_buckets,
                       max_relative_positions=self.max_relative_positions,
                       max_position_embeddings=self.max_position_embeddings, share_att_key=self.share_att_key,
                       relative_attention=self.relative_attention,
                       position_biased_input=self.position_biased_input, **weights)


def build(stack: Stack) -> list[LayerRecord]:
    """DeBERTa layers: the keys of :data:`DEBERTA_DEFAULTS` (v1 reads neither ``position_buckets`` nor
    ``share_att_key``), checked as :class:`refpos.encodings.deberta.DeBERTa` checks them."""
    shape, view, facts = stack.geometry(), stack.view, stack.facts
    unread_by_v1 = ("position_buckets", "share_att_key")
    read = {key: default if facts.version == "v1" and key in unread_by_v1 else
            view.value(key, default) for key, default in DEBERTA_DEFAULTS.items()}
    if facts.version == "v1":  # v1's code has neither key: a config that states them states nothing it runs
        for key in unread_by_v1:
            view.mark(key)
    for key in ("relative_attention", "share_att_key", "position_biased_input"):
        check_bool(view.name(key), read[key])
    terms = deberta_pos_att_type(read["pos_att_type"])
    buckets = check_int(view.name("position_buckets"), read["position_buckets"])
    distance = check_int(view.name("max_relative_positions"), read["max_relative_positions"])
    length = check_int(view.name("max_position_embeddings"), read["max_position_embeddings"], minimum=1)
    deberta_attention_span(buckets, distance, length)  # the span's own checks, naming the key
    return [DebertaLayer(stack.name, i, None, pos_att_type=terms, position_buckets=buckets,
                         max_relative_positions=distance, max_position_embeddings=length,
                         share_att_key=read["share_att_key"], relative_attention=read["relative_attention"],
                         position_biased_input=read["position_biased_input"], n_heads=shape.heads,
                         head_dim=shape.head_dim, version=facts.version, reads=SLOT_AGAINST_INDEX)
            for i in range(shape.layers)]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    buckets = draw(st.sampled_from([-1, 8, 32, 256]))
    return {"position_buckets": buckets, "max_relative_positions": draw(st.integers(max(buckets, 2), 1024))}


DEBERTA = EncodingKind(
    name="deberta", summary="disentangled content-to-position and position-to-content terms on log buckets "
    "(DeBERTa)", record=DebertaLayer, build=build, hook="qk_terms", reads=("cache_position", "key_index"),
    doc="docs/deberta.md#the-math", facts=DebertaFacts, check="deberta", golden="deberta",
    contract=("deberta_log_buckets", "deberta_attention_logits"), spec="spec_tests/test_deberta.py", draw=_draw,
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16, "relative_attention": True,
                        "position_buckets": 8, "max_relative_positions": 32, "pos_att_type": ["c2p", "p2c"]},
             "facts": {"version": "v2"}}, inert=("rotary",))


__all__ = ["DEBERTA", "DEBERTA_DEFAULTS", "DebertaFacts", "DebertaLayer", "build"]
