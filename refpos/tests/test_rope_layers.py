"""Per-layer positions (``hf_layers`` / ``hf_layer``), the not-modelled report and ``refpos rope``'s schedule.

The report's list of position-relevant keys is explicit (``position_keys.POSITION_KEYS``); these tests pin
what it reports on real and hand-made configs, that harmless keys stay out of it, and that ``strict``
refuses it. Query scales are float64 formulas evaluated two ways: rtol 1e-15.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import refpos
from refpos.models import UnknownFamilyWarning
from refpos.models import layers as rl
from refpos.models import position_keys as pk

CONFIGS = json.loads((Path(refpos.__file__).parent / "data" / "family_configs.json").read_text(encoding="utf8"))
LLAMA4 = CONFIGS["meta-llama/Llama-4-Scout-17B-16E-Instruct (text_config)"]["config"]
SMOL = CONFIGS["HuggingFaceTB/SmolLM3-3B-Base"]["config"]
COMMAND_A = CONFIGS["CohereForAI/c4ai-command-a-03-2025"]["config"]
EXAONE = CONFIGS["LGAI-EXAONE/EXAONE-4.0-32B"]["config"]
MINISTRAL = CONFIGS["mistralai/Ministral-3-8B-Instruct-2512 (text_config)"]["config"]
LLAMA = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4, "num_hidden_layers": 4,
         "rope_theta": 1e4, "max_position_embeddings": 4096}


@pytest.mark.parametrize("config, summary", [
    (LLAMA4, "layers 0-47: rope ×36, none+scale ×12 (every 4th)"),
    (SMOL, "layers 0-35: rope ×27, none ×9 (every 4th)"),
    (COMMAND_A, "layers 0-63: rope ×48, none ×16 (every 4th)"),
    (EXAONE, "layers 0-63: rope ×48, none ×16 (every 4th)"),
    (MINISTRAL, "layers 0-33: rope+scale ×34"),
    (LLAMA, "layers 0-3: rope ×4"),
])
def test_schedules(config, summary):
    assert refpos.models.hf_layers(config).summary() == summary


def test_layers_rotate_where_the_family_says():
    schedule = refpos.models.hf_layers(LLAMA4)
    assert [i for i, layer in enumerate(schedule) if layer.rope is None] == list(range(3, 48, 4))
    assert schedule[0].rope == refpos.models.from_hf_config(LLAMA4) and schedule[0].rope.layout == "interleaved"
    explicit = dict(SMOL, no_rope_layers=[1, 0] * 18)
    assert [layer.rope is None for layer in refpos.models.hf_layers(explicit)] == [False, True] * 18
    assert [layer.rope is not None for layer in refpos.models.hf_layers(dict(COMMAND_A,
                                                                             sliding_window=None))] == [False] * 64
    assert all(layer.rope is not None for layer in refpos.models.hf_layers(dict(EXAONE, sliding_window=None)))
    gemma = {"model_type": "gemma3_text", "hidden_size": 640, "num_attention_heads": 4, "head_dim": 256,
             "num_hidden_layers": 12, "rope_theta": 1e6, "rope_local_base_freq": 1e4, "max_position_embeddings": 32768}
    schedule = refpos.models.hf_layers(gemma)  # layer_types from sliding_window_pattern 6, per-type RoPE
    assert [layer.layer_type for layer in schedule][:6] == ["sliding_attention"] * 5 + ["full_attention"]
    assert (schedule[0].rope.theta, schedule[5].rope.theta) == (1e4, 1e6)


def test_query_scales():
    positions = np.array([0, 1, 8190, 8191, 16383, 10**6])
    nope = refpos.models.hf_layer(LLAMA4, 3)
    # float64 on both sides, the same log and floor: a few ulps (rtol 1e-15)
    expected = [1 + 0.1 * math.log(1 + math.floor((p + 1) / 8192)) for p in positions]
    np.testing.assert_allclose(nope.query_scale(cache_position=positions), expected, rtol=1e-15)
    np.testing.assert_array_equal(refpos.models.hf_layer(LLAMA4, 2).query_scale(positions), np.ones(6))
    off = refpos.models.hf_layers(dict(LLAMA4, attn_temperature_tuning=False))
    assert off[3].scale is None and off[3].kind == "none"
    assert refpos.models.hf_layers(dict(LLAMA4, attn_temperature_tuning=4))[3].scale == nope.scale  # Scout base: 4
    beta = [1 + 0.1 * math.log(1 + math.floor(p / 16384)) for p in positions]
    np.testing.assert_allclose(refpos.models.hf_layer(MINISTRAL, 7).query_scale(positions), beta, rtol=1e-15)
    assert refpos.models.hf_layer(LLAMA, 0).query_scale([[3, 4]]).shape == (1, 2)


def test_query_scale_property_breaks_on_an_inclusive_floor(monkeypatch):
    real = rl.HFLayer.query_scale
    monkeypatch.setattr(rl.HFLayer, "query_scale", lambda self, p=None, cache_position=None: real(
        self, None if p is None else np.asarray(p) + 1,
        cache_position=None if cache_position is None else np.asarray(cache_position) + 1))
    with pytest.raises(AssertionError):
        test_query_scales()


def test_not_modelled_report_is_explicit():
    assert dict(refpos.models.hf_layers(LLAMA).not_modelled) == {}
    scout = refpos.models.hf_layers(LLAMA4)
    assert set(scout.not_modelled) == {"attention_chunk_size", "use_qk_norm"} and not scout.complete
    assert set(refpos.models.from_hf_config(LLAMA4).not_modelled) == {"attention_chunk_size", "use_qk_norm",
                                                                "attn_temperature_tuning", "floor_scale",
                                                                "attn_scale", "no_rope_layers", "model_type"} - {
        "no_rope_layers"}  # an empty no_rope_layers list is not active
    assert "layer" in refpos.models.from_hf_config(LLAMA4).not_modelled["model_type"]
    with pytest.warns(UnknownFamilyWarning, match="my_new_llm"):
        unknown = refpos.models.from_hf_config(dict(LLAMA, model_type="my_new_llm"))
    assert "assumed" in unknown.not_modelled["model_type"] and unknown.layout == "half"
    qwen = refpos.models.from_hf_config(CONFIGS["Qwen/Qwen2-7B-Instruct"]["config"])
    assert "sliding_window" in qwen.unused_keys and not qwen.not_modelled  # window off: harmless
    gemma2 = refpos.models.from_hf_config(CONFIGS["google/gemma-2-9b"]["config"])
    assert set(gemma2.not_modelled) == {"attn_logit_softcapping", "query_pre_attn_scalar", "sliding_window"}
    llama_alpha = dict(LLAMA, rope_scaling={"type": "dynamic", "alpha": 8.0, "factor": 2.0})
    assert "vLLM" in refpos.models.from_hf_config(llama_alpha).not_modelled["rope_scaling.alpha"]
    phi3 = {"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 8192,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
                             "original_max_position_embeddings": 4096, "short_mscale": 1.1, "long_mscale": 1.2}}
    assert set(refpos.models.from_hf_config(phi3).not_modelled) == {"rope_scaling.short_mscale",
                                                                    "rope_scaling.long_mscale"}
    phimoe = refpos.models.from_hf_config(dict(phi3, model_type="phimoe"))
    assert not phimoe.not_modelled and (phimoe.short_mscale, phimoe.long_mscale) == (1.1, 1.2)


def test_every_position_key_has_an_activity_rule_and_an_effect():
    assert all(rule in pk.ACTIVE and effect for rule, effect in pk.POSITION_KEYS.values())
    assert not pk.is_active({"sliding_window": 4096, "use_sliding_window": False}, "sliding_window")
    assert pk.is_active({"sliding_window": 4096}, "sliding_window")
    assert not pk.is_active({"position_embedding_type": "rope"}, "position_embedding_type")
    assert pk.is_active({"position_embedding_type": "absolute"}, "position_embedding_type")
    assert pk.active_position_keys({"vocab_size": 3, "hidden_act": "silu", "use_qk_norm": False}) == []


def test_report_breaks_when_a_key_leaves_the_list(monkeypatch):
    monkeypatch.delitem(pk.POSITION_KEYS, "attn_logit_softcapping")
    with pytest.raises(AssertionError):
        test_not_modelled_report_is_explicit()


def test_strict():
    with pytest.raises(ValueError, match="attention_chunk_size"):
        refpos.models.hf_layers(LLAMA4, strict=True)
    assert refpos.models.hf_layers(SMOL, strict=True).complete
    with pytest.raises(ValueError, match="model_type"):
        refpos.models.from_hf_config(SMOL, strict=True)  # one RoPE for all layers: the NoPE layers are not modelled


@pytest.mark.parametrize("config, index, error, name", [
    (LLAMA, 4, ValueError, "index"),
    (LLAMA, -1, ValueError, "index"),
    (LLAMA, 1.5, TypeError, "index"),
    ({k: v for k, v in LLAMA.items() if k != "num_hidden_layers"}, 0, ValueError, "num_hidden_layers"),
    (dict(LLAMA4, no_rope_layers=[1, 2] * 24), 0, ValueError, "no_rope_layers"),
    (dict(LLAMA4, no_rope_layers=[1, 0]), 0, ValueError, "no_rope_layers"),
    (dict(LLAMA4, floor_scale=0), 3, ValueError, "floor_scale"),
    (dict(LLAMA4, attn_temperature_tuning="no"), 3, TypeError, "attn_temperature_tuning"),
    (dict(LLAMA4, attn_temperature_tuning=-1), 3, TypeError, "attn_temperature_tuning"),
    (dict(COMMAND_A, layer_types=["sliding_attention"] * 3), 0, ValueError, "layer_types"),
    ({**{k: v for k, v in EXAONE.items() if k != "layer_types"}, "model_type": "flint"}, 0, ValueError,
     "layer_types"),
])
def test_bad_input_names_the_parameter(config, index, error, name):
    with pytest.raises(error, match=name):
        refpos.models.hf_layer(config, index)



def test_a_missing_layer_count_is_its_own_error():
    """Callers that can do without a schedule (golden model, refpos rope) catch LayerCountMissing, a
    ValueError; any other bad layer count stays a plain ValueError and is not mistaken for a missing one."""
    no_count = {k: v for k, v in LLAMA.items() if k != "num_hidden_layers"}
    with pytest.raises(refpos.models.LayerCountMissing, match="num_hidden_layers"):
        refpos.models.hf_layers(no_count)
    with pytest.raises(ValueError, match="num_hidden_layers") as bad:
        refpos.models.hf_layers(dict(LLAMA, num_hidden_layers=0))
    assert not isinstance(bad.value, refpos.models.LayerCountMissing)


def test_a_layer_count_per_encoder_counts_every_layer():
    """LXMERT counts its layers per encoder (``num_hidden_layers = {"language": 9, "vision": 5, ...}``, its row's
    ``count = "per_encoder"``): the schedule holds all of them, and a bad count in it is an error naming that
    entry; a family whose row does not say so is refused such a count (the count's type named)."""
    from refpos.models.families import family_of
    from refpos.models.schedule import layer_count

    lxmert = family_of("lxmert")
    assert layer_count({"num_hidden_layers": {"vision": 5, "cross_encoder": 5, "language": 9}}, lxmert) == 19
    with pytest.raises(TypeError, match=r"num_hidden_layers\.vision"):
        layer_count({"num_hidden_layers": {"vision": 5.0, "language": 9}}, lxmert)
    with pytest.raises(ValueError, match=r"num_hidden_layers\.language"):
        layer_count({"num_hidden_layers": {"vision": 5, "language": -1}}, lxmert)
    with pytest.raises(TypeError, match="num_hidden_layers must be an int"):
        layer_count({"num_hidden_layers": {"language": 9}}, family_of("llama"))

QWEN3_NEXT = {"model_type": "qwen3_next", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2,
              "head_dim": 256, "num_hidden_layers": 48, "rope_theta": 1e7, "partial_rotary_factor": 0.25,
              "max_position_embeddings": 262144}


@pytest.mark.parametrize("config, summary", [
    (QWEN3_NEXT, "layers 0-47: linear ×36, rope ×12 (every 4th)"),  # full_attention_interval default 4
    (dict(QWEN3_NEXT, full_attention_interval=2), "layers 0-47: linear ×24, rope ×24 (every 2nd)"),
    (dict(QWEN3_NEXT, model_type="bamba", num_hidden_layers=8, attn_layer_indices=[3, 7]),
     "layers 0-7: mamba ×6 (0, 1, 2, 4, 5, 6), rope ×2 (every 4th)"),
    (dict(QWEN3_NEXT, model_type="lfm2", num_hidden_layers=6, full_attn_idxs=[2, 5]),
     "layers 0-5: conv ×4 (0, 1, 3, 4), rope ×2 (every 3rd)"),
    (dict(QWEN3_NEXT, model_type="granitemoehybrid", num_hidden_layers=4, position_embedding_type="rope",
          layer_types=["mamba", "mamba", "mamba", "attention"]), "layers 0-3: mamba ×3 (0, 1, 2), rope ×1"),
    # Granite-4.0-H: RoPE only with position_embedding_type "rope"; absent (the class default) or "nope": none
    (dict(QWEN3_NEXT, model_type="granitemoehybrid", num_hidden_layers=4,
          layer_types=["mamba", "mamba", "mamba", "attention"]), "layers 0-3: mamba ×3 (0, 1, 2), none ×1"),
    (dict(QWEN3_NEXT, model_type="granitemoehybrid", num_hidden_layers=4, position_embedding_type="nope",
          layer_types=["mamba", "mamba", "mamba", "attention"]), "layers 0-3: mamba ×3 (0, 1, 2), none ×1"),
    (dict(QWEN3_NEXT, model_type="minimax", num_hidden_layers=4,
          layer_types=["full_attention", "linear_attention"] * 2), "layers 0-3: rope ×2 (0, 2), linear ×2 (every 2nd)"),
])
def test_layers_without_attention_are_a_kind_of_their_own(config, summary):
    schedule = refpos.models.hf_layers(config)
    assert schedule.summary() == summary
    for layer in schedule:
        no_attention = layer.kind in ("linear", "mamba", "conv")
        assert layer.attention is not no_attention and (layer.rope is not None) is (layer.kind == "rope")
        assert not no_attention or (layer.scale is None and layer.query_scale([5])[0] == 1.0)
    assert "layer_types" not in schedule.not_modelled  # the schedule reads it
    if "rope" in summary:
        # one RoPE for all: a gap
        assert "no attention" in refpos.models.from_hf_config(config).not_modelled["model_type"]
    else:  # RoPE switched off: from_hf_config has no RoPE to give, and says which key turned it off
        with pytest.raises(ValueError, match=r"position_embedding_type=\S* gives none positions"):
            refpos.models.from_hf_config(config)


def test_complete_says_when_the_layers_without_attention_are_not_placed():
    assert refpos.models.hf_layers(QWEN3_NEXT).complete  # the pattern places them
    minimax = refpos.models.hf_layers(dict(QWEN3_NEXT, model_type="minimax"))  # no layer_types, no pattern
    assert not minimax.complete and minimax.summary() == "layers 0-47: rope ×48"
    assert "no layer_types to say which" in minimax.not_modelled["model_type"]
    with pytest.raises(ValueError, match="model_type"):
        refpos.models.hf_layers(dict(QWEN3_NEXT, model_type="minimax"), strict=True)
    with pytest.raises(ValueError, match="attn_layer_indices"):
        refpos.models.hf_layers(dict(QWEN3_NEXT, model_type="bamba", attn_layer_indices=[48]))
    bamba = refpos.models.hf_layers(dict(QWEN3_NEXT, model_type="bamba"))  # absent: every layer mamba (BambaConfig)
    assert bamba.summary() == "layers 0-47: mamba ×48" and bamba.complete


def test_layer_kind_tests_break_when_the_family_forgets_its_mamba_layers(monkeypatch):
    import dataclasses

    from refpos.models import families

    row = families.FAMILIES["qwen3_next"]
    monkeypatch.setitem(families.FAMILIES, "qwen3_next", dataclasses.replace(row, no_attention=()))
    with pytest.raises(AssertionError):
        test_layers_without_attention_are_a_kind_of_their_own(QWEN3_NEXT, "layers 0-47: linear ×36, rope ×12 "
                                                                          "(every 4th)")


def test_query_scale_bad_positions():
    layer = refpos.models.hf_layer(LLAMA4, 3)
    with pytest.raises(TypeError, match="positions"):
        layer.query_scale([0.5])
    with pytest.raises(ValueError, match="positions"):
        layer.query_scale([-1])
    with pytest.raises(ValueError, match="cache_position"):
        layer.query_scale(cache_position=[-1])


def test_llama4_temperature_reads_the_slot_never_the_id():
    """transformers' Llama4TextAttention scales by ``arange(T) + past_seen_tokens``: id 32767 in slot 5 is scaled
    by 1, and a call that gives only ids is refused rather than read as slots."""
    layer = refpos.models.hf_layer(LLAMA4, 3)
    ids = [0, 1, 2, 3, 4, 32767]
    with pytest.raises(ValueError, match=r"slot .*cache_position="):
        layer.query_scale(ids)
    np.testing.assert_array_equal(layer.query_scale(ids, cache_position=np.arange(6)), np.ones(6))
    np.testing.assert_array_equal(layer.query_scale(ids, attention_mask=np.ones(6)), np.ones(6))  # T_k = T: no cache
    decoding = layer.query_scale([7], attention_mask=np.ones(32768))  # one token after 32767 cached: slot 32767
    assert decoding.tolist() == [1 + 0.1 * math.log(1 + 4)]
    record = refpos.model_positions(LLAMA4).layers[3]
    assert record.reads == (("scale", ("cache_position",)),)
    np.testing.assert_array_equal(record.scale(ids, cache_position=np.arange(6)), np.ones(6))
    with pytest.raises(ValueError, match="cache_position="):
        record.scale(ids)


def test_cli_prints_the_schedule_and_the_report(tmp_path, capsys):
    from refpos.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA4))
    assert main(["rope", str(path)]) == 0
    out = capsys.readouterr().out
    assert "layers 0-47: rope ×36, none+scale ×12 (every 4th)" in out
    assert "complete: NO, 2 not modelled:" in out and "attention_chunk_size: chunked attention" in out
    assert main(["rope", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["complete"] is False and set(data["not_modelled"]) == {"attention_chunk_size", "use_qk_norm"}
    assert data["kinds"]["all/none+scale"] == list(range(3, 48, 4)) and data["ropes"]["all"]["params"]["layout"] \
        == "interleaved"
    assert main(["rope", str(path), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "attention_chunk_size" in err and len(err.strip().splitlines()) == 1
    smol = tmp_path / "smol.json"
    smol.write_text(json.dumps(SMOL))
    assert main(["rope", str(smol), "--strict"]) == 0
    assert "complete: yes" in capsys.readouterr().out


def test_check_rope_reports_not_modelled_and_judges_the_layout(tmp_path, capsys):
    """A Llama 4 port rotating interleaved pairs (as transformers' apply_rotary_emb) passes; half-split fails."""
    import dataclasses

    from refpos.cli import main
    from refpos.golden.files.npy import npy_bytes

    rope = refpos.models.from_hf_config(LLAMA4)
    positions = np.array([0, 1, 100, 8191, 65535])
    x = np.random.default_rng(3).standard_normal((positions.size, rope.head_dim))
    files = {"config.json": json.dumps(LLAMA4).encode(), "x.npy": npy_bytes(x), "p.npy": npy_bytes(positions),
             "good.npy": npy_bytes(refpos.to_numpy(refpos.apply_rope(x, positions, rope))),
             "half.npy": npy_bytes(refpos.to_numpy(refpos.apply_rope(x, positions,
                                                                    dataclasses.replace(rope, layout="half"))))}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    args = ["check", "rope", "--config", str(tmp_path / "config.json"), "--input", str(tmp_path / "x.npy"),
            "--positions", str(tmp_path / "p.npy"), "--candidate"]
    assert main([*args, str(tmp_path / "good.npy")]) == 0
    assert "not modelled: attention_chunk_size" in capsys.readouterr().out
    assert main([*args, str(tmp_path / "half.npy")]) == 1
    capsys.readouterr()
    assert main([*args, str(tmp_path / "good.npy"), "--strict"]) == 2
    assert "attention_chunk_size" in capsys.readouterr().err


def test_golden_model_writes_a_case_per_layer_kind(tmp_path, capsys):
    from refpos.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA4))
    assert main(["golden", "model", str(path), "--out", str(tmp_path / "g"), "--name", "scout",
                 "--positions", "0,1,8191,65535", "--no-certify"]) == 0
    out = capsys.readouterr().out
    assert "rope/scout/layers/all-none+scale" in out and "rope/scout/layers/all-rope" in out
    assert "complete: NO, 2 not modelled" in out
    manifest = json.loads((tmp_path / "g" / "manifest.json").read_text())
    case = next(c for c in manifest["cases"] if c["id"] == "rope/scout/layers/all-none+scale")
    assert case["parameters"]["layers"] == list(range(3, 48, 4))
    assert set(manifest["source"]["not_modelled"]) == {"attention_chunk_size", "use_qk_norm"}
    assert main(["golden", "verify", "--golden-dir", str(tmp_path / "g")]) == 0
    assert main(["golden", "model", str(path), "--out", str(tmp_path / "h"), "--strict"]) == 2


def test_multi_axis_configs_list_their_keys_as_not_modelled():
    """A multi-axis family refpos does not model (HunYuan-VL here) resolves along one axis, and says so; Qwen2-VL,
    whose M-RoPE refpos models, reports nothing."""
    config = {"model_type": "hunyuan_vl_text", "hidden_size": 3584, "num_attention_heads": 28, "num_hidden_layers": 28,
              "rope_theta": 1e6, "max_position_embeddings": 32768,
              "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    rope = refpos.models.from_hf_config(config)  # 'mrope' read as 'default', as transformers' config class does
    assert rope.rope_type == "default" and "rope_scaling.mrope_section" in rope.not_modelled
    report = refpos.models.hf_layers(config).not_modelled
    assert "M-RoPE" in report["rope_scaling.mrope_section"] and "multi-axis" in report["model_type"]
    assert not refpos.models.from_hf_config(dict(config, model_type="qwen2_vl")).not_modelled


GRANITE_SWA = {"model_type": "granite_swa", "hidden_size": 512, "num_attention_heads": 4, "num_hidden_layers": 4,
               "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}, "max_position_embeddings": 4096,
               "sliding_window": 128, "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                                                      "sliding_attention"],
               "layer_rope_theta": [0, 1e4, 5e5, 1e4]}
MUSE_SPARK_TEXT = {"model_type": "muse_spark_text", "hidden_size": 512, "num_attention_heads": 4,
                   "num_hidden_layers": 8, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5},
                   "max_position_embeddings": 4096, "sliding_window": 128}


def test_a_per_layer_base_list_gives_each_layer_its_base_and_zero_none():
    """GraniteSWAModel.forward: layer i rotates at base layer_rope_theta[i], none at 0; absent, every layer at the
    global base. Muse Spark (MuseSparkTextModel.forward): a non-zero entry rotates at the global base, 0 none;
    absent, every 4th layer counted back from the last has none (the config class's fill)."""
    schedule = rl.hf_layers(GRANITE_SWA)
    assert set(schedule.not_modelled) == {"sliding_window"}  # the mask only: the list is read
    assert schedule.summary() == "layers 0-3: none ×1, rope ×3 (1, 2, 3)"
    assert [layer.rope.theta for layer in schedule if layer.rope] == [1e4, 5e5, 1e4]
    plain = rl.hf_layers({k: v for k, v in GRANITE_SWA.items() if k != "layer_rope_theta"})
    assert plain.summary() == "layers 0-3: rope ×4"
    spark = rl.hf_layers(MUSE_SPARK_TEXT)
    assert set(spark.not_modelled) == {"sliding_window"}
    assert [layer.kind for layer in spark] == ["rope", "rope", "rope", "none"] * 2
    listed = rl.hf_layers({**MUSE_SPARK_TEXT, "layer_rope_theta": [1e6, 0, 1, 1, 1, 1, 1, 0]})
    assert any("only switches RoPE on" in note for note in listed.notes)
    assert [layer.rope.theta if layer.rope else 0 for layer in listed] == [5e5, 0, 5e5, 5e5, 5e5, 5e5, 5e5, 0]
    with pytest.raises(ValueError, match="layer_rope_theta"):
        rl.hf_layers({**GRANITE_SWA, "layer_rope_theta": [0, 1e4]})


def test_layers_outside_rope_scaling_layers_rotate_unscaled():
    """Molmo2TextModel.forward: the layers rope_scaling_layers lists take the rope dict's scaling, the others
    Molmo2RotaryEmbedding(scaled=False): rope type default at the same base; absent, every layer is scaled."""
    config = {"model_type": "molmo2_text", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
              "num_hidden_layers": 4, "max_position_embeddings": 36864, "rope_scaling_layers": [1, 3],
              "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                  "original_max_position_embeddings": 8192}}
    schedule = rl.hf_layers(config, strict=True)
    assert [layer.rope.rope_type for layer in schedule] == ["default", "yarn", "default", "yarn"]
    assert {layer.rope.theta for layer in schedule} == {1e6}
    every = rl.hf_layers({k: v for k, v in config.items() if k != "rope_scaling_layers"}, strict=True)
    assert [layer.rope.rope_type for layer in every] == ["yarn"] * 4
    with pytest.raises(ValueError, match="rope_scaling_layers"):
        rl.hf_layers({**config, "rope_scaling_layers": [4]})


def test_cohere2_moe_dense_prefix_layers_rotate_whatever_their_window():
    """Cohere2MoeAttention rotates when the layer has a window or force_rope holds: its MLP is dense
    (mlp_layer_types) and prefix_dense_sliding_window_pattern is 1; full-attention MoE layers do not rotate."""
    config = {"model_type": "cohere2_moe", "hidden_size": 512, "num_attention_heads": 4, "num_hidden_layers": 6,
              "rope_theta": 5e4, "max_position_embeddings": 8192, "sliding_window": 4096,
              "layer_types": ["full_attention", "full_attention", "sliding_attention", "full_attention",
                              "sliding_attention", "full_attention"],
              "mlp_layer_types": ["dense", "dense", "sparse", "sparse", "sparse", "sparse"]}
    schedule = rl.hf_layers(config)
    assert [layer.kind for layer in schedule] == ["rope", "rope", "rope", "none", "rope", "none"]
    assert not [k for k in schedule.not_modelled if k != "sliding_window"]
    patterned = rl.hf_layers({**config, "prefix_dense_sliding_window_pattern": 4})
    assert [layer.kind for layer in patterned] == ["none", "none", "rope", "none", "rope", "none"]
    counted = rl.hf_layers({k: v for k, v in config.items() if k != "mlp_layer_types"} | {"first_k_dense_replace": 1})
    assert [layer.kind for layer in counted] == ["rope", "none", "rope", "none", "rope", "none"]
