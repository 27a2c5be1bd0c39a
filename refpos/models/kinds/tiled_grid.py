r"""The tiled-grid kind: a tiled image's gated grid per aspect-ratio tile and its gated rows per tile before the
local and the global encoder (Llama 3.2 Vision's tower) — the config keys of its tiles, grid and aspect ratios and
the names of its three position modules (:class:`TiledGridFacts`), the record (:class:`TiledGridLayer`) and the
builder.

The formulas are :mod:`refpos.encodings.tiled_grid` (docs/tiled-grid.md#the-math): functions of the checkpoint's
tables and gates and of the aspect-ratio id fed beside the pixels. The record sits at the stack's input site
(``vision.input``), before the local encoder; it also holds the post-tile rows added before the global encoder
(:meth:`TiledGridLayer.post_rows`).

Examples
--------
>>> from refpos.models import model_positions
>>> tower = {"model_type": "mllama_vision_model", "num_hidden_layers": 2, "attention_heads": 2,
...          "hidden_size": 16, "image_size": 28, "patch_size": 14}
>>> print(model_positions(tower).summary())
vision input: tiled_grid(4 tiles × 5 rows, 9 ids)
vision layers 0-1: none ×2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.encodings.tiled_grid import aspect_ratio_rows, tiled_input_positions
from refpos.models.kinds.record import EncodingKind, Stack, check_fact, stack_width
from refpos.models.records import LayerRecord
from refpos.validation import check_table_shapes

#: the aspect ratios a config states when it leaves ``supported_aspect_ratios`` out (transformers' class default)
DEFAULT_RATIOS = 8


@dataclass(frozen=True)
class TiledGridFacts:
    """``tiles``: the key of the tiles per image (``max_num_tiles``), ``tiles_default`` its class default;
    ``image``, ``patch``: the keys of a tile's side and the patch side, ``defaults`` their class defaults;
    ``ratios``: the key of the list of aspect ratios (the ids are 0, the padding image, then one per ratio),
    ``ratios_default`` its length by default; ``grid``, ``pre``, ``post``: the names of the modules holding the gated
    grid and the pre- and post-tile tables (each with its ``gate``)."""

    tiles: str = "max_num_tiles"
    tiles_default: int = 4
    image: str = "image_size"
    patch: str = "patch_size"
    defaults: tuple[int, int] = (448, 14)
    ratios: str = "supported_aspect_ratios"
    ratios_default: int = DEFAULT_RATIOS
    grid: str = "gated_positional_embedding"
    pre: str = "pre_tile_positional_embedding"
    post: str = "post_tile_positional_embedding"

    def check(self, where: str) -> None:
        check_fact(where, self.tiles_default >= 1 and self.ratios_default >= 1, "tiled_grid defaults",
                   (self.tiles_default, self.ratios_default))
        check_fact(where, len(set((self.grid, self.pre, self.post))) == 3, "tiled_grid module names",
                   (self.grid, self.pre, self.post))


@dataclass(frozen=True)
class TiledGridLayer(LayerRecord):
    """A tiled tower's positions: ``tiles`` tiles of ``rows`` rows (the class token, then the patches) of width
    ``dim``, ``ids`` aspect-ratio ids, and the names of the three position modules; the tables and gates are weights
    of the checkpoint."""

    tiles: int = 4
    rows: int = 1025
    dim: int = 1280
    ids: int = 9
    grid: str = "gated_positional_embedding"
    pre: str = "pre_tile_positional_embedding"
    post: str = "post_tile_positional_embedding"
    kind: ClassVar[str] = "tiled_grid"

    @property
    def label(self) -> str:
        return f"tiled_grid({self.tiles} tiles × {self.rows} rows, {self.ids} ids)"

    def params(self) -> dict[str, Any]:
        return {"tiles": self.tiles, "rows": self.rows, "dim": self.dim, "ids": self.ids, "grid": self.grid,
                "pre": self.pre, "post": self.post, "at": "input; post-tile rows before the global encoder"}

    def _shapes(self, **tables: Any) -> None:
        wanted = {"embedding": (self.rows, self.dim), "tile_table": (self.ids, self.tiles * self.rows * self.dim),
                  "pre_table": (self.ids, self.tiles * self.dim), "post_table": (self.ids, self.tiles * self.dim)}
        check_table_shapes({name: (table, wanted[name]) for name, table in tables.items()})

    def reference(self, embedding: Any, tile_table: Any, gate: Any, pre_table: Any, pre_gate: Any,
                  aspect_ratio_id: Any) -> np.ndarray:
        """What each tile's rows gain before the local encoder, ``(tiles, rows, dim)``
        (:func:`~refpos.encodings.tiled_grid.tiled_input_positions`), the tables checked against the record."""
        self._shapes(embedding=embedding, tile_table=tile_table, pre_table=pre_table)
        return tiled_input_positions(embedding, tile_table, gate, pre_table, pre_gate, aspect_ratio_id, self.tiles)

    def post_rows(self, post_table: Any, post_gate: Any, aspect_ratio_id: Any) -> np.ndarray:
        """The row every row of each tile gains before the global encoder, ``(tiles, dim)``
        (:func:`~refpos.encodings.tiled_grid.aspect_ratio_rows`)."""
        self._shapes(post_table=post_table)
        return aspect_ratio_rows(post_table, post_gate, aspect_ratio_id, self.tiles)

    def _why_not(self) -> str:
        return ("the rows are functions of the tower's tables, gates and the aspect-ratio id, not of token "
                "positions: TiledGridLayer.reference computes them")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`TiledGridLayer`: the stack's input embedding."""
    facts: TiledGridFacts = stack.facts
    view = stack.view
    tiles = view.int(facts.tiles, facts.tiles_default, minimum=1)
    sides = [view.int(key, default, minimum=1)
             for key, default in zip((facts.image, facts.patch), facts.defaults, strict=True)]
    ratios = view.value(facts.ratios, None)
    if ratios is not None and not (isinstance(ratios, (list, tuple)) and ratios):
        raise ValueError(f"{view.name(facts.ratios)} must be a non-empty list of aspect ratios, got {ratios!r}")
    ids = (len(ratios) if ratios is not None else facts.ratios_default) + 1
    return [TiledGridLayer(stack.name, 0, None, tiles=tiles, rows=(sides[0] // sides[1]) ** 2 + 1,
                           dim=stack_width(view, stack.role), ids=ids, grid=facts.grid, pre=facts.pre, post=facts.post,
                           reads=(("rows", ("aspect_ratio_ids",)),))]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"tiles": draw(st.integers(1, 4)), "rows": draw(st.integers(1, 16)), "dim": draw(st.integers(1, 16)),
            "ids": draw(st.integers(1, 9))}


TILED_GRID = EncodingKind(
    name="tiled_grid", summary="a gated mix of a learned patch grid and a grid per aspect-ratio tile, and gated "
    "rows per tile before a local and a global encoder (Llama 3.2 Vision's tower)", record=TiledGridLayer,
    build=build, hook="input", reads=("aspect_ratio_ids",), doc="docs/tiled-grid.md#the-math", facts=TiledGridFacts,
    check="tiled_grid", golden="tiled_grid", contract=("tiled_input_positions",), spec="spec_tests/test_tiled_grid.py",
    draw=_draw, modalities=("vision",),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16, "image_size": 28,
                        "patch_size": 14}, "facts": {}},
    inert=("lengths", "rotary"))

__all__ = ["TILED_GRID", "TiledGridFacts", "TiledGridLayer", "build"]
