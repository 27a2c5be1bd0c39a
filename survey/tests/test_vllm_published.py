"""The published configs of the vLLM survey (``survey/vllm_engine/published/``): each record is read as JSON with its
source, a record that is missing, corrupt, a link or incomplete is named in a clear error, and the architectures
vLLM implements that transformers does not are built from them (the last needs vLLM)."""

from __future__ import annotations

import json
import re

import pytest

from survey.vllm_engine import configs, table

RECORDS = sorted(path.stem for path in configs.PUBLISHED.glob("*.json"))


def _write(directory, name, record):
    path = directory / f"{name}.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def _record(**changes):
    record = {"source": {"repo": "owner/name", "path": "config.json", "commit": "0" * 40},
              "config": {"architectures": ["FooForCausalLM"], "model_type": "foo", "hidden_size": 8}}
    record.update(changes)
    return record


@pytest.mark.parametrize("name", RECORDS)
def test_every_stored_record_reads_with_its_source_and_names_a_registry_architecture(name):
    values, source = configs.published_config(name)
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), source
    assert source["repo"].count("/") == 1 and source["path"]
    assert name in {row["architecture"] for row in table.load()["rows"]}, f"{name} is not in vLLM's table"
    assert values["model_type"]


def test_an_architecture_without_a_record_has_none(tmp_path):
    assert configs.published_config("FooForCausalLM", tmp_path) is None


def test_a_record_is_read_whole_with_its_source(tmp_path):
    _write(tmp_path, "FooForCausalLM", _record())
    values, source = configs.published_config("FooForCausalLM", tmp_path)
    assert values == {"architectures": ["FooForCausalLM"], "model_type": "foo", "hidden_size": 8}
    assert configs.describe(source) == "github:owner/name/config.json (commit 000000000000)"


def test_a_corrupt_record_is_named(tmp_path):
    (tmp_path / "FooForCausalLM.json").write_text('{"source": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"FooForCausalLM\.json: not JSON"):
        configs.published_config("FooForCausalLM", tmp_path)


def test_a_link_is_not_followed(tmp_path):
    target = _write(tmp_path, "Elsewhere", _record())
    (tmp_path / "FooForCausalLM.json").symlink_to(target)
    with pytest.raises(ValueError, match=r"FooForCausalLM\.json: not a plain file"):
        configs.published_config("FooForCausalLM", tmp_path)


@pytest.mark.parametrize("piece", ["repo", "path", "commit"])
def test_a_record_without_its_source_is_named(tmp_path, piece):
    record = _record()
    del record["source"][piece]
    _write(tmp_path, "FooForCausalLM", record)
    with pytest.raises(ValueError, match=r"FooForCausalLM\.json: its source must name repo, path, commit"):
        configs.published_config("FooForCausalLM", tmp_path)


def test_a_config_without_a_model_type_is_named(tmp_path):
    _write(tmp_path, "FooForCausalLM", _record(config={"architectures": ["FooForCausalLM"]}))
    with pytest.raises(ValueError, match="must be a dict with a model_type"):
        configs.published_config("FooForCausalLM", tmp_path)


def test_a_config_of_another_architecture_is_refused_unless_the_record_says_it_is_an_alias(tmp_path):
    _write(tmp_path, "BarForCausalLM", _record())
    with pytest.raises(ValueError, match=r"names \['FooForCausalLM'\], not BarForCausalLM"):
        configs.published_config("BarForCausalLM", tmp_path)
    _write(tmp_path, "BarForCausalLM", _record(alias_of="FooForCausalLM"))
    values, source = configs.published_config("BarForCausalLM", tmp_path)
    assert values["architectures"] == ["FooForCausalLM"]
    assert source["note"].startswith("FooForCausalLM's config")


def test_an_architecture_transformers_does_not_know_is_built_from_its_published_config():
    pytest.importorskip("vllm", reason="the registry is vLLM's")
    architecture = next(a for a in configs.architectures() if a.name == "MiMoForCausalLM")
    found = configs.config_for(architecture)
    assert found is not None, "no config found for MiMoForCausalLM"
    assert found.model_type == "mimo"
    assert "github:XiaomiMiMo/MiMo/config.json" in found.origin
    assert found.config.rope_theta == 640000 and found.config.num_key_value_heads == 8


def test_a_published_config_is_asked_before_a_transformers_class_defaults():
    pytest.importorskip("vllm", reason="the registry is vLLM's")
    architecture = next(a for a in configs.architectures() if a.name == "MiniMaxM2ForCausalLM")
    found = configs.config_for(architecture)
    assert found is not None and found.origin.startswith("published config.json"), found
    assert type(found.config).__name__ == "MiniMaxM2Config", "read by transformers' class of its model type"
    assert found.config.rotary_dim == 64, "the key the class defaults lack and vLLM's model reads"


def test_a_published_fp8_release_is_built_without_its_weight_quantization():
    pytest.importorskip("vllm", reason="the build is vLLM's")
    from survey.vllm_engine import engine, run

    engine.start()
    architecture = next(a for a in configs.architectures() if a.name == "MiniMaxM2ForCausalLM")
    assert configs.config_for(architecture).config.quantization_config["quant_method"] == "fp8"
    seen = run.observe(architecture)
    assert seen.run is not None and seen.row.cause == "", seen.row.cause
    assert "quantization_config" not in seen.config
    assert any(note.startswith("quantization_config: the checkpoint's") for note in seen.row.notes)


def test_an_architecture_vllms_own_config_class_names_is_built_from_its_defaults():
    pytest.importorskip("vllm", reason="the config class is vLLM's")
    architecture = next(a for a in configs.architectures() if a.name == "DeepseekVLV2ForCausalLM")
    found = configs.config_for(architecture)
    assert found is not None, "no config found for DeepseekVLV2ForCausalLM"
    assert (found.model_type, type(found.config).__name__) == ("deepseek_vl_v2", "DeepseekVLV2Config")


def test_a_speculative_head_is_built_from_its_targets_config_as_vllm_rewrites_it():
    pytest.importorskip("vllm", reason="the rewrite is vLLM's")
    architecture = next(a for a in configs.architectures() if a.name == "DeepSeekMTPModel")
    found = configs.config_for(architecture)
    assert found is not None, "no config found for DeepSeekMTPModel"
    assert found.model_type == "deepseek_mtp" and found.config.architectures == ["DeepSeekMTPModel"]
    assert found.origin.startswith("DeepseekV3ForCausalLM's config") and "hf_config_override" in found.origin


def test_a_merge_replaces_only_the_rows_it_names():
    stored = {"meta": {"vllm": "0"}, "rows": [{"architecture": "A", "status": "exact"},
                                              {"architecture": "B", "status": "not reached"}]}
    out = table.merged(stored, [{"architecture": "B", "status": "refused"}])
    assert out == {"meta": {"vllm": "0"}, "rows": [{"architecture": "A", "status": "exact"},
                                                   {"architecture": "B", "status": "refused"}]}
    with pytest.raises(ValueError, match="architectures the stored table lacks: C"):
        table.merged(stored, [{"architecture": "C", "status": "exact"}])


def _observed_and_judged(name):
    from survey.vllm_engine import engine, run

    engine.start()
    architecture = next(a for a in configs.architectures() if a.name == name)
    return run.judge(run.observe(architecture))


def test_an_eagle_draft_is_built_as_a_draft_of_itself_and_compared():
    pytest.importorskip("vllm", reason="the draft is vLLM's")
    row = _observed_and_judged("EagleLlamaForCausalLM")
    assert (row.status, row.observed) == ("exact", ["rope"]), (row.status, row.cause)


def test_a_speculative_head_of_a_targets_config_is_not_compared_and_says_why():
    pytest.importorskip("vllm", reason="the head is vLLM's")
    row = _observed_and_judged("DeepSeekMTPModel")
    assert row.status == "not reached"
    assert row.cause.startswith("a speculative head of DeepseekV3ForCausalLM: its layers are the target's")


def test_an_eagle_draft_named_after_an_architecture_is_built_from_that_architectures_config():
    pytest.importorskip("vllm", reason="the naming is vLLM's")
    architecture = next(a for a in configs.architectures() if a.name == "Eagle3Qwen3ForCausalLM")
    found = configs.config_for(architecture)
    assert found is not None, "no config found for Eagle3Qwen3ForCausalLM"
    assert found.model_type == "qwen3" and found.origin.startswith("the EAGLE draft of Qwen3ForCausalLM")
    assert configs.eagle_target("Eagle2_5_VLForConditionalGeneration") is None
    assert configs.eagle_target("DFlashLagunaForCausalLM").name == "LagunaForCausalLM"
