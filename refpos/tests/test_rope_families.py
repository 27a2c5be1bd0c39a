"""The family table: well formed, aliases followed, and (anchors) every row's citation and layout checked
against the transformers modeling file it names.

The layout anchor runs the file's own rotate function on the channel indices 0 … D−1 and reads off the
pairing: for "half" ``rotate_half(x)[j] = −x[j + D/2]``, for "interleaved" ``rotate(x)[2j] = −x[2j + 1]``, for
"deinterleaved" (``apply_rotary_pos_emb_interleave`` at cos 0, sin 1) ``out[j] = −x[2j + 1]``,
``out[j + D/2] = x[2j]``; exact integers, no tolerance. Each row is checked in the version the installed
transformers release runs (:mod:`refpos.models.releases`: a family whose code changed has a row per range).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from refpos.models import families as fam
from refpos.models import family_row
from refpos.models.kinds.rope import NETWORK
from refpos.models.releases import row_for


def test_rows_are_unique_and_valid():
    names = [row.model_type for row in fam.FAMILY_ROWS]
    assert len(names) == len(set(names)) == len(fam.FAMILIES)
    assert all(fam.SOURCE_FORM.fullmatch(row.source) for row in fam.FAMILY_ROWS), [
        r.source for r in fam.FAMILY_ROWS if not fam.SOURCE_FORM.fullmatch(r.source)]
    summary = fam.table_summary()
    assert summary["model_types"] == len(names) >= 150
    assert summary["differ_from_default"] == sum(row != fam.Family(row.model_type, row.source, "half")
                                                 for row in fam.FAMILY_ROWS)
    assert summary["differ_from_default"] < summary["model_types"]


@pytest.mark.parametrize("model_type, layout, layers, query", [
    ("cohere", "interleaved", "all", None),
    ("cohere2", "interleaved", "sliding", None),
    ("ernie4_5", "interleaved", "all", None),
    ("llama4_text", "interleaved", "no_rope_layers", "llama4_temperature"),
    ("minicpm3", "half", "all", None),
    ("smollm3", "half", "no_rope_layers", None),
    ("exaone4", "half", "sliding_or_no_window", None),
    ("ministral3", "half", "all", "llama_4_scaling_beta"),
    ("kimi_k2", "rope_interleave", "all", None),
    ("llama", "half", "all", None),
])
def test_the_families_of_the_issue(model_type, layout, layers, query):
    row = fam.family_of(model_type)
    assert (row.layout, row.rope_layers, row.query_scale) == (layout, layers, query)


def test_unknown_and_bad_model_types():
    assert fam.family_of("no_such_model") is None and fam.family_of(None) is None
    with pytest.raises(TypeError, match="model_type"):
        fam.family_of(3)
    with pytest.raises(ValueError, match="column"):
        fam.Family("x", "x/modeling_x.py: f", layout="spiral")


# ------------------------------------------------------------------ anchors: the rows against transformers
transformers = pytest.importorskip("transformers", reason="the family anchors read transformers' modeling files")
torch = pytest.importorskip("torch", reason="the layout anchor runs transformers' rotate functions")
MODELS = Path(transformers.__file__).parent / "models"
INSTALLED = transformers.__version__
#: every row as the installed release runs it (a family whose code changed: the row of that release's range)
RELEASE_ROWS = [row_for(row, INSTALLED)[0] for row in fam.FAMILY_ROWS
                if family_row.TRANSFORMERS_SOURCE.fullmatch(row_for(row, INSTALLED)[0].source)]


#: the rows read from transformers' tree (the others cite a public copy of a model's own code, checked against the
#: re-implementations that transcribe it: refpos/tests/test_anchors_remote.py)
TRANSFORMERS_ROWS = [row for row in fam.FAMILY_ROWS if family_row.TRANSFORMERS_SOURCE.fullmatch(row.source)]


def test_every_row_cites_transformers_or_a_public_copy():
    remote = [row for row in fam.FAMILY_ROWS if row not in TRANSFORMERS_ROWS]
    assert remote and all(all(family_row.PUBLIC_SOURCE.fullmatch(part) for part in row.source.split("; "))
                          for row in remote)
    for wrong in ("github:owner/modeling_x.py: f", "hf:org/repo/x.txt: f", "github:o/r/x.py f", "x/modeling_x.py"):
        assert not fam.SOURCE_FORM.fullmatch(wrong), wrong


@pytest.mark.anchors
@pytest.mark.parametrize("row", RELEASE_ROWS, ids=lambda r: r.model_type)
def test_row_cites_existing_functions(row):
    path, names = row.source.split(": ")
    text = (MODELS / path).read_text(encoding="utf8")
    for name in names.split(", "):
        owner, _, method = name.partition(".")
        assert re.search(rf"\n(class|def) {owner}\b", text), name
        assert not method or re.search(rf"\n    def {method}\b", text), name
    # the config class is the cited module's, or the model type's own (Param2MoE's config builds GLM-4-MoE's model)
    folders = {(MODELS / path).parent, MODELS / row.model_type.replace("-", "_")}
    config_text = "".join(p.read_text(encoding="utf8") for folder in folders for p in folder.glob("configuration_*.py"))
    assert f'model_type = "{row.model_type}"' in config_text


def _pairing(rotate, width: int) -> str:
    x = torch.arange(1, width + 1, dtype=torch.float64)
    r = rotate(x.reshape(1, 1, 1, width)).reshape(width)  # (batch, heads, seq, D): GPT-J indexes 4 axes
    half, inter = width // 2, torch.arange(0, width, 2)
    if torch.equal(r[:half], -x[half:]) and torch.equal(r[half:], x[:half]):
        return "half"
    if torch.equal(r[inter], -x[inter + 1]) and torch.equal(r[inter + 1], x[inter]):
        return "interleaved"
    if torch.equal(r[:half], -x[inter + 1]) and torch.equal(r[half:], x[inter]):
        return "deinterleaved"
    return "other"


def _rotate_of(apply):
    """The rotate function an ``apply(x, cos, sin)`` of half-width tables performs: its output at cos 0, sin 1."""
    def rotate(x):
        half = torch.zeros((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype)
        return apply(x, half, half + 1)
    return rotate


def _rotate_of_qk(apply):
    """The rotation an ``apply(q, k, cos, sin)`` of full-width tables performs on ``q``: its output at cos 0,
    sin 1."""
    def rotate(x):
        zeros = torch.zeros_like(x)
        return apply(x, x, zeros, zeros + 1)[0]
    return rotate


#: rotate functions, apply functions of the form apply(x, cos, sin) with half-width tables, and
#: apply(q, k, cos, sin) functions of full-width tables
ROTATE, APPLY, APPLY_QK = ("rotate_half", "rotate_every_two"), ("_apply_rotary_emb",), (
    "apply_rotary_pos_emb_interleave",)
ROTATE_ROWS = [row for row in RELEASE_ROWS if row.source.split(": ")[1].split(", ")[0] in ROTATE + APPLY + APPLY_QK]


@pytest.mark.anchors
@pytest.mark.parametrize("row", ROTATE_ROWS, ids=lambda r: r.model_type)
def test_layout_is_what_the_rotate_function_does(row):
    path, names = row.source.split(": ")
    module = importlib.import_module("transformers.models." + path[:-3].replace("/", "."))
    name = names.split(", ")[0]
    rotate = getattr(module, name) if name in ROTATE else _rotate_of(getattr(module, name)) if name in APPLY \
        else _rotate_of_qk(getattr(module, name))
    sign = row.rope.angle_sign if row.rope is not None else 1  # nanochat's rotate_half turns by −φ
    found = _pairing(lambda x: sign * rotate(x), 8)
    expected = "deinterleaved" if row.layout == "rope_interleave" else row.layout  # rope_interleave: true default
    assert found == expected or (found == "other" and row.unmodelled), found  # other: said not modelled


@pytest.mark.anchors
def test_layout_anchor_breaks_on_a_wrong_row(monkeypatch):
    wrong = fam.Family("cohere", "cohere/modeling_cohere.py: rotate_half", layout="half")
    with pytest.raises(AssertionError):
        test_layout_is_what_the_rotate_function_does(wrong)


@pytest.mark.anchors
def test_a_release_s_row_breaks_on_another_release_s_code():
    """HY-V4's two rows, each checked against the installed file: the row of the other release range fails."""
    hy = fam.family_of("hy_v4")
    mine, = [r for r in ROTATE_ROWS if r.model_type == "hy_v4"]
    other = hy if mine is not hy else dict(hy.versions)["<5.25"]
    test_layout_is_what_the_rotate_function_does(mine)
    with pytest.raises((AssertionError, AttributeError)):  # the other release's function: absent, or other pairs
        test_layout_is_what_the_rotate_function_does(other)


def test_rows_of_release_ranges():
    hy = fam.family_of("hy_v4")
    assert (row_for(hy, "5.24.0")[0].layout, row_for(hy, "5.25.0")[0].layout, row_for(hy, "5.30.1")[0].layout) == (
        "half", "deinterleaved", "deinterleaved")
    assert row_for(hy, "4.57.1")[0].release == "5.24" and row_for(hy, "5.25.0")[0].release == "5.25"
    assert "transformers_version" in row_for(hy, None)[1] and row_for(fam.family_of("llama"), None)[1] is None
    with pytest.raises(ValueError, match="transformers_version"):
        row_for(hy, "banana")
    with pytest.raises(ValueError, match="versions"):
        fam.load('''[aliases]
[family.x]
source = "x/modeling_x.py: f"
layout = "half"
versions = {"~5.25" = {layout = "interleaved", source = "x/modeling_x.py: g", release = "5.24"}}
''')


PATTERN_ROWS = [row for row in fam.FAMILY_ROWS if row.layer_pattern is not None]


def _given(pattern: fam.LayerPattern, n: int) -> dict:
    """A config setting the pattern's key: every 3rd layer, layers 2 and 7 (counted as the key counts), one
    character per layer, or a list of blocks to repeat (two of the first block, one of each other)."""
    if pattern.cycle:
        names = [name for name, _ in pattern.chars]
        return {pattern.key: [names[0], *names]}
    if pattern.chars:
        chars = "".join(c for c, _ in pattern.chars)
        return {pattern.key: (chars * n)[:n]}
    if pattern.indices is None:
        given = {pattern.key: 3} if pattern.key else {}
        return {**given, pattern.offset_key: 1} if pattern.offset_key else given
    listed = [2 + pattern.one_based, 7 + pattern.one_based]
    outer, _, inner = pattern.indices.rpartition(".")
    if not outer:
        return {inner: listed}
    others = [i + pattern.one_based for i in range(n) if i + pattern.one_based not in listed]
    return {outer: {inner: listed, "kda_layers": others}}  # Kimi-Linear lists both kinds


@pytest.mark.anchors
@pytest.mark.parametrize("row", PATTERN_ROWS, ids=lambda r: r.model_type)
def test_layer_pattern_is_what_the_config_class_fills(row):
    """The layer types refpos fills for a config without ``layer_types`` are the ones transformers' config class
    builds: with the pattern's key absent and set (every 3rd layer, layers 2 and 7, one character per layer)."""
    from transformers import AutoConfig

    from refpos.models.schedule import layer_count, layer_types

    pattern, n = row.layer_pattern, 12
    for extra in (({} if not pattern.chars else None), _given(pattern, n)):
        if extra is None:
            continue  # a character pattern without its key: the class's own default list
        hf_cfg = AutoConfig.for_model(row.model_type, num_hidden_layers=n, **extra)
        theirs = getattr(hf_cfg, "layer_types", None) or getattr(hf_cfg, "layers_block_type", None)
        if theirs is None:  # no layer types: the listed layers are another kind of layer (Mllama's cross-attention)
            assert pattern.listed != "full_attention", row.model_type
            theirs = [pattern.listed if i in getattr(hf_cfg, pattern.indices) else pattern.other for i in range(n)]
        theirs = list(theirs)
        mine = dict(extra, num_hidden_layers=n)
        filled = layer_types(mine, row, layer_count(mine, row))
        if filled is None and not extra:  # no list and no rule for its absence: refpos says it cannot place them
            assert pattern.indices is not None and pattern.absent is None
            continue
        assert filled == theirs, extra


#: the layer types without attention of the hybrid families (a network without attention at all, a CNN or a codec,
#: is anchored by refpos/tests/test_anchors_vision_models.py)
NO_ATTENTION = [(row, layer_type) for row in fam.FAMILY_ROWS for layer_type, _ in row.no_attention
                if layer_type != NETWORK]


@pytest.mark.anchors
@pytest.mark.parametrize("row, layer_type", NO_ATTENTION, ids=lambda v: v if isinstance(v, str) else v.model_type)
def test_no_attention_layers_have_no_attention_module(row, layer_type):
    """A tiny two-layer model of the family, layer 0 of the ``no_attention`` type and layer 1 full attention:
    layer 1 holds the family's attention module (the one that applies RoPE), layer 0 none."""
    from transformers import AutoConfig, AutoModel

    small = {"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
             "intermediate_size": 32, "num_hidden_layers": 2, "vocab_size": 128, "pad_token_id": 0}
    pattern = row.layer_pattern
    if row.positions.encoding == "no_attention":  # every layer: the model has no attention module at all
        tiny = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 128, "state_size": 16, "num_heads": 2,
                "head_dim": 64, "n_groups": 1}  # Mamba-2: hidden_size · expand = num_heads · head_dim
        model = AutoModel.from_config(AutoConfig.for_model(row.model_type, **tiny))
        named = [name for name, m in model.named_modules() if "Rotary" in type(m).__name__
                 or name.endswith(("position_embeddings", "embed_positions", "wpe"))]
        assert not named, named  # no rotary module, no position table (RWKV's WKV recurrence is no attention)
        assert not [m for m in model.modules() if type(m).__name__.endswith("Attention")
                    and row.model_type != "rwkv"]
        return
    if pattern is not None and pattern.indices is not None:  # the config lists its attention layers (Bamba, LFM2)
        if layer_type != pattern.other:
            pytest.skip(f"{row.model_type} names its other layers {pattern.other!r} from {pattern.indices}")
        small.update({} if "." in pattern.indices else {pattern.indices: [1]})
        if "." in pattern.indices:
            outer, _, inner = pattern.indices.rpartition(".")
            small[outer] = {inner: [1 + pattern.one_based], "kda_layers": [pattern.one_based]}
    elif pattern is not None and pattern.offset_key:  # attention every period-th layer from offset (Jamba)
        small.update({pattern.key: 2, pattern.offset_key: 1})
    elif row.model_type == "recurrent_gemma":  # block_types, cycled over the layers
        small["block_types"] = ["recurrent", "attention"]
    else:
        defaults = AutoConfig.for_model(row.model_type).to_dict().get(row.types_key) or ["full_attention"]
        attention_type = next(t for t in [*defaults, "full_attention"] if row.no_attention_kind(t) is None)
        small[row.types_key] = [layer_type, attention_type]
    if row.model_type == "qwen4_exp_text":  # its attention layers always build the QSA indexer: its sizes given
        small.update({"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 32, "indexer_budget": 4,
                      "indexer_compress_ratio": 2})
    if row.model_type == "zamba":  # its config ties every hybrid layer's shared block to another: a third to tie
        small.update({row.types_key: [*small[row.types_key], "hybrid"], "num_hidden_layers": 3})
    model = AutoModel.from_config(AutoConfig.for_model(row.model_type, **small))
    layers = next(m for name, m in model.named_modules() if name.endswith("layers") and hasattr(m, "__len__"))
    first, second = ({type(m).__name__ for m in layer.modules()} for layer in (layers[0], layers[1]))
    attention = {name for name in second - first if name.endswith("Attention")}
    assert attention and not attention & first, (first, second)
