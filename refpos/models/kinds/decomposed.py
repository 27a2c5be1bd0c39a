r"""The decomposed relative-position kind: SAM's and ViTDet's learned per-axis tables, read at the offsets of query
and key patches inside each layer's attention — the keys that turn it on and say which layers attend inside a
window (:class:`DecomposedFacts`), the record (:class:`DecomposedLayer`) and the builder.

The formulas are :mod:`refpos.encodings.decomposed` (docs/decomposed.md#the-math). Each layer attends over a grid
of ``q × q`` patches — a window of ``window_size`` patches per side, or the whole patch grid ``image_size /
patch_size`` in the global layers — and holds two tables of ``2q − 1`` rows (one per axis), resampled when the
grid it is given differs. SAM's config lists its global layers (``global_attn_indexes``: the others are
windowed), ViTDet's its windowed ones (``window_block_indices``). The trained tables are weights of the
checkpoint. The absolute grid these encoders add first is their input site (:mod:`refpos.models.kinds.grid`).

Examples
--------
>>> from refpos.models import model_positions
>>> sam = {"model_type": "sam_vision_model", "num_hidden_layers": 4, "num_attention_heads": 2, "hidden_size": 16,
...        "image_size": 1024, "patch_size": 16, "window_size": 14, "global_attn_indexes": [1, 3]}
>>> [(r.index, r.grid, r.windowed) for r in model_positions(sam).stack("vision")]
[(0, (14, 14), True), (1, (64, 64), False), (2, (14, 14), True), (3, (64, 64), False)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.backend import Array
from refpos.encodings.decomposed import add_decomposed_rel_pos
from refpos.models.kinds.grid import image_grid
from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.validation import check_int

#: what a config's layer list names: the global layers (SAM; the others are windowed) or the windowed ones (ViTDet)
LISTED = ("global", "window")


@dataclass(frozen=True)
class DecomposedFacts:
    """``window``: the key of a window's side (0: no window); ``layers``: the key listing the ``listed`` layers
    (:data:`LISTED`); ``image``, ``patch``: the keys of the patch grid the global layers attend over;
    ``defaults``: the config class's values of ``[window, layers, image, patch]`` (a config.json written by
    transformers leaves out a value equal to its class default)."""

    window: str = "window_size"
    layers: str = "global_attn_indexes"
    listed: str = "global"
    image: str = "image_size"
    patch: str = "patch_size"
    defaults: tuple[Any, ...] = (0, (), None, None)

    def __post_init__(self) -> None:
        if isinstance(self.defaults, list):
            object.__setattr__(self, "defaults", tuple(self.defaults))

    def check(self, where: str) -> None:
        check_fact(where, self.listed in LISTED, "decomposed.listed", self.listed)
        check_fact(where, len(self.defaults) == 4, "decomposed.defaults ([window, layers, image, patch])",
                   self.defaults)


@dataclass(frozen=True)
class DecomposedLayer(LayerRecord):
    """One layer's decomposed terms: the ``q × q`` grid it attends over (a window, or the patch grid), whether it is
    a window, its heads and head size; its tables hold ``2q − 1`` rows per axis."""

    grid: tuple[int, int] = (14, 14)
    windowed: bool = True
    n_heads: int = 1
    head_dim: int = 64
    kind: ClassVar[str] = "decomposed"

    @property
    def label(self) -> str:
        return f"decomposed({'window' if self.windowed else 'global'})"

    @property
    def table_rows(self) -> tuple[int, int]:
        """The rows of ``rel_pos_h`` and ``rel_pos_w``: ``2q − 1`` per axis."""
        return 2 * self.grid[0] - 1, 2 * self.grid[1] - 1

    def params(self) -> dict[str, Any]:
        return {"grid": list(self.grid), "windowed": self.windowed, "n_heads": self.n_heads,
                "head_dim": self.head_dim, "table_rows": list(self.table_rows), "index_arithmetic": "float32"}

    def reference(self, attn: Array, q: Array, rel_pos_h: Array, rel_pos_w: Array,
                  grid: tuple[int, int] | None = None) -> Array:
        """The logits ``attn`` ``(..., N, N)`` with the terms of the checkpoint's tables added, over the layer's
        grid (or ``grid``: a global layer given another image), the row index computed as torch does."""
        size = self.grid if grid is None else tuple(grid)
        return add_decomposed_rel_pos(attn, q, rel_pos_h, rel_pos_w, size, size, index_arithmetic="float32")

    def _why_not(self) -> str:
        return ("decomposed terms add q·R_h and q·R_w over a 2-D grid: DecomposedLayer.reference adds them to the "
                "logits")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`DecomposedLayer` per layer (module docstring)."""
    facts: DecomposedFacts = stack.facts
    view, shape = stack.view, stack.geometry()
    window_default, layers_default, image_default, patch_default = facts.defaults
    window = view.int(facts.window, window_default, minimum=0)
    listed = view.value(facts.layers, list(layers_default))
    if not isinstance(listed, (list, tuple)):
        raise ValueError(f"{view.name(facts.layers)} must list layer indices, got {listed!r}")
    listed = {check_int(f"{view.name(facts.layers)}[{i}]", v, minimum=0) for i, v in enumerate(listed)}
    grid = image_grid(view, facts.image, facts.patch, image_default=image_default, patch_default=patch_default)
    records: list[LayerRecord] = []
    for i in range(shape.layers):
        windowed = window > 0 and ((i in listed) == (facts.listed == "window"))
        where = ("window",) if windowed else ("image_grid",)  # the place inside the window, or in the patch grid
        records.append(DecomposedLayer(stack.name, i, None, grid=(window, window) if windowed else grid,
                                       windowed=windowed, n_heads=shape.heads, head_dim=shape.head_dim,
                                       reads=(("query", where), ("key", where))))
    return records


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"q_size": draw(st.integers(1, 8)), "k_size": draw(st.integers(1, 8))}


DECOMPOSED = EncodingKind(
    name="decomposed", summary="learned per-axis tables read at the row and column offsets of query and key patches, "
    "added to the logits (SAM, ViTDet)", record=DecomposedLayer, build=build, hook="qk_terms",
    reads=("image_grid", "window"), doc="docs/decomposed.md#the-math", facts=DecomposedFacts,
    contract=("add_decomposed_rel_pos",), spec="spec_tests/test_decomposed.py", draw=_draw, modalities=("vision",),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16, "image_size": 64,
                        "patch_size": 16, "window_size": 2, "global_attn_indexes": [1]}, "facts": {}},
    check="decomposed", golden="decomposed")

__all__ = ["DECOMPOSED", "LISTED", "DecomposedFacts", "DecomposedLayer", "build"]
