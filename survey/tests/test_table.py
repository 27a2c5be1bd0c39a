"""The survey's table, page and shrinking rules (no torch needed)."""

from __future__ import annotations

from typing import ClassVar

import pytest

from survey import table, tiny
from survey.__main__ import sample


def row(name, status, observed):
    return {"model_type": name, "status": status, "observed": observed, "claimed": [], "layers": "",
            "max_error": None, "cause": "", "notes": [], "file": f"{name}/modeling_{name}.py"}


ROWS = [row("a", "exact", ["rope"]), row("b", "exact", ["rope"]), row("c", "exact", ["rope"]),
        row("d", "wrong", ["rope"]), row("e", "refused", ["learned"]), row("f", "not reached", [])]


def test_sample_takes_the_first_of_every_group():
    assert sample(ROWS) == ["a", "d", "e", "f"]
    assert sample(ROWS, per_group=2) == ["a", "b", "d", "e", "f"]
    assert sample(list(reversed(ROWS))) == sample(ROWS)  # by name, not by order


def test_new_types_are_named():
    assert table.new_types(["a", "z", "b"], {"meta": {}, "rows": ROWS}) == ["z"]
    assert table.new_types([r["model_type"] for r in ROWS], {"meta": {}, "rows": ROWS[1:]}) == ["a"]


def test_page_counts_every_status_and_encoding():
    page = table.render({"meta": {"transformers": "9.9"}, "rows": ROWS})
    assert "| exact | 3 |" in page and "| wrong | 1 |" in page and "| all | 6 |" in page
    assert "| rope | 3 | 0 | 1 | 0 | 0 | 4 |" in page
    assert "| not run | 0 | 0 | 0 | 0 | 1 | 1 |" in page
    every = page.split("## Every model type")[1].split("## A second engine")[0]  # the vLLM section follows
    assert every.count("| `") == len(ROWS)
    unreached = page.split("## Not reached, each with its reason")[1].split("## Every model type")[0]
    assert "1 of 6 model types (16.7 %)" in unreached and unreached.count("| `") == 1


def test_the_committed_page_is_rendered_from_the_committed_tables():
    committed = table.load_all()
    if not committed:
        pytest.skip("no committed table")
    assert table.PAGE.read_text(encoding="utf-8") == table.render(committed)


def test_a_column_per_release_and_what_changed_between_them():
    old = {"meta": {"transformers": "5.24.0"}, "rows": [row("a", "exact", ["rope"]), row("b", "exact", ["rope"]),
                                                      row("g", "refused", [])]}
    new_b = {**row("b", "wrong", ["rope"]), "fingerprint": "f00"}
    new = {"meta": {"transformers": "5.25.0"}, "rows": [row("a", "exact", ["rope"]), new_b, row("n", "exact", [])]}
    page = table.render([old, new])
    assert "| status | transformers 5.24.0 | transformers 5.25.0 | meaning |" in page
    assert "| exact | 2 | 2 |" in page and "| wrong | 0 | 1 |" in page
    changed = dict((name, what) for name, _, what in table.changes([old, new]))
    assert changed == {"b": "exact → wrong; the recorded queries and keys", "n": "new: exact", "g": "gone"}
    assert "| `b` | exact | wrong |" in page.split("## Every model type")[1]


def test_a_model_one_release_did_not_run_is_not_a_change():
    """A model the survey did not run in one release (no geometry, an input that run did not feed) says what
    the survey reached, not what the release changed: it is left out of the changes."""
    not_run = {**row("p", "not reached", []), "cause": "transformers not run: its forward takes no input_ids"}
    old = {"meta": {"transformers": "5.24.0"}, "rows": [not_run, row("q", "exact", ["rope"])]}
    new = {"meta": {"transformers": "5.25.0"}, "rows": [row("p", "exact", ["grid"]), row("q", "wrong", ["rope"])]}
    assert [name for name, _, _ in table.changes([old, new])] == ["q"]


def test_shrinking_keeps_the_head_width_and_the_pattern_phase():
    values = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 48,
              "intermediate_size": 14336, "vocab_size": 128256, "pad_token_id": None,
              "layer_types": ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"] * 42,
              "rope_parameters": {"rope_theta": 5e5}, "max_position_embeddings": 131072}
    small = tiny.shrink_dict(values, "tiny")
    assert small["hidden_size"] // small["num_attention_heads"] == 128  # head width kept
    assert small["num_attention_heads"] == tiny.HEADS and small["num_key_value_heads"] == 1
    assert small["num_hidden_layers"] == tiny.LAYERS and small["layer_types"] == values["layer_types"][:8]
    assert small["rope_parameters"] == values["rope_parameters"]
    assert small["max_position_embeddings"] == 131072 and small["vocab_size"] == tiny.VOCAB
    assert tiny.shrink_dict(values, "layers")["hidden_size"] == 4096
    assert tiny.shrink_dict(values, "default")["vocab_size"] == 128256
    with pytest.raises(ValueError, match="strength"):
        tiny.shrink_dict(values, "huge")


def test_a_head_width_the_heads_do_not_divide_is_rounded_to_a_multiple_of_8():
    """GLM-4.5's defaults (4096 wide, 96 heads, half of each head rotated) would give 42-wide heads and an odd
    rotary width; heads that divide the width keep their quotient."""
    shrunk = tiny.shrink_dict({"hidden_size": 4096, "num_attention_heads": 96, "partial_rotary_factor": 0.5}, "tiny")
    assert shrunk["hidden_size"] == 4 * 40
    assert tiny.shrink_dict({"hidden_size": 4096, "num_attention_heads": 32}, "tiny")["hidden_size"] == 4 * 128


def test_counts_a_class_leaves_none_are_stated_and_widths_without_heads_shrunk():
    """DeepSeek-V2's experts per token, Dots1's experts, ESM's vocabulary (with a padding row at 0: its
    positions count from the padding id on) and RWKV's width without heads."""
    moe = tiny.shrink_dict({"hidden_size": 4096, "num_attention_heads": 32, "num_experts_per_tok": None,
                            "n_routed_experts": None, "n_shared_experts": None, "moe_intermediate_size": None}, "tiny")
    assert (moe["num_experts_per_tok"], moe["n_routed_experts"], moe["n_shared_experts"]) == (2, tiny.EXPERTS,
                                                                                              tiny.EXPERTS)
    assert moe["moe_intermediate_size"] == tiny.FFN
    esm = tiny.shrink_dict({"vocab_size": None, "pad_token_id": None, "hidden_size": 1280,
                            "num_attention_heads": 20}, "tiny")
    assert (esm["vocab_size"], esm["pad_token_id"]) == (tiny.VOCAB, 0)
    assert tiny.shrink_dict({"vocab_size": None, "pad_token_id": 1}, "tiny")["pad_token_id"] == 1
    rwkv = tiny.shrink_dict({"hidden_size": 4096, "attention_hidden_size": 4096, "num_hidden_layers": 32}, "tiny")
    assert rwkv["hidden_size"] == tiny.WIDTH and "attention_hidden_size" not in rwkv
    xlm = tiny.shrink_dict({"emb_dim": 2048, "n_heads": 16}, "tiny")
    assert xlm["emb_dim"] == 4 * 128
    assert tiny.shrink_dict({"num_experts_per_tok": None}, "default")["num_experts_per_tok"] is None


@pytest.mark.parametrize("sections, pairs, scaled", [
    ((24, 20, 20), 36, [14, 11, 11]), ((8, 12, 12), 64, [16, 24, 24]), ((24, 20, 20), 64, [24, 20, 20]),
    ((16, 24, 24), 10, [2, 4, 4])])
def test_sections_are_scaled_to_the_frequency_count(sections, pairs, scaled):
    """Proportional, rounded down, the pairs left over to the largest remainders (the first on a tie)."""
    assert tiny.scaled_sections(list(sections), pairs) == scaled and sum(scaled) == pairs


class _Config:
    sub_configs: ClassVar[dict[str, None]] = {"text_config": None}

    def __init__(self, text=None):
        self.text_config, self.rope_parameters = text, {"rope_type": "default", "rope_theta": 1e4}

    def to_dict(self):
        return {}


class _TextConfig(_Config):
    sub_configs: ClassVar[dict[str, None]] = {}


class _Rotary:
    def __init__(self, config, sections, pairs):
        import numpy as np

        self.config, self.mrope_section, self.inv_freq = config, sections, np.ones(pairs)


class _Model:
    def __init__(self, *modules):
        self._modules = modules

    def modules(self):
        return iter(self._modules)


def test_sections_that_do_not_fit_the_rotation_are_stated_scaled_in_their_own_config():
    """Qwen3-Omni's text rotary module keeps its default sections for 128-wide heads: the sub-config of the
    module's class gets the scaled sections, the composite's own rope dict is left alone."""
    text = _TextConfig()
    composite = _Config(text)
    model = _Model(_Rotary(_TextConfig(), [24, 20, 20], 36))
    assert tiny.fit_sections(model, composite)
    assert text.rope_parameters["mrope_section"] == [14, 11, 11] and "mrope_section" not in composite.rope_parameters
    fitting = _TextConfig()
    assert not tiny.fit_sections(_Model(_Rotary(_TextConfig(), [24, 20, 20], 64)), _Config(fitting))
    assert "mrope_section" not in fitting.rope_parameters


def test_a_composite_that_does_not_run_is_run_as_its_language_model(monkeypatch):
    """The composite's config dict, its text_config replaced by the one that ran; no text_config: not reached
    with the composite's reasons."""
    from survey import probe, run

    class Text:
        model_type = "opt"

        def to_dict(self):
            return {"hidden_size": 64}

    class Composite:
        model_type = "blip-2"
        sub_configs: ClassVar[dict[str, None]] = {"text_config": None}
        text_config = Text()

        def to_dict(self):
            return {"model_type": "blip-2", "text_config": {"hidden_size": 2048}, "num_query_tokens": 32}

    class Model:
        pass

    monkeypatch.setattr(run, "build", lambda config, *_: (config, Model(), "probe", "tiny"))
    values, seen, strength, note = run.build_language_model(Composite(), "pixel_values missing")
    assert values["text_config"] == {"hidden_size": 64, "model_type": "opt"} and values["num_query_tokens"] == 32
    assert (seen, strength) == ("probe", "tiny") and note.startswith(table.LANGUAGE_ALONE)
    assert "pixel_values missing" in note
    with pytest.raises(probe.NotReached, match="pixel_values missing"):
        run.build_language_model(Text(), "pixel_values missing")

    def fails(config, *_):
        raise probe.NotReached("no geometry")

    monkeypatch.setattr(run, "build", fails)
    with pytest.raises(probe.NotReached, match="pixel_values missing; its language model alone: no geometry"):
        run.build_language_model(Composite(), "pixel_values missing")


def test_tower_outcomes_are_counted_from_each_rows_towers():
    """The page counts a composite's towers (survey/towers.py) by the outcome each row stores for them; a row
    without towers (a language model, or an engine that runs none) counts nothing."""
    rows = [{"status": "exact", "towers": {"vision_config": "compared and exact", "audio_config": "not run"}},
            {"status": "wrong", "towers": {"vision_config": "wrong"}},
            {"status": "exact", "towers": {"vision_config": "refused by refpos"}},
            {"status": "exact"}]
    assert table.tower_outcomes(rows) == {"compared and exact": 1, "not run": 1, "wrong": 1, "refused by refpos": 1}


def test_a_tower_verdict_says_its_outcome():
    """Each tower verdict's outcome is what the page counts: a tower not run is "not run" though its status is
    not reached like a tower the survey ran but could not compare."""
    from survey.towers import TowerVerdict

    assert TowerVerdict("vision", "exact", "").outcome == "compared and exact"
    assert TowerVerdict("vision", "refused", "").outcome == "refused by refpos"
    assert TowerVerdict("vision", "not reached", "").outcome == "not compared"
    assert TowerVerdict("vision", "not reached", "", ran=False).outcome == "not run"
    assert TowerVerdict("vision", "wrong", "").outcome == "wrong"
