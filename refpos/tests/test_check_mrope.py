"""refpos check on M-RoPE configs: positions (3, ..., T), the M-RoPE catalogue, CLI exit codes.

Each mistake is built with refpos itself (plain RoPE at one row, permuted sections, the other assignment)
and must be named; the right output must pass at its dtype (float64, and float32 as float32).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from refpos.check.rope.run import check_rope
from refpos.cli import main
from refpos.golden.files.npy import npy_bytes
from refpos.models.mm_positions import Image, Text, mm_position_ids
from refpos.rope.config import RopeConfig
from refpos.rope.core import apply_rope

QWEN2 = RopeConfig(head_dim=128, theta=1e6, mrope_section=(16, 24, 24))
QWEN3 = RopeConfig(head_dim=128, theta=5e6, mrope_section=(24, 20, 20), mrope_interleaved=True)
POSITIONS = np.asarray(mm_position_ids([Text(3), Image((1, 8, 12)), Text(4)], family="qwen2_vl"))  # (3, 31)
X = np.random.default_rng(0).standard_normal((POSITIONS.shape[1], 128))


def _ids(result):
    return [d["id"] for d in result["diagnosis"]]


@pytest.mark.parametrize("rope", [QWEN2, QWEN3])
def test_the_right_output_passes(rope):
    assert check_rope(apply_rope(X, POSITIONS, rope), X, POSITIONS, rope)["ok"]
    assert check_rope(apply_rope(X, POSITIONS, rope).astype(np.float32), X, POSITIONS, rope)["ok"]


@pytest.mark.parametrize("rows", ["t", "h", "w", "index"])
def test_one_dimensional_positions_are_named(rows):
    plain = dataclasses.replace(QWEN2, mrope_section=None)
    given = np.arange(POSITIONS.shape[1]) if rows == "index" else POSITIONS["thw".index(rows)]
    result = check_rope(apply_rope(X, given, plain), X, POSITIONS, QWEN2)
    assert not result["ok"] and "mrope_1d_positions" in _ids(result)


def test_sections_in_the_wrong_order_are_named():
    wrong = apply_rope(X, POSITIONS, dataclasses.replace(QWEN2, mrope_section=(24, 24, 16)))
    result = check_rope(wrong, X, POSITIONS, QWEN2)
    assert "mrope_section_order" in _ids(result) and "mrope_1d_positions" not in _ids(result)


def test_the_other_assignment_is_named():
    wrong = apply_rope(X, POSITIONS, dataclasses.replace(QWEN3, mrope_interleaved=False))
    assert "mrope_assignment" in _ids(check_rope(wrong, X, POSITIONS, QWEN3))


def test_cli_exit_codes(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "qwen2_vl", "hidden_size": 1536, "num_attention_heads": 12,
                                  "rope_theta": 1e6, "rope_scaling": {"type": "mrope",
                                                                      "mrope_section": [16, 24, 24]}}))
    files = {}
    plain = apply_rope(X, POSITIONS[0], dataclasses.replace(QWEN2, mrope_section=None))
    for name, array in {"x": X, "p": POSITIONS, "good": apply_rope(X, POSITIONS, QWEN2), "bad": plain,
                        "p2": POSITIONS[:2]}.items():
        files[name] = tmp_path / f"{name}.npy"
        files[name].write_bytes(npy_bytes(array))

    def run(candidate, positions="p"):
        return main(["check", "rope", "--config", str(config), "--input", str(files["x"]), "--positions",
                     str(files[positions]), "--candidate", str(files[candidate])])

    assert run("good") == 0
    assert run("bad") == 1
    assert "mrope_1d_positions" in capsys.readouterr().out
    assert run("good", "p2") == 2
    err = capsys.readouterr().err
    assert "(3, ..., T)" in err and err.count("\n") == 1


def test_blockwise_mrope_equals_one_comparison(monkeypatch):
    """Blocks of a few rows on 3 threads give the whole comparison's numbers (the M-RoPE problem of all rows)."""
    from refpos import parallel
    from refpos.check.rope.mrope import mrope_problem
    from refpos.check.shared import stream
    from refpos.golden.exact.compare import compare

    x = np.random.default_rng(1).standard_normal((2, POSITIONS.shape[1], 128))  # two heads
    wrong = apply_rope(x, POSITIONS, QWEN2)
    wrong[1, 20:, 5] += 1e-3  # outside from token 20 of the second head
    whole = mrope_problem(x, POSITIONS, QWEN2, None, "float64")
    want = compare(wrong, whole.reference, atol=whole.atol, equal_nan=True).summary()
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", 3 * 128)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)
    monkeypatch.setenv("REFPOS_THREADS", "3")
    got = check_rope(wrong, x, POSITIONS, QWEN2)
    for key in ("ok", "max_abs_error", "max_ratio", "worst_index", "n_outside", "n"):
        assert got[key] == want[key], key
    assert got["error_profile"]["first_bad_position"] == int(POSITIONS.max(axis=0)[20:].min())


def test_a_large_mrope_check_is_diagnosed_on_a_window_of_tokens(monkeypatch):
    """Past SAMPLE_ROWS the diagnosis takes the tokens around the worst one; the token-index mutant counts
    from the window's first token, so 1-D positions 0 … T−1 are still named there."""
    from refpos.check.rope import run as check_run

    monkeypatch.setattr(check_run, "SAMPLE_ROWS", 8)
    plain = dataclasses.replace(QWEN2, mrope_section=None)
    result = check_rope(apply_rope(X, np.arange(POSITIONS.shape[1]), plain), X, POSITIONS, QWEN2)
    assert "mrope_1d_positions" in _ids(result) and result["diagnosis_rows"] == 8
    monkeypatch.setattr(check_run, "diagnose_mrope", lambda pb, cand, first=0: check_run_diagnose(pb, cand, 0))
    assert "mrope_1d_positions" not in _ids(check_rope(apply_rope(X, np.arange(POSITIONS.shape[1]), plain), X,
                                                       POSITIONS, QWEN2))  # meta: without the offset it is missed


def check_run_diagnose(pb, cand, first):
    from refpos.check.rope.mrope import diagnose_mrope

    return diagnose_mrope(pb, cand, first)
