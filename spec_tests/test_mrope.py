"""Spec: multi-axis RoPE (M-RoPE, docs/mrope.md) and the multimodal position ids of vision-language models.

The contract: a rope dict with ``mrope_section`` ``[s_t, s_h, s_w]`` (and ``mrope_interleaved``) makes
``rope_cos_sin`` / ``apply_rope`` take positions ``(3, ..., T)``, rows t, h, w; pair ``j`` is rotated by
``φ_j = p_{a(j)}·ω_j`` with the assignment ``a`` of docs/mrope.md#the-math. ``mrope_position_ids(layout,
family)`` gives the ``(3, T)`` ids of a layout (docs/mrope.md#position-ids-of-a-multimodal-sequence).

Properties: equal axes reduce to 1-D RoPE; the logit depends only on the shift of each axis; moving one
axis changes exactly its pairs (the sections partition the frequencies, in the documented order and
assignment). Tolerances: the phase rule of ``support.assert_close`` (angle error ∝ p·max ω), scaled by
|q|·|k| for logits; position ids are integers (exact); "a pair is unchanged" means bit for bit (the same
angle in, the same value out).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rope_support import frequencies_or_reference, seeded
from support import (
    IMPL_NAME,
    assert_close,
    declared_list,
    require,
    size,
    sized_lists,
    supported_subset,
    tolerance_array,
)

from refpos.testing.declarations import DECLARATIONS

POSITIONS = st.integers(0, 5000)


#: the three-row assignments an adapter may declare (INFO["mrope"]), docs/mrope.md#the-math
ASSIGNMENTS = ("contiguous", "interleaved", "hw_alternating")


def declared_assignments() -> tuple[str, ...]:
    """The M-RoPE variants the adapter declares (``INFO["mrope"]``); a skip, before anything is drawn, when it
    declares none of the three-row assignments."""
    variants = declared_list("mrope")
    variants = DECLARATIONS["mrope"].default_values if variants is None else variants
    if not set(ASSIGNMENTS) & set(variants):
        pytest.skip(f"{IMPL_NAME} declares INFO['mrope'] = {list(variants)}: no M-RoPE assignment to test")
    return variants


def assignment_keys(name: str) -> dict:
    """The rope-dict keys of an assignment: ``mrope_interleaved`` for the two it names, ``mrope_assignment`` for
    the one it cannot (ERNIE-4.5-VL's ``hw_alternating``)."""
    return {"mrope_assignment": name} if name == "hw_alternating" else {"mrope_interleaved": name == "interleaved"}


def assignment_of(rope: dict) -> str:
    """The assignment a rope dict names (the inverse of :func:`assignment_keys`)."""
    return rope.get("mrope_assignment") or ("interleaved" if rope.get("mrope_interleaved") else "contiguous")


@st.composite
def mrope_dicts(draw, rows: tuple[int, ...] | None = None):
    """A valid M-RoPE dict of a declared assignment (``INFO["mrope"]``), in a declared layout: 3 ≤ m ≤ 24 pairs
    split into three non-empty sections, or (``four_rows`` declared) four sections t, h, w, e (ggml);
    ``hw_alternating`` with ``s_h = s_w``."""
    variants = declared_assignments()
    choices = rows or ((3, 4) if "four_rows" in variants else (3,))
    if 4 in choices and "four_rows" not in variants:
        pytest.skip(f"{IMPL_NAME} does not declare a fourth position row (INFO['mrope'] lacks 'four_rows')")
    n_rows = draw(st.sampled_from(choices))
    m = draw(size(4, 24))
    s_h = draw(st.integers(1, m - 3))
    s_w = draw(st.integers(1, m - 2 - s_h))
    s_e = draw(st.integers(0, m - 1 - s_h - s_w)) if n_rows == 4 else 0
    fits = {"contiguous": True, "interleaved": 3 * s_h <= m + 1 and 3 * s_w <= m,  # the round-robin's room
            "hw_alternating": n_rows == 3}  # three rows; s_w is set to s_h below
    assignment = draw(st.sampled_from([a for a in ASSIGNMENTS if a in variants and fits[a]] or ["contiguous"]))
    if assignment == "hw_alternating":
        s_h = s_w = min(s_h, (m - 1) // 2)  # h and w alternate: as many pairs each, t keeps at least one
    sections = [m - s_h - s_w - s_e, s_h, s_w] + ([s_e] if n_rows == 4 else [])
    layouts = supported_subset("rope_layouts", ("half", "interleaved"))
    if not layouts:
        pytest.skip(f"{IMPL_NAME} declares neither the half nor the interleaved layout")
    return {"rope_type": "default", "rope_theta": draw(st.sampled_from([1e4, 1e6])), "head_dim": 2 * m,
            "layout": draw(st.sampled_from(layouts)), "mrope_section": sections, **assignment_keys(assignment)}


def expected_axes(sections, assignment):
    """a(j) by docs/mrope.md#the-math: contiguous bands; the round-robin, h at j ≡ 1, w at j ≡ 2 (mod 3), the pairs
    it leaves reading t (three sections) or, with four, t at j ≡ 0 below 3·s_t and e elsewhere; hw_alternating,
    h at even and w at odd j below s_h + s_w, t after."""
    m = sum(sections)
    if assignment == "hw_alternating":
        return [1 + j % 2 if j < sections[1] + sections[2] else 0 for j in range(m)]
    if assignment != "interleaved":
        return [axis for axis, count in enumerate(sections) for _ in range(count)]
    rest = 3 if len(sections) == 4 else 0
    return [j % 3 if j < 3 * sections[j % 3] else rest for j in range(m)]


def _plain(rope):
    return {k: v for k, v in rope.items() if k not in ("mrope_section", "mrope_interleaved", "mrope_assignment")}


def _pairs(table, rope):
    """Per-pair values of a table (..., 2m) in the layout's channel order."""
    m = rope["head_dim"] // 2
    return table[..., :m] if rope["layout"] == "half" else table[..., 0::2]


@given(mrope_dicts(), sized_lists(POSITIONS, 1, 6))
def test_equal_axes_are_one_dimensional_rope(impl, rope, positions):
    cos_sin = require(impl, "rope_cos_sin")
    p = np.array(positions)
    inv, _ = frequencies_or_reference(impl, _plain(rope), None)  # for the tolerance only
    want = cos_sin(p, _plain(rope))
    for got in (cos_sin(np.stack([p] * len(rope["mrope_section"])), rope), cos_sin(p, rope)):
        for g, w in zip(got, want, strict=True):
            assert_close(g, w, impl, "phase", positions=p, inv_freq=inv, what="M-RoPE with t = h = w")


@given(mrope_dicts(), sized_lists(POSITIONS, 8, 8), st.lists(st.integers(0, 3000), min_size=4,
       max_size=4), st.data())
def test_logit_depends_only_on_the_shift_of_each_axis(impl, rope, eight, shift, data):
    apply = require(impl, "apply_rope")
    x = seeded(data.draw, (2, rope["head_dim"]))
    q, k = x[:1], x[1:]
    rows = len(rope["mrope_section"])
    pq, pk = np.array(eight[:rows])[:, None], np.array(eight[4:4 + rows])[:, None]
    delta = np.array(shift[:rows])[:, None]

    def logit(a, b):
        return float((apply(q, a, rope) @ apply(k, b, rope).T)[0, 0])

    inv, _ = frequencies_or_reference(impl, _plain(rope), None)  # for the tolerance only
    top = int(max(pq.max(), pk.max()) + delta.max())
    assert_close(np.array([logit(pq + delta, pk + delta)]), np.array([logit(pq, pk)]), impl, "phase",
                 positions=np.array([2 * top]), inv_freq=inv, magnitude=np.linalg.norm(q) * np.linalg.norm(k),
                 what="logit after shifting every axis of q and k alike")


@given(mrope_dicts(), sized_lists(POSITIONS, 3, 3), st.integers(1, 100))
def test_each_axis_moves_exactly_its_pairs(impl, rope, base, step):
    """Moving axis a alone changes the pairs a(j) = a and no other: the sections partition the pairs, in
    the order t, h, w and the documented assignment. A pair of another axis keeps its value bit for bit (the
    same angle in, the same value out); a pair of the axis must change wherever the change of its sin
    exceeds the declared dtype's tolerance (a slow pair moved by a few positions may round to the same
    bfloat16 or float16 value)."""
    cos_sin = require(impl, "rope_cos_sin")
    rows = len(rope["mrope_section"])
    start = np.array((base * 2)[:rows])[:, None]  # (rows, T=1)
    _, sin0 = cos_sin(start, rope)
    inv, a = frequencies_or_reference(impl, _plain(rope), None)
    axes = expected_axes(rope["mrope_section"], assignment_of(rope))
    for axis in range(rows):
        moved = start.copy()
        moved[axis] += step
        _, sin1 = cos_sin(moved, rope)
        changed = [j for j, (x, y) in enumerate(zip(_pairs(sin0, rope)[0], _pairs(sin1, rope)[0], strict=True))
                   if x != y]
        want = [j for j, ax in enumerate(axes) if ax == axis]
        exact = a * np.abs(np.sin(moved[axes, 0] * inv) - np.sin(start[axes, 0] * inv))  # (m,) |Δ sin|
        visible = exact > tolerance_array(impl, exact, "phase", positions=np.full(exact.shape, moved.max()),
                                          inv_freq=inv, magnitude=max(a, 1.0))
        must_move = [j for j in want if visible[j]]
        where = f"(sections {rope['mrope_section']}, assignment {assignment_of(rope)})"
        assert set(changed) <= set(want), f"moving axis {'thwe'[axis]} changed pairs {changed}, only {want} may {where}"
        still = sorted(set(must_move) - set(changed))
        assert not still, f"moving axis {'thwe'[axis]} left pairs {still} unchanged {where}"


def test_image_tokens_rotate_by_all_three_axes(impl):
    """Vectors: a 2 × 3 image grid after two text tokens (Qwen2-VL sections scaled down), φ_j = p_{a(j)} ω_j."""
    cos_sin = require(impl, "rope_cos_sin")
    rope = {"rope_type": "default", "rope_theta": 1e6, "head_dim": 16, "layout": "half",
            "mrope_section": [2, 3, 3], "mrope_interleaved": False}
    positions = np.array([[0, 1, 2, 2, 2, 2, 2, 2, 5], [0, 1, 2, 2, 2, 3, 3, 3, 5], [0, 1, 2, 3, 4, 2, 3, 4, 5]])
    inv, a = 1e6 ** -(np.arange(0, 16, 2) / 16), 1.0  # default RoPE: ω_j = θ^(−2j/d), A = 1
    angles = positions[expected_axes([2, 3, 3], "contiguous")].T * inv  # (T, m)
    cos, sin = cos_sin(positions, rope)
    assert_close(cos, a * np.cos(np.concatenate([angles, angles], axis=-1)), impl, "phase",
                 positions=positions.max(axis=0), inv_freq=inv, what="cos of image tokens")
    assert_close(sin, a * np.sin(np.concatenate([angles, angles], axis=-1)), impl, "phase",
                 positions=positions.max(axis=0), inv_freq=inv, what="sin of image tokens")


def test_a_fourth_row_reads_the_pairs_the_round_robin_leaves(impl):
    """ggml's rope_multi with Qwen3-VL's sections [24, 20, 20, 0] (interleaved, head size 128): pairs 61 and 62
    read the fourth row e; with e = t the rotation is the three-row one, with e = 0 (llama.cpp's image
    tokens) exactly those two pairs turn by 0."""
    cos_sin = require(impl, "rope_cos_sin")
    if "four_rows" not in (declared_list("mrope") or ()):
        pytest.skip(f"{IMPL_NAME} does not declare a fourth position row (INFO['mrope'] lacks 'four_rows')")
    three = {"rope_type": "default", "rope_theta": 5e6, "head_dim": 128, "layout": "half",
             "mrope_section": [24, 20, 20], "mrope_interleaved": True}
    four = {**three, "mrope_section": [24, 20, 20, 0]}
    thw = np.array([[7, 7], [3, 4], [5, 6]])  # (3, T): two patches of one frame
    _, sin3 = cos_sin(thw, three)
    _, sin_e_is_t = cos_sin(np.concatenate([thw, thw[:1]]), four)
    np.testing.assert_array_equal(sin_e_is_t, sin3)  # the same angles in: the same values out
    _, sin_e_zero = cos_sin(np.concatenate([thw, np.zeros((1, 2), dtype=np.int64)]), four)
    moved = [j for j in range(64) if np.any(_pairs(sin_e_zero, four)[:, j] != _pairs(sin3, three)[:, j])]
    assert moved == [61, 62], f"e = 0 moved pairs {moved}, expected [61, 62]"
    assert np.all(_pairs(sin_e_zero, four)[:, [61, 62]] == 0.0)  # sin(0·ω) = 0


# ------------------------------------------------------------------------------- position ids
def expected_ids(layout, family, merge, tokens_per_second):
    """docs/mrope.md#position-ids-of-a-multimodal-sequence, one token at a time."""
    rows, start = [], 0
    for item in layout:
        if item[0] == "text":
            rows += [(start + i,) * 3 for i in range(item[1])]
            start += item[1]
            continue
        g_t, g_h, g_w = item[1]
        spacing = tokens_per_second * item[2] if item[0] == "video" and family == "qwen2_5_vl" else 1.0
        frames = [1] * g_t if item[0] == "video" and family in ("qwen3_vl", "glm4v") else [g_t]
        for frames_t in frames:
            for i_t in range(frames_t):
                for i_h in range(g_h // merge):
                    for i_w in range(g_w // merge):
                        rows.append((start + math.floor(i_t * spacing), start + i_h, start + i_w))
            start += max(g_h, g_w) // merge
    return np.array(rows).T


@st.composite
def layouts(draw):
    items = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["text", "image", "video"]))
        if kind == "text":
            items.append(("text", draw(st.integers(1, 4))))
            continue
        grid = (draw(st.integers(1, 4)) if kind == "video" else 1, 2 * draw(st.integers(1, 3)),
                2 * draw(st.integers(1, 3)))
        items.append((kind, grid) if kind == "image" else (kind, grid, draw(st.sampled_from([0.5, 1.0, 1.5, 2.0]))))
    return items


@given(layouts(), st.sampled_from(["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "glm4v"]))
def test_position_ids_follow_the_layout_rule(impl, layout, family):
    ids = require(impl, "mrope_position_ids")
    tps = 2.0 if family == "qwen2_5_vl" else None
    got = ids(layout, family, 2, tps)
    np.testing.assert_array_equal(got, expected_ids(layout, family, 2, tps or 1.0))


def test_video_temporal_spacing(impl):
    """Qwen2.5-VL: temporal patches 1.5 s apart at 2 tokens per second are 3 position ids apart."""
    ids = require(impl, "mrope_position_ids")
    got = ids([("text", 2), ("video", (3, 2, 2), 1.5), ("text", 1)], "qwen2_5_vl", 2, 2.0)
    np.testing.assert_array_equal(got[0], [0, 1, 2, 5, 8, 3])
    np.testing.assert_array_equal(got[1:], [[0, 1, 2, 2, 2, 3]] * 2)


# ------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("sections", "positions"), [([3, 3, 3], np.zeros((3, 2), dtype=np.int64)),
                                                     ([2, 3, 3], np.zeros((2, 4), dtype=np.int64))])
def test_bad_sections_and_leading_axes_are_errors(impl, sections, positions):
    cos_sin = require(impl, "rope_cos_sin")
    rope = {"rope_type": "default", "rope_theta": 1e4, "head_dim": 16, "mrope_section": sections}
    with pytest.raises(ValueError):
        cos_sin(positions, rope)


def test_negative_grid_sizes_are_errors(impl):
    ids = require(impl, "mrope_position_ids")
    with pytest.raises(ValueError):
        ids([("text", 2), ("image", (1, -2, 4))], "qwen2_vl", 2, None)
