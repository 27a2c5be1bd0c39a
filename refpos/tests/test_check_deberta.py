"""``refpos check deberta`` and golden DeBERTa cases: exact integer buckets, block by block, and the mistakes of
the ``deberta`` family named (docs/deberta.md#mistakes)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refpos
from refpos.check.case import check_case
from refpos.check.shared import stream
from refpos.check.tables.buckets import relative_grid
from refpos.check.tables.deberta import check_deberta, truncated_deberta_buckets
from refpos.cli import main
from refpos.golden.exact.compare import compare
from refpos.golden.files.npy import npy_bytes

V3 = {"position_buckets": 256, "max_relative_positions": 512}


def _ids(result):
    return [d["id"] for d in result["diagnosis"]]


def _buckets(rel, position_buckets=256, max_relative_positions=512):
    return np.asarray(refpos.to_numpy(refpos.encodings.deberta_log_buckets(np.ascontiguousarray(rel), position_buckets,
                                                                           max_relative_positions)))


def test_the_reference_passes_and_the_mistakes_are_named():
    rel = np.arange(-1000, 1001)
    assert check_deberta(_buckets(rel), rel, **V3)["ok"]
    assert _ids(check_deberta(_buckets(-rel), rel, **V3)) == ["deberta_relative_sign"]
    truncated = truncated_deberta_buckets(rel, 256, 512)
    assert _ids(check_deberta(truncated, rel, **V3)) == ["deberta_bucket_rounding"]
    assert int(np.sum(truncated != _buckets(rel))) > 700  # every far bucket but the exact ones


def test_the_grid_of_query_minus_key_is_a_view():
    grid = relative_grid(3, 7, query_minus_key=True)
    np.testing.assert_array_equal(grid, (4 + np.arange(3))[:, None] - np.arange(7)[None, :])
    assert not grid.flags.writeable


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.sampled_from([(9,), (4, 7), (2, 3, 5)]), wrong=st.integers(0, 3))
def test_blockwise_deberta_equals_one_comparison(seed, shape, wrong):
    rng = np.random.default_rng(seed)
    rel = rng.integers(-3000, 3000, size=shape)
    reference = _buckets(rel, 8, 64)
    candidate = reference.copy()
    for _ in range(wrong):
        candidate[tuple(int(rng.integers(0, n)) for n in shape)] += int(rng.integers(1, 5))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(stream, "BLOCK_ELEMENTS", int(rng.integers(1, 30)))
        got = check_deberta(candidate, rel, position_buckets=8, max_relative_positions=64)
    whole = compare(candidate.astype(np.float64), reference.astype(np.float64), atol=np.zeros(shape)).summary()
    assert (got["ok"], got["n_outside"], got["max_abs_error"]) == (whole["ok"], whole["n_outside"],
                                                                    whole["max_abs_error"])


def test_unusable_input_is_refused():
    rel = np.arange(-5, 6)
    with pytest.raises(ValueError, match="integer"):
        check_deberta(_buckets(rel).astype(np.float64), rel, **V3)
    with pytest.raises(ValueError, match="shape"):
        check_deberta(_buckets(rel)[:-1], rel, **V3)
    with pytest.raises(ValueError, match="max_relative_positions"):
        check_deberta(_buckets(rel), rel, position_buckets=256, max_relative_positions=100)


def test_a_golden_bucket_case_names_the_mistake():
    case = "deberta/buckets-256-512"
    from refpos.golden.files.manifest import default_golden_dir, find_case, load_arrays, load_manifest

    rel = load_arrays(default_golden_dir(), find_case(load_manifest(default_golden_dir()), case), "inputs")["rel"]
    assert check_case(case, _buckets(rel))["ok"]
    assert _ids(check_case(case, truncated_deberta_buckets(rel, 256, 512))) == ["deberta_bucket_rounding"]


def test_cli_checks_deberta_from_lengths_and_files(tmp_path, capsys):
    rel = relative_grid(6, 600, query_minus_key=True)
    (tmp_path / "right.npy").write_bytes(npy_bytes(_buckets(rel)))
    (tmp_path / "sign.npy").write_bytes(npy_bytes(_buckets(-rel)))
    (tmp_path / "rel.npy").write_bytes(npy_bytes(np.ascontiguousarray(rel)))
    lengths = ["--q-len", "6", "--k-len", "600", "--position-buckets", "256", "--max-relative-positions", "512"]
    assert main(["check", "deberta", "--candidate", str(tmp_path / "right.npy"), *lengths]) == 0
    assert main(["check", "deberta", "--candidate", str(tmp_path / "sign.npy"), "--relative",
                 str(tmp_path / "rel.npy"), "--position-buckets", "256", "--max-relative-positions", "512",
                 "--json"]) == 1
    assert "deberta_relative_sign" in _ids(json.loads(capsys.readouterr().out.splitlines()[-1]))


@pytest.mark.parametrize(("args", "message"), [
    (["--q-len", "6", "--k-len", "600", "--max-relative-positions", "512"], "--position-buckets"),
    (["--q-len", "6", "--k-len", "600", "--position-buckets", "256", "--max-relative-positions", "100"],
     "max_relative_positions"),
    (["--q-len", "7", "--k-len", "600", "--position-buckets", "256", "--max-relative-positions", "512"], "shape"),
])
def test_cli_bad_deberta_arguments_are_one_line(tmp_path, capsys, args, message):
    rel = relative_grid(6, 600, query_minus_key=True)
    (tmp_path / "b.npy").write_bytes(npy_bytes(_buckets(rel)))
    assert main(["check", "deberta", "--candidate", str(tmp_path / "b.npy"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
