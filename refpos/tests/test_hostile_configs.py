"""Hostile per-layer rope dicts: a ``rope_parameters`` keyed by layer type with a stray non-dict value.

transformers allows ``rope_parameters`` keyed by layer type (``{"full_attention": {...},
"sliding_attention": {...}}``, a null value meaning no RoPE for that type). A dict whose values are partly
rope dicts and partly something else (``3``, ``"x"``, a list) is neither that nor a rope dict; it used to
resolve to default RoPE (its keys reported unused). Every entry point that reads the dict
(:func:`refpos.models.from_hf_config` for each layer type or none, :func:`refpos.models.hf_layer_types`,
 :func:`refpos.models.hf_layers`, ``refpos rope``) must refuse it with a ``ValueError`` naming the key and what is
allowed; the forms transformers accepts keep resolving. The meta test puts the old predicate back and
shows the property failing.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refpos
from refpos import cli
from refpos.models import hf_files

BASE = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 2,
        "max_position_embeddings": 4096, "layer_types": ["full_attention", "sliding_attention"]}
FULL = {"rope_type": "default", "rope_theta": 1e6}
STRAYS = [3, "x", 2.5, True, [1, 2], math.nan, ""]


def _config(stray: object, key: str = "rope_parameters", where: str = "sliding_attention") -> dict:
    layers = {"full_attention": FULL, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    return {**BASE, key: {**layers, where: stray}}


def _entry_points(config: dict) -> dict[str, object]:
    return {
        "from_hf_config()": lambda: refpos.models.from_hf_config(config),
        "from_hf_config(full_attention)": lambda: refpos.models.from_hf_config(config, layer_type="full_attention"),
        "from_hf_config(sliding_attention)": lambda: refpos.models.from_hf_config(config,
                                                                                  layer_type="sliding_attention"),
        "hf_layer_types": lambda: refpos.models.hf_layer_types(config),
        "hf_layers": lambda: refpos.models.hf_layers(config),
    }


def _refused_everywhere(config: dict, key: str, where: str) -> None:
    for name, call in _entry_points(config).items():
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert f"{key}.{where}" in message and "rope dict or null" in message, f"{name}: {message}"


@pytest.mark.parametrize("stray", STRAYS, ids=[repr(s) for s in STRAYS])
@pytest.mark.parametrize("key", ["rope_parameters", "rope_scaling"])
def test_a_stray_non_dict_in_a_per_layer_rope_dict_is_a_named_value_error(stray, key):
    _refused_everywhere(_config(stray, key), key, "sliding_attention")


def test_the_stray_may_sit_beside_the_layer_type_asked_for():
    _refused_everywhere(_config("x", where="full_attention"), "rope_parameters", "full_attention")


def test_the_message_names_the_text_config_prefix():
    config = {"model_type": "x", "text_config": _config(3)}
    with pytest.raises(ValueError, match=r"text_config\.rope_parameters\.sliding_attention is int 3"):
        refpos.models.from_hf_config(config, layer_type="full_attention")


def test_the_cli_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("x")), encoding="utf8")
    assert cli.main(["rope", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rope_parameters.sliding_attention is str 'x'" in err


@pytest.mark.parametrize("layers", [
    {"full_attention": FULL, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
    {"full_attention": FULL, "sliding_attention": None},  # a layer type without RoPE
], ids=["two rope dicts", "one null"])
def test_the_forms_transformers_accepts_still_resolve(layers):
    config = {**BASE, "rope_parameters": layers}
    assert refpos.models.hf_layer_types(config) == ("full_attention", "sliding_attention")
    assert refpos.models.from_hf_config(config, layer_type="full_attention").theta == 1e6
    schedule = refpos.models.hf_layers(config)
    assert schedule[0].rope is not None and schedule[0].rope.theta == 1e6


def test_a_flat_rope_dict_is_not_taken_for_a_per_layer_one():
    config = {**BASE, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}
    config.pop("layer_types")
    assert refpos.models.hf_layer_types(config) == ()
    assert refpos.models.from_hf_config(config).rope_type == "linear"


LAYER_NAMES = st.sampled_from(["full_attention", "sliding_attention", "chunked_attention", "x", "layer_0"])
STRAY_VALUES = st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=5), st.booleans(),
                         st.lists(st.integers(), max_size=3))
ROPE_VALUES = st.one_of(st.none(), st.just(FULL), st.just({"rope_type": "linear", "factor": 2.0}))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.dictionaries(LAYER_NAMES, ROPE_VALUES, min_size=1, max_size=3), LAYER_NAMES, STRAY_VALUES)
def test_any_per_layer_dict_with_a_stray_value_never_resolves(layers, stray_key, stray):
    """Property: rope dicts (or null) under layer-type keys plus one stray non-dict: refused, named."""
    layers = {k: v for k, v in layers.items() if k != stray_key}
    if not layers:
        return
    config = {**BASE, "rope_parameters": {**layers, stray_key: stray}}
    config.pop("layer_types")
    for layer_type in (None, *layers):
        with pytest.raises(ValueError, match=rf"rope_parameters\.{stray_key} is "):
            refpos.models.from_hf_config(config, layer_type=layer_type)


def test_the_property_fails_with_the_old_predicate(monkeypatch):
    """The predicate before the fix (every value a dict or null, else "not per layer") lets the stray
    through: the config resolves to default RoPE and the test above fails."""
    def old(rope_dict, name="rope_parameters"):
        return bool(rope_dict) and all(isinstance(v, dict) or v is None for v in rope_dict.values()) \
            and not any(k in hf_files.ALL_ROPE_KEYS for k in rope_dict)

    monkeypatch.setattr(hf_files, "is_per_layer", old)
    monkeypatch.setattr("refpos.models.hf_resolver.is_per_layer", old)
    assert refpos.models.from_hf_config(_config(3)).rope_type == "default"  # the silent acceptance
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        test_any_per_layer_dict_with_a_stray_value_never_resolves()
