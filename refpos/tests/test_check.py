"""``refpos check``: pass/fail by dtype and position, every diagnosis id, unusable input (exit 2).

Each catalogue entry is triggered by a constructed wrong candidate (the mistake applied to the reference
computation) and must be named; the correct candidate passes and gets no diagnosis.
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos.check.rope.run import check_rope
from refpos.check.tables.alibi import check_alibi, naive_slopes
from refpos.check.tables.sinusoid import check_sinusoid
from refpos.check.tables.t5 import check_t5
from refpos.cli import main
from refpos.encodings import alibi_slopes, t5_bucket
from refpos.encodings.sinusoidal import sinusoidal
from refpos.golden.cases.rope import model_configs
from refpos.golden.files.manifest import default_golden_dir, find_case, load_manifest
from refpos.golden.files.npy import npy_bytes
from refpos.models import from_hf_config
from refpos.rope.core import rotate_pairs
from refpos.rope.forms import pair_channels
from refpos.tests.ports import float32_rope

CONFIGS = model_configs()
POSITIONS = np.array([0, 1, 2, 7, 255, 2047, 4095, 4096, 4097, 8191, 32768, 131071])


def _setup(model: str, positions: np.ndarray = POSITIONS, seed: int = 0):
    rope = from_hf_config(CONFIGS[model]["config"])
    x = np.random.default_rng(seed).standard_normal((positions.size, rope.head_dim))
    w, factor = refpos.rope_frequencies(rope, seq_len=int(positions.max()) + 1, xp="numpy")
    return rope, x, np.asarray(w), float(factor)


def _apply(x, positions, rope, **kw):
    return np.asarray(refpos.apply_rope(x, positions, rope, **kw))


def _float32_path(x, positions, rope, w, factor):
    """A correct float32 implementation (refpos.tests.ports.float32_rope)."""
    return float32_rope(x, positions, rope, w, factor)


def _ids(result):
    return [d["id"] for d in result["diagnosis"]]


# --------------------------------------------------------------------------------------- RoPE API
@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "microsoft/Phi-3.5-mini-instruct",
                                   "deepseek-ai/DeepSeek-V3", "EleutherAI/gpt-j-6b"])
def test_correct_candidates_pass_and_float32_declared_float64_is_named(model):
    rope, x, w, factor = _setup(model)
    ref = _apply(x, POSITIONS, rope)
    assert check_rope(ref, x, POSITIONS, rope)["ok"]
    y32 = _float32_path(x, POSITIONS, rope, w, factor)
    ok32 = check_rope(y32, x, POSITIONS, rope)  # dtype from the array: float32
    assert ok32["ok"] and ok32["dtype"] == "float32" and ok32["diagnosis"] == []
    as64 = check_rope(y32.astype(np.float64), x, POSITIONS, rope, dtype="float64")
    assert not as64["ok"]
    assert _ids(as64)[0] == "float32_angles" and _ids(as64)[-1] == "error_profile"


def test_rotating_the_layout_s_channels_as_lists_reproduces_the_reference_in_every_layout():
    """The ``pairs`` of a variant (other channels, as index lists) go through the readable rotation: given the
    layout's own channels, it is the reference, bit for bit."""
    for model in ("meta-llama/Llama-2-7b-hf", "deepseek-ai/DeepSeek-V3", "EleutherAI/gpt-j-6b", "microsoft/phi-2"):
        rope, x, w, factor = _setup(model)
        lists = rotate_pairs(x, POSITIONS, w, factor, rope, pairs=pair_channels(rope))
        np.testing.assert_array_equal(lists, _apply(x, POSITIONS, rope))


# Every RoPE mistake of the catalogue, from its definition, at every model's probe set and as a float32 port:
# refpos/tests/test_diagnosis_matrix.py.


def test_wrong_theta_from_the_frequency_probe():
    rope, x, _, _ = _setup("mistralai/Mistral-7B-v0.1")
    wrong = refpos.rope_config_from_params({**rope.to_params(), "rope_theta": 50000.0})
    result = check_rope(_apply(x, POSITIONS, wrong), x, POSITIONS, rope)
    probe = next(d for d in result["diagnosis"] if d["id"] == "wrong_theta")
    assert probe["fitted_theta"] == pytest.approx(50000.0, rel=1e-6)


@given(offset=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_property_offsets_are_named_and_the_reference_passes(offset, seed):
    rope, x, _, _ = _setup("meta-llama/Llama-2-7b-hf", np.arange(10, 18), seed)
    positions = np.arange(10, 18)
    assert check_rope(_apply(x, positions, rope), x, positions, rope)["ok"]
    result = check_rope(_apply(x, positions + offset, rope), x, positions, rope)
    assert "position_offset" in _ids(result)


# ------------------------------------------------------------------------------- tables (API)
def test_alibi_t5_sinusoid_mistakes_are_named():
    slopes = np.asarray(alibi_slopes(12, xp="numpy"))
    assert check_alibi(slopes, 12)["ok"]
    assert "alibi_closed_form_slopes" in _ids(check_alibi(naive_slopes(12), 12))
    assert "alibi_closed_form_slopes" in _ids(check_alibi(naive_slopes(12).astype(np.float32), 12))
    assert "alibi_slope_off_by_one" in _ids(check_alibi(slopes * 2 ** (8 / 12), 12))
    rel = np.arange(-40, 41)
    assert check_t5(np.asarray(t5_bucket(rel)), rel)["ok"]
    assert "t5_sign_flip" in _ids(check_t5(np.asarray(t5_bucket(-rel)), rel))
    assert "t5_direction" in _ids(check_t5(np.asarray(t5_bucket(rel, bidirectional=False)), rel))
    p = np.array([0, 1, 2, 100, 2048])
    assert check_sinusoid(np.asarray(sinusoidal(p, 16)), p, dim=16)["ok"]
    concat = np.asarray(sinusoidal(p, 16, layout="concat"))
    assert "sinusoid_layout_swap" in _ids(check_sinusoid(concat, p, dim=16))
    assert "float32_angles" in _ids(check_sinusoid(np.asarray(sinusoidal(p, 16)).astype(np.float32), p,
                                                   dim=16, dtype="float64"))


# -------------------------------------------------------------------------------------------- CLI
def _files(tmp_path, **arrays):
    paths = {}
    for name, a in arrays.items():
        paths[name] = tmp_path / f"{name}.npy"
        paths[name].write_bytes(npy_bytes(a))
    return paths


def _rope_cli(tmp_path, model, candidate, *extra):
    _, x, _, _ = _setup(model)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIGS[model]["config"]), encoding="utf8")
    f = _files(tmp_path, x=x, p=POSITIONS, y=candidate)
    return main(["check", "rope", "--config", str(config), "--input", str(f["x"]), "--positions", str(f["p"]),
                 "--candidate", str(f["y"]), *extra])


def test_cli_rope_exit_codes_and_json(tmp_path, capsys):
    model = "microsoft/Phi-3.5-mini-instruct"
    rope, x, w, factor = _setup(model)
    assert _rope_cli(tmp_path, model, _apply(x, POSITIONS, rope)) == 0
    y32 = _float32_path(x, POSITIONS, rope, w, factor)
    assert _rope_cli(tmp_path, model, y32) == 0  # a float32 file is judged as float32
    capsys.readouterr()
    assert _rope_cli(tmp_path, model, y32, "--dtype", "float64", "--json") == 1
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] is False and result["diagnosis"][0]["id"] == "float32_angles"
    assert _rope_cli(tmp_path, model, _apply(x, POSITIONS, rope, frequencies=(w, 1.0))) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "diagnosis missing_attention_factor" in out


@pytest.mark.parametrize("mode", ["truncated", "pickled", "shape", "int_candidate", "float_positions", "config",
                                  "missing"])
def test_cli_rope_unusable_input_exits_2_with_one_line(tmp_path, capsys, mode):
    import pickle

    model = "meta-llama/Llama-2-7b-hf"
    rope, x, _, _ = _setup(model)
    y = _apply(x, POSITIONS, rope)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIGS[model]["config"]), encoding="utf8")
    f = _files(tmp_path, x=x, p=POSITIONS, y=y)
    if mode == "truncated":
        f["y"].write_bytes(npy_bytes(y)[:-100])
    elif mode == "pickled":
        f["y"].write_bytes(pickle.dumps(y))
    elif mode == "shape":
        f["y"].write_bytes(npy_bytes(y[:, :64]))
    elif mode == "int_candidate":
        f["y"].write_bytes(npy_bytes(y.astype(np.int64)))
    elif mode == "float_positions":
        f["p"].write_bytes(npy_bytes(POSITIONS.astype(np.float64)))
    elif mode == "config":
        config.write_text(json.dumps({"model_type": "llama", "rope_scaling": {"rope_type": "llama3"}}), encoding="utf8")
    else:
        f["x"].unlink()
    code = main(["check", "rope", "--config", str(config), "--input", str(f["x"]), "--positions", str(f["p"]),
                 "--candidate", str(f["y"])])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("refpos check rope: error:") and captured.err.count("\n") == 1


def test_cli_tables(tmp_path, capsys):
    f = _files(tmp_path, naive=naive_slopes(12), flip=np.asarray(t5_bucket(-np.arange(-20, 21))),
               rel=np.arange(-20, 21), table=np.asarray(sinusoidal(np.arange(6), 8, layout="concat")),
               decoder=np.asarray(t5_bucket(np.arange(8)[None, :] - np.arange(8)[:, None])))
    assert main(["check", "alibi", "--heads", "12", "--candidate", str(f["naive"])]) == 1
    assert "alibi_closed_form_slopes" in capsys.readouterr().out
    assert main(["check", "t5", "--candidate", str(f["flip"]), "--relative", str(f["rel"])]) == 1
    assert "t5_sign_flip" in capsys.readouterr().out
    assert main(["check", "t5", "--candidate", str(f["decoder"]), "--q-len", "8", "--k-len", "8", "--causal"]) == 1
    assert "t5_direction" in capsys.readouterr().out
    assert main(["check", "sinusoid", "--candidate", str(f["table"]), "--length", "6", "--dim", "8"]) == 1
    assert "sinusoid_layout_swap" in capsys.readouterr().out
    assert main(["check", "t5", "--candidate", str(f["rel"]), "--relative", str(f["rel"])]) == 1
    assert main(["check", "t5", "--candidate", str(f["naive"]), "--relative", str(f["rel"])]) == 2  # float buckets
    assert main(["check", "alibi", "--candidate", str(f["naive"])]) == 2  # --heads missing
    assert "needs --heads" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- golden cases
def test_cli_golden_case(tmp_path, capsys):
    root = default_golden_dir()
    case = find_case(load_manifest(root), "rope/meta-llama--Llama-3.1-8B/apply")
    ref = np.load(root / case["outputs"]["y"]["file"], allow_pickle=False)
    x = np.load(root / case["inputs"]["x"]["file"], allow_pickle=False)
    pos = np.load(root / case["inputs"]["positions"]["file"], allow_pickle=False)
    rope = refpos.rope_config_from_params(case["parameters"]["rope"])
    swapped = _apply(x, pos, dataclasses.replace(rope, layout="interleaved"), seq_len=case["parameters"]["seq_len"])
    f = _files(tmp_path, ref=ref, swapped=swapped)
    assert main(["check", case["id"], str(f["ref"])]) == 0
    capsys.readouterr()
    assert main(["check", case["id"], str(f["swapped"]), "--json"]) == 1
    assert "layout_swap" in [d["id"] for d in json.loads(capsys.readouterr().out)["diagnosis"]]
    # cos/sin: the layout's full table is reduced to the stored per-pair columns
    cs = find_case(load_manifest(root), "rope/meta-llama--Llama-3.1-8B/cos-sin")
    cos = np.load(root / cs["outputs"]["cos"]["file"], allow_pickle=False)
    f = _files(tmp_path, full=np.concatenate([cos, cos], axis=-1).astype(np.float32))
    assert main(["check", cs["id"], str(f["full"])]) == 0


def test_cli_golden_case_unusable(tmp_path, capsys):
    f = _files(tmp_path, y=np.zeros(3))
    assert main(["check", "no/such-case", str(f["y"])]) == 2
    assert "no golden case" in capsys.readouterr().err
    copy = tmp_path / "golden"
    shutil.copytree(default_golden_dir(), copy)
    case = find_case(load_manifest(copy), "alibi/slopes-n12")
    (copy / case["outputs"]["slopes"]["file"]).unlink()
    f = _files(tmp_path, s=np.asarray(alibi_slopes(12, xp="numpy")))
    assert main(["check", "alibi/slopes-n12", str(f["s"]), "--golden-dir", str(copy)]) == 2
    assert "missing file" in capsys.readouterr().err
    assert main(["check", "alibi/slopes-n8", str(f["s"]), "--golden-dir", str(copy)]) == 2  # shape (12,) vs (8,)
    assert main(["check", "alibi/slopes-n12", str(tmp_path / "nope.npy")]) == 2


def test_non_finite_candidates_are_named_and_json_stays_strict(tmp_path, capsys):
    model = "meta-llama/Llama-2-7b-hf"
    rope, x, _, _ = _setup(model)
    bad = _apply(x, POSITIONS, rope)
    bad[3, 5] = np.nan
    result = check_rope(bad, x, POSITIONS, rope)
    assert not result["ok"] and _ids(result)[0] == "non_finite"
    assert "first at position 7" in result["diagnosis"][0]["evidence"]
    assert _rope_cli(tmp_path, model, np.full_like(bad, np.inf), "--json") == 1
    parsed = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert parsed["max_abs_error"] == "inf" and parsed["diagnosis"][0]["id"] == "non_finite"
