"""Spec: the RoPE of vision encoders, 2-D and 3-D (``apply_vision_rope``; docs/mrope.md#vision-encoders-2-d-axial-rope).

A patch at coordinates ``p = (p_0, …, p_{n−1})`` has pair ``j`` turned by ``φ_j = p_{a(j)}·ω_j``: each pair
reads one coordinate. The forms differ in ``a(j)``, ``ω_j`` and the layout (written out here from the docs,
independently of refpos; ``D`` the head size, ``q = D/4``, ``j' = j mod q``, ``b = [j ≥ q]``):

* ``qwen2_vl`` (Qwen2-VL / 2.5-VL / 3-VL and GLM-4.1V towers): ``a = b``, ``ω = θ^(−4j'/D)``, half layout;
* ``pixtral``: ``a = b``, ``ω = θ^(−2(2j' + b)/D)``, half layout;
* ``llama4``: ``a = 1 − b``, ``ω = θ^(−4j'/D)``, interleaved layout;
* ``axial`` (rotary-embedding-torch's axial frequencies, timm, 3-D video RoPE): one block of ``s_a`` pairs per
  axis, pair ``k`` of block ``a`` at ``ω = θ^(−k/s_a)``, half or interleaved layout.

Properties: the logit depends only on the coordinate differences; moving one coordinate changes exactly
the pairs of its axis; the norm is kept and the origin is the identity; a unit vector in pair ``j`` at
coordinate ``e_a`` turns by ``ω_j`` exactly when ``a(j) = a`` (the frequency probe). Tolerances: the
phase rule of ``support.assert_close`` at the largest coordinate (every ``ω ≤ 1``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rope_support import seeded
from support import IMPL_NAME, assert_close, declared_list, require

FORMS = ("qwen2_vl", "pixtral", "llama4", "axial")
COORDINATES = st.integers(0, 2000)


def declared_forms() -> tuple[str, ...]:
    forms = declared_list("vision_forms")
    forms = FORMS if forms is None else forms
    if not forms:
        pytest.skip(f"{IMPL_NAME} declares INFO['vision_forms'] = []: no vision RoPE")
    return forms


@st.composite
def vision_dicts(draw, forms: tuple[str, ...] = FORMS) -> dict:
    """A vision rope dict of a declared form: head size a multiple of 4 (named forms) or sections of 2 or 3
    axes (axial)."""
    kept = [f for f in forms if f in declared_forms()]
    if not kept:
        pytest.skip(f"needs one of {forms} in INFO['vision_forms']; {IMPL_NAME} declares {list(declared_forms())}")
    form = draw(st.sampled_from(kept))
    theta = draw(st.sampled_from([100.0, 1e4, 1e5]))
    if form != "axial":
        return {"form": form, "head_dim": 4 * draw(st.integers(1, 16)), "rope_theta": theta}
    sections = draw(st.lists(st.integers(1, 8), min_size=2, max_size=3))
    return {"form": "axial", "head_dim": 2 * sum(sections), "rope_theta": theta, "sections": sections,
            "layout": draw(st.sampled_from(["half", "interleaved"]))}


def axes_and_frequencies(rope: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(a(j), ω_j)`` of a vision rope dict, from the module docstring's table."""
    d, theta = rope["head_dim"], rope["rope_theta"]
    if rope["form"] == "axial":
        axes = np.concatenate([np.full(s, a) for a, s in enumerate(rope["sections"])])
        k = np.concatenate([np.arange(s) for s in rope["sections"]])
        size = np.concatenate([np.full(s, s) for s in rope["sections"]])
        return axes, theta ** (-k / size)
    q = d // 4
    j = np.arange(2 * q)
    b, j_in = (j >= q).astype(int), j % q
    omega = theta ** (-2.0 * (2 * j_in + b) / d) if rope["form"] == "pixtral" else theta ** (-4.0 * j_in / d)
    return (1 - b if rope["form"] == "llama4" else b), omega


def n_axes(rope: dict) -> int:
    return len(rope["sections"]) if rope["form"] == "axial" else 2


def layout_of(rope: dict) -> str:
    return rope.get("layout") or {"llama4": "interleaved"}.get(rope["form"], "half")


def pair_channels(rope: dict) -> tuple[np.ndarray, np.ndarray]:
    """The channels ``(u_j, v_j)`` of every pair in the form's layout."""
    m = rope["head_dim"] // 2
    if layout_of(rope) == "half":
        return np.arange(m), np.arange(m) + m
    return 2 * np.arange(m), 2 * np.arange(m) + 1


@st.composite
def coordinates(draw, rope: dict, count: int) -> np.ndarray:
    return np.array(draw(st.lists(st.lists(COORDINATES, min_size=n_axes(rope), max_size=n_axes(rope)),
                                  min_size=count, max_size=count)))


@given(vision_dicts(), st.data())
def test_the_logit_depends_only_on_the_coordinate_differences(impl, rope, data):
    rotate = require(impl, "apply_vision_rope")
    x = seeded(data.draw, (2, rope["head_dim"]))
    pq, pk = data.draw(coordinates(rope, 1)), data.draw(coordinates(rope, 1))
    shift = data.draw(coordinates(rope, 1))

    def logit(a, b):
        return float((rotate(x[:1], a, rope) @ rotate(x[1:], b, rope).T)[0, 0])

    top = int((np.maximum(pq, pk) + shift).max())
    _, omega = axes_and_frequencies(rope)
    assert_close(np.array([logit(pq + shift, pk + shift)]), np.array([logit(pq, pk)]), impl, "phase",
                 positions=np.array([2 * top]), inv_freq=omega,
                 magnitude=np.linalg.norm(x[0]) * np.linalg.norm(x[1]), what="logit after a shift of every coordinate")


@given(vision_dicts(), st.data())
def test_the_norm_is_kept_and_the_origin_is_the_identity(impl, rope, data):
    rotate = require(impl, "apply_vision_rope")
    x = seeded(data.draw, (3, rope["head_dim"]))
    p = data.draw(coordinates(rope, 3))
    y = rotate(x, p, rope)
    _, omega = axes_and_frequencies(rope)
    assert_close(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), impl, "phase", positions=p.max(axis=-1),
                 inv_freq=omega, magnitude=float(np.linalg.norm(x, axis=-1).max()), what="norms")
    assert_close(rotate(x, np.zeros_like(p), rope), x, impl, "phase", positions=np.zeros(3, dtype=np.int64),
                 magnitude=2 * np.abs(x).max(), what="rotation at the origin")


@given(vision_dicts(), st.data())
def test_each_coordinate_moves_exactly_its_pairs(impl, rope, data):
    """Moving coordinate a alone changes the pairs with a(j) = a and no other (bit for bit: the same angle in,
    the same value out)."""
    rotate = require(impl, "apply_vision_rope")
    x = seeded(data.draw, (1, rope["head_dim"]))
    start = data.draw(coordinates(rope, 1))
    axes, _ = axes_and_frequencies(rope)
    u, v = pair_channels(rope)
    y0 = rotate(x, start, rope)
    for axis in range(n_axes(rope)):
        moved = start.copy()
        moved[0, axis] += data.draw(st.integers(1, 50))
        y1 = rotate(x, moved, rope)
        changed = sorted({int(j) for j in np.nonzero((y0[0, u] != y1[0, u]) | (y0[0, v] != y1[0, v]))[0]})
        allowed = [int(j) for j in np.nonzero(axes == axis)[0]]
        assert set(changed) <= set(allowed), f"moving coordinate {axis} changed pairs {changed}, only {allowed} may"
        assert changed, f"moving coordinate {axis} changed nothing (its pairs: {allowed})"


@given(vision_dicts())
def test_the_frequency_probe_recovers_each_forms_frequencies_and_axes(impl, rope):
    """A unit vector in each pair's first channel at coordinate e_a (1 on axis a, 0 elsewhere) turns by ω_j when
    pair j reads axis a, and not at all otherwise: atan2 reads the form's a(j) and ω_j (all ω ≤ 1 < π)."""
    rotate = require(impl, "apply_vision_rope")
    axes, omega = axes_and_frequencies(rope)
    u, v = pair_channels(rope)
    m = rope["head_dim"] // 2
    probes = np.zeros((m, rope["head_dim"]))
    probes[np.arange(m), u] = 1.0
    for axis in range(n_axes(rope)):
        at = np.zeros((m, n_axes(rope)), dtype=np.int64)
        at[:, axis] = 1
        y = rotate(probes, at, rope)
        angles = np.arctan2(y[np.arange(m), v], y[np.arange(m), u])
        assert_close(angles, np.where(axes == axis, omega, 0.0), impl, "phase", positions=np.ones(m, dtype=np.int64),
                     inv_freq=omega, what=f"angle of each pair at coordinate e_{axis}")


@given(st.integers(1, 16), st.sampled_from([100.0, 1e4]), st.data())
def test_the_named_forms_are_axial_blocks(impl, quarter, theta, data):
    """Qwen2-VL's tower is the axial form with sections (D/4, D/4), half layout; Llama 4's is the same in the
    interleaved layout with the coordinates in the order (w, h)."""
    rotate = require(impl, "apply_vision_rope")
    d = 4 * quarter
    needed = {"qwen2_vl", "llama4", "axial"}
    if not needed <= set(declared_forms()):
        pytest.skip(f"needs {sorted(needed)} in INFO['vision_forms']")
    x = seeded(data.draw, (3, d))
    p = np.array(data.draw(st.lists(st.lists(COORDINATES, min_size=2, max_size=2), min_size=3, max_size=3)))
    axial = {"form": "axial", "head_dim": d, "rope_theta": theta, "sections": [quarter, quarter]}
    rule = {"positions": p.max(axis=-1), "inv_freq": np.array([1.0]), "magnitude": 2 * np.abs(x).max()}
    assert_close(rotate(x, p, {"form": "qwen2_vl", "head_dim": d, "rope_theta": theta}),
                 rotate(x, p, {**axial, "layout": "half"}), impl, "phase", what="qwen2_vl vs axial", **rule)
    assert_close(rotate(x, p, {"form": "llama4", "head_dim": d, "rope_theta": theta}),
                 rotate(x, p[:, ::-1], {**axial, "layout": "interleaved"}), impl, "phase", what="llama4 vs axial",
                 **rule)


BAD = [
    pytest.param({"form": "qwen2_vl", "head_dim": 6, "rope_theta": 1e4}, np.zeros((1, 2), np.int64), ValueError,
                 id="head_dim-6-not-a-multiple-of-4-ValueError"),
    pytest.param({"form": "axial", "head_dim": 8, "rope_theta": 1e4, "sections": [2, 1], "layout": "half"},
                 np.zeros((1, 2), np.int64), ValueError, id="sections-not-summing-to-D/2-ValueError"),
    pytest.param({"form": "pixtral", "head_dim": 8, "rope_theta": 1e4}, np.zeros((1, 3), np.int64), ValueError,
                 id="three-coordinates-for-a-2-D-form-ValueError"),
    pytest.param({"form": "pixtral", "head_dim": 8, "rope_theta": 1e4}, np.array([[0, -1]]), ValueError,
                 id="negative-coordinate-ValueError"),
    pytest.param({"form": "pixtral", "head_dim": 8, "rope_theta": 1e4}, np.array([[0.0, 1.0]]), TypeError,
                 id="float-coordinates-TypeError"),
    pytest.param({"form": "rope2d", "head_dim": 8, "rope_theta": 1e4}, np.zeros((1, 2), np.int64), ValueError,
                 id="unknown-form-ValueError"),
]


NAMED_2D = ("qwen2_vl", "pixtral", "llama4")  # two coordinates, head size a multiple of 4: one bad input fits all


@pytest.mark.parametrize(("rope", "positions", "error"), BAD)
def test_bad_vision_input_is_rejected(impl, rope, positions, error):
    """Bad input is an error in any form: a case of an undeclared named form runs in a declared one."""
    rotate = require(impl, "apply_vision_rope")
    if rope["form"] in FORMS and rope["form"] not in declared_forms():
        named = [f for f in NAMED_2D if f in declared_forms()]
        if rope["form"] not in NAMED_2D or not named:
            pytest.skip(f"{IMPL_NAME} does not declare the {rope['form']} form")
        rope = {**rope, "form": named[0]}
    with pytest.raises(error):
        rotate(np.ones((positions.shape[0], rope["head_dim"])), positions, rope)
