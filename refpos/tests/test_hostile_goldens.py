"""Hostile golden directories, read: a swapped file, an output the generator does not make, a changed
function, a loosened tolerance, a special file, a half-compared table.

Every golden file is opened once through the golden directory's descriptor without following a symlink, and
the bytes read are both hashed and parsed (:mod:`refpos.directory`, :func:`refpos.golden.files.manifest.read_case`);
``golden verify`` compares each case whole with its regeneration, and ``refpos check CASE`` does the same for
its case before comparing (:func:`refpos.golden.generate.case_problems`), or says the tolerance is not verified.
docs/security.md lists the groups.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from refpos.cli import main
from refpos.golden.files import manifest as golden
from refpos.golden.files.npy import npy_bytes, read_npy
from refpos.pairs import place_pairs
from refpos.tests.hostile import MODEL, edit_manifest, write_model

INTERLEAVED = {**MODEL, "model_type": "gptj", "rotary_dim": 8, "n_embd": 32, "n_head": 4}
POSITIONS = [0, 1, 7, 40]


_write_model = write_model
_edit = edit_manifest


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("model") / "g")


@pytest.fixture
def gdir(model_dir, tmp_path) -> Path:
    root = tmp_path / "g"
    shutil.copytree(model_dir, root)
    return root


def _case(manifest: dict, suffix: str) -> dict:
    return next(c for c in manifest["cases"] if c["id"].endswith(suffix))


def _garbage_output(root: Path, case: dict, name: str = "evil") -> np.ndarray:
    """An output the generator does not make, with a correct file and sha256: garbage of the primary's shape."""
    primary = case["outputs"][case["primary_output"]]
    garbage = np.full(primary["shape"], 7.0)
    rel = f"cases/{case['id']}/{name}.npy"
    (root / rel).write_bytes(npy_bytes(garbage))
    case["outputs"][name] = {**primary, "file": rel, "sha256": hashlib.sha256(npy_bytes(garbage)).hexdigest()}
    return garbage


def _verify(root: Path, capsys) -> str:
    code = main(["golden", "verify", "--golden-dir", str(root)])
    out = capsys.readouterr().out
    assert code == 1, out
    return out


def _check(root: Path, case_id: str, candidate: np.ndarray, tmp_path: Path, capsys, *extra: str) -> tuple[int, str]:
    path = tmp_path / "candidate.npy"
    path.write_bytes(npy_bytes(candidate))
    code = main(["check", case_id, str(path), "--golden-dir", str(root), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# ------------------------------------------------------------------------------------- verify means verified
def test_an_output_the_generator_does_not_make_fails_verify_and_check(gdir, tmp_path, capsys):
    """``outputs.evil`` with its correct sha256 and ``primary_output: "evil"``: verify said 0 problems and
    ``refpos check`` passed garbage."""
    state = {}

    def add_evil(manifest):
        case = _case(manifest, "/apply")
        state["garbage"] = _garbage_output(gdir, case)
        case["primary_output"] = "evil"
        state["id"] = case["id"]
    _edit(gdir, add_evil)
    out = _verify(gdir, capsys)
    assert f"MISMATCH {state['id']}: primary_output differs" in out
    assert f"MISMATCH {state['id']}: output evil: not made by the generator" in out
    code, text = _check(gdir, state["id"], state["garbage"], tmp_path, capsys)
    assert code == 2 and "not what refpos regenerates" in text, text


@pytest.mark.parametrize(("field", "value"), [("function", "alibi_slopes"), ("family", "alibi"),
                                              ("description", "anything"), ("primary_output", "sin")])
def test_a_changed_case_field_fails_verify(field, value, gdir, capsys):
    state = {}

    def change(manifest):
        case = _case(manifest, "/cos-sin")
        case[field] = value
        state["id"] = case["id"]
    _edit(gdir, change)
    out = _verify(gdir, capsys)
    assert f"MISMATCH {state['id']}: {field} differs from the regenerated case" in out


def test_an_input_the_generator_does_not_make_fails_verify(gdir, capsys):
    state = {}

    def add(manifest):
        case = _case(manifest, "/cos-sin")
        case["inputs"]["extra"] = dict(case["inputs"]["positions"])
        state["id"] = case["id"]
    _edit(gdir, add)
    assert f"MISMATCH {state['id']}: input extra: not made by the generator" in _verify(gdir, capsys)


def test_a_loosened_tolerance_is_refused_by_check_case(gdir, tmp_path, capsys):
    """``atol 1e300`` passed garbage through ``check CASE`` without a word (verify caught it, check did not)."""
    state = {}

    def loosen(manifest):
        case = _case(manifest, "/apply")
        case["outputs"]["y"]["tolerance"]["float64"]["atol"] = [1e300] * len(POSITIONS)
        state["id"], state["shape"] = case["id"], case["outputs"]["y"]["shape"]
    _edit(gdir, loosen)
    code, text = _check(gdir, state["id"], np.full(state["shape"], 7.0), tmp_path, capsys)
    assert code == 2 and "tolerance differs from the regenerated one" in text, text


def test_check_case_says_when_the_tolerance_is_not_verified(gdir, tmp_path, capsys):
    """A case this refpos does not generate is compared under the manifest's tolerance, and the output says so."""
    state = {}

    def rename(manifest):
        case = _case(manifest, "/apply")
        case["id"] = "rope/unknown-model/apply"
        state["y"] = read_npy(gdir / case["outputs"]["y"]["file"])
    _edit(gdir, rename)
    code, text = _check(gdir, "rope/unknown-model/apply", state["y"], tmp_path, capsys)
    assert code == 0 and "not verified" in text and "golden verify" in text, text
    code, text = _check(gdir, "rope/unknown-model/apply", state["y"], tmp_path, capsys, "--json")
    assert json.loads(text)["golden_verified"] is False
    verified = json.loads(_check(gdir, "rope/toy/cos-sin", read_npy(gdir / "cases/rope/toy/cos-sin/cos.npy"),
                                 tmp_path, capsys, "--json")[1])
    assert verified["ok"] and verified["golden_verified"] is True


# --------------------------------------------------------------------------------- reads that cannot be swapped
def test_a_file_swapped_for_a_symlink_after_the_manifest_is_checked_is_not_read(gdir, tmp_path, capsys, monkeypatch):
    """The paths were checked with ``realpath`` when the manifest loaded and reopened later following symlinks:
    a file swapped for a symlink in between (and swapped back) was read from outside and passed its sha256."""
    manifest = json.loads((gdir / "manifest.json").read_text(encoding="utf8"))
    case = _case(manifest, "/apply")
    entry = case["outputs"]["y"]
    garbage = np.full(entry["shape"], 7.0)
    outside = tmp_path / "outside.npy"
    outside.write_bytes(npy_bytes(garbage))
    entry["sha256"] = hashlib.sha256(npy_bytes(garbage)).hexdigest()  # the attacker knows the outside bytes
    (gdir / "manifest.json").write_text(json.dumps(manifest), encoding="utf8")
    inside = gdir / entry["file"]
    saved = gdir.parent / "saved.npy"
    real_open = os.open

    def swapping_open(path, flags, *args, **kwargs):  # the race, won every time: a symlink only while opened
        if not os.fspath(path).endswith("y.npy"):
            return real_open(path, flags, *args, **kwargs)
        inside.rename(saved)
        inside.symlink_to(outside)
        try:
            return real_open(path, flags, *args, **kwargs)
        finally:
            inside.unlink()
            saved.rename(inside)
    monkeypatch.setattr(os, "open", swapping_open)
    code, text = _check(gdir, case["id"], garbage, tmp_path, capsys)
    assert code == 2 and ("symlink" in text or "symbolic link" in text), text


def test_a_fifo_in_the_golden_directory_is_named_as_one(gdir, capsys):
    """A FIFO where a case file should be was reported as a "missing file"."""
    manifest = golden.load_manifest(gdir)
    rel = _case(manifest, "/apply")["outputs"]["y"]["file"]
    (gdir / rel).unlink()
    os.mkfifo(gdir / rel)
    out = _verify(gdir, capsys)
    assert "FIFO" in out and "missing" not in out


# ------------------------------------------------------------------------ full-width tables: both halves
@pytest.mark.parametrize("config", [MODEL, INTERLEAVED], ids=["half", "interleaved"])
def test_a_full_width_table_is_compared_in_both_halves(config, tmp_path, capsys):
    """The 52 ``reduce: pairs`` cases compared only one channel of each pair of a full-width candidate:
    ``concat(cos_ref, 7.0)`` passed."""
    root = _write_model(tmp_path / "g", config)
    manifest = golden.load_manifest(root)
    case = _case(manifest, "/cos-sin")
    layout = case["parameters"]["rope"].get("layout", "half")
    cos = read_npy(root / case["outputs"]["cos"]["file"])  # (T, m)
    full = place_pairs(cos, cos, layout)  # (T, 2m): what an implementation's cos table holds
    code, text = _check(root, case["id"], full, tmp_path, capsys)
    assert code == 0, text
    for broken in (place_pairs(cos, np.full_like(cos, 7.0), layout), place_pairs(np.full_like(cos, 7.0), cos, layout)):
        code, text = _check(root, case["id"], broken, tmp_path, capsys)
        assert code == 1, text
