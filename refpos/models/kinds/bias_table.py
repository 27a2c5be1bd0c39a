r"""The window-bias kind: a relative position bias indexed by a window (Swin v1, Swin v2's continuous bias, BEiT), as a
family's code builds it — which form, which keys hold the window, the stages and the switches
(:class:`BiasTableFacts`), the layer record (:class:`BiasTableLayer`) and the builder.

The formulas are :mod:`refpos.encodings.bias_table` (docs/bias-table.md#the-math). A Swin stage ``s`` has
``depths[s]`` layers of ``num_heads[s]`` heads, each with its own table over a ``window_size × window_size``
window; BEiT's window is the patch grid (``image_size / patch_size``), with a table per layer
(``use_relative_position_bias``) or one the encoder shares (``use_shared_relative_position_bias``), or none.

Examples
--------
>>> from refpos.models import model_positions
>>> swin = {"model_type": "swin", "depths": [2, 1], "num_heads": [2, 4], "window_size": 7, "embed_dim": 16}
>>> [(r.index, r.stage, r.n_heads, r.window) for r in model_positions(swin)]
[(0, 0, 2, (7, 7)), (1, 0, 2, (7, 7)), (2, 1, 4, (7, 7))]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.encoding import Encoding
from refpos.encodings.bias_table import BIAS_FORMS, WindowBias, window_bias
from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord, NoPositions
from refpos.validation import check_int


@dataclass(frozen=True)
class BiasTableFacts:
    """How a family's code builds its window bias (module docstring).

    ``form``: one of :data:`refpos.encodings.bias_table.BIAS_FORMS`; ``depths``: the key of the layers per stage
    (Swin; absent: one stage of the stack's layer count); ``heads``: the key of the head count (a list per stage
    where ``depths`` is set); ``window``: the key of the window's side (absent: the patch grid
    ``image_size / patch_size``, BEiT); ``pretrained``: Swin v2's key of the pretrained window per stage;
    ``own`` and ``shared``: BEiT's keys turning on a table per layer or one for the whole stack (neither: no
    positions in attention). A key written ``""`` in the family table is absent (TOML has no null).
    """

    form: str = "swin"
    depths: str | None = "depths"
    heads: str = "num_heads"
    window: str | None = "window_size"
    pretrained: str | None = None
    own: str | None = None
    shared: str | None = None

    def __post_init__(self) -> None:
        for name in ("depths", "window", "pretrained", "own", "shared"):
            if getattr(self, name) == "":
                object.__setattr__(self, name, None)

    def check(self, where: str) -> None:
        check_fact(where, self.form in BIAS_FORMS, "bias_table.form", self.form)
        check_fact(where, (self.own is None) == (self.shared is None), "bias_table.own/shared (both or neither)",
                   (self.own, self.shared))
        check_fact(where, self.pretrained is None or self.form == "swinv2", "bias_table.pretrained (swinv2 only)",
                   self.pretrained)


@dataclass(frozen=True)
class BiasTableLayer(LayerRecord):
    """One layer's window bias: its form, window ``(Wh, Ww)``, heads, stage, and which layer's table it reads
    (``table_layer``; ``None``: the stack's shared table)."""

    form: str = "swin"
    window: tuple[int, int] = (7, 7)
    n_heads: int = 1
    stage: int = 0
    pretrained_window: tuple[int, int] | None = None
    table_layer: int | None = 0
    kind: ClassVar[str] = "bias_table"

    def params(self) -> dict[str, Any]:
        return {"form": self.form, "window": list(self.window), "n_heads": self.n_heads, "stage": self.stage,
                "pretrained_window": None if self.pretrained_window is None else list(self.pretrained_window),
                "table_layer": self.table_layer}

    def bias(self, **weights: Any) -> Any:
        """The ``(H, N, N)`` bias of the layer's window (``table=`` for Swin and BEiT, ``mlp=(w1, b1, w2)`` for
        Swin v2; BEiT resamples a table of another window with ``table_window=``)."""
        if self.form == "swinv2":
            return window_bias("swinv2", self.window, mlp=weights.get("mlp"), pretrained_window=self.pretrained_window)
        if self.form == "beit":
            return window_bias("beit", self.window, table=weights.get("table"),
                               table_window=weights.get("table_window", self.window))
        return window_bias("swin", self.window, table=weights.get("table"))

    def encoding(self, **weights: Any) -> Encoding:
        return WindowBias(self.bias(**weights))


def _per_stage(stack: Stack, key: str, stages: int) -> list[int]:
    """A per-stage list of positive ints (a single int stands for every stage)."""
    value = stack.view.value(key)
    values = list(value) if isinstance(value, (list, tuple)) else [value] * stages
    if len(values) != stages:
        raise ValueError(f"{stack.view.name(key)} must list one value per stage ({stages}), got {value!r}")
    return [check_int(f"{stack.view.name(key)}[{i}]", v, minimum=1) for i, v in enumerate(values)]


def _window(stack: Stack) -> tuple[int, int]:
    facts: BiasTableFacts = stack.facts
    if facts.window is not None:
        side = stack.view.int(facts.window, minimum=1)
        return side, side
    image, patch = stack.view.value("image_size", 224), stack.view.value("patch_size", 16)
    sides = [check_int(stack.view.name("image_size"), v, minimum=1) for v in
             (image if isinstance(image, (list, tuple)) else [image, image])]
    patch = check_int(stack.view.name("patch_size"), patch, minimum=1)
    return sides[0] // patch, sides[1] // patch


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`BiasTableLayer` per layer (module docstring); BEiT's layers without a table are
    :class:`~refpos.models.records.NoPositions`."""
    facts: BiasTableFacts = stack.facts
    view = stack.view
    if facts.depths is not None:
        depths = view.value(facts.depths)
        depths = list(depths) if isinstance(depths, tuple) else depths
        if not isinstance(depths, list) or not depths:
            raise ValueError(f"{view.name(facts.depths)} must list the layers of each stage, got {depths!r}")
        depths = [check_int(f"{view.name(facts.depths)}[{i}]", d, minimum=1) for i, d in enumerate(depths)]
    else:
        depths = [view.count(("num_hidden_layers",), "layer count")]
    heads = _per_stage(stack, facts.heads, len(depths))
    pretrained = _per_stage(stack, facts.pretrained, len(depths)) if facts.pretrained and any(
        view.value(facts.pretrained) or [0]) else None
    window = _window(stack)
    # Swin partitions the patch map into windows and indexes by the place inside each; BEiT's window is the image's
    # whole patch grid (its table resampled when the image's grid is not the config's)
    where = ("window",) if facts.window is not None else ("image_grid",)
    reads = (("query", where), ("key", where))
    own = facts.own is not None and view.bool(facts.own, False)
    shared = facts.shared is not None and view.bool(facts.shared, False)
    records: list[LayerRecord] = []
    index = 0
    for stage, (depth, n_heads) in enumerate(zip(depths, heads, strict=True)):
        for _ in range(depth):
            if facts.own is not None and not (own or shared):
                records.append(NoPositions(stack.name, index, None))  # reads nothing: no positions
            else:
                records.append(BiasTableLayer(
                    stack.name, index, None, form=facts.form, window=window, n_heads=n_heads, stage=stage,
                    pretrained_window=None if pretrained is None else (pretrained[stage],) * 2,
                    table_layer=None if shared and not own else index, reads=reads))
            index += 1
    return records


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"form": draw(st.sampled_from(BIAS_FORMS)), "window": draw(st.integers(1, 12))}


BIAS_TABLE = EncodingKind(
    name="bias_table", summary="a learned bias per head for each (row, column) offset inside a window (Swin, BEiT), or "
    "an MLP of the log-spaced offset (Swin v2)", record=BiasTableLayer, build=build, hook="bias",
    reads=("window", "image_grid"), doc="docs/bias-table.md#the-math", facts=BiasTableFacts,
    contract=("window_bias",), spec="spec_tests/test_bias_table.py", draw=_draw, modalities=("vision", "audio"),
    example={"config": {"depths": [2, 2], "num_heads": [2, 4], "window_size": 7}, "facts": {"form": "swin"}},
    absent={"check": "named by refpos.encodings.bias_table_mistakes.identify_bias_table; the command's target "
                     "comes with the check registry",
            "golden": "the cases are refpos.golden.bias_table_cases (not yet in the committed goldens)"})

__all__ = ["BIAS_TABLE", "BiasTableFacts", "BiasTableLayer", "build"]
