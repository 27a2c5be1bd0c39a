"""The C++, Rust and Go readers of golden/README.md build with the documented commands, agree with
refpos's comparison and refuse hostile files.

Each reader is extracted from the README's code block and built in a temporary directory with the command
its first line documents (``// golden_check.rs — rustc --edition 2021 -O …``), so the README cannot
drift from what is tested. Then:

* on a committed golden case: the reference passes, a float32 rounding of it passes the float32 tolerance
  and fails the float64 one, a perturbed candidate fails, a truncated file is unusable (exit 2);
* on crafted ``.npy`` files, given as reference and candidate at once (a reader that accepts one prints
  ``OK``): preambles that end early (version 1 and 2), header lengths beyond the file, negative
  dimensions, shapes whose element count wraps around to 0 or 1, truncated and overlong data, unknown
  versions and headers without a shape — each exit 2 with one line on stderr naming the file, never a
  panic, a crash or "OK: 0 of 0";
* hostile arguments (a non-number, NaN or negative tolerance, an unknown dtype, an atol list of the wrong
  length) and, for the Go reader, which reads the manifest itself, file paths that leave the golden
  directory.

Skipped, with the reason, where the compiler is missing.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from refpos.golden.files.manifest import default_golden_dir, find_case, load_manifest
from refpos.golden.files.npy import MAGIC, npy_bytes, read_npy

CASE = "rope/meta-llama--Llama-3.1-8B/apply"
ROOT = default_golden_dir()
#: language -> (the README block's tag, the compiler the documented command runs)
LANGUAGES = {"cpp": "g++", "rust": "rustc", "go": "go"}


def _block(language: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf8")
    match = re.search(rf"```{language}\n(.*?)```", text, re.S)
    assert match, f"golden/README.md has no {language} block"
    return match.group(1)


def documented_build(language: str) -> tuple[str, list[str]]:
    """``(source file name, build command)`` from the block's first line: ``// NAME — COMMAND [(...)]``."""
    first = _block(language).splitlines()[0]
    match = re.fullmatch(r"// (\S+) — (.+?)(?: \(.*\))?", first)
    assert match, f"the {language} block's first line names no file and build command: {first!r}"
    name, command = match.group(1), shlex.split(match.group(2))
    assert name in command, f"the documented {language} command does not build {name}: {command}"
    return name, command


@dataclass
class Reader:
    language: str
    exe: Path
    work: Path

    def run(self, ref: Path, candidate: Path, dtype: str = "float64",
            entry: tuple[str, str, str] = ("0.0", "0.0", "0")) -> subprocess.CompletedProcess:
        """Compare ``candidate`` with ``ref`` under ``entry`` (atol text, rtol, ulps). The Go reader reads its
        reference and tolerance from a manifest: a one-case golden directory is written for it."""
        if self.language != "go":
            cmd = [str(self.exe), str(ref), str(candidate), *entry, dtype]
        else:
            root = self.work / "gdir"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            shutil.copyfile(ref, root / "y.npy")
            _manifest(root, "y.npy", {dtype: _entry_json(entry)})
            cmd = [str(self.exe), str(root), "case", "y", str(candidate), dtype]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _entry_json(entry: tuple[str, str, str]) -> dict:
    """The manifest entry of command-line tolerance arguments (a value that is no number stays a string)."""
    def number(text: str) -> float | str:
        try:
            return float(text)
        except ValueError:
            return text

    atol_text, rtol, ulps = entry
    atol = [number(a) for a in atol_text.split(",")] if "," in atol_text else number(atol_text)
    return {"atol": atol, "rtol": number(rtol), "ulps": number(ulps)}


def _manifest(root: Path, file: str, tolerance: dict) -> None:
    cases = [{"id": "case", "outputs": {"y": {"file": file, "tolerance": tolerance}}}]
    (root / "manifest.json").write_text(json.dumps({"cases": cases}), encoding="utf8")


@pytest.fixture(scope="module", params=list(LANGUAGES))
def reader(request, tmp_path_factory) -> Reader:
    language = request.param
    compiler = LANGUAGES[language]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed: the {language} reader of golden/README.md is not built")
    work = tmp_path_factory.mktemp(f"reader_{language}")
    name, command = documented_build(language)
    (work / name).write_text(_block(language), encoding="utf8")
    env = {"GOCACHE": str(work / "gocache"), "HOME": str(work), "PATH": "/usr/bin:/bin:" + str(
        Path(shutil.which(compiler)).parent), "GO111MODULE": "off"} if language == "go" else None
    built = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=300, env=env)
    assert built.returncode == 0, f"the documented command {' '.join(command)} fails:\n{built.stderr[-3000:]}"
    exe = work / "golden_check"
    assert exe.exists(), f"{' '.join(command)} wrote no golden_check"
    return Reader(language, exe, work)


# ------------------------------------------------------------------------------ a committed case
def _committed(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    case = find_case(load_manifest(ROOT), CASE)
    ref_file = ROOT / case["outputs"]["y"]["file"]
    ref = read_npy(ref_file)
    paths = {}
    for name, array in {"ref": ref, "f32": ref.astype(np.float32), "wrong": ref + 1e-3}.items():
        paths[name] = tmp_path / f"{name}.npy"
        paths[name].write_bytes(npy_bytes(array))
    paths["truncated"] = tmp_path / "truncated.npy"
    paths["truncated"].write_bytes(npy_bytes(ref)[:-8])
    return ref_file, paths


def _tolerance_args(dtype: str) -> tuple[str, str, str]:
    entry = find_case(load_manifest(ROOT), CASE)["outputs"]["y"]["tolerance"][dtype]
    atol = entry["atol"]
    atol_text = ",".join(repr(a) for a in atol) if isinstance(atol, list) else repr(atol)
    return atol_text, repr(entry["rtol"]), repr(entry["ulps"])


def test_the_reader_agrees_with_refpos_on_a_committed_case(reader, tmp_path):
    ref_file, paths = _committed(tmp_path)

    def code(name: str, dtype: str) -> int:
        if reader.language == "go":  # the committed manifest itself
            cmd = [str(reader.exe), str(ROOT), CASE, "y", str(paths[name]), dtype]
            return subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode
        return reader.run(ref_file, paths[name], dtype, _tolerance_args(dtype)).returncode

    assert code("ref", "float64") == 0
    assert code("f32", "float32") == 0
    assert code("f32", "float64") == 1
    assert code("wrong", "float32") == 1
    assert code("truncated", "float64") == 2


# ------------------------------------------------------------------------------ crafted files
def npy_file(shape: str, payload: bytes = b"", *, version: int = 1, descr: str = "'<f8'") -> bytes:
    """A well-formed preamble (``version``) around a header with this shape text, then ``payload``."""
    text = f"{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}".encode("latin1")
    preamble = 10 if version == 1 else 12
    text += b" " * ((64 - (len(text) + 1 + preamble) % 64) % 64) + b"\n"
    return MAGIC + bytes([version, 0]) + len(text).to_bytes(2 if version == 1 else 4, "little") + text + payload


SIX = np.arange(6, dtype="<f8").tobytes()
CRAFTED = {
    # the preamble or header ends early
    "v1 preamble of 9 bytes": MAGIC + b"\x01\x00\x76",
    "v2 preamble of 10 bytes": MAGIC + b"\x02\x00\x76\x00",
    "v2 preamble of 11 bytes": MAGIC + b"\x02\x00\x76\x00\x00",
    "v1 header longer than the file": MAGIC + b"\x01\x00\x76\x00{'descr': '<f8', ",
    "v2 header longer than the file": MAGIC + b"\x02\x00\x00\x00\x01\x00{'descr': '<f8', ",
    "v1 empty header": MAGIC + b"\x01\x00\x00\x00",
    "unknown version 0": npy_file("(2, 3)", SIX)[:6] + b"\x00" + npy_file("(2, 3)", SIX)[7:],
    "unknown version 9": npy_file("(2, 3)", SIX)[:6] + b"\x09" + npy_file("(2, 3)", SIX)[7:],
    "no shape": npy_file("(2, 3)", SIX).replace(b"'shape'", b"'shapf'"),
    # negative or non-integer dimensions
    "negative dims (-1, -1)": npy_file("(-1, -1)", SIX[:8]),
    "negative dim (-6,)": npy_file("(-6,)", SIX),
    "signed dim (+6,)": npy_file("(+6,)", SIX),
    "fractional dim (6.0,)": npy_file("(6.0,)", SIX),
    # element counts that wrap around in 64 bits
    "count wraps to 0: (2**32, 2**32)": npy_file(f"({2**32}, {2**32})"),
    "count wraps to 0: (2**63, 2)": npy_file(f"({2**63}, 2)"),
    "count wraps to 0: (2**22, 2**21, 2**21)": npy_file(f"({2**22}, {2**21}, {2**21})"),
    "count wraps to 1: (2**64 - 1, 2**64 - 1)": npy_file(f"({2**64 - 1}, {2**64 - 1})", SIX[:8]),
    "bytes wrap to 0: (2**61,) of 8 bytes": npy_file(f"({2**61},)"),
    "dimension beyond 64 bits": npy_file(f"({2**64},)"),
    # data that does not match the shape
    "truncated data": npy_file("(2, 3)", SIX[:-8]),
    "overlong data": npy_file("(2, 3)", SIX + b"\x00" * 8),
    "v2 truncated data": npy_file("(2, 3)", SIX[:-1], version=2),
}


def test_the_crafted_files_are_what_they_claim(tmp_path):
    """NumPy reads the well-formed ones the builder writes (the crafted ones differ only where named)."""
    for version in (1, 2):
        path = tmp_path / f"v{version}.npy"
        path.write_bytes(npy_file("(2, 3)", SIX, version=version))
        assert np.load(path, allow_pickle=False).tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


@pytest.mark.parametrize("version", [1, 2])
def test_a_valid_file_passes(reader, tmp_path, version):
    path = tmp_path / "valid.npy"
    path.write_bytes(npy_file("(2, 3)", SIX, version=version))
    done = reader.run(path, path)
    assert done.returncode == 0 and " 0 of 6 elements outside" in done.stdout, (done.stdout, done.stderr)


def _refused(done: subprocess.CompletedProcess, *named: str) -> None:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, f"exit {done.returncode}: {done.stdout!r} {done.stderr[-500:]!r}"
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr[-500:]
    assert "panic" not in done.stderr and "goroutine" not in done.stderr and not done.stdout
    for name in named:
        assert name in lines[0], lines[0]


@pytest.mark.parametrize("name", list(CRAFTED))
def test_a_crafted_file_is_refused_with_one_line(reader, tmp_path, name):
    path = tmp_path / "crafted.npy"
    path.write_bytes(CRAFTED[name])
    done = reader.run(path, path)
    _refused(done, "crafted.npy" if reader.language != "go" else "y.npy")


@pytest.mark.parametrize(("entry", "dtype"), [
    (("abc", "0", "0"), "float64"), (("nan", "0", "0"), "float64"), (("-1", "0", "0"), "float64"),
    (("0", "x", "0"), "float64"), (("0", "0", "inf"), "float64"), (("0,0,0", "0", "0"), "float64"),
    (("0", "0", "0"), "int4"),
], ids=["atol abc", "atol nan", "atol -1", "rtol x", "ulps inf", "3 atols for 2 rows", "dtype int4"])
def test_hostile_arguments_are_refused_with_one_line(reader, tmp_path, entry, dtype):
    if reader.language == "go" and entry[0] == "nan":
        pytest.skip("JSON has no NaN: a manifest cannot hold one")
    path = tmp_path / "valid.npy"
    path.write_bytes(npy_file("(2, 3)", SIX))
    _refused(reader.run(path, path, dtype, entry))


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_the_go_reader_keeps_to_the_golden_dir(reader, tmp_path, how):
    """The Go reader opens the files the manifest names: none outside the golden directory."""
    if reader.language != "go":
        pytest.skip("only the Go reader reads a manifest")
    outside = tmp_path / "outside.npy"
    outside.write_bytes(npy_file("(2, 3)", SIX))
    root = tmp_path / "gdir"
    root.mkdir()
    file = {"dotdot": "../outside.npy", "absolute": str(outside), "symlink": "link.npy"}[how]
    if how == "symlink":
        (root / "link.npy").symlink_to(outside)
    _manifest(root, file, {"float64": {"atol": 0.0, "rtol": 0.0, "ulps": 0}})
    done = subprocess.run([str(reader.exe), str(root), "case", "y", str(outside), "float64"], capture_output=True,
                          text=True, timeout=120)
    _refused(done, "golden directory")
