"""``refpos check vision_rope`` on refpos's own calls: the 3-D forms (``apply_vision3d_rope``: MiniMax-M3-VL's tower,
V-JEPA 2) and learned class angles (``apply_vision_rope_prefixed``: MLCD, LLaVA-OneVision-1.5). A float32 port
written from the math passes at frames, rows and columns of several hundred; every mistake of those calls is named,
from a float32 output too; an output no mistake explains is close to none; bad calls are unusable naming the
parameter (exit 2, one line); ``--config`` fills the rope dict from a tower's layer; ``refpos golden model`` writes
the towers' cases, which verify and name a mistake.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import refpos
from refpos.check.kinds import BY_KIND, catalogue_id, check_kind
from refpos.check.shared.arrays import Unusable
from refpos.cli import main
from refpos.rope.vision import pixtral_patch_positions
from refpos.rope.vision3d import thw_patch_positions, vjepa2_patch_positions
from refpos.tests.kind_checks import call_file

CHECK = BY_KIND["vision_rope"]
OWN = ("apply_vision3d_rope", "apply_vision_rope_prefixed")
#: the mistakes only refpos's own calls show
NEW = {"class_angles_dropped", "class_angles_after_patches", "frame_ignored", "frame_row_swapped", "frame_last",
       "frequencies_of_whole_head", "axis_blocks_split", "pair_angles_interleaved"}


def _omega32(theta: float, n: int) -> np.ndarray:
    """``ω_k = 1/θ^(k/n)``, the exponent and the power in float32 (transformers' towers)."""
    exponent = (np.arange(n, dtype=np.float32) / np.float32(n)).astype(np.float32)
    return np.float32(1.0) / np.power(np.float32(theta), exponent)


def port3d_32(x: np.ndarray, positions: np.ndarray, form: str, head_dim: int, theta: float) -> np.ndarray:
    """A float32 port of a 3-D form, from the math of docs/mrope.md: ``d = 2⌊⌊D/3⌋/2⌋``, ``n = d/2``; MiniMax-M3-VL
    pairs channels ``(j, j + 3n)`` turned by ``p_{⌊j/n⌋}·ω_{j mod n}``; V-JEPA 2 turns channel ``c`` of block ``b``
    by ``α_c = p_b·ω_{c mod n}``, ``y_2k = x_2k cos α_2k − x_2k+1 sin α_2k``,
    ``y_2k+1 = x_2k+1 cos α_2k+1 + x_2k sin α_2k+1``; the channels after ``3d`` pass through."""
    d = 2 * ((head_dim // 3) // 2)
    n = d // 2
    x = np.asarray(x, dtype=np.float32)
    p = np.asarray(positions).astype(np.float32)
    omega = _omega32(theta, n)
    out = x.copy()
    if form == "minimax_m3_vl":
        phi = np.concatenate([p[:, a:a + 1] * omega for a in range(3)], axis=-1)  # (N, 3n) float32
        u, v = x[:, :3 * n], x[:, 3 * n:6 * n]
        out[:, :3 * n] = u * np.cos(phi) - v * np.sin(phi)
        out[:, 3 * n:6 * n] = v * np.cos(phi) + u * np.sin(phi)
        return out
    for b in range(3):
        alpha = p[:, b:b + 1] * np.concatenate([omega, omega])  # (N, d): α_c = p_b ω_{c mod n}
        block = x[:, b * d:(b + 1) * d]
        even, odd = block[:, 0::2], block[:, 1::2]
        out[:, b * d:(b + 1) * d:2] = even * np.cos(alpha[:, 0::2]) - odd * np.sin(alpha[:, 0::2])
        out[:, b * d + 1:(b + 1) * d:2] = odd * np.cos(alpha[:, 1::2]) + even * np.sin(alpha[:, 1::2])
    return out


def prefixed_32(x: np.ndarray, positions: np.ndarray, head_dim: int, theta: float, angles: np.ndarray) -> np.ndarray:
    """A float32 port of MLCD's tower: Qwen2-VL's frequencies ``θ^(−k/(D/4))`` per axis, pairs ``(j, j + D/2)``, the
    first ``j < D/4`` reading the row; the class token(s) first, turned by their learned angles stored in float32."""
    q = head_dim // 4
    omega = _omega32(theta, q)
    p = np.asarray(positions).astype(np.float32)
    phi = np.concatenate([p[:, :1] * omega, p[:, 1:2] * omega], axis=-1)  # (N, D/2)
    phi = np.concatenate([np.asarray(angles, dtype=np.float32), phi])
    x = np.asarray(x, dtype=np.float32)
    u, v = x[:, :2 * q], x[:, 2 * q:]
    return np.concatenate([u * np.cos(phi) - v * np.sin(phi), v * np.cos(phi) + u * np.sin(phi)], axis=-1)


def _clip(frames: int, rows: int, cols: int) -> np.ndarray:
    return np.stack(np.meshgrid(np.arange(frames), np.arange(rows), np.arange(cols), indexing="ij"),
                    axis=-1).reshape(-1, 3)


#: (form, head size, θ, positions): merge blocks and V-JEPA 2's index order; frames, rows and columns to several
#: hundred; a head with channels passed through (D = 26, 80), one without (D = 48)
PORTS_3D = [
    ("minimax_m3_vl", 80, 10000.0, thw_patch_positions([(3, 6, 8)])),
    ("minimax_m3_vl", 26, 1000.0, _clip(3, 4, 5) * np.array([30, 120, 100])),
    ("minimax_m3_vl", 48, 1e6, _clip(2, 3, 3) * np.array([200, 250, 170])),
    ("vjepa2", 48, 10000.0, vjepa2_patch_positions(np.arange(64), 4)),
    ("vjepa2", 26, 10000.0, _clip(3, 4, 5) * np.array([30, 120, 100])),
    ("vjepa2", 80, 10000.0, _clip(2, 3, 3) * np.array([200, 250, 170])),
]


@pytest.mark.parametrize(("form", "head_dim", "theta", "positions"), PORTS_3D,
                         ids=[f"{f}-{d}-{i}" for i, (f, d, _, _) in enumerate(PORTS_3D)])
def test_a_float32_3d_port_passes_at_large_coordinates(form, head_dim, theta, positions):
    """Within the bound at every entry and named nothing; its error a sizeable part of the bound."""
    worst = 0.0
    for seed, scale in ((0, 1.0), (1, 30.0)):
        x = scale * np.random.default_rng(seed).standard_normal((len(positions), head_dim))
        call = {"x": x, "positions": positions, "rope": {"form": form, "head_dim": head_dim, "rope_theta": theta}}
        result = check_kind("vision_rope", "apply_vision3d_rope", call, port3d_32(x, positions, form, head_dim, theta))
        assert result["ok"] and result["dtype"] == "float32", result["max_ratio"]
        worst = max(worst, result["max_ratio"])
    assert 1e-4 < worst < 1.0, worst


@pytest.mark.parametrize("scale", [1.0, 40.0])
def test_a_float32_port_with_learned_class_angles_passes(scale):
    positions = pixtral_patch_positions(6, 9) * scale
    rng = np.random.default_rng(3)
    angles = rng.uniform(-np.pi, np.pi, (1, 40))
    x = rng.standard_normal((1 + len(positions), 80))
    call = {"x": x, "positions": positions.astype(np.int64), "rope": {"form": "mlcd", "head_dim": 80,
                                                                      "rope_theta": 10000.0}, "prefix_angles": angles}
    result = check_kind("vision_rope", "apply_vision_rope_prefixed", call,
                        prefixed_32(x, positions, 80, 10000.0, angles))
    assert result["ok"] and result["dtype"] == "float32" and 1e-4 < result["max_ratio"] < 1.0, result["max_ratio"]


def _own_examples() -> list[tuple[str, dict]]:
    return [(f, a) for f, a in CHECK.examples() if f in OWN]


def test_the_own_calls_show_every_new_mistake_and_name_each_far_outside_the_bound():
    """Each mistake the calls can show fails by at least 10⁴ bounds somewhere and is named, from its float32 output
    too; together they show every mistake of NEW."""
    shown = set()
    for function, arguments in _own_examples():
        inputs = CHECK.inputs(function, arguments)
        reference, bound = CHECK.reference(inputs)
        for name in CHECK.mistakes:
            wrong = CHECK.wrong(inputs, name)
            if wrong is None:
                continue
            assert np.max(np.abs(wrong - reference) / bound) > 1e4, (function, name)
            result = check_kind("vision_rope", function, arguments, wrong)
            assert [d["id"] for d in result["diagnosis"]] == [catalogue_id("vision_rope", name)], (name, result)
            assert CHECK.identify(wrong.astype(np.float32).astype(np.float64), inputs) == name
            shown.add(name)
    assert NEW <= shown, NEW - shown
    assert {"axes_swapped", "layout_swapped", "direction_reversed", "positions_from_one", "theta_default"} <= shown


def test_a_mistake_s_computation_is_the_one_it_names():
    """By hand: MiniMax-M3-VL's frame_ignored is the transform at (0, h, w); V-JEPA 2's pair_angles_interleaved turns
    each adjacent pair by one angle (a rotation: it keeps the pair's norm); the class angles placed after the
    patches turn the class token by the first patch's angles."""
    function, arguments = next((f, a) for f, a in _own_examples() if a["rope"]["form"] == "minimax_m3_vl")
    inputs = CHECK.inputs(function, arguments)
    flat = arguments["positions"].copy()
    flat[:, 0] = 0
    np.testing.assert_allclose(CHECK.wrong(inputs, "frame_ignored"),
                               CHECK.inputs(function, {**arguments, "positions": flat}).output(), atol=1e-13)
    function, arguments = next((f, a) for f, a in _own_examples() if a["rope"]["form"] == "vjepa2")
    inputs = CHECK.inputs(function, arguments)
    mended = CHECK.wrong(inputs, "pair_angles_interleaved")
    x = arguments["x"]
    np.testing.assert_allclose(np.hypot(mended[:, 0:24:2], mended[:, 1:24:2]), np.hypot(x[:, 0:24:2], x[:, 1:24:2]),
                               atol=1e-12)
    assert not np.allclose(np.hypot(*[inputs.output()[:, c:24:2] for c in (0, 1)]), np.hypot(x[:, 0:24:2],
                                                                                             x[:, 1:24:2]))
    function, arguments = next((f, a) for f, a in _own_examples() if f == "apply_vision_rope_prefixed")
    inputs = CHECK.inputs(function, arguments)
    after = CHECK.wrong(inputs, "class_angles_after_patches")
    first_patch = CHECK.inputs("apply_vision_rope", {"x": arguments["x"][:1], "positions": arguments["positions"][:1],
                                                     "rope": arguments["rope"]}).output()
    np.testing.assert_allclose(after[0], first_patch[0], atol=1e-13)
    np.testing.assert_array_equal(CHECK.wrong(inputs, "class_angles_dropped")[0], arguments["x"][0])


def test_a_mistake_the_call_cannot_show_is_not_tried():
    """One frame: no frame to ignore; V-JEPA 2: θ fixed, no axis_blocks_split (its own layout); a call without class
    angles has none to misplace."""
    x = np.random.default_rng(0).standard_normal((6, 24))
    one = CHECK.inputs("apply_vision3d_rope", {"x": x, "positions": _clip(1, 2, 3), "rope": {
        "form": "vjepa2", "head_dim": 24}})
    for name in ("frame_ignored", "theta_default", "axis_blocks_split", "class_angles_dropped", "cls_rotated"):
        assert CHECK.wrong(one, name) is None, name
    plain = CHECK.inputs("apply_vision_rope", {"x": x[:, :16], "positions": pixtral_patch_positions(2, 3),
                                               "rope": {"form": "mlcd", "head_dim": 16}})
    for name in ("class_angles_dropped", "class_angles_after_patches", "frame_ignored", "pair_angles_interleaved"):
        assert CHECK.wrong(plain, name) is None, name


@pytest.mark.parametrize("function", OWN)
def test_an_output_no_mistake_explains_is_close_to_none(function):
    _, arguments = next((f, a) for f, a in _own_examples() if f == function)
    reference, _ = CHECK.reference(CHECK.inputs(function, arguments))
    noisy = reference + 1e-3 * np.random.default_rng(0).standard_normal(reference.shape)
    for candidate in (reference + 0.25, noisy, np.zeros_like(reference)):
        result = check_kind("vision_rope", function, arguments, candidate)
        assert not result["ok"] and [d["id"] for d in result["diagnosis"]] == ["closest_mistake"]


THREE_D = {"x": np.zeros((4, 24)), "positions": _clip(1, 2, 2), "rope": {"form": "minimax_m3_vl", "head_dim": 24}}
PREFIXED = {"x": np.zeros((5, 16)), "positions": pixtral_patch_positions(2, 2),
            "rope": {"form": "mlcd", "head_dim": 16}, "prefix_angles": np.zeros((1, 8))}


@pytest.mark.parametrize(("function", "change", "message"), [
    ("apply_vision3d_rope", {"rope": {"form": "qwen2_vl", "head_dim": 24}}, "form must be one of"),
    ("apply_vision3d_rope", {"rope": {"form": "vjepa2", "head_dim": 24, "rope_theta": 500.0}}, "theta"),
    ("apply_vision3d_rope", {"rope": {"form": "vjepa2", "head_dim": 4}}, "head_dim"),
    ("apply_vision3d_rope", {"rope": {"form": "vjepa2", "head_dim": 24, "sections": [4, 4, 4]}}, "sections"),
    ("apply_vision3d_rope", {"positions": pixtral_patch_positions(2, 2)}, "positions"),
    ("apply_vision3d_rope", {"positions": -_clip(1, 2, 2)}, "positions"),
    ("apply_vision3d_rope", {"positions": _clip(1, 2, 2).astype(float)}, "positions"),
    ("apply_vision3d_rope", {"positions": _clip(1, 1, 3)}, "positions"),
    ("apply_vision3d_rope", {"x": np.zeros((4, 20))}, "x must have shape"),
    ("apply_vision3d_rope", {"x": np.full((4, 24), np.inf)}, "x must be finite"),
    ("apply_vision_rope", {"x": np.zeros((4, 24))}, "call apply_vision3d_rope"),
    ("apply_vision_rope_prefixed", {"prefix_angles": None}, "prefix_angles"),
    ("apply_vision_rope_prefixed", {"prefix_angles": np.zeros((1, 7))}, "prefix_angles must have shape"),
    ("apply_vision_rope_prefixed", {"prefix_angles": np.full((1, 8), np.nan)}, "prefix_angles must be finite"),
    ("apply_vision_rope_prefixed", {"x": np.zeros((4, 16))}, "prefix_angles rows"),
    ("apply_vision_rope_prefixed", {"rope": {"form": "vjepa2", "head_dim": 16}}, "call apply_vision3d_rope"),
])
def test_bad_calls_are_unusable_naming_the_parameter(function, change, message):
    base = PREFIXED if function == "apply_vision_rope_prefixed" else THREE_D
    with pytest.raises(Unusable, match=message):
        check_kind("vision_rope", function, {**base, **change}, np.zeros((5, 16)))


@pytest.mark.parametrize(("function", "name"), [("apply_vision3d_rope", "frame_row_swapped"),
                                                ("apply_vision_rope_prefixed", "class_angles_after_patches")])
def test_the_command_passes_a_port_names_a_mistake_and_refuses_a_bad_call(function, name, tmp_path, capsys):
    arguments = next(a for f, a in _own_examples() if f == function)
    inputs = CHECK.inputs(function, arguments)
    rope = arguments["rope"]
    port = port3d_32(inputs.x, inputs.positions, rope["form"], rope["head_dim"], rope["rope_theta"]) \
        if function == "apply_vision3d_rope" else prefixed_32(inputs.x, inputs.positions, rope["head_dim"],
                                                              rope["rope_theta"], arguments["prefix_angles"])
    call = call_file(tmp_path, function, arguments)
    np.save(tmp_path / "port.npy", port)
    np.save(tmp_path / "wrong.npy", CHECK.wrong(inputs, name))
    assert main(["check", "vision_rope", "--call", str(call), "--candidate", str(tmp_path / "port.npy")]) == 0
    assert "refpos check vision_rope: OK (float32)" in capsys.readouterr().out
    assert main(["check", "vision_rope", "--call", str(call), "--candidate", str(tmp_path / "wrong.npy")]) == 1
    assert f"diagnosis vision_rope_{name}: " in capsys.readouterr().out
    (tmp_path / "bad").mkdir()
    other = "pixtral" if function == "apply_vision3d_rope" else "vjepa2"  # a form of the other call
    bad = call_file(tmp_path / "bad", function, {**arguments, "rope": {**rope, "form": other}})
    assert main(["check", "vision_rope", "--call", str(bad), "--candidate", str(tmp_path / "port.npy")]) == 2
    err = capsys.readouterr().err
    assert "rope" in err and len(err.strip().splitlines()) == 1, err


#: tiny tower configs of each call, and the case ids refpos golden model writes for them (model name "m")
TOWERS = {
    "minimax_m3_vl": ({"model_type": "minimax_m3_vl_vision", "hidden_size": 80, "num_attention_heads": 4,
                       "num_hidden_layers": 2, "rope_parameters": {"rope_theta": 500.0, "rope_type": "axial"}},
                      ["vision_rope/m/vision-0/clip-2x4x6"]),
    "vjepa2": ({"model_type": "vjepa2", "hidden_size": 48, "num_attention_heads": 2, "num_hidden_layers": 1,
                "pred_hidden_size": 40, "pred_num_attention_heads": 2, "pred_num_hidden_layers": 1, "crop_size": 48,
                "patch_size": 16}, ["vision_rope/m/encoder-0/clip-2x3x3", "vision_rope/m/predictor-0/clip-2x3x3"]),
    "mlcd": ({"model_type": "mlcd_vision_model", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
              "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"}},
             ["vision_rope/m/vision-0/grid-4x6-prefix-1"]),
    "llava_onevision1_5": ({"model_type": "llava_onevision1_5_vision", "hidden_size": 64, "num_attention_heads": 4,
                            "depth": 1}, ["vision_rope/m/vision-0/grid-4x6-prefix-1"]),
}


@pytest.mark.parametrize("tower", sorted(TOWERS))
def test_golden_model_writes_the_tower_s_cases_which_verify_and_name_a_mistake(tower, tmp_path, capsys):
    from refpos.golden.files.manifest import load_manifest

    config, ids = TOWERS[tower]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf8")
    out = tmp_path / "out"
    assert main(["golden", "model", str(path), "--name", "m", "--out", str(out), "--no-certify"]) == 0
    assert "without a case" not in capsys.readouterr().out
    cases = [c for c in load_manifest(out)["cases"] if c["family"] == "vision_rope"]
    assert [c["id"] for c in cases] == ids
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 0
    function = cases[0]["function"]
    assert function == ("apply_vision_rope_prefixed" if tower in ("mlcd", "llava_onevision1_5") else
                        "apply_vision3d_rope")
    folder = out / "cases" / ids[0]
    arguments = {name: np.load(folder / f"{name}.npy") for name in ("x", "positions", "prefix_angles")
                 if (folder / f"{name}.npy").exists()}
    layer = next(layer for layer in refpos.model_positions(config) if layer.kind == "vision_rope")
    rope = {"form": layer.rope.kind, "head_dim": layer.rope.head_dim, "rope_theta": layer.rope.theta}
    inputs = CHECK.inputs(function, {**arguments, "rope": rope})
    np.save(tmp_path / "port.npy", inputs.output().astype(np.float32))
    name = "frame_last" if function == "apply_vision3d_rope" else "class_angles_dropped"
    np.save(tmp_path / "wrong.npy", CHECK.wrong(inputs, name))
    capsys.readouterr()
    assert main(["check", ids[0], str(tmp_path / "port.npy"), "--golden-dir", str(out)]) == 0
    assert main(["check", ids[0], str(tmp_path / "wrong.npy"), "--golden-dir", str(out)]) == 1
    assert f"diagnosis vision_rope_{name}" in capsys.readouterr().out
    # --config: the call file leaves the rope dict out; a contradicting form exits 2 with one line
    call = call_file(tmp_path, function, arguments)
    assert main(["check", "vision_rope", "--config", str(path), "--call", str(call), "--candidate",
                 str(tmp_path / "port.npy")]) == 0
    (tmp_path / "other").mkdir()
    other = "vjepa2" if layer.rope.kind != "vjepa2" else "minimax_m3_vl"
    call = call_file(tmp_path / "other", function, {**arguments, "rope": {**rope, "form": other}})
    capsys.readouterr()
    assert main(["check", "vision_rope", "--config", str(path), "--call", str(call), "--candidate",
                 str(tmp_path / "port.npy")]) == 2
    err = capsys.readouterr().err
    assert "--config: rope.form: the call gives" in err and len(err.strip().splitlines()) == 1, err
