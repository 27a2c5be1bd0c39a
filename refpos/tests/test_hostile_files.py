"""Hostile files: tampered goldens, crafted .npy headers, hostile config.json, special files.

Every case ends in a refusal that names the file (``ValueError``/``TypeError`` in the API; exit 2 with
one line in the CLI) or, for a tolerance that is of the right form but wrong, in ``golden verify``
reporting it; nothing hangs, nothing is allocated for what a header merely claims. docs/security.md
lists the groups.
"""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from refpos import inputs
from refpos.cli import main
from refpos.golden.cases.rope import layout_cases
from refpos.golden.exact import entries
from refpos.golden.files import manifest as golden
from refpos.golden.files import npy
from refpos.golden.files.npy import NpyError, npy_bytes, parse_npy, read_npy, read_npy_header, sha256_file
from refpos.models.hf import from_hf_config, load_hf_config
from refpos.tests.hostile import bounded, edit_manifest, exit_2

CASE = layout_cases()[0].id


_bounded = bounded
_one_line_exit_2 = exit_2


@pytest.fixture(scope="module")
def small_golden(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("golden")
    golden.write_cases(root, layout_cases(), title="layouts", certify=False)
    return root


@pytest.fixture
def gdir(small_golden, tmp_path) -> Path:
    root = tmp_path / "g"
    shutil.copytree(small_golden, root)
    return root


_edit = edit_manifest


def _primary(manifest: dict) -> dict:
    case = manifest["cases"][0]
    return case["outputs"][case["primary_output"]]


def _garbage(tmp_path: Path, like: Path) -> tuple[Path, str]:
    """A candidate and an outside 'reference' that is the same garbage: sha256 known to the attacker."""
    shape = read_npy(like).shape
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(npy_bytes(np.full(shape, 7.0)))
    return garbage, sha256_file(garbage)


# ------------------------------------------------------------------------------------- containment
def _outside_reference(kind: str, root: Path, tmp_path: Path) -> None:
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf8"))
    entry = _primary(manifest)
    garbage, digest = _garbage(tmp_path, root / entry["file"])
    if kind == "absolute":
        entry["file"] = str(garbage)
    elif kind == "dotdot":
        entry["file"] = "../garbage.npy"
    elif kind == "deep-dotdot":
        entry["file"] = "cases/../../garbage.npy"
    elif kind == "symlink-file":
        (root / "evil.npy").symlink_to(garbage)
        entry["file"] = "evil.npy"
    elif kind == "symlink-dir":
        (root / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
        entry["file"] = "elsewhere/garbage.npy"
    elif kind == "backslash":
        entry["file"] = "..\\garbage.npy"
    elif kind == "drive":
        entry["file"] = "C:/garbage.npy"
    elif kind == "nul":
        entry["file"] = "cases/x.npy\x00.txt"
    entry["sha256"] = digest
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf8")


CONTAINMENT = ["absolute", "dotdot", "deep-dotdot", "symlink-file", "symlink-dir", "backslash", "drive", "nul"]


@pytest.mark.parametrize("kind", CONTAINMENT)
def test_a_manifest_path_outside_the_golden_dir_is_refused_before_opening(kind, gdir, tmp_path, capsys,
                                                                           monkeypatch):
    _outside_reference(kind, gdir, tmp_path)
    opened = []
    for module in (npy, inputs):  # npy opens through both (read_npy, and read_npy_bytes via inputs.read_bytes)
        real = module.open_regular
        monkeypatch.setattr(module, "open_regular",
                            lambda path, real=real, **kw: opened.append(os.fspath(path)) or real(path, **kw))
    candidate = tmp_path / "candidate.npy"
    shutil.copyfile(tmp_path / "garbage.npy", candidate)  # the same garbage: it would pass against itself
    err = _one_line_exit_2(["check", CASE, str(candidate), "--golden-dir", str(gdir)], capsys)
    assert "golden directory" in err or "absolute" in err or "backslash" in err
    assert not any("garbage" in p for p in opened), opened  # refused before opening
    with pytest.raises(golden.GoldenError):
        golden.load_manifest(gdir)
    _one_line_exit_2(["golden", "verify", "--golden-dir", str(gdir)], capsys)


def test_a_symlink_is_refused_even_when_it_stays_inside(gdir):
    """Golden files are read without following symlinks: where a symlink points is not checked (it could
    change between the check and the read), a symlink is refused."""
    manifest = json.loads((gdir / "manifest.json").read_text(encoding="utf8"))
    entry = _primary(manifest)
    (gdir / "alias.npy").symlink_to(gdir / entry["file"])
    entry["file"] = "alias.npy"
    (gdir / "manifest.json").write_text(json.dumps(manifest), encoding="utf8")
    with pytest.raises(golden.GoldenError, match=r"alias\.npy.*symlink"):
        golden.load_manifest(gdir)


# ------------------------------------------------------------------------------------------- schema
def _tol(dtype: str, key: str, value):
    return lambda m: _primary(m)["tolerance"][dtype].__setitem__(key, value)


SCHEMA = {
    "inputs is a list": lambda m: m["cases"][0].__setitem__("inputs", []),
    "outputs missing": lambda m: m["cases"][0].pop("outputs"),
    "outputs empty": lambda m: m["cases"][0].__setitem__("outputs", {}),
    "atol NaN": _tol("float64", "atol", float("nan")),
    "atol the string 1e300": _tol("float64", "atol", "1e300"),
    "atol negative": _tol("float32", "atol", -1.0),
    "atol infinite": _tol("float32", "atol", float("inf")),
    "rtol a bool": _tol("float64", "rtol", True),
    "ulps missing": lambda m: _primary(m)["tolerance"]["float16"].pop("ulps"),
    "a dtype entry missing": lambda m: _primary(m)["tolerance"].pop("bfloat16"),
    "tolerance a list": lambda m: _primary(m).__setitem__("tolerance", [1e-13]),
    "atol list of the wrong length": _tol("float64", "atol", [1e-13] * 99),
    "atol list with a NaN": lambda m: _primary(m)["tolerance"]["float64"].__setitem__("atol", [float("nan")]),
    "shape negative": lambda m: _primary(m).__setitem__("shape", [-1, 8]),
    "shape a bool": lambda m: _primary(m).__setitem__("shape", [True, 8]),
    "shape 10**30": lambda m: _primary(m).__setitem__("shape", [10**30]),
    "sha256 not hex": lambda m: _primary(m).__setitem__("sha256", "z" * 64),
    "file a number": lambda m: _primary(m).__setitem__("file", 3),
    "dtype object": lambda m: _primary(m).__setitem__("dtype", "object"),
    "duplicate case id": lambda m: m["cases"].append(copy.deepcopy(m["cases"][0])),
    "case not an object": lambda m: m["cases"].append("x"),
    "cases an object": lambda m: m.__setitem__("cases", {"a": 1}),
    "format_version a string": lambda m: m.__setitem__("format_version", "1"),
    "format missing": lambda m: m.pop("format"),
    "primary_output not an output": lambda m: m["cases"][0].__setitem__("primary_output", "nope"),
    "call args not objects": lambda m: m["cases"][0]["parameters"].__setitem__("call", {"args": [1, 2]}),
    "parameters a list": lambda m: m["cases"][0].__setitem__("parameters", []),
    "certified_max_error_ulps a string": lambda m: m["cases"][0].__setitem__("certified_max_error_ulps", "3"),
    "source.command unknown": lambda m: m.__setitem__("source", {"command": "rm -rf"}),
    "source.positions negative": lambda m: m.__setitem__("source", {"command": "model", "config": {}, "name": "x",
                                                                     "positions": [-1], "seq_len": None}),
}


@pytest.mark.parametrize("name", list(SCHEMA))
def test_a_malformed_manifest_is_refused_whole_with_one_line(name, gdir, capsys):
    _edit(gdir, SCHEMA[name])
    with pytest.raises(golden.GoldenError) as info:
        golden.load_manifest(gdir)
    assert "manifest.json" in str(info.value) and "\n" not in str(info.value)
    candidate = gdir / "manifest.json"  # any file: the manifest is refused before the candidate is read
    _one_line_exit_2(["check", CASE, str(candidate), "--golden-dir", str(gdir)], capsys)


RAW = {
    "duplicate key": lambda text: text.replace('"format": "refpos-golden"',
                                               '"format": "refpos-golden", "format": "refpos-golden"', 1),
    "nested 10000 deep": lambda text: text[:-1] + ', "x": ' + "[" * 10000 + "]" * 10000 + "}",
    "not UTF-8": lambda text: "\udcff",
    "not JSON": lambda text: text[:100],
}


@pytest.mark.parametrize("name", list(RAW))
def test_a_hostile_manifest_file_is_refused_with_one_line(name, gdir, capsys):
    path = gdir / "manifest.json"
    text = RAW[name](path.read_text(encoding="utf8"))
    path.write_bytes(text.encode("utf8", "surrogateescape"))
    err = _one_line_exit_2(["golden", "list", "--golden-dir", str(gdir)], capsys)
    assert "manifest.json" in err


def test_a_fifo_manifest_does_not_hang(gdir, capsys):
    (gdir / "manifest.json").unlink()
    os.mkfifo(gdir / "manifest.json")
    err = _one_line_exit_2(["golden", "verify", "--golden-dir", str(gdir)], capsys)
    assert "FIFO" in err


# ---------------------------------------------------------------------------- tolerances verified
@pytest.fixture(scope="module")
def committed_copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("committed") / "golden"
    shutil.copytree(golden.default_golden_dir(), root)
    return root


@pytest.mark.parametrize(("dtype", "key", "value"), [("float64", "atol", 1e300), ("float32", "rtol", 0.5),
                                                     ("bfloat16", "ulps", 1e6)])
def test_verify_regenerates_and_compares_tolerances(committed_copy, dtype, key, value, capsys, tmp_path):
    """A loosened tolerance of the right form is no schema error; verify finds it by regenerating it."""
    root = tmp_path / "golden"
    shutil.copytree(committed_copy, root)
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf8"))
    case = manifest["cases"][0]
    case["outputs"][case["primary_output"]]["tolerance"][dtype][key] = value
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf8")
    assert main(["golden", "verify", "--golden-dir", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{case['id']}: output {case['primary_output']}: the tolerance differs from the regenerated one" in out
    assert f"{dtype}.{key}" in out


def test_compare_refuses_a_nan_or_string_tolerance():
    ref = np.ones(3)
    for bad in (float("nan"), "1e300", -1.0, None):
        entry = {"float64": {"atol": bad, "rtol": 0.0, "ulps": 0.0}}
        with pytest.raises(ValueError, match="atol"):
            entries.compare(np.full(3, 5.0), ref, entry, "float64")
    entry = {"float64": {"atol": 0.0, "rtol": 0.0, "ulps": 0.0}}
    assert not entries.compare(np.array([np.nan, 1.0, 1.0]), ref, entry, "float64")["ok"]


# --------------------------------------------------------------------------------------- .npy files
def _header(descr: str = "<f8", shape: str = "(3,)", fortran: str = "False", version: int = 1,
            pad_to: int | None = None) -> bytes:
    text = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    text += " " * ((pad_to or 0) - len(text)) + "\n"
    size = len(text).to_bytes(2 if version == 1 else 4, "little")
    return npy.MAGIC + bytes([version, 0]) + size + text.encode("latin1")


NPY = {
    "shape 10**30": _header(shape="(10**30,)"),
    "shape literal 10**30": _header(shape=f"({10**30},)"),
    "shape (0, 10**30)": _header(shape=f"(0, {10**30})"),
    "shape 2**62 x 4 (2**67 bytes)": _header(shape=f"({2**62}, 4)"),
    "shape 2**40 (claims 8 TiB)": _header(shape=f"({2**40},)"),
    "shape 2**32 x 2**32 (count wraps to 0 in 64 bits)": _header(shape=f"({2**32}, {2**32})"),
    "shape negative": _header(shape="(-1,)"),
    "shape with a bool": _header(shape="(True,)"),
    "shape a list": _header(shape="[3]"),
    "shape a float": _header(shape="(3.0,)"),
    "descr object": _header(descr="|O"),
    "descr unicode": _header(descr="<U4"),
    "descr void": _header(descr="|V8"),
    "descr subarray": _header(descr="(2,)<f8"),
    "descr nonsense": _header(descr="<q9"),
    "fortran order": _header(fortran="True"),
    "header a call": npy.MAGIC + b"\x01\x00\x20\x00" + b"__import__('os').system('true')  \n",
    "header nested 5000 deep": npy.MAGIC + b"\x01\x00" + (10001).to_bytes(2, "little") + b"(" * 5000 + b")" * 5000
                               + b"\n",
    "version 2 header of 2**31 bytes": npy.MAGIC + b"\x02\x00" + (2**31).to_bytes(4, "little") + b"{}",
    "version 2, short preamble": npy.MAGIC + b"\x02\x00\x10",
    "version 9": npy.MAGIC + b"\x09\x00\x10\x00",
    "header longer than the file": npy.MAGIC + b"\x01\x00\xff\x00{'descr'",
    "empty": b"",
    "magic only": npy.MAGIC,
}


@pytest.mark.parametrize("name", list(NPY))
def test_a_crafted_npy_header_is_refused_before_allocating(name, tmp_path):
    data = NPY[name] + b"\x00" * 24
    tracemalloc.start()
    try:
        with pytest.raises(NpyError) as info:
            parse_npy(data, "crafted.npy")
        path = tmp_path / "crafted.npy"
        path.write_bytes(data)
        with pytest.raises(NpyError):
            read_npy(path)
        with pytest.raises(NpyError):
            read_npy_header(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "crafted.npy" in str(info.value) and "\n" not in str(info.value)
    assert peak < 2**20, f"{peak} bytes allocated for a {len(data)}-byte file"


def test_the_npy_cap_is_checked_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "big.npy"
    path.write_bytes(npy_bytes(np.zeros(1000)))
    assert read_npy_header(path).nbytes == 8000
    monkeypatch.setattr(inputs, "MAX_NPY_BYTES", 4000)
    with pytest.raises(NpyError, match="more than the 4000 refpos reads"):
        read_npy(path)
    assert read_npy(path, max_bytes=8000).shape == (1000,)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "directory"])
def test_a_special_file_as_candidate_is_refused_without_reading(special, small_golden, tmp_path, capsys):
    path = tmp_path / "cand.npy"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "directory":
        path.mkdir()
    else:
        path = Path(special)
    err = _one_line_exit_2(["check", CASE, str(path), "--golden-dir", str(small_golden)], capsys)
    assert str(path) in err
    err = _one_line_exit_2(["check", "sinusoid", "--candidate", str(path), "--dim", "8", "--length", "4"], capsys)
    assert str(path) in err


def test_numpy_writes_what_the_reader_reads():
    for array in (np.arange(6.0).reshape(2, 3), np.array(3, dtype=np.int64), np.zeros((0, 4), dtype=bool)):
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        np.testing.assert_array_equal(parse_npy(buf.getvalue()), array)


# ---------------------------------------------------------------------------------------- configs
LLAMA = {"rope_theta": 500000.0, "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
         "max_position_embeddings": 131072}


def test_duplicate_json_keys_in_a_config_are_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_scaling": null, '
                    '"rope_theta": 10000.0, "head_dim": 64}', encoding="utf8")
    with pytest.raises(ValueError, match=r"config\.json: duplicate key 'rope_scaling'"):
        from_hf_config(path)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "directory-without-config"])
def test_a_special_file_as_config_is_refused_without_hanging(special, tmp_path):
    path = tmp_path / "config.json"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "/dev/zero":
        path = Path(special)
    else:
        path = tmp_path / "empty-dir"
        path.mkdir()
    with pytest.raises(ValueError, match="config_or_path") as info:
        _bounded(lambda: load_hf_config(path))
    assert str(path) in str(info.value)


def test_hostile_config_bytes(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"rope_theta": 1e4, "name": "\xff\xfe"}')
    with pytest.raises(ValueError, match=r"config\.json: not UTF-8"):
        load_hf_config(path)
    path.write_text('{"a": ' + "[" * 100000 + "]" * 100000 + "}", encoding="utf8")
    with pytest.raises(ValueError, match="nested 100001 levels"):
        load_hf_config(path)
    path.write_text(json.dumps(LLAMA), encoding="utf8")
    monkeypatch.setattr(inputs, "MAX_JSON_BYTES", 50)
    with pytest.raises(ValueError, match="more than the 50 refpos reads"):
        load_hf_config(path)
    monkeypatch.setattr(inputs, "MAX_JSON_BYTES", 2**20)
    path.write_text('{"head_dim": ' + "9" * 5000 + "}", encoding="utf8")
    with pytest.raises(ValueError, match="config"):
        load_hf_config(path)
