"""The config recipes of the vLLM survey (``survey/vllm_engine/recipes.toml``): each is read with its source, a recipe
that is incomplete or states a key vLLM's code does not read is refused by name, and a recipe builds the architecture's
config (the last two need vLLM); vLLM's square-root ALiBi (Step1's) is recorded in its own form."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from survey.vllm_engine import recipes

SOURCE = {"repo": "owner/name", "path": "config.py", "commit": "0" * 40}


def _table(**changes):
    table = {"model_type": "foo", "source": dict(SOURCE), "config": {"hidden_size": 8, "rope_theta": 10000.0}}
    table.update(changes)
    return table


def test_every_committed_recipe_reads_with_its_source():
    found = recipes.recipes()
    assert {"Step1ForCausalLM", "SolarForCausalLM", "TeleFLMForCausalLM", "IQuestLoopCoderForCausalLM",
            "Plamo3ForCausalLM"} <= {name for name, recipe in found.items() if not recipe.alias_of}
    assert {"InternLM2ForRewardModel", "VoyageQwen3BidirectionalEmbedModel", "HF_ColBERT", "ColBERTModernBertModel",
            "ColBERTLfm2Model", "JinaForRanking", "JinaEmbeddingsV5Model"} <= {name for name, recipe in found.items()
                                                                         if recipe.alias_of}
    for name, recipe in found.items():
        assert recipe.source["repo"].count("/") == 1 and recipe.source["path"], name
        assert recipe.alias_of or recipe.config["architectures"] == [name]


def test_a_recipe_states_its_keys_with_the_model_type_and_architecture():
    recipe = recipes.parse("FooForCausalLM", _table(**{"from": {"rope_theta": "derived"}}))
    assert recipe.config == {"hidden_size": 8, "rope_theta": 10000.0, "model_type": "foo",
                             "architectures": ["FooForCausalLM"]}
    assert recipe.origins == {"hidden_size": "the source states it", "rope_theta": "derived"}
    assert "rope_theta: derived" in recipes.describe(recipe)


@pytest.mark.parametrize(("changes", "message"), [
    ({"source": {"repo": "owner/name", "path": "config.py"}}, "its source must name repo, path, commit"),
    ({"source": {**SOURCE, "commit": "main"}}, "is not 40 hex digits"),
    ({"model_type": ""}, "model_type must be a non-empty string"),
    ({"config": {}}, "its config must be a table"),
    ({"config": {"model_type": "bar"}}, "config states model_type"),
    ({"from": {"head_dim": "derived"}}, "'from' names keys its config does not state"),
    ({"rope": {}}, "unknown field"),
    ({"alias_of": "BarForCausalLM"}, "an alias names another architecture and its source, nothing else"),
])
def test_an_incomplete_recipe_is_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=f"recipe FooForCausalLM: .*{message}"):
        recipes.parse("FooForCausalLM", _table(**changes))


def test_a_derived_key_is_computed_by_its_rule_from_the_stated_inputs():
    table = _table(config={"num_hidden_layers": 4, "sliding_window_pattern": 2}, derive="plamo3_windows",
                   inputs={"window_size": 16})
    recipe = recipes.parse("FooForCausalLM", table)
    assert recipe.config["interleaved_sliding_window"] == [16, None, 16, None]
    assert recipe.config["layer_types"] == ["sliding_attention", "full_attention"] * 2
    assert "window_size = 16" in recipe.origins["layer_types"]
    for changes, message in (({"derive": "windows"}, "derive 'windows' is none of"),
                             ({"inputs": {}}, "takes inputs"),
                             ({"inputs": {"window_size": 16, "pattern": 2}}, "takes inputs"),
                             ({"config": {**table["config"], "layer_types": []}}, "both stated and derived")):
        with pytest.raises(ValueError, match=f"recipe FooForCausalLM: .*{message}"):
            recipes.parse("FooForCausalLM", {**table, **changes})


def test_an_alias_names_its_architecture():
    recipe = recipes.parse("FooForRewardModel", {"alias_of": "FooForCausalLM", "source": dict(SOURCE)})
    assert recipe.alias_of == "FooForCausalLM" and not recipe.config


def test_a_key_no_line_of_vllm_code_names_is_refused(tmp_path):
    code = tmp_path / "foo.py"
    code.write_text('self.theta = config.rope_theta\nwidth = getattr(config, "hidden_size", 8)\n', encoding="utf-8")
    recipe = recipes.parse("FooForCausalLM", _table())
    recipes.check_keys(recipe, [code])
    wrong = recipes.parse("FooForCausalLM", _table(config={"hidden_size": 8, "rope_base": 10000.0}))
    with pytest.raises(ValueError, match="recipe FooForCausalLM: rope_base read by none of vLLM's code"):
        recipes.check_keys(wrong, [code])


def test_a_recipes_file_is_read_whole(tmp_path):
    path = tmp_path / "recipes.toml"
    path.write_text('[FooForCausalLM]\nmodel_type = "foo"\nsource = {repo = "o/n", path = "c.py", commit = "'
                    + "a" * 40 + '"}\n[FooForCausalLM.config]\nhidden_size = 8\n', encoding="utf-8")
    assert recipes.recipes(path)["FooForCausalLM"].config["hidden_size"] == 8
    assert recipes.recipes(tmp_path / "absent.toml") == {}


def _vllm():
    pytest.importorskip("torch", reason="the vLLM survey runs vLLM's model code: tox -e survey-vllm")
    pytest.importorskip("vllm.model_executor.models.registry", reason="vLLM: tox -e survey-vllm")
    from survey.vllm_engine import configs

    return {a.name: a for a in configs.architectures()}


def test_every_committed_recipe_names_only_keys_vllm_reads_and_builds_a_config():
    every = _vllm()
    from survey.vllm_engine import configs

    for name in recipes.recipes():
        found = configs.config_for(every[name])
        assert found is not None and "recipe" in found.origin, name
    step1 = configs.config_for(every["Step1ForCausalLM"])
    assert step1.model_type == "step1" and step1.config.num_attention_groups == 4
    reward = configs.config_for(every["InternLM2ForRewardModel"])
    assert reward.model_type == "internlm2" and "InternLM2ForCausalLM's config" in reward.origin
    plamo3 = configs.config_for(every["Plamo3ForCausalLM"])
    assert plamo3.config.interleaved_sliding_window[7] is None and plamo3.config.rope_local_theta == 10000


def test_a_committed_recipe_given_a_key_vllm_does_not_read_is_refused():
    every = _vllm()
    step1 = recipes.recipes()["Step1ForCausalLM"]
    files = recipes.vllm_files(every["Step1ForCausalLM"])
    assert files[0].name == "step1.py" and any(f.name == "config.py" for f in files)
    recipes.check_keys(step1, files)
    for key in ("rope_theta_of_step1", "alibi_bias_max_sqrt"):
        wrong = dataclasses.replace(step1, config={**step1.config, key: 1.0})
        with pytest.raises(ValueError, match=f"recipe Step1ForCausalLM: {key} read by none of vLLM's code"):
            recipes.check_keys(wrong, files)


def test_the_square_root_alibi_is_recorded_in_its_own_form():
    from survey.vllm_engine.engine import _alibi

    slopes = np.array([0.5, 0.25])
    (name, bias), = _alibi(slopes, 4, sqrt=True).items()
    assert "sqrt" in name and bias.shape == (1, 2, 4, 4)
    assert bias[0, 0, 3, 0] == -0.5 * np.sqrt(3.0) and bias[0, 1, 2, 1] == -0.25 and bias[0, 0, 1, 3] == 0.0
    (linear_name, linear), = _alibi(slopes, 4, sqrt=False).items()
    assert "sqrt" not in linear_name and linear[0, 0, 3, 2] == 1.0
    # the two forms are not one bias shifted per row (a softmax-invisible change): the linear form read for the
    # square-root one would be caught by the ALiBi comparison, which subtracts each row's diagonal
    rows = bias[0] - np.diagonal(bias[0], axis1=1, axis2=2)[..., None]
    linear_rows = linear[0] - np.diagonal(linear[0], axis1=1, axis2=2)[..., None]
    causal = np.tril(np.ones((4, 4), dtype=bool))
    assert np.abs((rows - linear_rows)[:, causal]).max() > 0.1


def test_an_alias_of_an_architecture_outside_the_registry_is_refused(monkeypatch):
    every = _vllm()
    from survey.vllm_engine import configs

    alias = recipes.Recipe("Step1ForCausalLM", dict(SOURCE), alias_of="NoSuchForCausalLM")
    monkeypatch.setattr(recipes, "recipe", lambda architecture, path=None: alias)
    with pytest.raises(ValueError, match="recipe Step1ForCausalLM: alias_of 'NoSuchForCausalLM' is not in vLLM's"):
        configs.config_for(every["Step1ForCausalLM"])
