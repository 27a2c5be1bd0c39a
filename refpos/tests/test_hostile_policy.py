"""One error policy, everywhere: a public function refuses what its command line refuses, with the same sentence;
strings refpos did not write cannot drive the terminal; a malformed wrapper config is refused by name; a closed
pipe ends a command quietly. docs/security.md lists the promises.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import refpos
from refpos.cli import main
from refpos.tests.hostile import edit_manifest, exit_2, write_model

REPOSITORY = Path(__file__).resolve().parents[2]
LLAMA = {"model_type": "llama", "rope_theta": 10000.0, "head_dim": 8, "hidden_size": 32, "num_attention_heads": 4,
         "max_position_embeddings": 64}
ROPE = refpos.RopeConfig(head_dim=8)


def _allowed(text: str) -> str:
    """The ``must be …`` clause of a refusal, up to its ``, got``."""
    found = re.search(r"must be (.*?), got", text)
    assert found, text
    return found.group(1)


# --------------------------------------------------------------------------- the API refuses what the CLI does
#: (id, the command line, the API call): both must refuse, with the same clause
SAME = [
    ("seq_len 0", ["rope", "{llama}", "--seq-len", "0"], lambda: refpos.rope_frequencies(ROPE, seq_len=0)),
    ("seq_len 2**60", ["rope", "{llama}", "--seq-len", str(2**60)],
     lambda: refpos.rope_cos_sin(np.arange(3), ROPE, seq_len=2**60)),
    ("seq_len 0 in apply_rope", ["rope", "{llama}", "--seq-len", "0"],
     lambda: refpos.apply_rope(np.ones((3, 8)), np.arange(3), ROPE, seq_len=0)),
    ("theta 5e-324", ["tolerance", "--theta", "5e-324"], lambda: refpos.RopeConfig(head_dim=8, theta=5e-324)),
    ("theta 1", ["tolerance", "--theta", "1"], lambda: refpos.rope_config_from_params({"rope_theta": 1.0,
                                                                                       "head_dim": 8})),
]


@pytest.mark.parametrize(("argv", "call"), [s[1:] for s in SAME], ids=[s[0] for s in SAME])
def test_the_api_refuses_what_the_command_line_refuses_with_the_same_words(argv, call, tmp_path, capsys):
    """``theta=5e-324``, ``seq_len=0`` and ``seq_len=2**60`` were accepted by the API (the CLI refused them)."""
    (tmp_path / "llama.json").write_text(json.dumps(LLAMA), encoding="utf8")
    err = exit_2([a.replace("{llama}", str(tmp_path / "llama.json")) for a in argv], capsys)
    with pytest.raises(ValueError) as info:
        call()
    assert _allowed(str(info.value)) == _allowed(err), (str(info.value), err)


def test_the_largest_allowed_values_still_work():
    assert refpos.rope_frequencies(ROPE, seq_len=2**53 + 1)[1] == 1.0  # max(positions) + 1 for a position of 2**53
    assert np.isfinite(np.asarray(refpos.rope_cos_sin([2**53], ROPE)[0])).all()
    assert refpos.RopeConfig(head_dim=8, theta=1.0000001).theta > 1


@pytest.mark.parametrize(("call", "error", "word"), [
    (lambda: refpos.self_attention(np.ones((4, 8)), None), TypeError, "weights"),
    (lambda: refpos.self_attention(np.ones((4, 8)), {"w_q": np.eye(8)}), TypeError, "weights"),
    (lambda: refpos.self_attention([[1.0] * 8] * 4, refpos.AttentionWeights.identity(8)), TypeError, "x must be"),
    (lambda: refpos.AttentionWeights(w_q=None, w_k=None, w_v=None), TypeError, "w_q"),
    (lambda: refpos.AttentionWeights(w_q=[[1.0]], w_k=[[1.0]], w_v=[[1.0]]), TypeError, "w_q"),
    (lambda: refpos.to_numpy({"a": 1}), TypeError, "x must be"),
    (lambda: refpos.to_numpy("1.5"), TypeError, "x must be"),
    (lambda: refpos.to_numpy(None), TypeError, "x must be"),
    (lambda: refpos.to_numpy([1, [2, 3]]), TypeError, "ragged"),
    (lambda: refpos.to_numpy([2**70]), TypeError, "64 bits"),
], ids=["self_attention None", "self_attention dict", "self_attention list x", "AttentionWeights None",
        "AttentionWeights lists", "to_numpy dict", "to_numpy str", "to_numpy None", "to_numpy ragged",
        "to_numpy 2**70"])
def test_a_wrong_type_is_a_type_error_naming_the_parameter(call, error, word):
    """``self_attention(x, None)`` raised AttributeError ('NoneType' object has no attribute 'w_q');
    ``to_numpy({'a': 1})`` returned an object array."""
    with pytest.raises(error, match=re.escape(word)):
        call()


def test_to_numpy_still_converts_numbers_and_arrays():
    assert refpos.to_numpy([1, 2]).dtype == np.int64 and refpos.to_numpy(2.5).dtype == np.float64
    assert refpos.to_numpy(np.float32(1)).dtype == np.float32 and refpos.to_numpy((True,)).dtype == np.bool_


# ------------------------------------------------------------------------------------------ wrapper configs
@pytest.mark.parametrize(("change", "key"), [
    ({"model_type": "llava", "text_config": [1, 2]}, "text_config"),
    ({"model_type": "qwen2_5_vl", "text_config": "qwen2"}, "text_config"),
    ({"model_type": "qwen2_5_omni", "thinker_config": {"text_config": 3}}, "thinker_config.text_config"),
    ({"model_type": "qwen2_5_vl", "vision_config": [2]}, "vision_config"),
    ({"model_type": "internvl", "llm_config": True}, "llm_config"),
])
def test_a_wrapper_config_that_is_not_an_object_is_refused_by_name(change, key, tmp_path, capsys):
    """A ``text_config`` that is a list was answered "unknown" (exit 0) as if the model had none."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(change), encoding="utf8")
    for argv in (["positions", str(path)], ["rope", str(path)], ["positions", str(path), "--layout", "text:3"]):
        err = exit_2(argv, capsys)
        assert f"{key} must be a JSON object" in err, err
    with pytest.raises(TypeError, match=re.escape(key)):
        refpos.model_positions(change)


# ----------------------------------------------------------------------------------- control characters
CLEAR = "\x1b[2J\x1b[H"
SPOOF = f"rope/toy/apply{CLEAR}all cases ok\r"


@pytest.mark.parametrize("where", ["id", "output name"])
def test_control_characters_in_a_manifest_are_refused_at_load(where, tmp_path, capsys):
    """A case id could clear the terminal and print a spoofed "all cases ok" in ``golden list``."""
    root = write_model(tmp_path / "g")

    def plant(manifest):
        case = manifest["cases"][0]
        if where == "id":
            case["id"] = SPOOF
        else:
            case["outputs"]["bad\x1b[31m"] = case["outputs"].pop(case["primary_output"])
            case["primary_output"] = "bad\x1b[31m"

    edit_manifest(root, plant)
    for argv in (["golden", "list", "--golden-dir", str(root)], ["golden", "verify", "--golden-dir", str(root)],
                 ["golden", "show", SPOOF, "--golden-dir", str(root)]):
        err = exit_2(argv, capsys)
        assert "control or format characters" in err and "\x1b" not in err, err
        assert ("\\x1b[2J" if where == "id" else "\\x1b[31m") in err, err


def test_strings_refpos_did_not_write_are_printed_escaped(tmp_path, capsys):
    """The check verb echoes the case id it was given, the error line the message it got: both escaped."""
    err = exit_2(["check", SPOOF, str(tmp_path / "missing.npy")], capsys)
    assert "\x1b" not in err and "\r" not in err and "\\x1b[2J" in err, err
    from refpos.validation import printable

    assert printable("ok 我 − ×\u202eevil\x00") == "ok 我 − ×\\u202eevil\\x00"


# -------------------------------------------------------------------------------------------- closed pipes
VERBS = [["golden", "list"], ["explain"], ["golden", "show", "rope/meta-llama--Llama-3.1-8B/apply"], ["--help"],
         ["positions", str(REPOSITORY / "golden" / "configs" / "Qwen--Qwen2.5-VL-7B-Instruct.json"), "--layout",
          "text:200000"]]


@pytest.mark.parametrize("argv", VERBS, ids=[" ".join(v[:2]) for v in VERBS])
def test_a_closed_pipe_ends_every_verb_quietly(argv):
    """``golden list | head`` ended in "error: [Errno 32] Broken pipe", exit 2."""
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone before the first line: every write meets a closed pipe
    try:
        done = subprocess.run([sys.executable, "-m", "refpos", *argv], stdout=writer, stderr=subprocess.PIPE,
                              env=env, timeout=300, check=False)
    finally:
        os.close(writer)
    assert done.returncode in (0, 141), done.stderr.decode()
    assert done.stderr == b"", done.stderr.decode()


def test_main_returns_141_when_stdout_is_closed(monkeypatch, capsys):
    """In process: the verb's write meets a closed pipe; nothing is printed, not even on stderr."""
    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["explain"]) == 141
    assert capsys.readouterr().err == ""


def test_main_flushes_what_is_buffered_before_it_returns(monkeypatch, capsys):
    """A verb's few lines fit the buffer, so the pipe is met only at the last flush: in ``main``, not in the
    interpreter's flush at exit (which printed "Exception ignored ... BrokenPipeError" and exited 120)."""
    class BufferedThenClosed:
        def write(self, text):
            return len(text)

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise OSError("not a file")

    monkeypatch.setattr(sys, "stdout", BufferedThenClosed())
    assert main(["explain"]) == 141
    assert main(["--help"]) == 141
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------------------ two array libraries
def _mixed_calls(other):
    """Each encoding with two or more array arguments, one of them from ``other``'s library: (name, call, the
    argument that must be named)."""
    enc = refpos.encodings
    f = np.ones
    q, three, zeros = f((2, 3, 4)), np.arange(3), np.zeros((3, 3), dtype=np.int64)
    return [
        ("t5_bias", lambda: enc.t5_bias(other(f((32, 2))), three, three), "q_positions"),
        ("learned_lookup", lambda: enc.learned_lookup(other(f((4, 2))), np.arange(2)), "positions"),
        ("kerple_bias", lambda: enc.kerple_bias(other(f(2)), f(2), three, three), "r2"),
        ("shaw_key_terms", lambda: enc.shaw_key_terms(q, other(f((5, 4))), three, three, 2), "w_k"),
        ("shaw_value_terms", lambda: enc.shaw_value_terms(f((2, 3, 3)), other(f((5, 4))), three, three, 2), "w_v"),
        ("deberta_c2p_terms", lambda: enc.deberta_c2p_terms(q, other(f((2, 8, 4))), zeros), "pos_key"),
        ("deberta_p2c_terms", lambda: enc.deberta_p2c_terms(q, other(f((2, 8, 4))), zeros), "pos_query"),
        ("cope_gates", lambda: enc.cope_gates(q, other(q), three, three), "k"),
        ("cope_position_logits", lambda: enc.cope_position_logits(q, other(f((4, 3))), zeros.astype(float)), "e"),
        ("fire_bias", lambda: enc.fire_bias(three, three, other(f(4)), f(4), f((2, 4)), f(2)), "w1"),
        ("txl_scores", lambda: enc.txl_scores(q, other(q), q, f((2, 4)), f((2, 4))), "k"),
        ("txl_position_scores", lambda: enc.txl_position_scores(q, q, other(q), f((2, 4)), f((2, 4))), "r_head_k"),
        ("sandwich_bias", lambda: enc.sandwich_bias(three, other(three), 8, 2), "k_positions"),
        ("distance_bias", lambda: enc.distance_bias(three, other(three)), "k_positions"),
        ("deberta_relative_index", lambda: enc.deberta_relative_index(three, other(three), position_buckets=4,
                                                                       max_relative_positions=8), "k_positions"),
        ("deberta_position_projection", lambda: enc.deberta_position_projection(f((8, 8)), other(f((8, 8))),
                                                                                 n_heads=2), "weight"),
    ]


MIXED = [name for name, _, _ in _mixed_calls(lambda a: a)]


@pytest.mark.parametrize("index", range(len(MIXED)), ids=MIXED)
def test_arrays_of_two_libraries_are_refused_by_name_in_every_encoding(index):
    """A torch (here array-api-strict) array among NumPy ones raised the library's own error (torch:
    "reshape(): argument 'input' must be Tensor"), naming no argument, or returned a mixed result (txl_scores)."""
    import array_api_strict

    _, call, argument = _mixed_calls(lambda a: array_api_strict.asarray(a))[index]
    with pytest.raises(TypeError, match=rf"^{argument} is an array of (array_api_strict|numpy), the other inputs"):
        call()
