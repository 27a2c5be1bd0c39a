"""The committed golden files regenerate bit for bit under the pinned kernels (refpos.golden.generate.PINNED_KERNELS).

``refpos golden verify`` compares regenerated outputs within tolerance, which any CPU meets; this test makes
the stronger claim that the committed bytes are reproducible: ``refpos golden generate`` run in a fresh
process with NumPy held to its AVX2 kernels and OpenBLAS to its Haswell ones writes every ``.npy`` and config
file byte for byte, and the same manifest apart from the generator's versions. It runs where those kernels
exist (x86-64 with AVX2 and FMA) and NumPy is the version that wrote the manifest; elsewhere it is skipped
with the reason.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refpos.golden.files.manifest import default_golden_dir
from refpos.golden.generate import PINNED_KERNELS

GOLDEN = default_golden_dir()


def _machine_has_the_kernels() -> str | None:
    """Why the pinned kernels cannot run here, or None."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the pinned kernels are x86-64 ones; this machine is {platform.machine()}"
    from numpy._core._multiarray_umath import __cpu_features__

    missing = [f for f in PINNED_KERNELS["NPY_ENABLE_CPU_FEATURES"].split() if not __cpu_features__.get(f)]
    if missing:
        return f"this CPU lacks {missing}"
    written_by = json.loads((GOLDEN / "manifest.json").read_text(encoding="utf8"))["generator"]["numpy"]
    if written_by != np.__version__:
        return f"the manifest was written by NumPy {written_by}, this is {np.__version__} (its kernels may differ)"
    return None


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", "README.md")}


def _manifest_without_versions(path: Path) -> dict:
    """The manifest less the versions of the tools that wrote it (the generator record, and the mpmath
    version each certificate names): they say which tools ran, not what the cases hold."""
    manifest = json.loads(path.read_text(encoding="utf8"))
    manifest.pop("generator")
    text = re.sub(r"mpmath [0-9][^ \"]* at", "mpmath at", json.dumps(manifest))
    return json.loads(text)


def test_committed_golden_bytes_regenerate_exactly(tmp_path):
    reason = _machine_has_the_kernels()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "golden"
    env = {**os.environ, **PINNED_KERNELS}
    done = subprocess.run([sys.executable, "-m", "refpos", "golden", "generate", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    committed, regenerated = _files(GOLDEN), _files(out)
    assert sorted(regenerated) == sorted(committed), "the regenerated set names other files"
    differ = [name for name in committed if committed[name] != regenerated[name]]
    assert not differ, f"{len(differ)} files differ in bytes, e.g. {differ[:5]} (regenerate with PINNED_KERNELS)"
    assert _manifest_without_versions(out / "manifest.json") == _manifest_without_versions(GOLDEN / "manifest.json")
