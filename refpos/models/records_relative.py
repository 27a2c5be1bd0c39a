"""The records of layers whose positions are relative terms of the logits: ALiBi, T5 buckets, DeBERTa.

See :mod:`refpos.models.records` for the records every kind shares (stack, index, layer type, ``params``,
``describe``, ``encoding``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.backend import array_namespace, to_numpy
from refpos.encoding import Encoding
from refpos.encodings.deberta import DeBERTa, deberta_attention_span, deberta_relative_index, deberta_softmax_scale
from refpos.encodings.t5 import T5, t5_bias, t5_bucket
from refpos.models.records import LayerRecord, round_to

Array = Any


# ------------------------------------------------------------------------------------------------- ALiBi
@dataclass(frozen=True)
class AlibiLayer(LayerRecord):
    r"""ALiBi as the family's code builds it.

    ``slopes`` are the family's exact slopes (float64); ``computed_slopes`` are what its code holds: computed
    in float32 and rounded to ``dtype`` (BLOOM and MPT float32, Falcon bfloat16: its 0.917 is 0.91796875,
    :func:`refpos.models.stacks.family_slopes`); each product slope × position is rounded to ``dtype`` too.
    The bias of head ``h`` at query position ``i`` and key position ``j``, as the family computes it, is

    .. math:: b_{hij} = \operatorname{round}(\hat m_h\, j) \;\;(\texttt{key\_index}),
              \qquad b_{hij} = \operatorname{round}(\hat m_h (j - j_{\text{last}}))
              \;\;(\texttt{key\_index\_end})

    with the positions :math:`j` rounded to ``dtype`` first, as torch converts an integer tensor before the
    product (Falcon's bfloat16 holds 2047 as 2048). Both forms equal the causal form :math:`-m_h (i - j)` under
    a causal mask, up to a per-row constant the softmax removes; ``rounded=False`` gives the exact bias.
    ``before_scale``: added to :math:`q\cdot k` before the :math:`1/\sqrt{d}` scale (Falcon), else after it
    (BLOOM, MPT).
    """

    slopes: tuple[float, ...] = ()
    computed_slopes: tuple[float, ...] = ()
    form: str = "key_index"
    before_scale: bool = False
    dtype: str = "float32"
    head_dim: int = 1
    kind: ClassVar[str] = "alibi"

    def params(self) -> dict[str, Any]:
        return {"n_heads": len(self.slopes), "slopes": list(self.slopes), "computed_slopes": list(self.computed_slopes),
                "form": self.form, "before_scale": self.before_scale, "dtype": self.dtype, "head_dim": self.head_dim}

    def bias(self, q_positions: Any, k_positions: Any, *, rounded: bool = True) -> np.ndarray:
        """The bias ``(H, Tq, Tk)`` (or ``(B, H, Tq, Tk)`` for per-row positions), float64; ``rounded``: as
        the family's code computes it, else exact."""
        q = np.asarray(to_numpy(q_positions), dtype=np.int64)
        k = np.asarray(to_numpy(k_positions), dtype=np.int64)
        key = k - k[..., -1:] if self.form == "key_index_end" else k  # (..., Tk)
        slopes = np.asarray(self.computed_slopes if rounded and self.computed_slopes else self.slopes,
                            dtype=np.float64)
        m = slopes[:, None, None]  # (H, 1, 1)
        key = key[..., None, None, :].astype(np.float64)  # (..., 1, 1, Tk)
        if rounded:  # torch converts the integer positions to the slopes' dtype before the product
            return self._broadcast(round_to(m * round_to(key, self.dtype), self.dtype), q, k)
        return self._broadcast(m * key, q, k)

    @staticmethod
    def _broadcast(products: np.ndarray, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The per-key products ``(..., H, 1, Tk)`` on every query row: ``(..., H, Tq, Tk)``."""
        return np.broadcast_to(products, (*products.shape[:-2], q.shape[-1], k.shape[-1])).copy()

    def encoding(self, **weights: Any) -> Encoding:
        return _RecordBias(self)


class _RecordBias(Encoding):
    """The bias of an :class:`AlibiLayer` as a pipeline encoding (in the namespace of the positions)."""

    name = "alibi"

    def __init__(self, record: AlibiLayer) -> None:
        self.record, self.bias_scaled = record, record.before_scale

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        if n_heads != len(self.record.slopes):
            raise ValueError(f"the layer has {n_heads} heads, its ALiBi record {len(self.record.slopes)} slopes")
        xp = array_namespace(q_positions)
        return xp.asarray(self.record.bias(q_positions, k_positions))

    def __repr__(self) -> str:
        return f"_RecordBias({self.record.form}, before_scale={self.bias_scaled})"


# ---------------------------------------------------------------------------------------------------- T5
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

    def buckets(self, q_positions: Any, k_positions: Any) -> np.ndarray:
        """Bucket of every (query, key) pair ``(Tq, Tk)``: ``bucket(k − q)``."""
        q = np.asarray(to_numpy(q_positions), dtype=np.int64)
        k = np.asarray(to_numpy(k_positions), dtype=np.int64)
        return np.asarray(t5_bucket(k[..., None, :] - q[..., :, None], bidirectional=self.bidirectional,
                                    num_buckets=self.num_buckets, max_distance=self.max_distance))

    def bias(self, table: Any, q_positions: Any, k_positions: Any) -> Array:
        """``table[bucket(k − q)]`` as ``(H, Tq, Tk)``; ``table`` is ``(num_buckets, n_heads)``."""
        self._check_table(table)
        return t5_bias(table, q_positions, k_positions, bidirectional=self.bidirectional,
                       max_distance=self.max_distance)

    def _check_table(self, table: Any) -> None:
        if tuple(table.shape) != (self.num_buckets, self.n_heads):
            raise ValueError(f"table must be (num_buckets, n_heads) = ({self.num_buckets}, {self.n_heads}), got "
                             f"{tuple(table.shape)}")

    def encoding(self, **weights: Any) -> Encoding:
        if "table" not in weights:
            raise ValueError(f"{self.stack} layer {self.index} (t5): pass table=, the bucket embedding of layer "
                             f"{self.table_layer} ({self.num_buckets}, {self.n_heads})")
        self._check_table(weights["table"])
        return T5(weights["table"], bidirectional=self.bidirectional, max_distance=self.max_distance)


# ------------------------------------------------------------------------------------------------ DeBERTa
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

    def relative_index(self, q_positions: Any, k_positions: Any) -> np.ndarray:
        """The relative-table row of every (query, key) pair, int64 ``(Tq, Tk)``."""
        return np.asarray(deberta_relative_index(
            np.asarray(to_numpy(q_positions), dtype=np.int64), np.asarray(to_numpy(k_positions), dtype=np.int64),
            position_buckets=self.position_buckets, max_relative_positions=self.max_relative_positions,
            max_position_embeddings=self.max_position_embeddings))

    def encoding(self, **weights: Any) -> Encoding:
        """:class:`refpos.encodings.deberta.DeBERTa` with the record's keys; ``weights`` are its tensors
        (``rel_embeddings``, the projections, ``position_embeddings``)."""
        return DeBERTa(pos_att_type=list(self.pos_att_type), position_buckets=self.position_buckets,
                       max_relative_positions=self.max_relative_positions,
                       max_position_embeddings=self.max_position_embeddings, share_att_key=self.share_att_key,
                       relative_attention=self.relative_attention,
                       position_biased_input=self.position_biased_input, **weights)


__all__ = ["AlibiLayer", "DebertaLayer", "T5Layer"]
