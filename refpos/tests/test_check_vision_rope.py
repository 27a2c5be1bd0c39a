"""``refpos check vision_rope`` (refpos.check.kinds.vision_rope, refpos.rope.vision_mistakes): the reference and a
float32 port of every form pass, at coordinates of several hundred too; each catalogued mistake fails and is named;
an output no mistake explains is said to be close to none; bad calls are unusable, naming the parameter; the
command exits 0 on the reference and 1 on a mistake, printing its id.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from refpos.check.kinds import BY_KIND, catalogue_id, check_kind
from refpos.check.shared.arrays import Unusable
from refpos.cli import main
from refpos.rope.vision import (
    VisionRope,
    dinov3_patch_positions,
    llama4_patch_positions,
    pixtral_patch_positions,
    sam3_patch_positions,
    vision_frequencies,
    vision_place_pairs,
    vision_split_pairs,
)
from refpos.rope.vision_mistakes import VISION_ROPE_MISTAKES, VisionRopeInputs, rotate
from refpos.tests.kind_checks import call_file

CHECK = BY_KIND["vision_rope"]
FUNCTION = "apply_vision_rope"


def port32(x: np.ndarray, positions: np.ndarray, rope: VisionRope) -> np.ndarray:
    """A correct port computing in float32 throughout, as transformers' towers do: ``ω = 1/θ^e`` (the exponent
    and the power in float32), ``φ = p·ω``, cos and sin, then ``u cos φ − v sin φ``, ``v cos φ + u sin φ``."""
    axes, omega = vision_frequencies(rope)
    exponent = (-np.log(omega / omega[0]) / np.log(rope.theta)).astype(np.float32) if rope.theta != 1.0 \
        else np.zeros_like(omega, dtype=np.float32)
    scale = np.float32(omega[0])  # 1, or DINOv3's 2π
    omega32 = scale * (np.float32(1.0) / np.power(np.float32(rope.theta), exponent))  # float32 ops only
    angles = np.asarray(positions)[..., list(axes)].astype(np.float32) * omega32  # (..., N, D/2) float32
    cos, sin = np.cos(angles), np.sin(angles)
    u, v = vision_split_pairs(np.asarray(x, dtype=np.float32), rope)
    return np.asarray(vision_place_pairs(u * cos - v * sin, v * cos + u * sin, rope))


def _rope_dict(rope: VisionRope) -> dict:
    out = {"form": rope.kind, "head_dim": rope.head_dim, "rope_theta": rope.theta}
    if rope.kind == "axial":
        out |= {"sections": list(rope.sections), "layout": rope.axial_layout}
    return out


#: (rope, positions): every form, coordinates from 0 to several hundred (DINOv3: centres in [−1, 1], and past
#: them), θ from 100 to 10⁶
PORTS = [
    (VisionRope("qwen2_vl", 80), pixtral_patch_positions(6, 9)),
    (VisionRope("qwen2_vl", 80), pixtral_patch_positions(4, 5) + np.array([500, 380])),
    (VisionRope("pixtral", 64, theta=10000.0), pixtral_patch_positions(5, 7) + np.array([300, 250])),
    (VisionRope("llama4", 88), llama4_patch_positions(24)),
    (VisionRope("llama4", 88, theta=1e6), llama4_patch_positions(5) * 90),
    (VisionRope("axial", 64, theta=100.0, sections=(16, 16), axial_layout="interleaved"),
     pixtral_patch_positions(4, 4) * 120),
    (VisionRope("mlcd", 80), pixtral_patch_positions(6, 9) * 40),
    (VisionRope("dinov3", 64, theta=100.0), dinov3_patch_positions(14, 14, prefix=5)),
    (VisionRope("dinov3", 64, theta=100.0), dinov3_patch_positions(7, 9) * 60),
    (VisionRope("gemma4", 64, theta=100.0), pixtral_patch_positions(6, 9) * 40),
    (VisionRope("sam3", 64), sam3_patch_positions(24, 24)),
    (VisionRope("sam3", 64), sam3_patch_positions(72, 72, 24 / 72)),
    (VisionRope("step3p7", 64, theta=10000.0), pixtral_patch_positions(6, 9) * 40),
    (VisionRope("kimi_k25", 72, theta=10000.0), pixtral_patch_positions(5, 7) + np.array([300, 250])),
    (VisionRope("axial", 48, sections=(8, 8, 8)), np.stack(np.meshgrid(np.arange(3), np.arange(4) * 100,
                                                                       np.arange(5) * 90, indexing="ij"),
                                                           axis=-1).reshape(-1, 3)),
]


def _call(rope: VisionRope, positions: np.ndarray, seed: int = 0, scale: float = 1.0) -> dict:
    x = scale * np.random.default_rng(seed).standard_normal((len(positions), rope.head_dim))
    return {"x": x, "positions": np.asarray(positions), "rope": _rope_dict(rope)}


def test_the_reference_and_its_float32_storage_pass():
    for function, arguments in CHECK.examples():
        reference, _ = CHECK.reference(CHECK.inputs(function, arguments))
        for candidate in (reference, reference.astype(np.float32)):
            result = check_kind("vision_rope", function, arguments, candidate)
            assert result["ok"] and result["diagnosis"] == [], arguments["rope"]


@pytest.mark.parametrize(("rope", "positions"), PORTS, ids=lambda v: getattr(v, "kind", ""))
def test_a_float32_port_passes_at_large_coordinates(rope, positions):
    """A port computing in float32 is within the bound at every entry, the largest coordinate 500; its error is a
    sizeable part of the bound (the bound is not loose by orders of magnitude)."""
    worst = 0.0
    for seed, scale in ((0, 1.0), (1, 30.0)):
        call = _call(rope, positions, seed, scale)
        candidate = port32(call["x"], call["positions"], rope)
        result = check_kind("vision_rope", FUNCTION, call, candidate)
        assert result["ok"] and result["dtype"] == "float32", (rope, result["max_ratio"])
        worst = max(worst, result["max_ratio"])
    assert 1e-4 < worst < 1.0, worst


def test_the_bound_grows_with_the_coordinates_and_with_x():
    rope = VisionRope("qwen2_vl", 32)
    x = np.random.default_rng(0).standard_normal((4, 32))
    near = VisionRopeInputs(x, pixtral_patch_positions(2, 2), rope).bound()
    far = VisionRopeInputs(x, pixtral_patch_positions(2, 2) + 400, rope).bound()
    assert np.all(far > 50 * near[0])
    np.testing.assert_allclose(VisionRopeInputs(10 * x, pixtral_patch_positions(2, 2), rope).bound(), 10 * near)


@pytest.mark.parametrize("example", range(len(CHECK.examples())))
def test_each_mistake_fails_and_is_named(example):
    function, arguments = CHECK.examples()[example]
    inputs = CHECK.inputs(function, arguments)
    shown = 0
    for name in CHECK.mistakes:
        wrong = CHECK.wrong(inputs, name)
        if wrong is None:
            continue
        result = check_kind("vision_rope", function, arguments, wrong)
        assert not result["ok"], name
        assert [d["id"] for d in result["diagnosis"]] == [catalogue_id("vision_rope", name)], (name, result)
        # a float32 port making the mistake is named too
        assert CHECK.identify(wrong.astype(np.float32).astype(np.float64), inputs) == name
        shown += 1
    assert shown >= 5


def test_the_examples_show_every_mistake():
    shown = {name for function, arguments in CHECK.examples() for name in CHECK.mistakes
             if CHECK.wrong(CHECK.inputs(function, arguments), name) is not None}
    assert shown == {m.name for m in VISION_ROPE_MISTAKES}


def test_a_mistake_s_computation_is_the_one_it_names():
    """The reversed rotation undoes the rotation; the other layout of an interleaved form is the half form's
    rotation of the same pairs; Pixtral's frequencies in Qwen2-VL's order are Pixtral's rotation."""
    rope = VisionRope("llama4", 16)
    positions = llama4_patch_positions(3)
    x = np.random.default_rng(3).standard_normal((len(positions), 16))
    turned, _ = rotate(x, positions, rope)
    back, _ = rotate(turned, positions, rope, reverse=True)
    np.testing.assert_allclose(back, x, atol=1e-13)
    qwen = VisionRope("qwen2_vl", 16)
    as_half, _ = rotate(x, positions[:, ::-1], rope, layout="half")  # Llama 4 = Qwen2-VL in (w, h), interleaved
    direct, _ = rotate(x, positions, qwen)
    np.testing.assert_allclose(as_half, direct, atol=1e-13)
    inputs = VisionRopeInputs(x, positions, qwen)
    wrong = CHECK.wrong(inputs, "frequencies_of_head_d")
    np.testing.assert_allclose(wrong, rotate(x, positions, VisionRope("pixtral", 16))[0], atol=1e-13)


@pytest.mark.parametrize(("rope", "positions", "names"), [
    (VisionRope("gemma4", 32, theta=100.0), pixtral_patch_positions(4, 6),
     ("layout_swapped", "axes_swapped", "direction_reversed", "positions_from_one", "theta_default")),
    (VisionRope("sam3", 32), sam3_patch_positions(9, 9, 4 / 9),
     ("layout_swapped", "axes_swapped", "direction_reversed", "positions_from_one")),
    (VisionRope("step3p7", 32, theta=100.0), pixtral_patch_positions(4, 6),
     ("layout_swapped", "axes_swapped", "direction_reversed", "positions_from_one", "theta_default")),
    (VisionRope("kimi_k25", 32, theta=100.0), pixtral_patch_positions(4, 6),
     ("layout_swapped", "axes_swapped", "direction_reversed", "positions_from_one", "theta_default")),
], ids=["gemma4", "sam3-global", "step3p7", "kimi_k25"])
def test_the_forms_beyond_the_contract_name_their_mistakes(rope, positions, names):
    """Gemma 4's layout mistake is its two per-axis spans read as one half-layout head; SAM 3's scaled real
    coordinates, Step 3.5's column-first and Kimi K2.5's alternating pairs take the catalogue as the other forms
    do."""
    call = _call(rope, positions, 2, 3.0)
    inputs = CHECK.inputs(FUNCTION, call)
    for name in names:
        wrong = CHECK.wrong(inputs, name)
        result = check_kind("vision_rope", FUNCTION, call, wrong)
        assert [d["id"] for d in result["diagnosis"]] == [catalogue_id("vision_rope", name)], (name, result)
    if rope.kind == "gemma4":  # the whole head in the half layout: Qwen2-VL's pairs with the column first
        as_head = rotate(call["x"], positions[:, ::-1], VisionRope("qwen2_vl", 32, theta=100.0))[0]
        np.testing.assert_allclose(CHECK.wrong(inputs, "layout_swapped"), as_head, atol=1e-12)
    if rope.kind == "step3p7":  # Qwen2-VL's rotation with the row and column exchanged
        np.testing.assert_allclose(rotate(call["x"], positions, rope)[0], rotate(
            call["x"], positions[:, ::-1], VisionRope("qwen2_vl", 32, theta=100.0))[0], atol=1e-12)


def test_an_output_no_mistake_explains_is_close_to_none():
    function, arguments = CHECK.examples()[0]
    reference, _ = CHECK.reference(CHECK.inputs(function, arguments))
    noisy = reference + 1e-3 * np.random.default_rng(0).standard_normal(reference.shape)
    for candidate in (reference + 0.25, noisy, np.zeros_like(reference)):
        result = check_kind("vision_rope", function, arguments, candidate)
        assert not result["ok"]
        assert [d["id"] for d in result["diagnosis"]] == ["closest_mistake"]


@pytest.mark.parametrize(("change", "message"), [
    ({"rope": {"form": "qwen2_vl", "head_dim": 32, "rope_theta": 10000.0, "mrope_section": [1]}},
     "unknown vision rope keys"),
    ({"rope": ["qwen2_vl", 32]}, "rope must be a dict"),
    ({"rope": {"form": "qwen3_vl", "head_dim": 32}}, "kind must be one of"),
    ({"rope": {"form": "qwen2_vl", "head_dim": 30}}, "head_dim"),
    ({"rope": {"form": "qwen2_vl", "head_dim": 32, "layout": "half"}}, "sections and layout are the axial"),
    ({"rope": {"form": "qwen2_vl", "head_dim": 32, "rope_theta": -1.0}}, "theta"),
    ({"rope": {"form": "axial", "head_dim": 32, "sections": [4, 4]}}, "sections"),
    ({"x": np.zeros((24, 30))}, "x must have shape"),
    ({"x": np.full((24, 32), np.nan)}, "x must be finite"),
    ({"positions": np.zeros((24, 2))}, "positions"),
    ({"positions": -np.ones((24, 2), dtype=np.int64)}, "positions"),
    ({"positions": np.zeros((23, 2), dtype=np.int64)}, "positions"),
    ({"positions": np.zeros((24, 3), dtype=np.int64)}, "positions"),
])
def test_bad_calls_are_unusable_naming_the_parameter(change, message):
    function, arguments = CHECK.examples()[0]
    reference, _ = CHECK.reference(CHECK.inputs(function, arguments))
    with pytest.raises(Unusable, match=message):
        check_kind("vision_rope", function, {**arguments, **change}, reference)


def test_the_call_reads_the_rope_dict_as_the_reference_adapter_does():
    from refpos.check.kinds.vision_rope import ROPE_FIELDS, vision_rope_of
    from refpos.testing import adapter_layers

    assert tuple(ROPE_FIELDS) == adapter_layers.VISION_KEYS
    rope = {"form": "axial", "head_dim": 24, "rope_theta": 500.0, "sections": [4, 8], "layout": None}
    assert vision_rope_of(rope) == VisionRope("axial", 24, theta=500.0, sections=(4, 8), axial_layout="half")
    assert vision_rope_of({"form": "pixtral", "head_dim": 16}) == VisionRope("pixtral", 16)


def test_bad_candidates_and_functions_are_unusable():
    function, arguments = CHECK.examples()[0]
    reference, _ = CHECK.reference(CHECK.inputs(function, arguments))
    with pytest.raises(Unusable, match="float16"):
        check_kind("vision_rope", function, arguments, reference.astype(np.float16))
    with pytest.raises(Unusable, match="takes a call of apply_vision_rope"):
        check_kind("vision_rope", "apply_rope", arguments, reference)
    with pytest.raises(Unusable, match="unexpected keyword argument 'theta'"):
        check_kind("vision_rope", function, {**arguments, "theta": 1.0}, reference)
    with pytest.raises(Unusable, match="shape"):
        check_kind("vision_rope", function, arguments, reference[:, :-2])


@pytest.mark.parametrize(("form", "name"), [("llama4", "cls_rotated"), ("llama4", "layout_swapped"),
                                            ("dinov3", "prefix_misaligned")])
def test_the_command_passes_a_port_and_names_a_mistake(form, name, tmp_path, capsys):
    function, arguments = next((f, a) for f, a in CHECK.examples() if a["rope"]["form"] == form)
    inputs = CHECK.inputs(function, arguments)
    call = call_file(tmp_path, FUNCTION, arguments)
    np.save(tmp_path / "port.npy", port32(inputs.x, inputs.positions, inputs.rope))
    np.save(tmp_path / "wrong.npy", CHECK.wrong(inputs, name))
    assert main(["check", "vision_rope", "--call", str(call), "--candidate", str(tmp_path / "port.npy")]) == 0
    assert "refpos check vision_rope: OK (float32)" in capsys.readouterr().out
    assert main(["check", "vision_rope", "--call", str(call), "--candidate", str(tmp_path / "wrong.npy")]) == 1
    assert f"diagnosis vision_rope_{name}: " in capsys.readouterr().out
    assert main(["check", "vision_rope", "--call", str(call), "--candidate", str(tmp_path / "wrong.npy"),
                 "--json"]) == 1
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["diagnosis"]] == [f"vision_rope_{name}"]
