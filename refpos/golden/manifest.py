"""Golden outputs: cases, the manifest, generate, verify, load.

A **case** is one reference computation: a function (an adapter function name when the adapter contract
has one), its parameters (JSON), named input arrays and named output arrays. Each output carries its
tolerance for every dtype a candidate may compute in (:mod:`refpos.golden.tolerance`) and, where an
arbitrary-precision evaluation is cheap, a certificate: the largest error of the float64 value
against an mpmath evaluation at 30 digits, in ulps (:mod:`refpos.golden.certify`).

``golden/`` holds ``manifest.json``, ``README.md`` (the format, readers in C++, Rust and Go) and the
arrays as ``.npy`` files (:mod:`refpos.golden.npy`: version 1.0, little-endian, C order, never pickled).

Comparison of a candidate ``y`` with a reference ``r`` under the tolerance entry of one dtype::

    |y - r| <= atol[i] + rtol·|r| + ulps·ulp_dtype(|r|)

``atol`` is a number, or a list indexed along ``atol_axis`` (the position axis of angle-derived
outputs). Equal values pass (equal infinities of masked logits included); a NaN passes only against a
NaN of the reference (the ``"nan"`` policy of fully masked rows), and a NaN tolerance never passes.
Manifests are validated whole before use (:mod:`refpos.golden.schema`), and every file path in
them must stay inside the golden directory.

The case builders live in :mod:`refpos.golden.cases` (encodings, worked example, scenarios) and
:mod:`refpos.golden.rope_cases` (per-model RoPE, boundaries); the CLI in :mod:`refpos.golden.generate`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from refpos.golden.entries import RULES
from refpos.golden.npy import NpyError, parse_npy, read_npy_bytes, write_npy
from refpos.golden.schema import SchemaError, contained_path, validate_manifest
from refpos.inputs import InputError, load_json
from refpos.installed import suite_root

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
FORMULA = "|y - ref| <= atol[i] + rtol*|ref| + ulps*ulp_dtype(|ref|); i = index along atol_axis"
# the manifest's wording of refpos.golden.compare.FORMULA (stored in every manifest: unchanged bytes)


class GoldenError(ValueError):
    """An unusable golden directory or manifest (one-line message)."""


# ------------------------------------------------------------------------------------------ cases
@dataclass
class Output:
    """One output array of a case with its tolerance entry and, optionally, its certificate."""

    array: np.ndarray
    tolerance: dict[str, Any]
    #: () -> exact values (float64 array of the correctly rounded mpmath values) and the ulp scale
    certify: Callable[[], tuple[np.ndarray, Any]] | None = None


@dataclass
class Case:
    """A golden case as built in memory (before writing)."""

    id: str
    family: str
    function: str | None
    description: str
    parameters: dict[str, Any]
    inputs: dict[str, np.ndarray]
    outputs: dict[str, Output]
    #: input name -> shared file name under inputs/ (identical arrays used by several cases)
    shared_inputs: dict[str, str] = field(default_factory=dict)
    primary: str | None = None


def case_dir(case_id: str) -> str:
    """Directory of a case's files, relative to the golden root."""
    return "cases/" + case_id


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    return value


def _array_entry(root: Path, rel: str, array: np.ndarray) -> dict[str, Any]:
    a = np.asarray(array)
    digest = write_npy(root / rel, a)
    entry = {"file": rel, "dtype": a.dtype.name, "shape": list(a.shape), "sha256": digest}
    if a.ndim == 0:
        entry["value"] = jsonable(a.item())
        if a.dtype.kind == "f":
            entry["hex"] = float(a).hex()
    return entry


def write_case(root: Path, case: Case, *, certify: bool = True) -> dict[str, Any]:
    """Write a case's arrays under ``root`` and return its manifest entry."""
    from refpos.golden.certify import certificate

    inputs = {}
    for name, array in case.inputs.items():
        rel = f"inputs/{case.shared_inputs[name]}.npy" if name in case.shared_inputs else \
            f"{case_dir(case.id)}/{name}.npy"
        inputs[name] = _array_entry(root, rel, array)
    outputs = {}
    worst_ulps: float | None = None
    for name, out in case.outputs.items():
        entry = _array_entry(root, f"{case_dir(case.id)}/{name}.npy", out.array)
        entry["tolerance"] = jsonable(out.tolerance)
        if certify and out.certify is not None:
            cert = certificate(out.array, out.certify, out.tolerance)
            entry["certified"] = cert
            worst_ulps = max(worst_ulps or 0.0, cert["max_error_ulps"])
        else:
            entry["certified"] = None
        outputs[name] = entry
    return {"id": case.id, "family": case.family, "function": case.function,
            "description": case.description, "parameters": jsonable(case.parameters),
            "primary_output": case.primary or next(iter(case.outputs)),
            "inputs": inputs, "outputs": outputs, "certified_max_error_ulps": worst_ulps}


def generator_versions() -> dict[str, str]:
    import mpmath

    import refpos

    return {"refpos": refpos.__version__, "numpy": np.__version__, "mpmath": mpmath.__version__,
            "python": platform.python_version()}


def write_manifest(root: Path, entries: list[dict[str, Any]], *, title: str,
                   source: dict[str, Any] | None = None) -> Path:
    """Write ``manifest.json``; ``source`` says how ``refpos golden verify`` regenerates the cases."""
    manifest = {"format": "refpos-golden", "format_version": FORMAT_VERSION, "title": title,
                "generator": generator_versions(), "source": jsonable(source or {"command": "generate"}),
                "comparison": FORMULA, "tolerance_rules": RULES,
                "array_format": ".npy version 1.0, little-endian, C order, never pickled",
                "cases": entries}
    path = root / MANIFEST
    path.write_text(dump_json(manifest) + "\n", encoding="utf8")
    return path


def dump_json(value: Any, indent: int = 0) -> str:
    """JSON with one key per line but lists of numbers and strings on one line (a compact manifest)."""
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {dump_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [pad + dump_json(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value, ensure_ascii=False)


def write_cases(root: str | os.PathLike[str], cases: Iterable[Case], *, title: str,
                certify: bool = True, clean: bool = True, source: dict[str, Any] | None = None,
                ) -> list[dict[str, Any]]:
    """Write ``cases`` and the manifest to ``root`` (old ``cases/`` and ``inputs/`` removed first)."""
    import shutil

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if clean:
        for sub in ("cases", "inputs"):
            if (root / sub).is_dir():
                shutil.rmtree(root / sub)
    entries = []
    seen = set()
    for case in cases:
        if case.id in seen:
            raise ValueError(f"duplicate golden case id {case.id!r}")
        seen.add(case.id)
        entries.append(write_case(root, case, certify=certify))
    write_manifest(root, entries, title=title, source=source)
    return entries


# ----------------------------------------------------------------------------------- reading
def default_golden_dir() -> Path:
    """``REFPOS_GOLDEN_DIR``, else the committed goldens: a checkout's ``golden/``, else the installed
    package's copy (:func:`refpos.installed.suite_root`)."""
    env = os.environ.get("REFPOS_GOLDEN_DIR")
    return Path(env) if env else suite_root() / "golden"


def load_manifest(root: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``manifest.json`` strictly (:mod:`refpos.inputs`), validate it whole against the schema
    (:func:`refpos.golden.schema.validate_manifest`) and check that every file it names lies inside
    ``root`` (:func:`~refpos.golden.schema.contained_path`); the files themselves are checked by
    :func:`check_files`."""
    path = Path(root) / MANIFEST
    if not path.exists() and not path.is_symlink():
        raise GoldenError(f"{path}: no golden manifest here (run `refpos golden generate`)")
    try:
        manifest = load_json(path, what="golden manifest")
        validate_manifest(manifest, FORMAT_VERSION)
        for case in manifest["cases"]:  # every path inside the directory, before any file is opened
            for label, entry in _file_entries(case):
                contained_path(root, entry["file"], label=f"case {case['id']}: {label}")
    except (InputError, SchemaError) as exc:
        message = str(exc)
        raise GoldenError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    return manifest


def find_case(manifest: dict[str, Any], case_id: str) -> dict[str, Any]:
    for case in manifest["cases"]:
        if case["id"] == case_id:
            return case
    close = [c["id"] for c in manifest["cases"] if case_id.split("/")[0] in c["id"]][:5]
    raise GoldenError(f"no golden case {case_id!r}" + (f" (similar: {', '.join(close)})" if close else ""))


def _file_entries(case: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    for kind in ("inputs", "outputs"):
        for name, entry in case.get(kind, {}).items():
            yield f"{kind[:-1]} {name}", entry


def _contained(root: str | os.PathLike[str], rel: object, label: str) -> Path:
    try:
        return contained_path(root, rel, label=label)
    except SchemaError as exc:
        raise GoldenError(str(exc)) from None


def check_files(root: str | os.PathLike[str], case: dict[str, Any]) -> list[str]:
    """Problems with a case's files: outside the directory, missing, sha256 mismatch, unreadable,
    shape/dtype disagreeing. A path that leaves the golden directory is refused before it is opened."""
    problems = []
    for label, entry in _file_entries(case):
        try:
            path = _contained(root, entry.get("file"), label)
        except GoldenError as exc:
            problems.append(str(exc))
            continue
        if not path.is_file():
            problems.append(f"{label}: missing file {entry.get('file')!r}")
            continue
        try:
            data = read_npy_bytes(path)  # read once: the bytes hashed are the bytes parsed
            if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
                problems.append(f"{label}: sha256 mismatch for {entry['file']} (file changed or tampered)")
                continue
            a = parse_npy(data, os.fspath(path))
        except NpyError as exc:
            problems.append(f"{label}: {exc}")
            continue
        if list(a.shape) != entry.get("shape") or a.dtype.name != entry.get("dtype"):
            problems.append(f"{label}: {entry['file']} holds {a.dtype.name}{list(a.shape)}, the manifest says "
                            f"{entry.get('dtype')}{entry.get('shape')}")
    return problems


def load_arrays(root: str | os.PathLike[str], case: dict[str, Any], kind: str) -> dict[str, np.ndarray]:
    """The ``inputs`` or ``outputs`` arrays of a manifest case, contained and sha256-checked."""
    out = {}
    for name, entry in case.get(kind, {}).items():
        label = f"case {case['id']}: {kind[:-1]} {name}"
        path = _contained(root, entry["file"], label)
        if not path.is_file():
            raise GoldenError(f"{label}: missing file {entry['file']}")
        data = read_npy_bytes(path)  # read once: the bytes hashed are the bytes parsed
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise GoldenError(f"{label}: sha256 mismatch for {entry['file']}")
        out[name] = parse_npy(data, os.fspath(path))
    return out
