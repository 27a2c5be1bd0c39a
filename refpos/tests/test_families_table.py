"""The family table's file (``refpos/models/data/families.toml``): every malformed table refused with a message that
names it, and the warning an unknown ``model_type`` resolves with (API and ``refpos rope``).

The row-by-row anchors against transformers' modeling files are in test_rope_families.py.
"""

from __future__ import annotations

import json
import warnings
from importlib import resources

import pytest

import refpos
from refpos.cli import main
from refpos.models import families as fam

ROW = '[family.x]\nlayout = "half"\nsource = "x/modeling_x.py: rotate_half"\n'


def table(rows: str = ROW, aliases: str = "") -> str:
    return f"[aliases]\n{aliases}\n{rows}"


def test_the_file_loads_into_the_rows():
    rows, aliases = fam.load()
    assert rows == fam.FAMILY_ROWS and aliases == fam.ALIASES
    assert aliases == {"kimi_k2": "deepseek_v3", "gemma3": "gemma3_text", "gemma4": "gemma4_text",
                       "qwen2_vl_text": "qwen2_vl", "qwen2_5_vl_text": "qwen2_5_vl",
                       "qwen2_5_omni_text": "qwen2_5_omni", "paddleocr_vl_text": "paddleocr_vl",
                       "internlm3": "llama", "iquestcoder": "llama",
                       "emu3_text_model": "emu3", "layoutxlm": "layoutlmv2",
                       "sarvam_mla": "deepseek_v3", "minimax_m3_vl_text": "minimax_m3_vl",
                       "muse_glimmer_text": "muse_glimmer", "muse_spark_text": "muse_spark",
                       "qwen2_5_omni_talker": "qwen2_5_omni",
                       "mimi_encoder": "mimi", "mimi_decoder": "mimi", "qwen4_exp_vision": "qwen3_5_vision",
                       "qianfan_ocr_vision": "internvl_vision", "mlcd": "mlcd_vision_model",
                       "pp_chart2table_vision": "got_ocr2_vision",
                       "RefinedWebModel": "falcon", "RefinedWeb": "falcon", "phi-msft": "phi"}
    text = (resources.files("refpos") / "models" / "data" / "families.toml").read_text(encoding="utf8")
    assert len(rows) == len({row.model_type for row in rows}) == text.count("\n[family.")
    (row,), _ = fam.load(table(ROW + 'no_attention = {conv = "conv"}\nlayer_pattern = {every = 3, other = "conv"}\n'))
    assert row.no_attention_kind("conv") == "conv" and row.no_attention_kind("full_attention") is None
    assert row.layer_pattern == fam.LayerPattern(every=3, other="conv") and not row.is_default


@pytest.mark.parametrize("text, named", [
    (table(ROW + "colour = 1\n"), "unknown keys ['colour']"),
    (table('[family.x]\nsource = "x/modeling_x.py: f"\n'), "column layout"),  # a RoPE row needs its layout
    (table('[family.x]\nlayout = "half"\n'), "missing ['source']"),
    (table(ROW + 'encoding = "spiral"\n'), "encoding holds a value outside"),
    (table(ROW + 'stacks = "three"\n'), "column stacks"),
    (table(ROW + 'alibi = {dtype = "float8"}\n'), "alibi.dtype"),
    (table(ROW + 'alibi = {colour = 1}\n'), "alibi takes"),
    (table(ROW + 't5 = {tables = "some"}\n'), "t5.tables"),
    (table(ROW + 'encoding = "learned"\nlearned = {offset = 2}\n'), "learned.table"),
    (table(ROW + 'sinusoidal = {layout = "spiral"}\n'), "sinusoidal.layout"),
    (table(ROW + 'switch = {key = "k", values = {true = "alibi"}, absent = "false"}\n'), "switch.absent"),
    (table(ROW + 'switch = {key = "k", values = {true = "magic"}, absent = "true"}\n'), "switch.values"),
    (table(ROW + 'switch = {key = "k"}\n'), "switch takes"),
    (table(ROW + 'encoder = {encoding = "t5"}\n'), "column encoder"),  # a decoder-only row has no encoder
    (table(ROW + 'width_factor = 0\n'), "column width_factor"),
    (table(ROW + 'layer_pattern = {every = 4, offset = -1}\n'), "layer_pattern: give every"),
    (table(ROW + 'layer_pattern = {chars = {M = "mamba"}}\n'), "layer_pattern: give every"),
    (table(ROW + 'rope = {theta = -1.0}\n'), "rope.theta"),
    (table(ROW + 'rope = {theta_fixed = true}\n'), "rope.theta_fixed"),
    (table(ROW + 'rope = {rotary_dim = 1.5}\n'), "rope.rotary_dim"),
    (table(ROW + 'rope = {local_theta_key = "k"}\n'), "rope.local_theta"),
    (table(ROW + 'rope = {colour = 1}\n'), "rope takes"),
    (table(ROW.replace('"half"', '"spiral"')), "column layout"),
    (table(ROW.replace("modeling_x.py: rotate_half", "x.py")), "column source"),
    (table(ROW + 'rope_layers = "odd"\n'), "column rope_layers"),
    (table(ROW + 'rope_dict = ["magic"]\n'), "column rope_dict"),
    (table(ROW + "multi_axis = 1\n"), "multi_axis has the wrong type"),
    (table(ROW + 'rope_dict = "ntk_alpha"\n'), "rope_dict has the wrong type"),
    (table(ROW + "layer_pattern = {every = 0}\n"), "layer_pattern: give every"),
    (table(ROW + 'layer_pattern = {every = 2, indices = "k"}\n'), "layer_pattern: give every"),
    (table(ROW + "layer_pattern = {period = 2}\n"), "layer_pattern takes every"),
    (table(ROW + "no_attention = {conv = 1}\n"), "no_attention maps"),
    (table(aliases='y = "nowhere"'), "[aliases]"),
    (table(aliases='x = "x"'), "[aliases]"),
    ("[family.x]\nlayout = 'half'\nsource = 'x/modeling_x.py: f'\n", "expected the tables"),
])
def test_a_malformed_table_is_refused_by_name(text, named):
    with pytest.raises(ValueError) as info:
        fam.load(text)
    assert named in str(info.value)


UNKNOWN = {"model_type": "no_such_model", "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
           "rope_theta": 1e4}


def test_an_unknown_model_type_warns_that_the_layout_is_assumed():
    for resolve in (refpos.models.from_hf_config, refpos.models.hf_layers):
        with pytest.warns(refpos.models.UnknownFamilyWarning, match="'no_such_model' is not in refpos's family table"):
            result = resolve(UNKNOWN)
        assert "not in the family table" in result.not_modelled["model_type"]  # and the report says it too
    with pytest.warns(fam.UnknownFamilyWarning, match="no model_type"):
        refpos.models.from_hf_config({k: v for k, v in UNKNOWN.items() if k != "model_type"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a known family resolves silently
        refpos.models.from_hf_config(dict(UNKNOWN, model_type="llama"))
        refpos.models.hf_layers(dict(UNKNOWN, model_type="kimi_k2"))


def test_a_key_the_row_ignores_does_not_narrow_the_rotation():
    """MiniMax-M3-VL's text config keeps ``rotary_dim``, which no line of its code reads: the rotation spans the
    whole head (its row ignores the key); Persimmon's row does not, and the same key narrows its rotation."""
    cfg = dict(UNKNOWN, num_key_value_heads=2, head_dim=32, rotary_dim=16)
    (layer, _) = refpos.model_positions(dict(cfg, model_type="minimax_m3_vl_text"))
    assert (layer.rope.rotary_dim, layer.rope.partial_rotary_factor) == (32, 1.0)
    (layer, _) = refpos.model_positions(dict(cfg, model_type="persimmon"))
    assert layer.rope.rotary_dim == 16


def test_a_decoder_alone_counts_its_decoder_layers():
    """TrOCR's config names its one stack's geometry decoder_layers and decoder_attention_heads (no other key)."""
    cfg = {"model_type": "trocr", "decoder_layers": 3, "decoder_attention_heads": 2, "d_model": 16,
           "max_position_embeddings": 32}
    layers = list(refpos.model_positions(cfg))
    assert [(layer.kind, layer.index) for layer in layers] == [("learned", 0), ("learned", 1), ("learned", 2)]
    # ProphetNet's num_encoder_layers / num_encoder_attention_heads: its encoder's table is read, its decoder's
    # n-gram attention refused by name
    prophetnet = {"model_type": "prophetnet", "num_encoder_layers": 2, "num_decoder_layers": 1, "hidden_size": 16,
                  "num_encoder_attention_heads": 2, "num_decoder_attention_heads": 2, "max_position_embeddings": 32,
                  "pad_token_id": 0}
    assert [(layer.stack, layer.kind) for layer in refpos.model_positions(prophetnet)] == [
        ("encoder", "learned"), ("encoder", "learned"), ("decoder", "refused")]


def test_the_warning_test_breaks_without_the_warning(monkeypatch):
    monkeypatch.setattr("refpos.models.hf_resolver.warn_assumed", lambda *a, **k: None)
    with pytest.raises(pytest.fail.Exception):
        test_an_unknown_model_type_warns_that_the_layout_is_assumed()


def test_refpos_rope_refuses_an_unknown_family_as_positions_does(tmp_path, capsys):
    """``refpos rope`` on a model type the table does not know exits 2 with one line (its positional keys, the
    row's columns to state first) instead of assuming half-split RoPE; ``--assume`` states the row."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(UNKNOWN, rope_ratio=2.0)), encoding="utf8")
    assert main(["rope", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'no_such_model' is not in refpos's family table" in err
    assert "rope_ratio=2.0" in err and err.index("--assume encoding=rope") < err.index("--assume family=")
    assert main(["rope", str(path), "--assume", "encoding=rope", "--assume", "layout=half"]) == 0
    out = capsys.readouterr().out
    assert "complete: NO" in out and "rope_ratio: positional by its name" in out  # stated, and still said
    assert main(["rope", str(path), "--assume", "family=llama", "--assume", "rope.ratio_key=rope_ratio",
                 "--assume", "rope.ratio_acts=divide"]) == 0
    out = capsys.readouterr().out
    assert "complete: yes" in out and "'linear'" in out
    path.write_text(json.dumps(dict(UNKNOWN, model_type="llama")), encoding="utf8")
    assert main(["rope", str(path)]) == 0 and capsys.readouterr().err == ""


FAMILY_CONFIGS = json.loads((resources.files("refpos") / "data" / "family_configs.json").read_text(encoding="utf8"))


def provenance_problems(entries: dict) -> list[str]:
    """Entries whose record of what was checked does not account for every config key exactly once."""
    problems = []
    for name, entry in entries.items():
        keys, verified, unverified = set(entry["config"]), entry.get("verified"), entry.get("unverified")
        if not (isinstance(entry.get("source"), str) and len(entry["source"]) > 40):
            problems.append(f"{name}: no source")
        if not isinstance(verified, list) or not isinstance(unverified, list) \
                or set(verified) & set(unverified) or set(verified) | set(unverified) != keys:
            problems.append(f"{name}: verified + unverified must split the config's keys")
    return problems


def test_every_family_config_says_what_was_verified():
    assert provenance_problems(FAMILY_CONFIGS) == []
    assert len(FAMILY_CONFIGS) >= 29 and {"openbmb/MiniCPM3-4B", "microsoft/Phi-3.5-MoE-instruct",
                                          "meta-llama/Llama-4-Scout-17B-16E (text_config)"} \
        <= set(FAMILY_CONFIGS)
    broken = {"x": {**FAMILY_CONFIGS["openbmb/MiniCPM3-4B"], "verified": ["rope_theta"]}}
    assert provenance_problems(broken)  # a key neither verified nor unverified is caught


def _minimax_m2(**keys):
    base = {"model_type": "minimax_m2", "hidden_size": 256, "num_attention_heads": 4, "head_dim": 128,
            "num_hidden_layers": 2, "max_position_embeddings": 4096}
    return refpos.model_positions(base | keys)


def test_a_rotary_dim_stating_the_factors_width_is_read_as_that_fact_and_another_is_reported():
    """MiniMax-M2's config class derives partial_rotary_factor from the checkpoints' legacy rotary_dim and writes
    both: a rotary_dim equal to head_dim × the factor states the same width and is read; the published config's
    rotary_dim alone is the width; a rotary_dim stating another width than the factor is reported, not dropped."""
    both = _minimax_m2(rotary_dim=64, rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                                       "partial_rotary_factor": 0.5})
    alone = _minimax_m2(rotary_dim=64, rope_theta=5e6)
    other = _minimax_m2(rotary_dim=32, rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                                        "partial_rotary_factor": 0.5})
    assert both.layers[0].rope.rotary_dim == alone.layers[0].rope.rotary_dim == 64
    assert "rotary_dim" not in both.not_modelled and "rotary_dim" not in alone.not_modelled
    assert "rotary_dim" in other.not_modelled


def test_a_switch_without_a_class_default_refuses_a_config_without_its_key():
    """timm_backbone's switch states no absent value (its class has no default architecture): a config naming a
    listed ResNet is answered, one naming another architecture or none is refused by name, the value shown."""
    listed = refpos.model_positions({"model_type": "timm_backbone", "backbone": "resnet50"})
    assert listed.complete and [r.kind for r in listed] == ["no_attention"]
    for config, text in (({"backbone": "vit_base_patch16_224"}, "vit_base_patch16_224"), ({}, "null")):
        refused = refpos.model_positions({"model_type": "timm_backbone", **config})
        assert not refused.complete and [r.kind for r in refused] == ["refused"]
        assert refused.not_modelled["backbone"].startswith(f"backbone={text}: ")
    row = fam.FAMILIES["timm_backbone"]
    assert row.switch is not None and row.switch.absent == ""


def test_llama4s_tower_states_its_table_with_the_class_row_last():
    """Llama 4's vision tower adds a fixed table of one row per patch and a last one for the class token it appends
    (grid fact suffix); a row stating both a suffix count and a suffix key is refused when the table is read."""
    config = {"model_type": "llama4_vision_model", "image_size": 56, "patch_size": 14, "hidden_size": 32,
              "num_attention_heads": 2, "num_hidden_layers": 1}
    (table,) = refpos.model_positions(config).stack("vision.input")
    assert (table.way, table.grid, table.prefix, table.suffix, table.table_rows) == ("fixed", (4, 4), 0, 1, 17)
    with pytest.raises(ValueError, match=r"grid\.suffix"):
        fam.read_row("x", {"source": "x/modeling_x.py: X", "stacks": "vision", "encoding": "none",
                           "input": {"encoding": "grid", "grid": {"suffix": 1, "suffix_key": "n"}}})
