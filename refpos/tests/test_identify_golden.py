"""Parity: a candidate checked against a golden case gets every diagnosis ``--config`` gives it, and the fit.

The M-RoPE cases of a vision-language model (``refpos golden model``: text, image, video, text-after-image)
are checked with wrong candidates of each layout: no crash, the M-RoPE mistake named, the pairs fitted, a NaN
named ``non_finite`` and reported as NaN; a frequencies case is fitted; ``refpos golden show`` prints a case's
inputs, outputs, tolerance and the command; position ids of a written layout follow the config's rules.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import refpos
from refpos.check.case import check_case
from refpos.check.rope.run import check_rope
from refpos.cli import main
from refpos.encodings import alibi_slopes
from refpos.golden.cases.mrope import probe_layouts, vlm_configs
from refpos.golden.files.manifest import find_case, load_manifest
from refpos.golden.files.npy import npy_bytes
from refpos.models.mm_layout import config_position_ids, parse_layout

QWEN25 = "Qwen/Qwen2.5-VL-7B-Instruct"


@pytest.fixture(scope="module")
def vlm_goldens(tmp_path_factory):
    """``refpos golden model`` of Qwen2.5-VL (no certificates: the cases' arrays are what is checked)."""
    root = tmp_path_factory.mktemp("vlm")
    (root / "config.json").write_text(json.dumps(vlm_configs()[QWEN25]["config"]), encoding="utf8")
    assert main(["golden", "model", str(root / "config.json"), "--out", str(root / "golden"), "--name", "qwen25vl",
                 "--no-certify"]) == 0
    return root / "golden"


def _case(root, case_id):
    case = find_case(load_manifest(root), case_id)
    arrays = {name: np.load(root / entry["file"], allow_pickle=False) for name, entry in case["inputs"].items()}
    return case, arrays, refpos.rope_config_from_params(case["parameters"]["rope"]), case["parameters"]["seq_len"]


@pytest.mark.parametrize("layout", probe_layouts(vlm_configs()[QWEN25]["config"]))
def test_every_multimodal_layout_is_diagnosed_and_fitted_as_with_the_config(vlm_goldens, layout):
    case, inputs, rope, seq_len = _case(vlm_goldens, f"rope/qwen25vl/{layout}/apply")
    x, positions = inputs["x"], inputs["positions"]
    flat = dataclasses.replace(rope, mrope_section=None, mrope_interleaved=False)
    one_d = np.asarray(refpos.apply_rope(x, positions[0], flat, seq_len=seq_len))  # every pair reads t
    golden = check_case(case["id"], one_d, golden_dir=vlm_goldens)
    with_config = check_rope(one_d, x, positions, rope, seq_len=seq_len)
    assert golden["ok"] == with_config["ok"]
    assert [d["id"] for d in golden.get("diagnosis", [])] == [d["id"] for d in with_config["diagnosis"]]
    if layout == "text":  # t = h = w: 1-D positions are right
        assert golden["ok"]
        return
    assert "mrope_1d_positions" in [d["id"] for d in golden["diagnosis"]]
    read = {p["axis"]: {p["axis_fitted"] for p in golden["pairs"] if not p["ok"]} for p in golden["pairs"]}
    assert read.get("h") == {"t"} and read.get("w") == {"t"}
    assert golden["error_profile"]["by_token_kind"]["text"]["tokens_outside"] == 0
    assert golden["error_profile"]["by_token_kind"]["vision"]["tokens_outside"] > 0


@pytest.mark.parametrize("layout", ["image", "video"])
def test_a_nan_candidate_is_named_non_finite_and_its_error_is_nan(vlm_goldens, tmp_path, capsys, layout):
    case, inputs, rope, seq_len = _case(vlm_goldens, f"rope/qwen25vl/{layout}/apply")
    y = np.asarray(refpos.apply_rope(inputs["x"], inputs["positions"], rope, seq_len=seq_len))
    y[5, 3] = np.nan
    (tmp_path / "y.npy").write_bytes(npy_bytes(y))
    assert main(["check", case["id"], str(tmp_path / "y.npy"), "--golden-dir", str(vlm_goldens), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["max_abs_error"] == "nan" and result["diagnosis"][0]["id"] == "non_finite"
    assert [p["index"] for p in result["pairs"] if not p["ok"]] == [3 % 64]
    assert main(["check", case["id"], str(tmp_path / "y.npy"), "--golden-dir", str(vlm_goldens)]) == 1
    assert "max |candidate − reference| = nan" in capsys.readouterr().out


def test_a_frequencies_case_is_fitted_per_pair(tmp_path, capsys):
    case_id = "rope/meta-llama--Llama-3.1-8B/frequencies"
    rope = refpos.rope_config_from_params(find_case(load_manifest(refpos.golden.files.manifest.default_golden_dir()),
                                                    case_id)["parameters"]["rope"])
    omega = np.asarray(refpos.rope_frequencies(dataclasses.replace(rope, factor=4.0), seq_len=131072, xp="numpy")[0])
    (tmp_path / "w.npy").write_bytes(npy_bytes(omega))
    assert main(["check", case_id, str(tmp_path / "w.npy"), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["fitted"]["rule_changed"] == {"factor": [8.0, 4.0]}
    scaled = [p["index"] for p in result["pairs"] if not p["band"].startswith("high")]  # the bands s reaches
    assert [p["index"] for p in result["pairs"] if not p["ok"]] == scaled


# ------------------------------------------------------------------------------------------ golden show
def test_golden_show_prints_inputs_outputs_tolerance_and_the_command(vlm_goldens, capsys):
    assert main(["golden", "show", "rope/qwen25vl/image/apply", "--golden-dir", str(vlm_goldens)]) == 0
    out = capsys.readouterr().out
    assert "x: " in out and "float64 (29, 128)" in out and "int64 (3, 29)" in out
    assert "      h: [0, 1, 2, 3, 3, 3, 3, 3, 3, 4," in out
    assert "tolerance rule 'rope'" in out
    assert f"refpos check rope/qwen25vl/image/apply CANDIDATE.npy --golden-dir {vlm_goldens}" in out
    assert main(["golden", "show", "rope/qwen25vl/image/apply", "--golden-dir", str(vlm_goldens), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inputs"]["positions"]["values"][2][:5] == [0, 1, 2, 3, 4]
    assert main(["golden", "show", "no/such-case"]) == 2
    assert "no golden case" in capsys.readouterr().err


# -------------------------------------------------------------------------------------- layouts, rope text
def test_position_ids_of_a_written_layout_follow_the_configs_rules():
    config = vlm_configs()[QWEN25]["config"]
    spans = parse_layout("text:6,image:1x8x12,text:6,video:2x4x4@0.5")
    ids, rules = config_position_ids(config, spans)
    assert rules["family"][0] == "qwen2_5_vl" and rules["spatial_merge_size"] == (
        2, "config: vision_config.spatial_merge_size")
    assert rules["tokens_per_second"][0] == config["vision_config"]["tokens_per_second"]
    text_after = ids[:, 6 + 24:6 + 24 + 6]  # the second text span continues after the image's largest side (6)
    assert text_after[0].tolist() == list(range(12, 18))
    video_t = ids[0, -8:]  # two temporal patches 0.5 s apart at 2 tokens per second: Δ = 1
    assert sorted(set(video_t.tolist())) == [18, 19]
    for bad in ("text:x", "image:1x8", "sound:3", "audio:0", "video:1x2x2@fast", "video:1x2x2+track:3", ""):
        with pytest.raises(ValueError, match="--layout"):
            parse_layout(bad)
    with pytest.raises(ValueError, match="no M-RoPE position rules"):
        config_position_ids({"model_type": "llama"}, spans)
    with pytest.raises(ValueError, match="no audio input"):  # a span the family has no input for
        config_position_ids(config, parse_layout("text:2,audio:4"))


def test_a_written_layout_with_audio_follows_an_omni_thinkers_rules():
    config = vlm_configs()["Qwen/Qwen2.5-Omni-7B (thinker)"]["config"]
    ids, rules = config_position_ids(config, parse_layout("text:2,audio:4,text:1,video:2x4x4@2+audio:3"))
    assert rules["family"][0] == "qwen2_5_omni"
    assert rules["position_id_per_seconds"] == (25, "config: thinker_config.position_id_per_seconds")
    assert ids[:, :7].tolist() == [[0, 1, 2, 3, 4, 5, 6]] * 3  # audio tokens: one id each, on all three rows
    assert ids.shape == (3, 2 + 4 + 1 + 8 + 3 + 4)


def test_refpos_rope_prints_every_value_of_mrope_section(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(vlm_configs()[QWEN25]["config"]), encoding="utf8")
    assert main(["rope", str(tmp_path / "config.json")]) == 0
    line = next(li for li in capsys.readouterr().out.splitlines() if "mrope_section" in li)
    assert "[16, 24, 24]" in line


@pytest.mark.parametrize("layout", ["image", "video", "text-after-image"])
def test_a_cos_sin_case_names_the_mrope_mistake(vlm_goldens, layout):
    from refpos.pairs import split_pairs

    case, inputs, rope, seq_len = _case(vlm_goldens, f"rope/qwen25vl/{layout}/cos-sin")
    flat = dataclasses.replace(rope, mrope_section=None, mrope_interleaved=False)
    cos, sin = refpos.rope_cos_sin(inputs["positions"][0], flat, seq_len=seq_len, xp="numpy")
    for name, table in (("cos", cos), ("sin", sin)):
        per_pair = split_pairs(np.asarray(table), rope.layout, side="written")[0]
        result = check_case(case["id"], per_pair, golden_dir=vlm_goldens, output=name)
        assert [d["id"] for d in result["diagnosis"]] == ["mrope_1d_positions"], result["diagnosis"]


def test_two_mistakes_at_once_are_both_named_by_the_fit():
    case_id = "rope/meta-llama--Llama-3.1-8B/apply"
    root = refpos.golden.files.manifest.default_golden_dir()
    _, inputs, rope, seq_len = _case(root, case_id)
    both = np.asarray(refpos.apply_rope(inputs["x"], inputs["positions"] + 3,
                                        dataclasses.replace(rope, layout="interleaved"), seq_len=seq_len))
    result = check_case(case_id, both)
    ids = [d["id"] for d in result["diagnosis"]]
    assert ids == ["layout_swap", "position_offset", "error_profile"]
    assert result["fitted"]["layout"] == "interleaved" and result["fitted"]["position_offset"] == 3


def test_refpos_positions_writes_the_ids_of_a_layout(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(vlm_configs()[QWEN25]["config"]), encoding="utf8")
    out = tmp_path / "ids.npy"
    assert main(["positions", str(config), "--layout", "text:3,image:1x8x12,text:2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "spatial_merge_size: 2 (config: vision_config.spatial_merge_size)" in printed
    ids = np.load(out)
    assert ids.shape == (3, 29) and ids[:, -1].tolist() == [10, 10, 10]
    np.testing.assert_array_equal(ids, config_position_ids(vlm_configs()[QWEN25]["config"],
                                                            parse_layout("text:3,image:1x8x12,text:2"))[0])
    assert main(["positions", str(config), "--layout", "text:3", "--out", str(out)]) == 2  # never replaced
    assert "exists" in capsys.readouterr().err
    assert main(["positions", str(config), "--layout", "image:1x7x12"]) == 2  # not a multiple of the merge
    assert main(["positions", str(config), "--out", str(tmp_path / "x.npy")]) == 2


@pytest.mark.skipif(__import__("importlib").util.find_spec("matplotlib") is None, reason="needs the 'plot' extra")
def test_check_plot_draws_the_fit(vlm_goldens, tmp_path, capsys):
    case, inputs, rope, seq_len = _case(vlm_goldens, "rope/qwen25vl/image/apply")
    flat = dataclasses.replace(rope, mrope_section=None, mrope_interleaved=False)
    (tmp_path / "y.npy").write_bytes(npy_bytes(np.asarray(refpos.apply_rope(inputs["x"], inputs["positions"][0], flat,
                                                                             seq_len=seq_len))))
    base = ["check", case["id"], str(tmp_path / "y.npy"), "--golden-dir", str(vlm_goldens)]
    assert main([*base, "--plot", str(tmp_path / "fit.svg")]) == 1
    svg = (tmp_path / "fit.svg").read_bytes()
    assert svg.startswith(b"<?xml") and b"<svg" in svg[:2000]
    assert main([*base, "--plot", str(tmp_path / "fit.jpg")]) == 2
    assert "--plot must name a .svg or .png file" in capsys.readouterr().err
    (tmp_path / "s.npy").write_bytes(npy_bytes(np.sort(np.asarray(alibi_slopes(12, xp="numpy")))[::-1].copy()))
    assert main(["check", "alibi", "--heads", "12", "--candidate", str(tmp_path / "s.npy"), "--plot",
                 str(tmp_path / "heads.png")]) == 1
    assert (tmp_path / "heads.png").read_bytes().startswith(b"\x89PNG")


# ------------------------------------------------------------- the fit on the vision-language families' records
#: config name -> the golden-model name of each family refpos resolves with its own M-RoPE assignment
ASSIGNMENT_CONFIGS = {"Qwen/Qwen3.5-27B": "qwen35",
                      "baidu/ERNIE-4.5-VL-28B-A3B-PT (HF Ernie4_5_VLMoeConfig defaults)": "ernie",
                      "Qwen/Qwen2.5-Omni-7B (thinker)": "omni25"}


@pytest.fixture(scope="module")
def family_goldens(tmp_path_factory):
    """``refpos golden model`` of each config of :data:`ASSIGNMENT_CONFIGS` (no certificates)."""
    roots = {}
    for config_name, name in ASSIGNMENT_CONFIGS.items():
        root = tmp_path_factory.mktemp(name)
        (root / "config.json").write_text(json.dumps(vlm_configs()[config_name]["config"]), encoding="utf8")
        assert main(["golden", "model", str(root / "config.json"), "--out", str(root / "golden"), "--name", name,
                     "--no-certify"]) == 0
        roots[name] = root / "golden"
    return roots


def _other_assignment(rope):
    from refpos.rope.mrope import ASSIGNMENTS

    """The rope with the first other assignment its sections admit."""
    for other in (name for name in ASSIGNMENTS if name != rope.mrope_scheme):
        try:
            return dataclasses.replace(rope, mrope_assignment=other if other != "interleaved" else None,
                                       mrope_interleaved=other == "interleaved")
        except ValueError:  # the sections do not fit this assignment
            continue
    raise AssertionError(f"no other assignment fits {rope.mrope_section}")


@pytest.mark.parametrize("config_name", list(ASSIGNMENT_CONFIGS))
def test_the_fit_reads_each_pairs_axis_from_the_familys_assignment(family_goldens, config_name):
    """Each pair's expected axis is its family's assignment record (ERNIE-4.5-VL: h and w alternate, t last), the
    right candidate is fitted pair by pair to it, and one computed with another assignment is fitted to that one's
    axes, its pairs named, at every probe layout of the family, the golden case diagnosed as ``--config``."""
    from refpos.rope.mrope import pair_axes

    name = ASSIGNMENT_CONFIGS[config_name]
    for layout in probe_layouts(vlm_configs()[config_name]["config"]):
        case, inputs, rope, seq_len = _case(family_goldens[name], f"rope/{name}/{layout}/apply")
        x, positions = inputs["x"], inputs["positions"]
        expected = ["thw"[a] for a in pair_axes(rope.mrope_section, rope.mrope_scheme)]
        right = check_case(case["id"], np.asarray(refpos.apply_rope(x, positions, rope, seq_len=seq_len)),
                           golden_dir=family_goldens[name])
        assert right["ok"], (layout, right.get("diagnosis"))
        wrong_rope = _other_assignment(rope)
        wrong = np.asarray(refpos.apply_rope(x, positions, wrong_rope, seq_len=seq_len))
        golden = check_case(case["id"], wrong, golden_dir=family_goldens[name])
        with_config = check_rope(wrong, x, positions, rope, seq_len=seq_len)
        assert golden["ok"] == with_config["ok"]
        assert [d["id"] for d in golden.get("diagnosis", [])] == [d["id"] for d in with_config["diagnosis"]]
        if (positions == positions[0]).all():  # t = h = w on every token (text, audio): any assignment is right
            assert golden["ok"]
            continue
        assert [p["axis"] for p in golden["pairs"]] == expected  # what each pair should read: the record's
        used = ["thw"[a] for a in pair_axes(wrong_rope.mrope_section, wrong_rope.mrope_scheme)]
        differ = {p["index"] for p in golden["pairs"] if "axis" in p and p["axis"] != used[p["index"]]}
        assert differ and {p["index"] for p in golden["pairs"] if not p["ok"]} <= differ
        for pair in golden["pairs"]:
            if not pair["ok"] and pair.get("axis_fitted") is not None:
                assert pair["axis_fitted"] == used[pair["index"]], (layout, pair)
        assert "mrope_assignment" in [d["id"] for d in golden["diagnosis"]], (layout, golden["diagnosis"])
