"""What vLLM computes where it differs from refpos's answer: the answer changed one way at a time, judged again.

A row that comes out wrong against vLLM's run says by how much; :func:`matching_change` says *what* vLLM does
instead, by judging the same stored run against refpos's answer with one field of every rotary layer's
:class:`refpos.RopeConfig` changed (:data:`CHANGES`): the first change under which every layer is exact names
vLLM's computation in refpos's terms (``layout = 'interleaved'``: vLLM rotates adjacent pairs and keeps them in
place). None matching is said too: the difference is then none of these single changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from survey import adaptor, compare
from survey.claims import LayerClaim, Resolution


def _rope(change: Callable[[Any], Any]) -> Callable[[LayerClaim], LayerClaim]:
    def apply(claim: LayerClaim) -> LayerClaim:
        return dataclasses.replace(claim, rope=change(claim.rope)) if claim.kind == "rope" else claim
    return apply


def _half_rotated(rope: Any) -> Any:
    """``rope`` rotating the first half of each head (GLM-4's default where a config states no factor); M-RoPE
    sections halved with it (the survey's positions are text positions, the same on every axis)."""
    sections = rope.mrope_section
    if sections and all(s % 2 == 0 for s in sections):
        sections = tuple(s // 2 for s in sections)
    return dataclasses.replace(rope, rotary_dim=rope.head_dim // 2, partial_rotary_factor=0.5,
                               mrope_section=sections)


#: one change at a time: its description and the claim it makes of each layer's claim
CHANGES: tuple[tuple[str, Callable[[LayerClaim], LayerClaim]], ...] = (
    ("layout = 'half'", _rope(lambda r: dataclasses.replace(r, layout="half"))),
    ("layout = 'interleaved'", _rope(lambda r: dataclasses.replace(r, layout="interleaved"))),
    ("layout = 'deinterleaved'", _rope(lambda r: dataclasses.replace(r, layout="deinterleaved"))),
    ("rope_type = 'default' (no scaling rule)", _rope(lambda r: dataclasses.replace(
        r, rope_type="default", factor=None, original_max_position_embeddings=None))),
    ("partial_rotary_factor = 0.5 (the first half of each head rotated)", _rope(_half_rotated)),
    ("no query scale", lambda c: dataclasses.replace(c, query_scale=None)),
    ("no rotation (NoPE)", lambda c: LayerClaim(c.stack, c.index, "none", query_scale=c.query_scale)
     if c.kind == "rope" else c),
)


def _exact(resolution: Resolution, run: Any) -> bool:
    verdict = compare.compare(resolution, run)
    return bool(verdict.layers) and all(r.status == "exact" for r in verdict.layers)


def matching_change(config: dict[str, Any], run: Any) -> str | None:
    """The first change of :data:`CHANGES` under which refpos's answer for ``config`` is exact against ``run``."""
    resolution = adaptor.resolve(config)
    if not resolution.layers or run is None:
        return None
    for description, change in CHANGES:
        try:
            changed = dataclasses.replace(resolution, layers=tuple(change(c) for c in resolution.layers))
            if _exact(changed, run):
                return description
        except (ValueError, TypeError):  # a change the config's rope cannot take (a layout its rule forbids)
            continue
    return None
