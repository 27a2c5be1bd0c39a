r"""The fixed 2-D sin–cos kind: MAE's patch-grid table, DETR's sine map of the pixel mask, the decoders' sine
features of anchors and boxes — which variant a family's code computes, where it adds it and with what width
(:class:`Sincos2dFacts`), the record (:class:`Sincos2dLayer`) and the builder.

The formulas are :mod:`refpos.encodings.sincos2d` (docs/sincos2d.md#the-math); the variants are the records of
:data:`refpos.encodings.sincos2d_variants.SINE_VARIANTS`, each with the config keys it reads (a temperature, a
scale). Where a family adds the embedding decides the records:

* ``at = "input"`` — once, to the patches before the first layer (ViT-MAE): the stack's input site;
* ``at = "query_key"`` — to the query and key inputs of every attention layer, never to the values (DETR's
  encoder: ``hidden_states + position_embeddings`` in each self-attention): one record per layer;
* ``at = "cross_keys"`` — a decoder's cross-attention keys (the encoder's map), every layer, with its queries
  carrying the object queries (``queries``: a learned table of ``num_queries`` rows, or a sine variant of
  reference points such as ``anchors``);
* ``at = "output"`` — once per path, to the tokens a stage after the stack's last layer makes from its output
  (the row's ``output`` column; Granite-Docling's connector): the native grid ``(M_h, M_w)`` pixel-shuffled by a
  factor ``s`` (``shuffle``: each ``s × s`` block of tokens becomes one), so the table is the variant's on the grid
  ``(M_h / s, M_w / s)``, of the stage's width; a second path at half the factor (``halved``: four times as many
  tokens) has its own table. One record per path, its factor in ``shuffle``.

What the embedding is computed from is stated by the variant (the record's ``reads``): the patch grid (``grid``
variants), the pixel mask of each feature map (``mask``), or the coordinates of points and boxes
(``coordinates``); a decoder's queries read the reference points their sine variant encodes.

Examples
--------
>>> from refpos.models import model_positions
>>> detr = {"model_type": "detr", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
...         "decoder_attention_heads": 2, "d_model": 16}
>>> print(model_positions(detr).summary())
encoder layers 0-0: sincos2d(detr) ×1
decoder layers 0-0: sincos2d(detr) ×1
>>> decoder = model_positions(detr).stack("decoder")[0]
>>> decoder.at, decoder.features, decoder.queries, decoder.query_rows
('cross_keys', 8, 'learned', 100)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.backend import Array
from refpos.encodings.grid_variants import GRID_VARIANTS
from refpos.encodings.sincos2d_variants import SINE_VARIANTS, SineVariant
from refpos.models.kinds.grid import image_grid
from refpos.models.kinds.record import EncodingKind, Stack, check_fact, layer_count, stack_width
from refpos.models.kinds.variant_keys import unmet, variant_values
from refpos.models.records import LayerRecord
from refpos.models.view import ConfigView

#: where a family adds the embedding (module docstring)
SINE_SITES = ("input", "query_key", "cross_keys", "output")
#: what a decoder's queries carry besides the sine of the memory keys: a learned table of object queries
QUERY_TABLE = "learned"
#: the input each builder of :mod:`refpos.encodings.sincos2d` reads (keys of :data:`refpos.models.sources.INPUTS`)
BUILDER_INPUTS = {"grid": "image_grid", "mask": "pixel_mask", "coordinates": "points"}


@dataclass(frozen=True)
class Sincos2dFacts:
    """How a family's code computes and adds its sin–cos embedding (module docstring).

    ``variant``: a record of :data:`~refpos.encodings.sincos2d_variants.SINE_VARIANTS`; ``at``: one of
    :data:`SINE_SITES`; ``width``: the key of the channels the stack adds (absent: the stack's width);
    ``halve``: the builder is called with half of them per axis (``num_pos_feats = d_model // 2``: DETR);
    ``queries``: a decoder's query positions, ``"learned"`` (a table of ``queries_key`` rows, the class default
    ``queries_default``) or a sine variant;
    ``image``, ``patch``: the keys of a fixed grid's native size (``grid`` variants), ``defaults`` their class
    defaults; ``way``: a way of
    :data:`~refpos.encodings.grid_variants.GRID_VARIANTS` by which the fixed table is resampled to another grid
    (ViT-MAE: bicubic), absent when it is recomputed for each input; ``width_default``: the class default of
    ``width``; at ``output``, ``shuffle``: the key of the pixel-shuffle factor ``s`` the stage merges the grid by
    (``shuffle_default`` its class default), ``halved``: the bool key that builds a second path at ``s // 2``
    (``halved_default`` its class default).
    """

    variant: str = "detr"
    at: str = "query_key"
    width: str | None = None
    halve: bool = False
    queries: str | None = None
    queries_key: str = "num_queries"
    queries_default: int | None = None
    image: str = "image_size"
    patch: str = "patch_size"
    defaults: tuple[Any, Any] = (None, None)
    way: str | None = None
    width_default: int | None = None
    shuffle: str | None = None
    shuffle_default: int | None = None
    halved: str | None = None
    halved_default: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.defaults, list):
            object.__setattr__(self, "defaults", tuple(self.defaults))

    def check(self, where: str) -> None:
        check_fact(where, self.variant in SINE_VARIANTS, "sincos2d.variant", self.variant)
        check_fact(where, self.at in SINE_SITES, "sincos2d.at", self.at)
        check_fact(where, self.queries in (None, QUERY_TABLE, *SINE_VARIANTS), "sincos2d.queries", self.queries)
        check_fact(where, (self.queries is not None) == (self.at == "cross_keys"), "sincos2d.queries (cross_keys)",
                   self.queries)
        check_fact(where, self.way is None or (self.way in GRID_VARIANTS and SINE_VARIANTS[self.variant].builder
                                               == "grid"), "sincos2d.way (a grid variant's)", self.way)
        check_fact(where, self.at != "output" or (SINE_VARIANTS[self.variant].builder == "grid" and self.way is None),
                   "sincos2d.at = output (a fixed grid variant's)", self.at)
        check_fact(where, (self.shuffle is None and self.halved is None) or self.at == "output",
                   "sincos2d.shuffle, halved (at = output)", (self.shuffle, self.halved))
        check_fact(where, self.halved is None or self.shuffle is not None, "sincos2d.halved (with shuffle)",
                   self.halved)


@dataclass(frozen=True)
class Sincos2dLayer(LayerRecord):
    """One stack's (``at = "input"``) or one layer's sin–cos embedding: the variant, where it is added, the channels
    the builder is called with (``features``), the values the variant reads from the config (``settings``), the
    native grid of a fixed table, and what a decoder's queries carry."""

    variant: str = "detr"
    at: str = "query_key"
    features: int = 128
    settings: tuple[tuple[str, Any], ...] = ()
    grid: tuple[int, int] | None = None
    way: str | None = None
    queries: str | None = None
    query_rows: int | None = None
    #: at ``output``: the pixel-shuffle factor of the path whose tokens the table is added to (1 elsewhere)
    shuffle: int = 1
    kind: ClassVar[str] = "sincos2d"

    @property
    def label(self) -> str:
        return f"sincos2d({self.variant})"

    @property
    def record(self) -> SineVariant:
        """The variant's record."""
        return SINE_VARIANTS[self.variant]

    def params(self) -> dict[str, Any]:
        return {"variant": self.variant, "builder": self.record.builder, "at": self.at, "features": self.features,
                **{key: list(value) if isinstance(value, tuple) else value for key, value in self.settings},
                "grid": None if self.grid is None else list(self.grid), "resampled_by": self.way,
                "queries": self.queries, "query_rows": self.query_rows,
                **({"shuffle": self.shuffle} if self.at == "output" else {})}

    def reference(self, **inputs: Any) -> Array:
        """The embedding: the variant's builder called with ``inputs`` (``height=, width=`` for a grid, ``mask=``,
        or ``coords=``), the record's width and the settings read from the config. A fixed grid (``grid`` set)
        at another size is resampled by ``way`` when the family does so, else refused."""
        keywords = dict(self.settings)
        builder = self.record.builder
        if builder == "grid":
            size = (inputs.pop("height", None), inputs.pop("width", None))
            if self.grid is not None and size != self.grid:
                if self.way is None:
                    raise ValueError(f"height, width: the {self.stack} table is fixed at {self.grid}, got {size}")
                cls_rows = self.record.parameters.get("cls_rows", 0)
                table = self.record.build(height=self.grid[0], width=self.grid[1], dim=self.features, **keywords)
                return GRID_VARIANTS[self.way].resample(table, size, prefix_tokens=cls_rows, source_grid=self.grid)
            return self.record.build(height=size[0], width=size[1], dim=self.features, **keywords, **inputs)
        return self.record.build(num_features=self.features, **keywords, **inputs)

    def _why_not(self) -> str:
        return ("a 2-D sin–cos embedding is added to patches or feature maps, not to 1-D positions: "
                "Sincos2dLayer.reference computes it")


def build(stack: Stack) -> list[LayerRecord]:
    """One record at the input (``at = "input"``), else one per layer (module docstring)."""
    facts: Sincos2dFacts = stack.facts
    view, variant = stack.view, SINE_VARIANTS[facts.variant]
    wrong = unmet(view, variant.requires)
    if wrong:
        raise ValueError(f"{stack.name}: the {facts.variant} sin–cos needs {dict(variant.requires)}, the config "
                         f"has {wrong}")
    width = stack_width(view, stack.role) if facts.width is None else view.int(facts.width, facts.width_default,
                                                                                minimum=1)
    features = width // 2 if facts.halve else width
    settings = tuple(sorted(variant_values(view, variant.config_keys).items()))
    grid = None
    if variant.builder == "grid" and facts.at == "input":
        grid = image_grid(view, facts.image, facts.patch, image_default=facts.defaults[0],
                          patch_default=facts.defaults[1])
    rows = view.int(facts.queries_key, facts.queries_default, minimum=1) if facts.queries == QUERY_TABLE else None
    record = {"variant": facts.variant, "at": facts.at, "features": features, "settings": settings, "grid": grid,
              "way": facts.way, "queries": facts.queries, "query_rows": rows}
    if facts.at == "input":
        return [Sincos2dLayer(stack.name, 0, None, **record, reads=_reads(facts))]
    if facts.at == "output":
        return [Sincos2dLayer(stack.name, i, None, **{**record, "grid": shuffled, "shuffle": factor},
                              reads=_reads(facts)) for i, (factor, shuffled) in enumerate(_paths(view, facts))]
    return [Sincos2dLayer(stack.name, i, None, **record, reads=_reads(facts))
            for i in range(layer_count(view, stack.role))]


def _paths(view: ConfigView, facts: Sincos2dFacts) -> list[tuple[int, tuple[int, int]]]:
    r"""``(s, grid)`` of each path of a stage after the stack: the native grid ``(M_h, M_w)`` of ``image`` and
    ``patch`` pixel-shuffled by the factor ``s`` of ``shuffle``, and, where ``halved`` is true, by ``s // 2``.

    .. math::
        (h_s, w_s) = (M_h / s,\; M_w / s), \qquad s \in \{s_0\} \cup \{\lfloor s_0 / 2 \rfloor
        \text{ if halved}\}

    A factor below 1, or one that does not divide both sides (the pixel shuffle regroups ``s × s`` blocks), is a
    ``ValueError`` naming ``shuffle``."""
    native = image_grid(view, facts.image, facts.patch, image_default=facts.defaults[0],
                        patch_default=facts.defaults[1])
    factor = 1 if facts.shuffle is None else view.int(facts.shuffle, facts.shuffle_default, minimum=1)
    factors = [factor]
    if facts.halved is not None and view.bool(facts.halved, facts.halved_default):
        factors.append(factor // 2)
    for s in factors:
        if s < 1 or native[0] % s or native[1] % s:
            raise ValueError(f"{view.name(facts.shuffle or 'shuffle')}: a pixel-shuffle factor {s} does not divide "
                             f"the native grid {native} into whole blocks")
    return [(s, (native[0] // s, native[1] // s)) for s in factors]


def _reads(facts: Sincos2dFacts) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What the records' positions are read from: the variant's input, as the rows added at the input, on the
    queries and keys of every layer, or on a decoder's cross-attention keys (its queries: the reference points of a
    sine variant; a learned table of object queries reads nothing)."""
    source = (BUILDER_INPUTS[SINE_VARIANTS[facts.variant].builder],)
    if facts.at in ("input", "output"):
        return (("rows", source),)
    if facts.at == "query_key":
        return (("query", source), ("key", source))
    queries = () if facts.queries in (None, QUERY_TABLE) else (
        ("query", (BUILDER_INPUTS[SINE_VARIANTS[facts.queries].builder],)),)
    return (*queries, ("key", source))


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"variant": draw(st.sampled_from(tuple(SINE_VARIANTS))), "features": 4 * draw(st.integers(1, 16))}


SINCOS2D = EncodingKind(
    name="sincos2d", summary="fixed sines and cosines of a patch's row and column, a feature map's normalised mask "
    "counts, or given points (MAE, DETR)", record=Sincos2dLayer, build=build, hook="input",
    reads=("image_grid", "pixel_mask", "points"), doc="docs/sincos2d.md#the-math", facts=Sincos2dFacts,
    contract=("sincos_2d_grid", "sine_position_map", "sine_coordinates"), spec="spec_tests/test_sincos2d.py",
    draw=_draw, modalities=("vision",),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}, "facts": {}},
    check="sincos2d", golden="sincos2d",
    inert=("lengths", "rotary"))

__all__ = ["BUILDER_INPUTS", "QUERY_TABLE", "SINCOS2D", "SINE_SITES", "Sincos2dFacts", "Sincos2dLayer", "build"]
