"""``refpos check`` compares everything it is given: positions shaped as the API requires, uint64 read without
wrap-around, positions up to 2**53, and a candidate truncated while it is read is an error line, not a signal.

docs/security.md lists the groups; the full-width tables of the golden cases are in
refpos/tests/test_hostile_goldens.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import refpos
from refpos.cli import main
from refpos.encodings import t5_bucket
from refpos.encodings.sinusoidal import sinusoidal
from refpos.golden.files.npy import npy_bytes
from refpos.models import from_hf_config
from refpos.tests.hostile import exit_2

ROPE_CONFIG = {"model_type": "llama", "rope_theta": 10000.0, "head_dim": 8, "hidden_size": 32,
               "num_attention_heads": 4, "max_position_embeddings": 64}
REPOSITORY = Path(__file__).resolve().parents[2]


def _save(path: Path, array) -> str:
    path.write_bytes(npy_bytes(np.asarray(array)))
    return str(path)


def _config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(ROPE_CONFIG), encoding="utf8")
    return str(path)


_exit_2 = exit_2


# ------------------------------------------------------------------------------ positions as the API wants them
@pytest.mark.parametrize("shape", [(1,), ()], ids=["(1,)", "()"])
def test_positions_that_apply_rope_refuses_are_refused_by_check_rope(shape, tmp_path, capsys):
    """A positions file of shape (1,) or () was broadcast to every token; apply_rope refuses it."""
    x = np.linspace(-1, 1, 24).reshape(1, 3, 8)
    rope = from_hf_config(ROPE_CONFIG)
    positions = np.full(shape, 5, dtype=np.int64)
    with pytest.raises(ValueError, match="positions"):
        refpos.apply_rope(x, positions, rope)
    candidate = refpos.apply_rope(x, np.full((1, 3), 5), rope)  # every token at position 5: what a broadcast gives
    err = _exit_2(["check", "rope", "--config", _config(tmp_path), "--input", _save(tmp_path / "x.npy", x),
                   "--positions", _save(tmp_path / "p.npy", positions), "--candidate",
                   _save(tmp_path / "y.npy", candidate)], capsys)
    assert "positions" in err and "(1, 3, 8)" in err


@pytest.mark.parametrize("target", ["rope", "sinusoid"])
def test_uint64_positions_are_read_without_wrapping_around(target, tmp_path, capsys):
    """uint64 2**64 - 1 was read as -1 ("a minimum of -1")."""
    positions = np.array([0, 2**64 - 1], dtype=np.uint64)
    p = _save(tmp_path / "p.npy", positions)
    if target == "rope":
        x = np.ones((2, 8))
        argv = ["check", "rope", "--config", _config(tmp_path), "--input", _save(tmp_path / "x.npy", x),
                "--positions", p, "--candidate", _save(tmp_path / "y.npy", x)]
    else:
        argv = ["check", "sinusoid", "--dim", "8", "--positions", p, "--candidate",
                _save(tmp_path / "y.npy", np.zeros((2, 8)))]
    err = _exit_2(argv, capsys)
    assert "int64 holds" in err and "-1" not in err, err


def test_uint64_relative_positions_are_read_without_wrapping_around(tmp_path, capsys):
    """``check t5 --relative`` with uint64 2**64 - 1 read -1, and the buckets of -1 passed."""
    rel = np.array([[0, 2**64 - 1]], dtype=np.uint64)
    buckets = np.asarray(t5_bucket(np.array([[0, -1]])))  # the buckets of the wrapped-around value
    err = _exit_2(["check", "t5", "--relative", _save(tmp_path / "rel.npy", rel), "--candidate",
                   _save(tmp_path / "b.npy", buckets)], capsys)
    assert "int64 holds" in err, err


# ---------------------------------------------------------------------------------- positions up to 2**53
@pytest.mark.parametrize("high", [2**40, 2**41 + 3, 2**53], ids=["2**40", "2**41+3", "2**53"])
def test_a_correct_candidate_at_large_positions_passes(high, tmp_path, capsys):
    """Positions >= 2**40 broke check rope and sinusoid ("index 41 is out of bounds") though 2**53 is allowed."""
    positions = np.array([0, 1, high - 1, high], dtype=np.int64)
    rope = from_hf_config(ROPE_CONFIG)
    x = np.linspace(-1, 1, 32).reshape(4, 8)
    y = np.asarray(refpos.apply_rope(x, positions, rope))
    p = _save(tmp_path / "p.npy", positions)
    assert main(["check", "rope", "--config", _config(tmp_path), "--input", _save(tmp_path / "x.npy", x),
                 "--positions", p, "--candidate", _save(tmp_path / "y.npy", y)]) == 0, capsys.readouterr().err
    table = np.asarray(sinusoidal(positions, 8))
    assert main(["check", "sinusoid", "--dim", "8", "--positions", p, "--candidate",
                 _save(tmp_path / "s.npy", table)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["check", "sinusoid", "--dim", "8", "--positions", p, "--candidate",
                 _save(tmp_path / "s.npy", table), "--json"]) == 0
    bins = json.loads(capsys.readouterr().out)["error_profile"]["bins"]
    assert any(b["from"] <= high < b["to"] for b in bins), bins  # the largest position has its bin


# ------------------------------------------------------------------------------- truncated while it is read
TRUNCATE = textwrap.dedent("""
    import contextlib, os, sys
    import refpos.check.shared.stream as stream
    import refpos.cli.check as cli_check
    from refpos.cli import main

    stream.BLOCK_ELEMENTS = 4096  # many blocks: the file is cut after the first
    candidate = sys.argv[1]

    @contextlib.contextmanager
    def cutting(*args, **kwargs):
        def progress(done, total):
            if os.path.getsize(candidate) > 4096:
                os.truncate(candidate, 4096)
        yield progress

    cli_check.ProgressBar = cutting
    sys.exit(main(sys.argv[2:]))
""")


@pytest.mark.parametrize("target", ["rope", "sinusoid"])
def test_a_candidate_truncated_while_it_is_read_is_an_error_line_not_a_signal(target, tmp_path):
    """A memory-mapped candidate truncated during the check died by SIGBUS with no message."""
    positions = np.arange(2048, dtype=np.int64)
    p = _save(tmp_path / "p.npy", positions)
    if target == "rope":
        rope = from_hf_config(ROPE_CONFIG)
        x = np.random.default_rng(0).standard_normal((8, 2048, 8))
        candidate = _save(tmp_path / "y.npy", refpos.apply_rope(x, positions, rope))
        argv = ["check", "rope", "--config", _config(tmp_path), "--input", _save(tmp_path / "x.npy", x),
                "--positions", p, "--candidate", candidate]
    else:
        candidate = _save(tmp_path / "y.npy", np.broadcast_to(sinusoidal(positions, 64), (8, 2048, 64)))
        argv = ["check", "sinusoid", "--dim", "64", "--positions", _save(tmp_path / "p8.npy",
                                                                           np.broadcast_to(positions, (8, 2048))),
                "--candidate", candidate]
    run = subprocess.run([sys.executable, "-c", TRUNCATE, candidate, *argv], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(REPOSITORY)})
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert run.stderr.count("\n") == 1 and "truncated" in run.stderr and "y.npy" in run.stderr, run.stderr


@pytest.mark.parametrize("dtype", ["<f8", ">f4", "<i8"])
def test_block_reads_give_what_numpy_indexing_gives(dtype, tmp_path):
    """Every index the blockwise check uses, read from the file, equals NumPy's indexing of the whole array."""
    from refpos.golden.files.npy_file import open_npy

    a = (np.arange(2 * 3 * 5 * 4) - 50).reshape(2, 3, 5, 4).astype(dtype)
    with open_npy(_save(tmp_path / "a.npy", a)) as f:
        rows = f.reshape(6, 5, 4)
        np.testing.assert_array_equal(np.asarray(f), a)
        for key in [(slice(0, 2), slice(1, 4)), (slice(None), slice(2, None), slice(None)), (1, slice(0, 5)),
                    (slice(3, 3),), (-1,), Ellipsis]:
            np.testing.assert_array_equal(rows[key], a.reshape(6, 5, 4)[key])
        lead, token = np.array([0, 5, 2]), np.array([4, 0, 2])
        np.testing.assert_array_equal(rows[lead, token], a.reshape(6, 5, 4)[lead, token])
        assert rows[lead, token].dtype == a.dtype.newbyteorder("=")
        np.testing.assert_array_equal(f.reshape(1, 1, -1)[0, 0], a.reshape(-1))
        with pytest.raises(IndexError):
            rows[7]
