"""Fuzzing the readers of outside data: the config resolvers (RoPE, every encoding), the manifest loader, the
.npy reader.

Hypothesis generates hostile config.json dicts (RoPE configs, and configs of every encoding for
:func:`refpos.model_positions`), mutated golden manifests and crafted ``.npy`` headers;
each reader must give a result or a ``ValueError``/``TypeError`` whose message names what it read, and
nothing else, within a time bound (Hypothesis' deadline) and a memory bound (``tracemalloc``'s peak).
The ``@example`` inputs are the known hostile cases; the meta tests at the end show each property
failing on a reader with one check removed. docs/security.md lists the groups.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import tracemalloc
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import refpos
from refpos.golden import entries, npy
from refpos.golden import manifest as golden
from refpos.golden.rope_cases import layout_cases
from refpos.models import from_hf_config, hf, hf_layer_types
from refpos.models.kinds import Stack

FUZZ = settings(max_examples=60, deadline=timedelta(seconds=10), suppress_health_check=[HealthCheck.too_slow],
                derandomize=True)
#: the memory a reader may take for one example beyond its input (none of them allocates a table)
MEMORY_BOUND = 16 * 2**20

# --------------------------------------------------------------------------------------- strategies
EDGE_INTS = st.sampled_from([0, 1, -1, 2, 3, 7, 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 10**30,
                             -(2**63), 2**40])
EDGE_FLOATS = st.sampled_from([0.0, -0.0, 0.5, 1.0, -1.0, 1e-300, 1e300, math.inf, -math.inf, math.nan, 1e4, 5e5])
SCALARS = st.one_of(st.none(), st.booleans(), EDGE_INTS, st.integers(-10, 10**6), EDGE_FLOATS,
                    st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(["", "nan", "1e300", "default", "linear", "dynamic", "yarn", "llama3", "longrope",
                                     "half", "interleaved", "full_attention", "sliding_attention", "\x00", "é"]))


def hostile_json(max_leaves: int = 12) -> st.SearchStrategy:
    """Any JSON-like value: scalars above, lists and objects of them, nested a few levels."""
    return st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                        max_leaves=max_leaves)


ROPE_KEYS = ["rope_type", "type", "factor", "rope_theta", "original_max_position_embeddings", "beta_fast",
             "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "low_freq_factor", "high_freq_factor",
             "short_factor", "long_factor", "partial_rotary_factor", "truncate"]
TOP_KEYS = ["rope_theta", "head_dim", "hidden_size", "num_attention_heads", "partial_rotary_factor", "rotary_dim",
            "max_position_embeddings", "original_max_position_embeddings", "rope_scaling", "rope_parameters",
            "layer_types", "model_type", "rotary_pct", "rotary_emb_base", "qk_rope_head_dim", "sliding_window",
            "text_config"]
_VALID = {"rope_theta": 10000.0, "head_dim": 64, "hidden_size": 512, "num_attention_heads": 8,
          "max_position_embeddings": 4096}
# warm every import and cache once, so that the deadline measures the example, not the first import
refpos.rope_frequencies(from_hf_config({**_VALID, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
                        seq_len=8, xp="numpy")


def rope_dicts() -> st.SearchStrategy[dict]:
    """A rope_scaling / rope_parameters entry: known keys with sensible or hostile values."""
    value = st.one_of(SCALARS, hostile_json(4), st.lists(EDGE_FLOATS, min_size=1, max_size=40))
    return st.dictionaries(st.sampled_from(ROPE_KEYS), value, max_size=7)


def hostile_configs() -> st.SearchStrategy[dict]:
    """config.json dicts: a valid base with keys replaced, removed or added with hostile values, flat,
    per-layer (``rope_parameters`` keyed by layer type, possibly with a stray non-dict) or nested."""
    per_layer = st.dictionaries(st.sampled_from(["full_attention", "sliding_attention", "x"]),
                                st.one_of(rope_dicts(), SCALARS), min_size=1, max_size=3)
    value = st.one_of(SCALARS, hostile_json(6), rope_dicts(), per_layer)
    changes = st.dictionaries(st.sampled_from(TOP_KEYS + ROPE_KEYS), value, max_size=6)
    drops = st.sets(st.sampled_from(sorted(_VALID)), max_size=3)
    return st.builds(lambda ch, dr: {**{k: v for k, v in _VALID.items() if k not in dr}, **ch}, changes, drops)


#: model types of every encoding the family table knows, one the table does not know, and none
MODEL_TYPES = ["bloom", "falcon", "mpt", "t5", "umt5", "opt", "bart", "whisper", "marian", "m2m_100", "gpt2", "bert",
               "roberta", "distilbert", "jamba", "nemotron_h", "kimi_linear", "zamba2", "granitemoehybrid", "mamba",
               "llama", "llama4_text", "qwen3_next", "no_such_model", None]
MODEL_KEYS = ["n_layer", "n_head", "n_embd", "num_hidden_layers", "num_attention_heads", "hidden_size", "d_model",
              "num_layers", "num_decoder_layers", "num_heads", "encoder_layers", "decoder_layers",
              "encoder_attention_heads", "decoder_attention_heads", "relative_attention_num_buckets",
              "relative_attention_max_distance", "max_position_embeddings", "n_positions", "max_source_positions",
              "max_target_positions", "pad_token_id", "alibi", "attn_config", "position_embedding_type",
              "use_mem_rope", "sinusoidal_pos_embds", "layers_block_type", "hybrid_override_pattern",
              "linear_attn_config", "attn_layer_period", "attn_layer_offset", "layer_types", "embedding_size",
              "text_config", "thinker_config", "rope_theta"]
_MODEL = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32, "n_layer": 2, "n_head": 4,
          "d_model": 32, "num_layers": 2, "num_heads": 4, "encoder_layers": 1, "decoder_layers": 1,
          "encoder_attention_heads": 2, "decoder_attention_heads": 2, "relative_attention_num_buckets": 32,
          "max_position_embeddings": 64, "max_source_positions": 64, "max_target_positions": 64, "pad_token_id": 1}


def model_configs() -> st.SearchStrategy[dict]:
    """config.json dicts of any encoding: a valid base of every geometry key, a model type, and keys replaced,
    removed or added with hostile values (nested wrappers included)."""
    value = st.one_of(SCALARS, hostile_json(6), st.dictionaries(st.sampled_from(["alibi", "alibi_bias_max",
                                                                                 "full_attn_layers"]), SCALARS))
    changes = st.dictionaries(st.sampled_from(MODEL_KEYS), value, max_size=5)
    drops = st.sets(st.sampled_from(sorted(_MODEL)), max_size=4)
    return st.builds(lambda mt, ch, dr: {**({} if mt is None else {"model_type": mt}),
                                         **{k: v for k, v in _MODEL.items() if k not in dr}, **ch},
                     st.sampled_from(MODEL_TYPES), changes, drops)


def _header_text(descr, fortran, shape, extra) -> bytes:
    fields = {"descr": descr, "fortran_order": fortran, "shape": shape, **extra}
    return ("{" + ", ".join(f"{k!r}: {v}" for k, v in fields.items()) + ", }").encode("latin1", "replace")


def npy_files() -> st.SearchStrategy[bytes]:
    """``.npy`` bytes with crafted headers: versions, dtypes, orders, shapes (huge, negative, bool, wrapping),
    extra keys, lying header lengths and payloads of any length."""
    descr = st.sampled_from(["'<f8'", "'<f4'", "'<i8'", "'|b1'", "'>f8'", "'<u8'", "'|O'", "'<U3'", "'|V8'",
                             "'(2,)<f8'", "'<q9'", "'<f8", "3", "None", "[('a', '<f8')]"])
    fortran = st.sampled_from(["False", "True", "0", "None", "'False'"])
    dim = st.one_of(EDGE_INTS.map(str), st.integers(0, 6).map(str), st.sampled_from(["True", "-1", "3.0", "'3'"]))
    shape = st.one_of(st.lists(dim, max_size=4).map(lambda d: "(" + "".join(x + ", " for x in d) + ")"),
                      st.sampled_from(["[3]", "3", "None", "(" * 300 + ")" * 300, "10**30"]))
    extra = st.dictionaries(st.sampled_from(["x", "descr2"]), st.sampled_from(["1", "'a'"]), max_size=1)
    header = st.builds(_header_text, descr, fortran, shape, extra)
    version = st.sampled_from([1, 1, 2, 3, 0, 9])
    lie = st.sampled_from([0, 0, 0, 1, -1, 2**15, 70000])
    payload = st.binary(max_size=96)

    def build(v, h, lie_by, data):
        text = h + b" " * ((64 - (len(h) + 11) % 64) % 64) + b"\n"
        n = max(len(text) + lie_by, 0)
        size = (n % 2**16).to_bytes(2, "little") if v == 1 else n.to_bytes(4, "little")
        return npy.MAGIC + bytes([v, 0]) + size + text + data

    return st.builds(build, version, header, lie, payload)


def _npy(shape: str, payload: bytes = b"", descr: str = "'<f8'") -> bytes:
    """A well-formed version 1.0 preamble around a header with this shape (an explicit example)."""
    text = _header_text(descr, "False", shape, {})
    text += b" " * ((64 - (len(text) + 11) % 64) % 64) + b"\n"
    return npy.MAGIC + b"\x01\x00" + len(text).to_bytes(2, "little") + text + payload


def _mutations() -> st.SearchStrategy:
    """(path into the manifest, new value or a deletion) pairs."""
    where = st.sampled_from([
        ("cases",), ("cases", 0), ("cases", 0, "id"), ("cases", 0, "inputs"), ("cases", 0, "outputs"),
        ("cases", 0, "parameters"), ("cases", 0, "primary_output"), ("cases", 0, "function"),
        ("cases", 0, "outputs", "*"), ("cases", 0, "outputs", "*", "file"), ("cases", 0, "outputs", "*", "shape"),
        ("cases", 0, "outputs", "*", "dtype"), ("cases", 0, "outputs", "*", "sha256"),
        ("cases", 0, "outputs", "*", "tolerance"), ("cases", 0, "outputs", "*", "tolerance", "float64"),
        ("cases", 0, "outputs", "*", "tolerance", "float64", "atol"),
        ("cases", 0, "outputs", "*", "tolerance", "float32", "rtol"),
        ("cases", 0, "outputs", "*", "tolerance", "atol_axis"), ("cases", 0, "inputs", "*", "file"),
        ("format_version",), ("source",), ("cases", 0, "certified_max_error_ulps")])
    paths = st.sampled_from(["../x.npy", "/etc/passwd", "a\\b", "cases/../../x", "", "inputs", "C:/x"])
    value = st.one_of(st.just("<delete>"), hostile_json(6), paths)
    return st.lists(st.tuples(where, value), min_size=1, max_size=3)


# ---------------------------------------------------------------------------------------- contracts
def _named_refusal(exc: BaseException, name: str) -> None:
    """The contract of a refusal: ValueError or TypeError (subclasses included), one line naming ``name``."""
    assert isinstance(exc, (ValueError, TypeError)), f"{type(exc).__name__}: {exc}"
    message = str(exc)
    assert message and "\n" not in message, repr(message)
    assert name in message, f"{message!r} does not name {name!r}"


def _within_memory(call):
    tracemalloc.start()
    try:
        result = call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, f"peak {peak} bytes"
    return result


def resolve_contract(config: dict) -> None:
    """A hostile config: a RopeConfig per layer type with usable frequencies, or a named refusal."""
    def run():
        layer_types = hf_layer_types(config) or (None,)
        ropes = [from_hf_config(config, layer_type=lt) for lt in layer_types]
        for rope in ropes:
            inv_freq, factor = refpos.rope_frequencies(rope, seq_len=8, xp="numpy")
            assert np.all(np.isfinite(refpos.to_numpy(inv_freq))) and math.isfinite(float(factor))
    try:
        _within_memory(run)
    except Exception as exc:  # the contract decides what is allowed
        assert isinstance(exc, (ValueError, TypeError)), f"{type(exc).__name__}: {exc}"
        assert str(exc), f"{type(exc).__name__} without a message"


def positions_contract(config: dict) -> None:
    """A hostile config of any encoding: every layer's record, usable at a few positions, or a named refusal."""
    def run():
        resolved = refpos.model_positions(config)
        json.dumps(resolved.describe())  # JSON all the way down
        p = np.arange(4)
        for layer in resolved:
            if layer.kind == "alibi":
                assert np.all(np.isfinite(layer.bias_at(p, p)))
            elif layer.kind == "t5":
                assert layer.buckets_at(p, p).shape == (4, 4)
            elif layer.kind == "sinusoidal":
                assert np.all(np.isfinite(layer.sinusoid(p[: min(4, (layer.table_size or 4) - layer.offset)])))
            elif layer.kind == "learned":
                assert layer.rows_at(p[: layer.table_size - layer.offset]).size >= 0
            elif layer.kind in ("rope", "mrope"):
                inv_freq, factor = refpos.rope_frequencies(layer.rope, seq_len=8, xp="numpy")
                assert np.all(np.isfinite(refpos.to_numpy(inv_freq))) and math.isfinite(float(factor))
    try:
        _within_memory(run)
    except Exception as exc:  # the contract decides what is allowed
        assert isinstance(exc, (ValueError, TypeError)), f"{type(exc).__name__}: {exc}"
        assert str(exc) and "\n" not in str(exc), f"{type(exc).__name__}: {exc!r}"


def npy_contract(data: bytes) -> None:
    """Crafted ``.npy`` bytes: an array no larger than the payload, or an NpyError naming the file."""
    try:
        array = _within_memory(lambda: npy.parse_npy(data, "fuzz.npy"))
    except Exception as exc:  # the contract decides what is allowed
        _named_refusal(exc, "fuzz.npy")
        assert isinstance(exc, npy.NpyError), type(exc)
        return
    assert array.nbytes <= len(data)


@pytest.fixture(scope="module")
def golden_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-golden")
    golden.write_cases(root, layout_cases()[:2], title="fuzz", certify=False)
    return root


def _apply(manifest: dict, mutations) -> dict:
    for path, value in mutations:
        target = manifest
        try:
            for key in path[:-1]:
                target = target[next(iter(target))] if key == "*" else target[key]
            key = path[-1]
            if key == "*":
                key = next(iter(target))
            if value == "<delete>":
                del target[key]
            else:
                target[key] = value
        except (KeyError, IndexError, TypeError, StopIteration):
            continue  # an earlier mutation removed the way there
    return manifest


def manifest_contract(root: Path, mutations) -> None:
    """A mutated manifest: loads and every case reads, or a GoldenError naming manifest.json."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "g"
        shutil.copytree(root, work)
        manifest = _apply(json.loads((work / "manifest.json").read_text(encoding="utf8")), mutations)
        (work / "manifest.json").write_text(json.dumps(manifest), encoding="utf8")

        def run():
            loaded = golden.load_manifest(work)
            for case in loaded["cases"]:
                problems = golden.check_files(work, case)
                assert all(isinstance(p, str) and "\n" not in p for p in problems)
                if not problems:
                    outputs = golden.load_arrays(work, case, "outputs")
                    name = case["primary_output"]
                    entries.compare(outputs[name], outputs[name], case["outputs"][name]["tolerance"], "float32")
        try:
            _within_memory(run)
        except Exception as exc:  # the contract decides what is allowed
            _named_refusal(exc, "manifest.json")


# ------------------------------------------------------------------------------------------- tests
@FUZZ
@given(hostile_configs())
@example({**_VALID, "rope_scaling": {"rope_type": "linear", "factor": 2.0}})
@example({**_VALID, "head_dim": 2**40})
@example({**_VALID, "head_dim": True})
@example({**_VALID, "rope_theta": "1e4"})
@example({**_VALID, "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                         "sliding_attention": 3}})
@example({**_VALID, "rope_scaling": {"rope_type": "yarn", "factor": math.nan}})
@example({"rope_theta": 1e4})
def test_the_resolver_gives_a_rope_or_a_named_refusal(config):
    resolve_contract(config)


@FUZZ
@given(model_configs())
@example({"model_type": "t5", "num_layers": 2, "num_heads": 4, "d_model": 32, "relative_attention_num_buckets": 3})
@example({"model_type": "opt", **_MODEL, "max_position_embeddings": 2**62})
@example({"model_type": "bloom", **_MODEL, "n_head": 2**40})
@example({"model_type": "mpt", **_MODEL, "attn_config": {"alibi_bias_max": math.nan}})
@example({"model_type": "m2m_100", **_MODEL, "pad_token_id": -5})
@example({"model_type": "nemotron_h", **_MODEL, "hybrid_override_pattern": "M*?"})
@example({"model_type": "kimi_linear", **_MODEL, "linear_attn_config": {"full_attn_layers": [0, 99]}})
@example({"model_type": "whisper", **_MODEL, "d_model": 15})
@example({"model_type": "voxtral", "text_config": {"model_type": "bloom", **_MODEL}, "hidden_size": 3})
@example({"model_type": "qwen2_5_omni", "thinker_config": {"text_config": 7}})
def test_model_positions_gives_records_or_a_named_refusal(config):
    positions_contract(config)


@FUZZ
@given(npy_files())
@example(_npy("(4294967296, 4294967296)"))
@example(_npy("(True,)", b"\x00" * 8))
@example(_npy("(-1,)"))
@example(_npy(f"({10**30},)"))
@example(npy.MAGIC + b"\x02\x00\x10")
def test_the_npy_reader_gives_an_array_or_a_named_refusal(data):
    npy_contract(data)


@FUZZ
@given(_mutations())
@example([(("cases", 0, "inputs"), [])])
@example([(("cases", 0, "outputs"), "<delete>")])
@example([(("cases", 0, "outputs", "*", "tolerance", "float64", "atol"), math.nan)])
@example([(("cases", 0, "outputs", "*", "file"), "../x.npy")])
def test_the_manifest_loader_gives_cases_or_a_named_refusal(golden_dir, mutations):
    manifest_contract(golden_dir, mutations)


# -------------------------------------------------------------------------------------- meta tests
def _fails_its_contract(call) -> None:
    """``call`` (a property test) fails by its contract's assertion (several explicit examples: a group)."""
    with pytest.raises((AssertionError, ExceptionGroup)) as info:
        call()
    if isinstance(info.value, ExceptionGroup):
        assert info.value.subgroup(AssertionError) is not None, info.value


def test_the_npy_property_fails_when_the_count_wraps_around(monkeypatch):
    """64-bit element counts (the readers' old bug): a (2**32, 2**32) shape counts 0 and NumPy's reshape
    error escapes unnamed."""
    monkeypatch.setattr(npy, "element_count", lambda shape: int(np.prod(shape, dtype=np.int64)))
    _fails_its_contract(test_the_npy_reader_gives_an_array_or_a_named_refusal)


def test_the_manifest_property_fails_without_the_schema(monkeypatch, golden_dir):
    """Without the schema a manifest whose ``inputs`` is a list ends in AttributeError."""
    monkeypatch.setattr(golden, "validate_manifest", lambda manifest, version: None)
    _fails_its_contract(lambda: test_the_manifest_loader_gives_cases_or_a_named_refusal(golden_dir))


def test_the_positions_property_fails_on_an_unnamed_error(monkeypatch):
    """A stack reader that lets a KeyError out (a geometry key read by indexing) is caught by the property."""
    real = Stack.geometry

    def leaky(stack):
        stack.view.raw["ffn_dim"]  # a KeyError: no config here has it
        return real(stack)

    monkeypatch.setattr(Stack, "geometry", leaky)
    _fails_its_contract(test_model_positions_gives_records_or_a_named_refusal)


def test_the_resolver_property_fails_on_an_unnamed_error(monkeypatch):
    """A resolver step that lets a KeyError out (as config lookups did) is caught by the property."""
    real = hf.as_language_view

    def leaky(config):
        view = real(config)
        view.raw["hidden_size"] // view.raw["num_attention_heads"]  # KeyError / ZeroDivisionError on hostile configs
        return view

    monkeypatch.setattr(hf, "as_language_view", leaky)
    _fails_its_contract(test_the_resolver_gives_a_rope_or_a_named_refusal)
