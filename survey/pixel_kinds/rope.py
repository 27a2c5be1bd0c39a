r"""The ``rope`` comparison on audio and feature runs: each rotary module's cos and sin tables at the position ids
it was fed (Mimi, LASR, Nemotron's transcriber, TimesFM 2.5), against refpos's rotation of the layer.

What is observed (:attr:`survey.pixels.PixelRun.rotary`): at each input size, a rotary module's first call — its
position ids ``p`` and its tables ``cos, sin`` of shape ``(…, T, r)``, ``r`` the rotated width. refpos's rotation
is read per output channel ``c`` of the rotated span as an angular speed ``ω_c`` and a gain ``A_c`` (the attention
factor) by :func:`survey.rotation.channels`, the text survey's reading of a claim; the tables it predicts are

.. math::  \cos_{t,c} = A_c\cos(ω_c\,p_t), \qquad \sin_{t,c} = A_c\sin(ω_c\,p_t).

The channel order carries the layout only where the model applies its table as it is laid out, as the half layout
does (channels ``c`` and ``c + r/2`` share a frequency: the table is ``[θ | θ]``). A model rotating adjacent pairs
may lay its table out so and regroup it in its apply function (PE-Audio's takes the first half and pairs
``(2i, 2i + 1)``), or lay it out ``[θ₀ θ₀ θ₁ θ₁ …]`` (BLT's): the tables alone cannot tell the layouts apart.

**The rotation as a map.** Where a rotary apply function ran (:attr:`survey.pixels.PixelRun.applied`, recorded by
:func:`survey.pixel_capture.rotations`: the query and key before and after, one head), its output is compared
with refpos's rotation of its input at the positions the rotary module was fed (:func:`map_cases`, by
:func:`survey.rotation.rotated_map`): that compares the pairs, and so the layout, whatever the tables' order. Every
layout is compared so where such a call was recorded; a layout other than the half one with no call recorded is not
reached, by name.

**Bound.** These modules compute the angles in float32 whatever dtype the model runs in (``.float()``), so the
tables carry :meth:`survey.rotation.Channels.bound` at unit norm, ``|A_c|·((R + 1 + |ln ω_c|)·u·|p_t|·ω_c + C)``
with ``u = 2⁻²⁴``, ``R`` the inverse frequency's roundings and ``C`` the cosine's and sine's (16 ulp); the rotation
made with them, the same bound at the norm of each pair it turns.

**Wrong answers.** refpos's claim changed one way at a time (:func:`survey.mutants._rope_mutants`: each other
layout, the base ``θ(1 + 10⁻⁴)``, each length the rule reads ±1, the rotated width ±2), each predicting tables
(and a map) that must leave the bound somewhere; a change that predicts the same at every observed position (a
length the default rule does not read) is no wrong answer and is left out.

A model with rotary modules of another width than refpos's rotated one is graded wrong; every module of the
claimed width must agree (one stack's RoPE read against another stack's module is then graded wrong, never
passed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, graded
from survey.pixel_records import IMAGE_INPUTS
from survey.pixels import PixelRun, Site


def tables(rope: Any, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """refpos's ``(cos, sin)`` tables ``(2, T, r)`` of the rotated span at ``positions`` and their bound (module
    docstring); ``None`` where the rope cannot be read per channel."""
    from refpos.pairs import span_bounds
    from survey.rotation import channels

    try:
        speeds = channels(rope, int(positions.max()) + 1)
    except (ValueError, TypeError):
        return None
    start, stop = span_bounds(rope.head_dim, rope.rotary_width, rope.placement)
    omega, gain = speeds.omega[start:stop], speeds.gain[start:stop]
    angle = positions[:, None] * omega
    predicted = np.stack([gain * np.cos(angle), gain * np.sin(angle)])
    unit_norm = np.full((positions.size, rope.head_dim), 2.0**-0.5)  # a pair of unit norm in every channel
    bound = speeds.bound(unit_norm, positions)[:, start:stop]
    return predicted, np.broadcast_to(bound, predicted.shape)


def _observed(site: Site) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(positions (T,), tables (2, T, r))`` of the first batch row at each size."""
    out = []
    for capture in site.captures.values():
        ids, both = capture.module_in, capture.module_out
        positions = ids.reshape(-1, ids.shape[-1])[0]
        out.append((positions, both.reshape(2, -1, *both.shape[-2:])[:, 0].astype(np.float64)))
    return out


def compare_rope(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's RoPE against every rotary module of its rotated width (module docstring)."""
    from survey.mutants import _rope_mutants

    if run.input_name in IMAGE_INPUTS:
        return Outcome("not reached", f"{record.stack} layer {record.index}: the survey compares a 1-D RoPE on "
                       "audio and feature inputs (a vision tower's positions are a grid)")
    fed = [site for site in run.rotary if site.captures]
    if not fed:
        return Outcome("not reached", f"{record.stack} layer {record.index}: no rotary module (a class named "
                       f"…RotaryEmbedding) was called with position ids on {run.input_name}")
    width = record.rope.rotary_width
    mine = [site for site in fed if all(t.shape[-1] == width for _, t in _observed(site))]
    if not mine:
        return Outcome("wrong", f"{record.stack} layer {record.index}: refpos rotates {width} channels, "
                       "transformers' rotary tables are " + ", ".join(
                           f"{site.path}: {_observed(site)[0][1].shape[-1]}" for site in fed))
    maps = map_cases(record, run, mine)
    if isinstance(maps, Outcome):
        return maps
    if record.rope.layout != "half" and not maps:  # the tables are [θ | θ]; an apply function may regroup them
        return Outcome("not reached", f"{record.stack} layer {record.index}: refpos rotates {record.rope.layout} "
                       "pairs; a rotary module's tables do not show the layout where the apply function regroups "
                       "the channels, and no apply function's call was recorded to compare the rotation as a map")
    cases = list(maps)
    for site in mine if record.rope.layout == "half" else ():
        for positions, observed in _observed(site):
            reference = tables(record.rope, positions)
            if reference is None:
                return Outcome("not reached", f"{site.path}: refpos's RoPE is not a rotation per channel pair")
            predicted, bound = reference
            wrong = {}
            for name, rope in _rope_mutants(record.rope):
                other = None if rope is None else tables(rope, positions)
                if other is not None and not np.array_equal(other[0], predicted):
                    wrong[name] = other[0]
            cases.append((observed, predicted, bound, wrong))
    return graded(cases, (), f"{record.stack} layer {record.index} rope ({', '.join(s.path for s in mine)})")


def compare_mrope(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One M-RoPE layer on a run whose rotary modules were fed the same positions on every axis row (a talker
    stack run on its ``inputs_embeds``: ``arange(T)`` on t, h and w): there every pair reads the one position, the
    tables are 1-D RoPE's, and :func:`compare_rope` compares them at the first row. Rows that differ are an M-RoPE
    grid this comparison does not read (not reached, by name)."""
    for site in run.rotary:
        for capture in site.captures.values():
            ids = capture.module_in
            rows = ids.reshape(ids.shape[0], -1) if ids.ndim >= 3 else ids.reshape(1, -1)
            if not (rows == rows[:1]).all():
                return Outcome("not reached", f"{record.stack} layer {record.index}: {site.path} was fed position "
                               f"rows that differ (shape {tuple(ids.shape)}): the survey compares M-RoPE on "
                               f"{run.input_name} where every axis reads the same position")
    return compare_rope(record, run, sites)


def map_cases(record: Any, run: PixelRun, mine: list[Site]) -> list[tuple] | Outcome:
    """The rotation as a map at each recorded call of a rotary apply function (:attr:`PixelRun.applied`): its
    output against refpos's rotation of its input (:func:`survey.rotation.rotated_map`) at the position ids the
    rotary modules ``mine`` were fed at that size, with every wrong answer's rotation. A call is compared where
    its token count is that of the positions and its width the head's or the rotated span's (a call of another
    width is another stack's: the tables compare the width); where the modules were fed different positions of that
    count the size is not compared (which a call read is not known)."""
    from survey.mutants import _rope_mutants
    from survey.rotation import rotated_map

    cases = []
    for size, calls in (run.applied or {}).items():
        fed = {}
        for site in mine:
            if size in site.captures:
                ids = site.captures[size].module_in
                positions = ids.reshape(-1, ids.shape[-1])[0].astype(np.int64)
                fed.setdefault(positions.size, []).append(positions)
        for call in calls:
            for before, after in zip(call.before, call.after, strict=False):
                found = fed.get(before.shape[0] if before.ndim == 2 else -1, [])
                if not found or any(not np.array_equal(p, found[0]) for p in found) or before.shape != after.shape:
                    continue
                positions = found[0]
                x = before.astype(np.float64)
                mapped = rotated_map(record.rope, x, positions)
                if mapped is None:  # another stack's heads (the width is compared on the tables)
                    continue
                wrong = {}
                for name, rope in _rope_mutants(record.rope):
                    other = None if rope is None else rotated_map(rope, x, positions)
                    if other is not None and not np.array_equal(other[0], mapped[0]):
                        wrong[name] = other[0]
                cases.append((after.astype(np.float64), *mapped, wrong))
    return cases
