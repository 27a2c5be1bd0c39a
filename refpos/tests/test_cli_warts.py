"""What the commands print reads right: ``refpos rope``'s unused keys are the keys nothing read; ``refpos
positions`` shows each scaling rule's keys and its attention factor; ``refpos plot --config`` answers a per-layer
config by naming ``--layer-type``; no text of a model's figure runs past its edge; ``refpos golden list`` says
what its "certified … ulps" means. Each test fails on the tree before these changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refpos.cli import main

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "golden" / "configs"
GEMMA3 = CONFIGS / "google--gemma-3-12b-it-text_config.json"
#: keys of Gemma 3's config that no part of refpos reads (the rest: the RoPE of one layer type or the other)
GEMMA3_UNUSED = ["hidden_size", "num_attention_heads", "num_key_value_heads"]


def _unused_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if "unused keys" in line]


def test_unused_keys_are_the_keys_no_layer_type_read(capsys, tmp_path):
    """Gemma 3 reads rope_theta and rope_scaling in its full-attention layers and rope_local_base_freq in its
    sliding ones: none of them is unused, per layer type, for one layer type, or with a layer schedule."""
    line = f"unused keys (harmless for positions): {', '.join(GEMMA3_UNUSED)}"
    assert main(["rope", str(GEMMA3)]) == 0
    assert _unused_lines(capsys.readouterr().out) == [line, line]
    assert main(["rope", str(GEMMA3), "--layer-type", "sliding_attention"]) == 0
    assert _unused_lines(capsys.readouterr().out) == [line]
    assert main(["rope", str(GEMMA3), "--json"]) == 0
    assert {k: v["unused_keys"] for k, v in json.loads(capsys.readouterr().out).items()} == {
        "full_attention": GEMMA3_UNUSED, "sliding_attention": GEMMA3_UNUSED}
    with_layers = tmp_path / "config.json"  # the schedule reads the layer count and the sliding-window pattern
    with_layers.write_text(json.dumps({**json.loads(GEMMA3.read_text()), "num_hidden_layers": 12}))
    assert main(["rope", str(with_layers)]) == 0
    assert _unused_lines(capsys.readouterr().out) == [line]


@pytest.mark.parametrize(("config", "facts"), [
    ("NousResearch--Yarn-Llama-2-13b-64k", "yarn: factor s = 16.0, original_max_position_embeddings L0 = 4096, "
     "beta_fast = 32.0, beta_slow = 1.0, truncate = True, softmax_mscale = False, attention factor A = 1.277258872"),
    ("meta-llama--Llama-3.1-8B", "llama3: factor s = 8.0, original_max_position_embeddings L0 = 8192, "
     "low_freq_factor = 1.0, high_freq_factor = 4.0, attention factor A = 1"),
    ("microsoft--Phi-3.5-mini-instruct", "longrope: factor s = 32.0, original_max_position_embeddings L0 = 4096, "
     "short_factor = [48 values: 1.0 … 2.8399994373321533], long_factor = [48 values: 1.0800000429153442 … "
     "64.83999633789062], attention factor A = 1.190238071"),
])
def test_positions_shows_each_rules_facts(capsys, config, facts):
    assert main(["positions", str(CONFIGS / f"{config}.json")]) == 0
    assert f"    {facts}\n" in capsys.readouterr().out


def test_positions_shows_each_layer_types_own_rope(capsys):
    assert main(["positions", str(GEMMA3)]) == 0
    out = capsys.readouterr().out
    sliding = out.split("decoder rope [sliding_attention]: layers 0\n", 1)[1]
    assert "\n    default RoPE, theta 10000.0" in sliding.split("decoder rope", 1)[0], out


def test_plot_asks_for_the_layer_type_by_its_flag(capsys, tmp_path):
    out = str(tmp_path / "fig.svg")
    assert main(["plot", "--config", str(GEMMA3), "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "layer_type=" not in err, err
    assert err.endswith("give --layer-type full_attention or --layer-type sliding_attention"), err
    assert main(["plot", "--config", str(GEMMA3), "--layer-type", "local", "--out", out]) == 2
    assert capsys.readouterr().err.startswith("refpos plot: error: --layer-type local: ")
    assert main(["plot", "--config", str(CONFIGS / "meta-llama--Llama-3.1-8B.json"), "--layer-type",
                 "full_attention", "--out", out]) == 2
    assert "has one RoPE for every layer: drop --layer-type" in capsys.readouterr().err
    assert not Path(out).exists()


def _texts_outside(fig) -> list[str]:
    """The texts of a figure (title, footnote, legends, axis labels) that reach past its edges."""
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    texts = [*fig.texts, *(t for t in (fig._suptitle, fig._supxlabel) if t is not None),
             *(t for legend in fig.legends for t in legend.get_texts())]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
        if ax.get_legend() is not None:
            texts += list(ax.get_legend().get_texts())
    outside = []
    for text in texts:
        if text.get_visible() and text.get_text():
            extent = text.get_window_extent(renderer)
            if extent.x0 < -0.5 or extent.x1 > box.width + 0.5 or extent.y0 < -0.5 or extent.y1 > box.height + 0.5:
                outside.append(text.get_text())
    return outside


@pytest.mark.parametrize(("config", "layer_type"), [
    ("meta-llama--Llama-4-Scout-17B-16E-text_config", None),  # the longest footnote: 8 keys not modelled
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct-text_config", None),  # the longest title
    ("Gemma-4-family-HF-Gemma4Config-defaults", "full_attention"),
    ("google--gemma-3-12b-it-text_config", "sliding_attention"),
])
def test_no_text_of_a_model_figure_runs_past_its_edge(config, layer_type):
    import refpos
    from refpos.tools.figures import pyplot
    from refpos.tools.model_plots import model_figure

    rope = refpos.models.from_hf_config(CONFIGS / f"{config}.json", layer_type=layer_type)
    fig = model_figure(rope, config + (f" ({layer_type})" if layer_type else ""))
    try:
        assert _texts_outside(fig) == []
        if rope.not_modelled:  # every key named, none cut
            assert all(key in fig._supxlabel.get_text() for key in rope.not_modelled)
    finally:
        pyplot().close(fig)


def test_golden_list_says_what_certified_means(capsys):
    assert main(["golden", "list", "--family", "rope"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("rope/meta-llama--Llama-3.1-8B/apply "))
    assert line.endswith("certified 67421.6 ulps (|err| 1.5e-11, within tolerance)"), line
    assert out.rstrip().endswith("and within the float64 tolerance (refpos golden show CASE prints it).")
    assert "inherits the float64 rounding of\n  that angle, up to about |p·ω|·2⁻⁵³" in out
