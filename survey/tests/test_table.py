"""The survey's table, page and shrinking rules (no torch needed)."""

from __future__ import annotations

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
    every = page.split("## Every model type")[1]
    assert every.count("| `") == len(ROWS)
    unreached = page.split("## Not reached, each with its reason")[1].split("## Every model type")[0]
    assert "1 of 6 model types (16.7 %)" in unreached and unreached.count("| `") == 1


def test_the_committed_page_is_rendered_from_the_committed_table():
    committed = table.load()
    if not committed["rows"]:
        pytest.skip("no committed table")
    assert table.PAGE.read_text(encoding="utf-8") == table.render(committed)


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
