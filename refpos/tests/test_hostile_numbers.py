"""Hostile numbers: sizes the command line caps, integers beyond float64, parameters that resolve to infinity,
a sequence length below the positions, environment variables, and arrays of two libraries.

Each is a ``ValueError``/``TypeError`` naming the parameter (and, for a size, the memory it would take) before
anything is allocated, or one line and exit 2 on the command line. docs/security.md lists the groups.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import refpos
from refpos.encodings import relative_positions, t5_bucket
from refpos.golden.cases.rope import model_cases
from refpos.models import from_hf_config, hf_layers
from refpos.rope import apply_rope_complex
from refpos.tests.hostile import bounded, exit_2

REPOSITORY = Path(__file__).resolve().parents[2]
BASE = {"model_type": "llama", "rope_theta": 10000.0, "head_dim": 8, "hidden_size": 32, "num_attention_heads": 4,
        "max_position_embeddings": 64}


_bounded = bounded


def _config(tmp_path: Path, config: dict, text: str | None = None) -> str:
    path = tmp_path / "config.json"
    path.write_text(text if text is not None else json.dumps(config), encoding="utf8")
    return str(path)


_exit_2 = exit_2


# ------------------------------------------------------------------------------ sizes the CLI caps, in the API
SIZES = [
    ("alibi_slopes(2**40)", lambda: refpos.encodings.alibi_slopes(2**40), "n_heads"),
    ("alibi_bias(2**40, 1, 1)", lambda: refpos.encodings.alibi_bias(2**40, 1, 1), "n_heads"),
    ("alibi_bias(8, 2**20, 2**20)", lambda: refpos.encodings.alibi_bias(8, 2**20, 2**20), "q_len=1048576"),
    ("sinusoidal(dim=2**40)", lambda: refpos.encodings.sinusoidal.sinusoidal(np.arange(4), 2**40), "dim"),
    ("sinusoidal of 2**40 positions", lambda: refpos.encodings.sinusoidal.sinusoidal(np.broadcast_to(np.int64(3),
                                                                                                     (2**20, 2**20)),
                                                                                     64), "positions"),
    ("sinusoidal_shift_matrix(1, 2**16)", lambda: refpos.encodings.sinusoidal_shift_matrix(1, 2**16), "dim=65536"),
    ("alibi_bias_from_positions of 2**40 keys",
     lambda: refpos.encodings.alibi_bias_from_positions(refpos.encodings.alibi_slopes(8, xp="numpy"),
                                                        np.broadcast_to(np.int64(0), (2**20,)),
                                                        np.broadcast_to(np.int64(0), (2**20,))), "heads"),
    ("num_hidden_layers 2**40", lambda: hf_layers({**BASE, "num_hidden_layers": 2**40}), "num_hidden_layers"),
    ("t5 num_buckets 2**40", lambda: t5_bucket(np.array([1]), num_buckets=2**40, max_distance=2**41),
     "num_buckets"),
]


@pytest.mark.parametrize(("call", "word"), [s[1:] for s in SIZES], ids=[s[0] for s in SIZES])
def test_a_size_the_cli_caps_is_refused_by_the_api_before_allocating(call, word):
    """These never returned (alibi_slopes) or raised MemoryError after trying to allocate terabytes."""
    with pytest.raises(ValueError) as info:
        _bounded(call)
    message = str(info.value)
    assert word in message and "\n" not in message, message
    if "num_buckets" not in word:
        assert "B " in message or "B of" in message, message  # the estimated bytes


# ------------------------------------------------------------------------------- integers beyond float64
@pytest.mark.parametrize(("key", "rope_scaling", "word"), [
    ("rope_theta", None, "theta"),
    ("partial_rotary_factor", None, "partial_rotary_factor"),
    ("rope_scaling", {"rope_type": "linear", "factor": 10**400}, "factor"),
    ("rope_scaling", {"rope_type": "yarn", "factor": 2.0, "beta_fast": 10**400,
                      "original_max_position_embeddings": 32}, "beta_fast"),
    ("rope_scaling", {"rope_type": "longrope", "short_factor": [1.0, 10**400, 1.0, 1.0], "long_factor": [1.0] * 4,
                      "original_max_position_embeddings": 32}, "short_factor[1]"),
])
def test_an_integer_beyond_float64_is_a_value_error_naming_the_key(key, rope_scaling, word, tmp_path, capsys):
    """Python integers beyond float range raised OverflowError (API) or exited 3 (``refpos rope``)."""
    config = {**BASE, key: rope_scaling if rope_scaling is not None else 10**400}
    with pytest.raises(ValueError, match=re.escape(word)):
        from_hf_config(config)
    text = json.dumps({**BASE, key: rope_scaling if rope_scaling is not None else "BIG"}).replace(
        '"BIG"', "1" + "0" * 400).replace(str(10**400), "1" + "0" * 400)
    err = _exit_2(["rope", _config(tmp_path, {}, text)], capsys)
    assert word.split("[")[0] in err


# ------------------------------------------------------------------------------------ finite or refused
def test_frequencies_that_resolve_to_infinity_are_refused(tmp_path, capsys):
    """``short_factor`` 1e-320 gave ω = inf and "complete: yes"."""
    config = {**BASE, "rope_scaling": {"rope_type": "longrope", "short_factor": [1e-320, 1.0, 1.0, 1.0],
                                       "long_factor": [1.0] * 4, "original_max_position_embeddings": 32}}
    with pytest.raises(ValueError, match=r"ω\[0\].*inf.*finite"):
        refpos.rope_frequencies(from_hf_config(config), seq_len=8)
    err = _exit_2(["golden", "model", _config(tmp_path, config), "--out", str(tmp_path / "out"), "--no-certify",
                   "--positions", "0,1,7"], capsys)  # within L_0 = 32: the short factors
    assert "longrope" in err and "finite" in err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_an_attention_factor_that_overflows_the_goldens_is_refused(tmp_path, capsys):
    """YaRN ``attention_factor`` 1e308 wrote goldens of infinities."""
    config = {**BASE, "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1e308,
                                       "original_max_position_embeddings": 32}}
    err = _exit_2(["golden", "model", _config(tmp_path, config), "--out", str(tmp_path / "out"), "--no-certify",
                   "--positions", "0,1,7"], capsys)
    assert "apply" in err and "inf" in err and "non-finite" in err
    assert not (tmp_path / "out" / "manifest.json").exists()


# -------------------------------------------------------------------------------- seq_len below the positions
DYNAMIC = {**BASE, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}


@pytest.mark.parametrize("call", ["apply_rope", "rope_cos_sin", "rope_rotation_matrix"])
def test_dynamic_ntk_below_the_positions_is_refused_with_the_rule(call):
    """``seq_len < max(positions) + 1`` silently used unscaled frequencies."""
    rope = from_hf_config(DYNAMIC)
    positions = np.array([0, 100])
    calls = {"apply_rope": lambda: refpos.apply_rope(np.ones((2, 8)), positions, rope, seq_len=10),
             "rope_cos_sin": lambda: refpos.rope_cos_sin(positions, rope, seq_len=10),
             "rope_rotation_matrix": lambda: refpos.rope.rope_rotation_matrix(100, rope, seq_len=10)}
    with pytest.raises(ValueError, match=r"seq_len must be >= max\(positions\) \+ 1 = 101 .*'dynamic'"):
        calls[call]()
    assert np.asarray(refpos.rope_cos_sin(positions, rope, seq_len=101)[0]).shape == (2, 8)  # covering: fine


def test_golden_model_refuses_a_seq_len_below_its_positions(tmp_path, capsys):
    err = _exit_2(["golden", "model", _config(tmp_path, DYNAMIC), "--out", str(tmp_path / "out"), "--no-certify",
                   "--seq-len", "5", "--positions", "0,100"], capsys)
    assert "seq_len" in err and "101" in err


# --------------------------------------------------------------------------------------- named messages
@pytest.mark.parametrize(("change", "words"), [
    ({"max_position_embeddings": 10**30}, ("max_position_embeddings", "2**53")),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0, "beta_fast": 1e308, "beta_slow": 1e308,
                       "original_max_position_embeddings": 32}}, ("beta_fast", "2π")),
    ({"model_type": 3}, ("model_type", "string", "int 3")),
])
def test_an_unclear_refusal_names_the_key_and_what_is_allowed(change, words, tmp_path, capsys):
    """"high is out of bounds for int64", "math domain error", "model_type None" named nothing."""
    config = _config(tmp_path, {**BASE, **change})
    for argv in (["rope", config], ["golden", "model", config, "--out", str(tmp_path / "out"), "--no-certify"]):
        err = _exit_2(argv, capsys)
        assert all(w in err for w in words), err


# ------------------------------------------------------------------------------- environment variables
def _run(args, **env):
    return subprocess.run([sys.executable, "-m", "refpos", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPOSITORY), **env})


@pytest.mark.parametrize("value", ["abc", "-1", "1e9", ""])
def test_a_bad_npy_cap_is_one_line_naming_the_variable_and_only_where_it_is_used(value):
    """``REFPOS_MAX_NPY_BYTES=abc`` printed an import-time traceback on every command; ``-1`` was accepted and
    then blamed every file."""
    explain = _run(["explain"], REFPOS_MAX_NPY_BYTES=value)
    assert explain.returncode == 0, explain.stderr  # a command that reads no .npy file is not concerned
    listing = _run(["golden", "list"], REFPOS_MAX_NPY_BYTES=value)
    assert listing.returncode == 2, listing.stderr
    assert listing.stderr.count("\n") == 1 and "REFPOS_MAX_NPY_BYTES" in listing.stderr, listing.stderr
    assert "manifest.json" not in listing.stderr  # the variable is wrong, not the manifest


def test_every_environment_variable_is_read_when_used():
    """No module reads ``os.environ`` at import: a bad value is an error of the command that uses it."""
    offenders = []
    for path in sorted((REPOSITORY / "refpos").rglob("*.py")):
        if "tests" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf8"))
        for node in tree.body:  # module level statements (not inside a def or class)
            for inner in ast.walk(node):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    break
                if isinstance(inner, ast.Attribute) and inner.attr in ("environ", "getenv"):
                    offenders.append(f"{path.relative_to(REPOSITORY)}:{inner.lineno}")
    assert not offenders, offenders


# ----------------------------------------------------------------------------------- two array libraries
def _libraries():
    import array_api_strict

    found = [("array_api_strict", lambda a: array_api_strict.asarray(a))]
    try:
        import torch
    except ImportError:
        return found
    return [*found, ("torch", lambda a: torch.as_tensor(a))]


@pytest.mark.parametrize("library", [name for name, _ in _libraries()])
@pytest.mark.parametrize("which", ["x", "positions"])
def test_arrays_of_two_libraries_are_refused_by_name(library, which):
    """torch and NumPy inputs mixed raised AttributeError (array-api-strict ones likewise)."""
    convert = dict(_libraries())[library]
    rope = refpos.RopeConfig(head_dim=8)
    x, positions = np.ones((2, 8)), np.array([0, 1])
    if which == "x":
        x = convert(x)
    else:
        positions = convert(positions)
    for call in (lambda: refpos.apply_rope(x, positions, rope), lambda: apply_rope_complex(x, positions, rope)):
        with pytest.raises(TypeError, match=r"positions is an array of .* the other inputs arrays of") as info:
            call()
        assert library in str(info.value)
    with pytest.raises(TypeError, match="k_positions"):
        relative_positions(np.array([0, 1]), convert(np.array([0, 1])))
    with pytest.raises(TypeError, match="q_positions"):
        refpos.encodings.alibi_bias_from_positions(refpos.encodings.alibi_slopes(2, xp="numpy"), convert(np.array([0,
                                                                                                                   1])),
                                         np.array([0, 1]))
    y = refpos.apply_rope(convert(np.ones((2, 8))), [0, 1], rope)  # a list of ints goes with any library
    assert type(y).__module__.split(".")[0] in (library, "array_api_strict")


def test_a_model_case_set_resolves_where_the_numbers_are_sane():
    """The refusals above leave ordinary configs alone (a regression guard for the checks' thresholds)."""
    cases = model_cases({**BASE, "num_hidden_layers": 32, "max_position_embeddings": 2**17}, "sane")
    assert {c.id.split("/")[-1] for c in cases} == {"frequencies", "cos-sin", "apply"}
