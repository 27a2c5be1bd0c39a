"""The C++, Rust and Go readers of golden/README.md compile and agree with refpos's comparison.

Each reader is extracted from the README's code block, compiled into a temporary directory and run on a
committed golden case: the reference itself passes, a float32 rounding of it passes the float32
tolerance and fails the float64 one, a perturbed candidate fails, a truncated file is unusable (exit 2).
Skipped where the compiler is missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from refpos.golden.manifest import default_golden_dir, find_case, load_manifest
from refpos.golden.npy import npy_bytes, read_npy

CASE = "rope/meta-llama--Llama-3.1-8B/apply"
ROOT = default_golden_dir()


def _block(language: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf8")
    match = re.search(rf"```{language}\n(.*?)```", text, re.S)
    assert match, f"golden/README.md has no {language} block"
    return match.group(1)


def _candidates(tmp_path: Path) -> dict[str, Path]:
    case = find_case(load_manifest(ROOT), CASE)
    ref = read_npy(ROOT / case["outputs"]["y"]["file"])
    files = {"ref": ref, "f32": ref.astype(np.float32), "wrong": ref + 1e-3}
    paths = {}
    for name, array in files.items():
        paths[name] = tmp_path / f"{name}.npy"
        paths[name].write_bytes(npy_bytes(array))
    paths["truncated"] = tmp_path / "truncated.npy"
    paths["truncated"].write_bytes(npy_bytes(ref)[:-8])
    return paths


def _tolerance_args(dtype: str) -> list[str]:
    entry = find_case(load_manifest(ROOT), CASE)["outputs"]["y"]["tolerance"][dtype]
    atol = entry["atol"]
    atol_text = ",".join(repr(a) for a in atol) if isinstance(atol, list) else repr(atol)
    return [atol_text, repr(entry["rtol"]), repr(entry["ulps"]), dtype]


def _run(cmd: list[str]) -> int:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode


def _expectations(run_with) -> None:
    assert run_with("ref", "float64") == 0
    assert run_with("f32", "float32") == 0
    assert run_with("f32", "float64") == 1
    assert run_with("wrong", "float32") == 1
    assert run_with("truncated", "float64") == 2


@pytest.mark.parametrize(("language", "compiler"), [("cpp", "g++"), ("rust", "rustc")])
def test_cpp_and_rust_readers(tmp_path, language, compiler):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    source = tmp_path / ("golden_check.cpp" if language == "cpp" else "golden_check.rs")
    source.write_text(_block(language), encoding="utf8")
    exe = tmp_path / "golden_check"
    build = ["g++", "-std=c++17", "-O1", str(source), "-o", str(exe)] if language == "cpp" else \
        ["rustc", "-O", "--edition", "2021", str(source), "-o", str(exe)]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    paths = _candidates(tmp_path)
    ref_file = ROOT / find_case(load_manifest(ROOT), CASE)["outputs"]["y"]["file"]
    _expectations(lambda name, dtype: _run([str(exe), str(ref_file), str(paths[name]), *_tolerance_args(dtype)]))


def test_go_reader(tmp_path):
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    source = tmp_path / "golden_check.go"
    source.write_text(_block("go"), encoding="utf8")
    exe = tmp_path / "golden_check"
    env_cache = {"GOCACHE": str(tmp_path / "gocache"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
                 "GO111MODULE": "off"}
    subprocess.run(["go", "build", "-o", str(exe), str(source)], check=True, capture_output=True, timeout=300,
                   env=env_cache)
    paths = _candidates(tmp_path)
    _expectations(lambda name, dtype: _run([str(exe), str(ROOT), CASE, "y", str(paths[name]), dtype]))
