"""Golden M-RoPE cases (``refpos golden model`` on a vision-language config) and the real configs in
refpos/data/vlm_configs.json: resolution, probe layouts, and a generate → verify round trip."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

import refpos
from refpos.cli import main
from refpos.golden.mrope_cases import PROBE_LAYOUTS, layout_positions, probe_layouts
from refpos.golden.rope_cases import model_cases
from refpos.models.vision_towers import vision_rope_from_hf_config
from refpos.rope.mrope import pair_axes

VLM = json.loads(resources.files("refpos").joinpath("data/vlm_configs.json").read_text(encoding="utf8"))
TEXT = [name for name, entry in VLM.items() if "text_config" in entry["config"] or "rope_theta" in entry["config"]
        or "thinker_config" in entry["config"]]

#: what each text model resolves to (sections, interleaved, layout, rotary_dim, theta)
RESOLVED = {
    "Qwen/Qwen2-VL-7B-Instruct": ((16, 24, 24), False, "half", 128, 1e6),
    "Qwen/Qwen2.5-VL-7B-Instruct": ((16, 24, 24), False, "half", 128, 1e6),
    "Qwen/Qwen3-VL-8B-Instruct": ((24, 20, 20), True, "half", 128, 5e6),
    "Qwen/Qwen3-VL-8B-Instruct (v5 rope_parameters)": ((24, 20, 20), True, "half", 128, 5e6),
    "zai-org/GLM-4.1V-9B-Thinking": ((8, 12, 12), False, "interleaved", 64, 1e4),
    "Qwen/Qwen3.5-27B": ((11, 11, 10), True, "half", 64, 1e7),
    "Qwen/Qwen2.5-Omni-7B (thinker)": ((16, 24, 24), False, "half", 128, 1e6),
    "Qwen/Qwen3-Omni-30B-A3B-Instruct (thinker)": ((24, 20, 20), True, "half", 128, 1e6),
    "baidu/ERNIE-4.5-VL-28B-A3B-PT (HF Ernie4_5_VLMoeConfig defaults)": ((20, 22, 22), False, "interleaved", 128, 5e5),
}


def test_every_config_names_its_source():
    assert all(entry["source"] for entry in VLM.values())
    assert set(TEXT) == set(RESOLVED)


@pytest.mark.parametrize("name", sorted(RESOLVED))
def test_real_configs_resolve(name):
    hybrid = "full_attention_interval" in VLM[name]["config"].get("text_config", {})  # some layers: no attention
    rope = refpos.models.from_hf_config(VLM[name]["config"], strict=not hybrid)
    assert not hybrid or list(rope.not_modelled) == ["text_config.model_type"]
    assert (rope.mrope_section, rope.mrope_interleaved, rope.layout, rope.rotary_dim, rope.theta) == RESOLVED[name]


@pytest.mark.parametrize("name", sorted(VLM))
def test_real_vision_towers_resolve(name):
    kind = vision_rope_from_hf_config(VLM[name]["config"]).kind
    assert kind == ("pixtral" if "pixtral" in name else "llama4" if "Llama-4" in name else "qwen2_vl")


def test_probe_layouts_follow_each_family():
    qwen25 = layout_positions(VLM["Qwen/Qwen2.5-VL-7B-Instruct"]["config"], "video")
    qwen2 = layout_positions(VLM["Qwen/Qwen2-VL-7B-Instruct"]["config"], "video")
    # 4 temporal patches 1 s apart at tokens_per_second = 2: t = 2 + 0, 2, 4, 6 (Qwen2-VL: 2 + 0, 1, 2, 3)
    assert sorted(set(qwen25[0, 2:-2].tolist())) == [2, 4, 6, 8]
    assert sorted(set(qwen2[0, 2:-2].tolist())) == [2, 3, 4, 5]
    after = layout_positions(VLM["Qwen/Qwen2-VL-7B-Instruct"]["config"], "text-after-image")
    assert after[:, -16].tolist() == [4 + 8] * 3  # the text resumes at 4 + max(16, 8) / 2


def test_model_cases_hold_every_layout_and_their_tables():
    config = VLM["Qwen/Qwen3-VL-8B-Instruct"]["config"]
    cases = {c.id: c for c in model_cases(config, "Qwen/Qwen3-VL-8B-Instruct")}
    key = "rope/Qwen--Qwen3-VL-8B-Instruct"
    assert {f"{key}/{layout}/{kind}" for layout in probe_layouts(config) for kind in ("cos-sin", "apply")} <= \
        set(cases)
    assert "audio" not in probe_layouts(config) and "audio" in PROBE_LAYOUTS
    case = cases[f"{key}/image/cos-sin"]
    positions = case.inputs["positions"]  # (3, T)
    rope = refpos.models.from_hf_config(config)
    inv_freq, _ = refpos.rope_frequencies(rope, seq_len=int(positions.max()) + 1)
    axes = np.array(pair_axes(rope.mrope_section, rope.mrope_scheme))
    np.testing.assert_array_equal(case.outputs["cos"].array, np.cos(positions[axes].T * np.asarray(inv_freq)))


ERNIE = "baidu/ERNIE-4.5-VL-28B-A3B-PT (HF Ernie4_5_VLMoeConfig defaults)"


@pytest.mark.parametrize("name", ["zai-org/GLM-4.1V-9B-Thinking", ERNIE, "Qwen/Qwen3.5-27B",
                                  "Qwen/Qwen2.5-Omni-7B (thinker)", "Qwen/Qwen3-Omni-30B-A3B-Instruct (thinker)"])
def test_golden_model_round_trip(tmp_path, name):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(VLM[name]["config"]), encoding="utf8")
    out = tmp_path / "golden"
    assert main(["golden", "model", str(config), "--out", str(out), "--name", name]) == 0
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf8"))
    wanted = ("/video/cos-sin", "/video-with-audio/cos-sin", "/audio/apply") if "Omni" in name else ("/video/cos-sin",)
    layouts = [c for c in manifest["cases"] if c["id"].endswith(wanted)]
    assert len(layouts) == len(wanted) and all(c.get("certified_max_error_ulps") is not None for c in layouts)


def test_ernie_probe_video_merges_time():
    """ERNIE-4.5-VL's 4 temporal patches are 2 temporal cells (temporal_merge_size 2 of its vision_config)."""
    ids = layout_positions(VLM[ERNIE]["config"], "video")
    assert ids.shape == (3, 2 + 2 * 4 * 4 + 2) and sorted(set(ids[0, 2:-2].tolist())) == [2, 3]
