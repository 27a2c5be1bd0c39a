"""Bounded everything: a count a user types is capped before anything is allocated, with the parameter named, and
every quantity derived from one (times, ids, table rows) is finite and exact or refused.

``refpos positions --layout text:50000000`` allocated 4 GiB and ``image:1x100000x100000`` more;
``text:99999999999999999999999`` printed NumPy's "Maximum allowed size exceeded"; ``video:2x4x4@1e308`` printed
temporal ids of −2⁶³ with exit 0; ``check learned`` read a uint64 position 2⁶⁴ − 1 as −1. docs/security.md lists
the promises.
"""

from __future__ import annotations

import json
import resource
import sys

import numpy as np
import pytest

from refpos.cli import main
from refpos.models.mm_layout import config_position_ids, parse_layout
from refpos.models.mm_positions import Image, Text, Video, mm_position_ids
from refpos.tests.hostile import bounded, exit_2

QWEN25_VL = {"model_type": "qwen2_5_vl", "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 2}}
OMNI = {"model_type": "qwen2_5_omni", "thinker_config": {"model_type": "qwen2_5_omni_thinker",
                                                         "position_id_per_seconds": 25, "seconds_per_chunk": 2}}


@pytest.fixture
def config(tmp_path):
    def write(body: dict = QWEN25_VL) -> str:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(body), encoding="utf8")
        return str(path)

    return write


@pytest.fixture
def small_memory():
    """At most 1 GiB more address space than the test process holds now: a layout that allocates gigabytes
    fails with MemoryError (exit 2 "not enough memory", not the refusal naming --layout) instead of swapping."""
    if sys.platform != "linux":
        pytest.skip("the address-space limit is read from /proc (Linux)")
    with open("/proc/self/statm", encoding="ascii") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (used + 2**30, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ---------------------------------------------------------------------------------------------- --layout
TOO_MANY = [
    ("text:50000000", "'text:50000000': the token count must be an integer from 1 to 2**22"),
    ("text:99999999999999999999999", "the token count must be an integer from 1 to 2**22"),
    ("image:1x100000x100000", "spans hold 2500000000 tokens, more than the 4194304 (2**22) a layout may hold"),
    ("text:4194304,text:1", "spans hold 4194305 tokens, more than the 4194304"),
    ("image:1x8x" + "9" * 5000, "a patch count must be an integer from 1 to 2**22"),
    ("video:70000x2x2", "spans make 70000 pieces of ids"),  # Qwen3-VL places a video frame by frame
    (",".join(["text:1"] * 70000), "--layout holds 70000 spans, more than the 65536 (2**16)"),
]


@pytest.mark.parametrize(("layout", "words"), TOO_MANY, ids=[t[0][:40] for t in TOO_MANY])
def test_a_layout_too_large_is_refused_naming_layout_before_allocating(layout, words, config, capsys, small_memory):
    family = {"model_type": "qwen3_vl"} if layout.startswith("video") else QWEN25_VL
    err = exit_2(["positions", config(family), "--layout", layout], capsys)
    assert "--layout" in err and words in err, err
    assert "B of (3, T) int64 ids" in err or "tokens" not in words, err  # the memory it would have taken


def test_the_largest_layout_allowed_still_works(config, capsys):
    ids, _ = config_position_ids(QWEN25_VL, parse_layout("text:100,image:1x64x64,text:100"))
    assert ids.shape == (3, 100 + 32 * 32 + 100)
    assert main(["positions", config(), "--layout", "text:3,image:1x4x4,text:2"]) == 0


@pytest.mark.parametrize(("family", "layout", "words"), [
    (QWEN25_VL, "video:2x4x4@1e308", "tokens_per_second × seconds_per_grid = inf"),
    (QWEN25_VL, "video:3x4x4@4e15", "places temporal patch 2 at 1.6e+16"),
    (OMNI, "text:1,video:2x4x4@1e308,text:1", "seconds_per_grid=1e+308 × position_id_per_seconds=25"),
    (OMNI, "text:1,video:2x4x4@1e300+audio:4,text:1", "= 2.5e+301 places temporal patch 1"),
])
def test_a_video_whose_times_overflow_is_refused_not_printed_as_minus_2_63(family, layout, words, config, capsys):
    err = exit_2(["positions", config(family), "--layout", layout], capsys)
    assert words in err and "at most 2**53" in err, err


def test_the_api_refuses_the_same_layouts_by_name():
    with pytest.raises(ValueError, match=r"Text.length must be an integer from 1 to 2\*\*22"):
        Text(50_000_000)
    with pytest.raises(ValueError, match=r"spans hold 2500000000 tokens"):
        bounded(lambda: mm_position_ids([Image((1, 100_000, 100_000))], family="qwen2_vl"))
    with pytest.raises(ValueError, match=r"spans\[0\]: tokens_per_second × seconds_per_grid = inf"):
        mm_position_ids([Video((2, 4, 4), seconds_per_grid=1e308)], family="qwen2_5_vl", tokens_per_second=2)
    with pytest.raises(ValueError, match="place a position id at"):
        mm_position_ids([Text(4), Video((2, 4, 4), seconds_per_grid=2.0**52)], family="qwen2_5_vl",
                        tokens_per_second=2)


@pytest.mark.parametrize("layout", ["text:١٢", "image:1x8x١٢", "text:1_0", "text: 5", "video:2x4x4@nan",
                                    "video:2x4x4@inf", "video:2x4x4@١", "text:1,,text:2", "text:1,"])
def test_a_layout_count_is_ascii_digits(layout, config, capsys):
    """Arabic-Indic digits passed as integers (``str.isdigit`` and ``int`` accept them)."""
    err = exit_2(["positions", config(), "--layout", layout], capsys)
    assert "--layout" in err, err


# ------------------------------------------------------------------------------------- derived quantities
def test_learned_positions_in_uint64_are_not_wrapped_to_minus_one(tmp_path, capsys):
    """``check learned`` cast a uint64 2**64 − 1 to −1, read table row 1 (OPT's offset 2) and passed."""
    opt = {"model_type": "opt", "hidden_size": 16, "num_attention_heads": 2, "max_position_embeddings": 16,
           "num_hidden_layers": 1, "word_embed_proj_dim": 16}
    (tmp_path / "opt.json").write_text(json.dumps(opt), encoding="utf8")
    table = np.arange(18 * 16, dtype=np.float64).reshape(18, 16)
    np.save(tmp_path / "table.npy", table)
    np.save(tmp_path / "p.npy", np.array([0, 2**64 - 1], dtype=np.uint64))
    np.save(tmp_path / "y.npy", table[[2, 1]])  # rows 0 + 2 and (-1) + 2: what the wrapped positions read
    err = exit_2(["check", "learned", "--config", str(tmp_path / "opt.json"), "--positions", str(tmp_path / "p.npy"),
                  "--table", str(tmp_path / "table.npy"), "--candidate", str(tmp_path / "y.npy")], capsys)
    assert "int64 holds" in err and "18446744073709551615" in err, err


@pytest.mark.parametrize(("argv", "flag"), [
    (["rope", "{config}", "--seq-len", "٤٠٩٦"], "--seq-len"),
    (["tolerance", "--theta", "١٠٠٠٠"], "--theta"),
    (["tolerance", "--head-dim", "١٢٨"], "--head-dim"),
    (["tolerance", "--max-position", "1_000"], "--max-position"),
    (["tolerance", "--theta", " 10000"], "--theta"),
])
def test_a_numeric_option_is_ascii_digits(argv, flag, config, capsys):
    """``int('١٢٨')`` is 128 and ``float('١٠٠٠٠')`` 10000.0: the options took other scripts' digits."""
    err = exit_2([a.replace("{config}", config({"model_type": "llama", "head_dim": 8, "rope_theta": 1e4}))
                  for a in argv], capsys)
    assert flag in err, err


@pytest.mark.parametrize(("variable", "value"), [("REFPOS_MAX_NPY_BYTES", "١٢٣٤٥"), ("REFPOS_THREADS", "٢")])
def test_an_environment_count_is_ascii_digits(variable, value, monkeypatch):
    from refpos.inputs import max_npy_bytes
    from refpos.parallel import num_threads

    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=variable):
        (max_npy_bytes if variable == "REFPOS_MAX_NPY_BYTES" else num_threads)()


def test_golden_model_positions_refuse_an_empty_item(tmp_path, capsys):
    """``--positions 1,,2`` dropped the empty item and wrote goldens at 1 and 2."""
    (tmp_path / "c.json").write_text(json.dumps({"model_type": "llama", "head_dim": 8, "rope_theta": 1e4,
                                                 "hidden_size": 32, "num_attention_heads": 4}), encoding="utf8")
    for positions in ("1,,2", "1,2,", "١,2"):
        err = exit_2(["golden", "model", str(tmp_path / "c.json"), "--out", str(tmp_path / "out"), "--no-certify",
                      "--positions", positions], capsys)
        assert "--positions" in err and "ASCII digits" in err, err
    assert not (tmp_path / "out").exists()
    assert main(["golden", "model", str(tmp_path / "c.json"), "--out", str(tmp_path / "out"), "--no-certify",
                 "--positions", "0, 1,7"]) == 0  # a space after a comma is layout, not data


# ------------------------------------------------------------------------------ every count of the public API
def _api_counts():
    import refpos

    core, enc, rope = refpos.core, refpos.encodings, refpos.rope
    q = np.ones((1, 2, 3, 4))
    plain = refpos.RopeConfig(head_dim=8)
    dynamic = refpos.rope_config_from_params({"rope_type": "dynamic", "head_dim": 8, "factor": 2.0,
                                              "max_position_embeddings": 16})
    yarn = refpos.rope_config_from_params({"rope_type": "yarn", "head_dim": 8, "factor": 2.0,
                                           "original_max_position_embeddings": 16})
    three = np.arange(3)
    zeros = np.zeros((2, 2), dtype=np.int64)
    return [  # (call of one count, its name, the values refused): each was a MemoryError, an OverflowError, a
        # ZeroDivisionError or a silently empty result (2**63 wrapped) before
        ("causal_mask q_len", lambda n: core.causal_mask(n, n), "q_len", [2**40, 2**63]),
        ("causal_mask k_len", lambda n: core.causal_mask(1, n), "k_len", [2**40, 2**63, 10**30]),
        ("chunked_causal_mask chunk", lambda n: core.chunked_causal_mask(4, 4, n), "chunk", [2**63, 10**30]),
        ("sliding_window_mask", lambda n: core.sliding_window_mask(n, n, 4), "q_len", [2**40, 2**63]),
        ("sliding_window_mask window", lambda n: core.sliding_window_mask(4, 4, n), "window", [2**63, 2**1100]),
        ("repeat_kv", lambda n: core.repeat_kv(q, n), "n_heads", [2**40]),
        ("alibi_slopes", lambda n: enc.alibi_slopes(n), "n_heads", [2**1100]),
        ("cope_positions", lambda n: enc.cope_positions(np.ones((1, 3, 3)), n), "npos", [2**63, 2**1100]),
        ("deberta_attention_span", lambda n: enc.deberta_attention_span(n, n), "position_buckets", [2**63]),
        ("deberta_log_buckets", lambda n: enc.deberta_log_buckets(three, 256, n), "max_relative_positions",
         [2**63, 10**30]),
        ("deberta_relative_index", lambda n: enc.deberta_relative_index(three, three, position_buckets=4,
                                                                         max_relative_positions=n),
         "max_relative_positions", [2**63, 2**1100]),
        ("deberta_softmax_scale", lambda n: enc.deberta_softmax_scale(n, "c2p"), "head_dim", [2**63, 2**1100]),
        ("interleaved_to_concat_permutation", lambda n: enc.interleaved_to_concat_permutation(n), "dim", [2**1100]),
        ("sandwich_bias head_dim", lambda n: enc.sandwich_bias(three, three, n, 2), "head_dim", [2**40]),
        ("sandwich_bias n_heads", lambda n: enc.sandwich_bias(three, three, 8, n), "n_heads", [2**40, 2**63]),
        ("shaw_index", lambda n: enc.shaw_index(three, three, n), "max_relative_position", [2**63, 10**30]),
        ("sinusoidal_frequencies", lambda n: enc.sinusoidal_frequencies(n), "dim", [2**1100]),
        ("sinusoidal_shift_matrix r", lambda n: enc.sinusoidal_shift_matrix(n, 8), "r", [2**63, 2**1100]),
        ("txl_position_table klen", lambda n: enc.txl_position_table(n, 8), "klen", [2**40, 2**63]),
        ("txl_position_table dim", lambda n: enc.txl_position_table(4, n), "dim", [2**1100]),
        ("txl_position_table clamp_len", lambda n: enc.txl_position_table(4, 8, clamp_len=n), "clamp_len",
         [2**63, 10**30]),
        ("xpos_decay", lambda n: enc.xpos_decay(n, xp=np), "dim", [2**40]),
        ("learned_lookup offset", lambda n: enc.learned_lookup(np.ones((4, 2)), np.arange(2), offset=n), "offset",
         [2**63, 10**30]),
        ("half_to_interleaved_permutation", lambda n: rope.half_to_interleaved_permutation(n), "d", [2**40, 2**63]),
        ("interleaved_to_half_permutation", lambda n: rope.interleaved_to_half_permutation(n), "d", [2**40, 10**30]),
        ("mscale k", lambda n: rope.mscale(2.0, n), "k", [2**1100]),
        ("yarn_pair_at", lambda n: rope.yarn_pair_at(n, yarn), "rotations", [0, 2**1100]),
        ("dynamic_theta", lambda n: rope.dynamic_theta(dynamic, n), "seq_len", [2**1100, 2**63]),
        ("rope_frequencies seq_len", lambda n: refpos.rope_frequencies(plain, seq_len=n), "seq_len", [2**63, 0]),
        ("check_deberta", lambda n: refpos.check.check_deberta(zeros, zeros, position_buckets=4,
                                                                max_relative_positions=n),
         "max_relative_positions", [10**30, 2**1100]),
        ("angle_error_bound", lambda n: refpos.golden.angle_error_bound("float32", [n], np.ones(2)), "positions",
         [2**1100]),
        ("cope_gates scale", lambda n: enc.cope_gates(q[0], q[0], three, three, scale=n), "scale",
         [2**1100, float("nan")]),
    ]


API_COUNTS = [(name, call, word, value) for name, call, word, values in _api_counts() for value in values]


@pytest.mark.parametrize(("call", "word", "value"), [c[1:] for c in API_COUNTS],
                         ids=[f"{c[0]}={'2**1100' if c[3] == 2**1100 else c[3]}" for c in API_COUNTS])
def test_every_count_of_the_api_is_refused_by_name_before_allocating(call, word, value, small_memory):
    with pytest.raises((ValueError, TypeError)) as info:
        bounded(lambda: call(value))
    assert word in str(info.value) and "\n" not in str(info.value), str(info.value)
