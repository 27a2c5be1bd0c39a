"""The models that ship their own code: the one rule for positional keys, the rows that read each family's keys under
its own names, and a family row stated by the caller (``assume=``, ``--assume``, ``--assume-file``).

The numbers of each family against its source are the anchors' (refpos/tests/test_anchors_remote.py); these tests
hold what is decided from a config: which keys are read, reported, refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import refpos
from refpos.cli import main
from refpos.models import positions as mp
from refpos.models.position_keys import BY_NAME, is_positional
from refpos.models.stated import ASSUMABLE, assume_pairs, stated_row

CONFIGS = json.loads((Path(refpos.__file__).parent / "data" / "remote_configs.json").read_text(encoding="utf8"))


def config(name: str, **changes) -> dict:
    return {**CONFIGS[name]["config"], **changes}


# ------------------------------------------------------------------------------------------- the one rule
@pytest.mark.parametrize("key", ["rope_ratio", "rotary_emb_base", "rope_embedding_base", "rope_pct", "rotary_pct",
                                 "position_encoding_2d", "use_logn_attn", "use_dynamic_ntk", "kv_channels",
                                 "seq_length", "base_seqlen", "training_seqlen", "alibi_scaling", "logn",
                                 "rope_position_scale", "original_rope", "max_sequence_length", "n_positions",
                                 "attn_config.rope_theta", "pos_emb", "ntk_alpha"])
def test_the_rule_catches_the_position_keys_of_code_outside_transformers(key):
    assert is_positional(key)


@pytest.mark.parametrize("key", ["vocab_size", "dim_model_base", "scale_emb", "model_max_length", "hidden_size",
                                 "multi_query_group_num", "layer_norm_epsilon", "use_flash_attn", "n_ctx",
                                 "base_model_tp_plan", "compress_ratio", "num_layers", "bos_token_id"])
def test_the_rule_leaves_keys_that_are_not_positions(key):
    assert not is_positional(key)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_remote_config_has_its_position_keys_read(name):
    """Each real config, resolved by its row: no key positional by name is left unread (the row reads it, or its
    code ignores it and the row says so); what is reported is a mask or scale the attention does not model."""
    resolved = refpos.model_positions(CONFIGS[name]["config"])
    assert not [key for key, why in resolved.not_modelled.items() if why == BY_NAME], resolved.not_modelled
    assert set(resolved.not_modelled) <= {"scale_qk_dot_by_d", "dense_attention_every_n_layers", "mup_use_scaling"}
    assert all(layer.kind not in ("refused", "unknown") for layer in resolved)


#: a model type the table does not know (the config's own, renamed), the row a user would borrow, and the keys of
#: the family's code that row does not read: each is reported and refuses the layers
NAIVE = [
    ("THUDM/glm-4-9b-chat", "glm", {"rope_ratio", "kv_channels", "seq_length", "original_rope"}),
    ("THUDM/chatglm-6b", "glm", {"position_encoding_2d", "max_sequence_length"}),
    ("microsoft/Phi-3-small-8k-instruct", "phi3", {"rope_embedding_base", "rope_position_scale"}),
    ("stabilityai/stablelm-3b-4e1t", "stablelm", {"rope_pct"}),
    ("Qwen/Qwen-7B-Chat", "qwen2", {"kv_channels", "seq_length", "use_dynamic_ntk", "use_logn_attn"}),
]


@pytest.mark.parametrize("name, family, keys", NAIVE, ids=[n for n, _, _ in NAIVE])
def test_a_borrowed_family_never_drops_the_code_s_own_keys(name, family, keys):
    renamed = config(name, model_type="my_model")
    resolved = refpos.model_positions(renamed, assume={"family": family})
    assert keys <= set(resolved.not_modelled), resolved.not_modelled
    assert all(layer.kind == "refused" for layer in resolved) and not resolved.complete
    with pytest.raises(ValueError, match="strict: not modelled"):
        refpos.model_positions(renamed, assume={"family": family}, strict=True)


def test_the_naive_test_breaks_when_the_rule_is_off(monkeypatch):
    monkeypatch.setattr(mp, "unread_positional", lambda view: {})
    monkeypatch.setattr("refpos.models.position_keys.is_positional", lambda key: False)
    with pytest.raises(AssertionError):
        test_a_borrowed_family_never_drops_the_code_s_own_keys(*NAIVE[0])


def test_the_refusal_lists_the_positional_keys_and_the_columns_first():
    resolved = refpos.model_positions(config("THUDM/glm-4-9b-chat", model_type="my_model"))
    why = resolved.unknown["model_type"]
    assert "rope_ratio=500" in why and "kv_channels=128" in why and "seq_length=131072" in why
    assert why.index("'encoding'") < why.index("'family'")
    assert {"rope_ratio", "kv_channels", "seq_length"} <= set(resolved.layers[0].stated)


# ------------------------------------------------------------------------------------------- the rows
@pytest.mark.parametrize("name_or_path, rope_type, theta, factor", [
    ("THUDM/glm-4-9b-chat", "default", 5e6, None), ("THUDM/chatglm3-6b-32k", "default", 5e6, None),
    ("THUDM/chatglm2-6b-32k", "linear", 1e4, 500.0), ("zai-org/GLM_4-9B", "default", 5e6, None),
])
def test_rope_ratio_means_what_the_release_s_code_makes_it(name_or_path, rope_type, theta, factor):
    rope = refpos.model_positions(config("THUDM/glm-4-9b-chat", _name_or_path=name_or_path)).layers[0].rope
    assert (rope.rope_type, rope.theta, rope.factor) == (rope_type, theta, factor)
    assert (rope.layout, rope.head_dim, rope.rotary_dim, rope.max_position_embeddings) == (
        "interleaved", 128, 64, 131072)


def test_rope_ratio_of_no_named_release_is_refused_unless_it_is_one():
    nameless = config("THUDM/glm-4-9b-chat")
    del nameless["_name_or_path"]
    resolved = refpos.model_positions(nameless)
    assert "its meaning depends on the release" in resolved.not_modelled["rope_ratio"]
    assert all(layer.kind == "refused" for layer in resolved)
    assert refpos.model_positions(dict(nameless, rope_ratio=1)).complete  # every meaning agrees


def test_qwen_reads_its_switches_and_the_class_defaults():
    qwen = config("Qwen/Qwen-7B-Chat")
    layer = refpos.model_positions(qwen).layers[0]
    assert (layer.rope.rope_type, layer.rope.original_max_position_embeddings, layer.query_scale.rule) == (
        "dynamic_step", 8192, "qwen_logn")
    defaults = {k: v for k, v in qwen.items() if k not in ("use_dynamic_ntk", "use_logn_attn")}
    assert refpos.model_positions(defaults).layers[0].rope.rope_type == "dynamic_step"  # QWenConfig: on
    off = refpos.model_positions(dict(qwen, use_dynamic_ntk=False, use_logn_attn=False)).layers[0]
    assert off.rope.rope_type == "default" and off.query_scale is None and off.kind == "rope"
    both = refpos.model_positions(dict(qwen, rope_scaling={"type": "linear", "factor": 2.0}))
    assert "both at once are not modelled" in both.not_modelled["use_dynamic_ntk"]


def test_baichuan_decides_its_encoding_by_the_hidden_size():
    assert refpos.model_positions(config("baichuan-inc/Baichuan2-7B-Chat")).layers[0].kind == "rope"
    layer = refpos.model_positions(config("baichuan-inc/Baichuan2-13B-Chat")).layers[0]
    assert layer.kind == "alibi" and len(layer.slopes) == 40 and layer.form == "causal"


def test_jais_reads_its_position_embedding_type():
    assert refpos.model_positions(config("inceptionai/jais-13b-chat")).layers[0].kind == "alibi"
    learned = refpos.model_positions(config("inceptionai/jais-13b-chat", position_embedding_type="learned"))
    assert learned.layers[0].kind == "learned" and learned.layers[0].table_size == 2048


def test_the_chatglm_v1_layers_are_two_axis_rope():
    layer = refpos.model_positions(config("THUDM/chatglm-6b")).layers[0]
    assert layer.kind == "rope_2d" and layer.rope.head_dim == 64 and layer.rope.theta == 10000.0
    refused = refpos.model_positions(config("THUDM/chatglm-6b", position_encoding_2d=False))
    assert "position_encoding_2d=false" in refused.not_modelled["position_encoding_2d"]


# ------------------------------------------------------------------------------------------- stated rows
GLM4_ROW = {"family": "glm", "rope": {"head_dim_key": "kv_channels", "length_key": "seq_length",
                                      "ratio_key": "rope_ratio", "ratio_acts": "base"},
            "ignores": ["original_rope"]}


def test_a_stated_row_resolves_as_the_table_s_row():
    renamed = config("THUDM/glm-4-9b-chat", model_type="my_glm")
    stated = refpos.model_positions(renamed, assume=GLM4_ROW)
    known = refpos.model_positions(config("THUDM/glm-4-9b-chat"))
    assert stated.complete and stated.layers[0].rope == known.layers[0].rope
    assert stated.family.source == "stated by the caller" and stated.assumed == GLM4_ROW
    dotted = {"family": "glm", "rope.head_dim_key": "kv_channels", "rope.length_key": "seq_length",
              "rope.ratio_key": "rope_ratio", "rope.ratio_acts": "base", "ignores": ["original_rope"]}
    assert refpos.model_positions(renamed, assume=dotted).layers[0].rope == known.layers[0].rope


@pytest.mark.parametrize("assume, named", [
    ({"colour": "red"}, "assume takes"), ({"source": "x/modeling_x.py: f"}, "the caller"),
    ({"encoding": "rope"}, "column layout"), ({"family": "glm", "rope.ratio_acts": "sideways"}, "ratio_acts"),
    ({"family": "glm", "rope.ratio_key": "rope_ratio"}, "ratio_key"), ({"encoding": "spiral"}, "encoding"),
    ({"family": "glm", "rope": {"theta_key": 3}}, "theta_key"), ({"layout": "half", "rope.rule": "sideways"}, "rule"),
    ({"family": 3}, "family"), ({"rope.theta": 1.0, "rope": 2}, "stated twice"), ({"rope": 2}, "rope takes"),
])
def test_a_stated_row_is_checked_as_the_table_s_rows(assume, named):
    with pytest.raises((ValueError, TypeError), match=named):
        refpos.model_positions(config("THUDM/glm-4-9b-chat", model_type="my_glm"), assume=assume)


def test_assume_values_are_toml_or_bare_words():
    assert assume_pairs(["rope.theta=5e6", "layout=half", "rope_dict=[\"ntk_alpha\"]", "rope.partial_honoured=true",
                         "rope.ratio_names={chatglm2 = \"divide\"}"]) == {
        "rope": {"theta": 5e6, "partial_honoured": True, "ratio_names": {"chatglm2": "divide"}}, "layout": "half",
        "rope_dict": ["ntk_alpha"]}
    with pytest.raises(ValueError, match="given twice"):
        assume_pairs(["layout=half", "layout=interleaved"])
    assert "rope" in ASSUMABLE and "family" in ASSUMABLE and "source" not in ASSUMABLE
    assert stated_row("x", {"encoding": "alibi"}).positions.encoding == "alibi"


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data), encoding="utf8")
    return path


def test_the_command_line_states_a_row_by_flags_or_file(tmp_path, capsys):
    cfg = _write(tmp_path / "config.json", config("THUDM/glm-4-9b-chat", model_type="my_glm"))
    row = tmp_path / "row.toml"
    row.write_text('family = "glm"\nignores = ["original_rope"]\n'
                   'rope = {head_dim_key = "kv_channels", length_key = "seq_length", ratio_key = "rope_ratio"}\n',
                   encoding="utf8")
    assert main(["positions", str(cfg), "--assume-file", str(row), "--assume", "rope.ratio_acts=base", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["complete"] and data["layers"][0]["rope"]["rope_theta"] == 5e6
    assert data["source"] == "stated by the caller"
    assert main(["positions", str(cfg), "--assume", "family=glm", "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kv_channels" in err[0]
    assert main(["rope", str(cfg), "--assume-file", str(row), "--assume", "rope.ratio_acts=base", "--strict"]) == 0
    assert "5000000.0" in capsys.readouterr().out
    out = tmp_path / "g"
    assert main(["golden", "model", str(cfg), "--out", str(out), "--assume-file", str(row), "--assume",
                 "rope.ratio_acts=base", "--no-certify", "--strict"]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf8"))
    assert manifest["source"]["assume"]["rope"]["ratio_acts"] == "base"
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 0


@pytest.mark.parametrize("text, named", [("rope = [", "is not TOML"), ('source = "x/modeling_x.py: f"\n', "caller"),
                                         ('layout = "spiral"\n', "layout")])
def test_a_bad_row_file_is_one_line(tmp_path, capsys, text, named):
    cfg = _write(tmp_path / "config.json", config("THUDM/glm-4-9b-chat", model_type="my_glm"))
    row = tmp_path / "row.toml"
    row.write_text(text, encoding="utf8")
    assert main(["positions", str(cfg), "--assume-file", str(row)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0]
    assert main(["positions", str(cfg), "--assume-file", str(tmp_path)]) == 2  # a directory is not a row file
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------- the new records
def test_the_step_rule_raises_the_base_in_powers_of_two():
    import numpy as np

    from refpos.rope.rules.step import step_alpha

    assert [step_alpha(n, 2048) for n in (None, 1, 1024, 2048, 2049, 4096, 4097, 8192, 8193)] == [
        1, 1, 1, 1, 3, 3, 7, 7, 15]
    rope = refpos.RopeConfig(rope_type="dynamic_step", head_dim=128, original_max_position_embeddings=2048)
    plain = refpos.to_numpy(refpos.rope_frequencies(refpos.RopeConfig(head_dim=128), seq_len=4096)[0])
    for length, alpha in ((2048, 1), (3000, 3), (8193, 15)):
        inv, factor = refpos.rope_frequencies(rope, seq_len=length)
        expected = (10000.0 * alpha ** (128 / 126)) ** (-np.arange(0, 128, 2) / 128)
        np.testing.assert_allclose(refpos.to_numpy(inv), expected, rtol=4e-16 * 64, atol=0)
        assert factor == 1.0
    assert np.array_equal(refpos.to_numpy(refpos.rope_frequencies(rope, seq_len=2048)[0]), plain)
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        refpos.RopeConfig(rope_type="dynamic_step", head_dim=128)


def test_qwen_s_log_n_scale_starts_past_the_training_length():
    import math

    from refpos.models.query_scales import QUERY_SCALES

    scale = QUERY_SCALES["qwen_logn"].read({"seq_length": 8192}, {})
    values = scale([0, 8190, 8191, 8192, 32766])
    assert values.tolist()[:3] == [1.0, 1.0, 1.0]  # p + 1 <= 8192
    assert values[3] == math.log(8193) / math.log(8192) and abs(values[4] - math.log(32767, 8192)) < 4e-16
    assert QUERY_SCALES["qwen_logn"].read({"seq_length": 8192, "use_logn_attn": False}, {}) is None


def test_golden_model_writes_no_goldens_for_a_borrowed_row_that_drops_keys(tmp_path, capsys):
    """``golden model --assume family=glm`` on a GLM-4 config: the layers are refused (rope_ratio, kv_channels, …
    not read), so nothing is written and the command exits 2 (it wrote GLM's θ = 10⁴ goldens and exited 0)."""
    cfg = _write(tmp_path / "config.json", config("THUDM/glm-4-9b-chat", model_type="my_glm"))
    for extra in ([], ["--strict"]):
        out = tmp_path / f"g{len(extra)}"
        assert main(["golden", "model", str(cfg), "--out", str(out), "--assume", "family=glm", "--no-certify",
                     *extra]) == 2
        err = capsys.readouterr().err
        assert "rope_ratio" in err and not out.exists()
