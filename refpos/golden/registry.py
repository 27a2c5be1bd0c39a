"""The registry of golden case families: one :class:`CaseFamily` record per family (:data:`FAMILIES`), in the order
``refpos golden generate`` writes them.

A *case family* is the cases under one id prefix (``golden/cases/<prefix>/…``): its record holds the prefix, the
builder that makes its cases (:mod:`refpos.golden.cases`, one module per family or per group of small ones), the
encoding kinds (:data:`refpos.models.kinds.KINDS`) whose formulas its cases pin down, and one line saying what
they hold. :func:`refpos.golden.generate.all_cases` iterates the records; a case whose id is outside its family's
prefix is refused.

To add a family, write its builder in :mod:`refpos.golden.cases` and list its record here; the kinds' records name
its prefix (``EncodingKind.golden``), and the meta-test (``refpos/tests/test_kinds_registry.py``) asks the
committed manifest for cases under it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from refpos.golden.cases import (
    axis_tables,
    bias_table,
    box_tables,
    conv_position,
    deberta,
    decomposed,
    fourier,
    grid,
    layers,
    layout_bias,
    relative,
    rope,
    scenarios,
    shaw_key,
    sincos2d,
    sinusoid1d,
    tables,
    tiled_grid,
)
from refpos.golden.files.manifest import Case


@dataclass(frozen=True)
class CaseFamily:
    """One family of golden cases: every case it builds has an id ``<prefix>/…``."""

    prefix: str
    build: Callable[[], list[Case]]
    kinds: tuple[str, ...]
    summary: str

    def cases(self) -> list[Case]:
        """The family's cases; a ``ValueError`` naming a case whose id is not under the prefix."""
        cases = self.build()
        stray = [case.id for case in cases if not case.id.startswith(self.prefix + "/")]
        if stray:
            raise ValueError(f"golden family {self.prefix!r}: cases outside its prefix: {stray}")
        return cases


def _registry(*families: CaseFamily) -> Mapping[str, CaseFamily]:
    prefixes = [family.prefix for family in families]
    if len(set(prefixes)) != len(prefixes):
        raise ValueError(f"golden family prefixes must be unique, got {prefixes}")
    return MappingProxyType({family.prefix: family for family in families})


#: prefix -> its family, in manifest order
FAMILIES: Mapping[str, CaseFamily] = _registry(
    CaseFamily("sinusoid", tables.sinusoid_cases, ("sinusoidal",), "sinusoidal tables: both layouts and spacings"),
    CaseFamily("alibi", tables.alibi_cases, ("alibi",), "ALiBi slopes of 1 … 112 heads and a bias of each form"),
    CaseFamily("t5", tables.t5_cases, ("t5",), "T5 buckets of both directions and a cached decoder's bias"),
    CaseFamily("shaw", relative.shaw_cases, (), "Shaw et al.'s attention with relative tables"),
    CaseFamily("txl", relative.txl_cases, (), "Transformer-XL's logits with memory"),
    CaseFamily("kerple", relative.kerple_cases, (), "KERPLE's log and power kernels"),
    CaseFamily("fire", relative.fire_cases, (), "FIRE's MLP bias"),
    CaseFamily("xpos", relative.xpos_cases, (), "xPos's query and key"),
    CaseFamily("sandwich", relative.sandwich_cases, (), "Sandwich's bias"),
    CaseFamily("cope", relative.cope_cases, (), "CoPE's logits"),
    CaseFamily("distance", relative.distance_cases, (), "the worked example's distance bias"),
    CaseFamily("learned", relative.learned_cases, ("learned",), "learned absolute rows"),
    CaseFamily("deberta", deberta.deberta_cases, ("deberta",), "DeBERTa's log buckets and disentangled logits"),
    CaseFamily("worked-example", scenarios.worked_example_cases, (), "the worked example 我 愛 你, step by step"),
    CaseFamily("attention", scenarios.attention_cases, ("none",), "attention without positions: masks, softcap"),
    CaseFamily("rope-layout", rope.layout_cases, ("rope",), "RoPE in every layout and partial placement"),
    CaseFamily("rope", rope.all_model_cases, ("rope", "mrope"), "real models' RoPE at the probe positions"),
    CaseFamily("rope-boundary", rope.boundary_cases, ("rope",), "RoPE at the boundaries of each scaling rule"),
    CaseFamily("scenario", scenarios.scenario_cases, (), "decoding with a cache, left padding, a chunked prefill"),
    CaseFamily("vision-rope", layers.vision_cases, ("vision_rope",), "2-D and 3-D RoPE of vision towers"),
    CaseFamily("rope-2d", layers.rope_2d_cases, ("rope_2d",), "GLM's two position axes, one RoPE per head half"),
    CaseFamily("local-attention", layers.local_attention_cases, (), "sliding-window and chunked local attention"),
    CaseFamily("query-scale", layers.query_scale_cases, (), "position-dependent query scales"),
    CaseFamily("bias_table", bias_table.bias_table_cases, ("bias_table",), "Swin, Swin v2 and BEiT window biases"),
    CaseFamily("conv_position", conv_position.conv_position_cases, ("conv_position",),
               "convolutional positions: weight norm, a plain kernel, SEW's stride, Data2Vec-audio's layers"),
    CaseFamily("resample", grid.resample_cases, ("grid",), "torch's interpolate: every mode, both corner rules"),
    CaseFamily("grid", grid.grid_variant_cases, ("grid",), "learned 2-D tables resampled each family's way"),
    CaseFamily("decomposed", decomposed.decomposed_cases, ("decomposed",), "SAM's decomposed relative positions"),
    CaseFamily("sincos2d", sincos2d.sincos2d_cases, ("sincos2d",), "fixed 2-D sin–cos of grids, masks and points"),
    CaseFamily("fourier", fourier.fourier_cases, ("fourier",), "SAM's and Perceiver's Fourier features"),
    CaseFamily("sinusoid1d", sinusoid1d.sinusoid1d_cases, ("sinusoid1d",), "audio and time-series sinusoids"),
    CaseFamily("axis_tables", axis_tables.axis_tables_cases, ("axis_tables",),
               "factorised row and column tables read at per-patch indices"),
    CaseFamily("tiled_grid", tiled_grid.tiled_grid_cases, ("tiled_grid",),
               "a tiled image's gated grid and pre-tile rows at one aspect-ratio id"),
    CaseFamily("box_tables", box_tables.box_tables_cases, ("box_tables",),
               "a document token's x, y, height and width table rows at its box"),
    CaseFamily("layout_bias", layout_bias.layout_bias_cases, ("layout_bias",),
               "a learned bias per head over T5 buckets of the token distance and of the boxes' x and y distances"),
    CaseFamily("shaw_key", shaw_key.shaw_key_cases, ("shaw_key",),
               "each query's product with a learned table's rows of clipped frame distances, inside blocks of frames"),
)

__all__ = ["FAMILIES", "CaseFamily"]
