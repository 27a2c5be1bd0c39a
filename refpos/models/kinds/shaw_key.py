r"""The Shaw key-term kind: a speech encoder's learned table of clipped frame distances, read by each query inside
its attention and added to the logits, over the whole sequence (wav2vec2-BERT's ``relative_key``, SpeechT5's encoder)
or inside blocks of frames (Granite Speech's conformer), or read as a bias per head (Phi-4-multimodal's audio
encoder, ``term = "bias"``, with its streaming window) — the keys of its clip, offset, table, blocks, window and head
width (:class:`ShawKeyFacts`), the record (:class:`ShawKeyLayer`) and the builder.

The formula is :mod:`refpos.encodings.shaw_key` (docs/relative.md#shaw-key-term): a pair of frames of one block reads
row ``clip(s·(j − i), −L, R) + o`` of the table, its term ``d^{-1/2} q_i·E[row]``; pairs of two blocks are not
attended. A bias (:mod:`refpos.encodings.shaw_key_bias`) is column ``h`` of the row for head ``h``, plus the 0/1
streaming window. The trained table is a weight of the checkpoint; the queries are the layer's.

Examples
--------
>>> from refpos.models import model_positions
>>> w2v = {"model_type": "wav2vec2-bert", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
...        "position_embeddings_type": "relative_key", "left_max_position_embeddings": 64,
...        "right_max_position_embeddings": 8}
>>> print(model_positions(w2v).summary())
audio layers 0-1: shaw_key(key_minus_query, clip -64…8) ×2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.encodings.shaw_key import SIGNS, shaw_key_terms
from refpos.encodings.shaw_key_bias import shaw_bias_terms
from refpos.models.kinds.record import GEOMETRY_KEYS, EncodingKind, Stack, check_fact, layer_count
from refpos.models.records import LayerRecord

#: what a layer's table gives: each query's scaled product with the rows, or a bias per head read as it is
TERMS = ("query", "bias")


@dataclass(frozen=True)
class ShawKeyFacts:
    """How a family's code reads its table of clipped distances (module docstring).

    ``sign``: the distance read (:data:`refpos.encodings.shaw_key.SIGNS`); ``left``, ``right``: the keys of the clip
    below and above; ``offset``: the key of the row of distance 0; ``span``: the key ``k`` of a table of ``2k + 1``
    rows (``None``: ``L + R + 1`` rows); ``right_less``: how far the clip above falls short of the value at
    ``right`` (SpeechT5: distances ``−M … M − 1`` of one key ``M``, a table of ``2M`` rows); ``block``: the key of
    the frames per block (``None``: one block); ``block_frames``: frames per block the code fixes (Phi-4's 500, where
    no key states it); ``head_dim``: the key of the head width (``None`` or absent from the config: the width over
    the heads); ``term``: ``"query"`` (each query's product with the rows, scaled) or ``"bias"`` (a table of a
    column per head, read as it is); ``chunk``, ``left_chunks``: the keys of the streaming window a bias adds
    (:func:`refpos.encodings.shaw_key_bias.streaming_window`; ``None``: none).
    """

    sign: str = "key_minus_query"
    left: str = "left_max_position_embeddings"
    right: str = "right_max_position_embeddings"
    offset: str = "left_max_position_embeddings"
    span: str | None = None
    right_less: int = 0
    block: str | None = None
    block_frames: int | None = None
    head_dim: str | None = None
    term: str = "query"
    chunk: str | None = None
    left_chunks: str | None = None

    def check(self, where: str) -> None:
        check_fact(where, self.sign in SIGNS, "shaw_key.sign", self.sign)
        check_fact(where, type(self.right_less) is int and self.right_less >= 0, "shaw_key.right_less",
                   self.right_less)
        check_fact(where, self.term in TERMS, "shaw_key.term", self.term)
        check_fact(where, self.block_frames is None or (type(self.block_frames) is int and self.block_frames >= 1
                                                        and self.block is None), "shaw_key.block_frames",
                   self.block_frames)
        check_fact(where, (self.chunk is None) == (self.left_chunks is None) and (self.chunk is None
                                                                                  or self.term == "bias"),
                   "shaw_key.chunk", (self.chunk, self.left_chunks))


@dataclass(frozen=True)
class ShawKeyLayer(LayerRecord):
    """One layer's key term: the distance's ``sign``, the clip ``left``/``right``, the ``offset`` row, the table's
    ``rows``, the frames per ``block`` (``None``: one block), its heads and head size, the ``term`` (``"query"`` or
    ``"bias"``) and a bias's streaming ``window`` ``(k, ℓ)`` (``None``: none)."""

    sign: str = "key_minus_query"
    left: int = 64
    right: int = 8
    offset: int = 64
    rows: int = 73
    block: int | None = None
    n_heads: int = 1
    head_dim: int = 64
    term: str = "query"
    window: tuple[int, int] | None = None
    kind: ClassVar[str] = "shaw_key"

    @property
    def table_width(self) -> int:
        """The table's columns: the head width (a query term), the heads (a bias)."""
        return self.n_heads if self.term == "bias" else self.head_dim

    @property
    def label(self) -> str:
        blocks = "" if self.block is None else f", blocks of {self.block}"
        bias = "" if self.term == "query" else ", a bias per head" + (
            "" if self.window is None else f" + window of chunks {self.window[0]}, {self.window[1]} left")
        return f"shaw_key({self.sign}, clip -{self.left}…{self.right}{blocks}{bias})"

    def params(self) -> dict[str, Any]:
        return {"sign": self.sign, "left": self.left, "right": self.right, "offset": self.offset, "rows": self.rows,
                "block": self.block, "n_heads": self.n_heads, "head_dim": self.head_dim, "term": self.term,
                "window": None if self.window is None else list(self.window)}

    def reference(self, q: Any, table: Any) -> np.ndarray:
        """The terms ``(..., H, T, T)`` of queries ``(..., H, T, d)`` and the checkpoint's table (``-inf`` at pairs of
        two blocks); of a bias, the table's ``(H, T, T)`` bias and window at the ``T`` frames of ``q`` (the queries
        are not read)."""
        table = np.asarray(table, dtype=np.float64)
        if table.shape != (self.rows, self.table_width):
            raise ValueError(f"table must be ({self.rows}, {self.table_width}), got {table.shape}")
        if self.term == "bias":
            return shaw_bias_terms(table, np.shape(q)[-2], left=self.left, right=self.right, offset=self.offset,
                                   sign=self.sign, block=self.block, window=self.window)
        return shaw_key_terms(q, table, left=self.left, right=self.right, offset=self.offset, sign=self.sign,
                              block=self.block)

    def _why_not(self) -> str:
        return ("the term is each query's product with the table's rows: ShawKeyLayer.reference computes it from the "
                "queries and the checkpoint's table")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`ShawKeyLayer` per layer (module docstring)."""
    facts: ShawKeyFacts = stack.facts
    view = stack.view
    layers = layer_count(view, stack.role)
    heads = view.count(GEOMETRY_KEYS[stack.role]["heads"], "head count")
    stated = None if facts.head_dim is None else view.value(facts.head_dim)
    head_dim = (view.count(GEOMETRY_KEYS[stack.role]["width"], "hidden width") // heads if stated is None
                else view.int(facts.head_dim, minimum=1))
    left, right = view.int(facts.left, minimum=0), view.int(facts.right, minimum=facts.right_less) - facts.right_less
    offset = view.int(facts.offset, minimum=0)
    rows = left + right + 1 if facts.span is None else 2 * view.int(facts.span, minimum=0) + 1
    block = facts.block_frames if facts.block is None else view.int(facts.block, minimum=1)
    window = None if facts.chunk is None else (view.int(facts.chunk), view.int(facts.left_chunks, minimum=0))
    if window is not None and window[0] == 0:
        raise ValueError(f"{view.name(facts.chunk)}: a chunk of 0 frames (positive, or negative for one chunk)")
    if offset - left < 0 or offset + right >= rows:
        raise ValueError(f"{view.name(facts.offset)}: distances clipped to [-{left}, {right}] from row {offset} read "
                         f"rows outside the table's {rows}")
    return [ShawKeyLayer(stack.name, i, None, sign=facts.sign, left=left, right=right, offset=offset, rows=rows,
                         block=block, n_heads=heads, head_dim=head_dim, term=facts.term, window=window,
                         reads=(("query", ("frames",)), ("key", ("frames",)))) for i in range(layers)]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    left, right = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    return {"length": draw(st.integers(1, 12)), "left": left, "right": right, "offset": left,
            "sign": draw(st.sampled_from(sorted(SIGNS))), "block": draw(st.one_of(st.none(), st.integers(1, 8)))}


SHAW_KEY = EncodingKind(
    name="shaw_key", summary="a learned table of clipped frame distances read by each query and added to the logits, "
    "over the sequence or inside blocks of frames (wav2vec2-BERT, Granite Speech, SpeechT5), or read as a bias per "
    "head (Phi-4-multimodal's audio encoder)", record=ShawKeyLayer, build=build,
    hook="qk_terms", reads=("frames",), doc="docs/relative.md#shaw-key-term", facts=ShawKeyFacts, check="shaw_key",
    golden="shaw_key", contract=("shaw_key_terms",), spec="spec_tests/test_shaw_key.py", draw=_draw,
    modalities=("audio",), inert=("lengths", "rotary"),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
                        "left_max_position_embeddings": 4, "right_max_position_embeddings": 2}, "facts": {}})

__all__ = ["SHAW_KEY", "TERMS", "ShawKeyFacts", "ShawKeyLayer", "build"]
