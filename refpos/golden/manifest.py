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
import math
import os
import platform
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from refpos.directory import Directory, MissingFile, relative_parts
from refpos.golden.entries import RULES
from refpos.golden.npy import MAX_HEADER_BYTES, npy_bytes, parse_npy
from refpos.golden.schema import FORMAT_VERSION, SchemaError, validate_manifest
from refpos.golden.store import MANIFEST, check_entry
from refpos.inputs import MAX_JSON_BYTES, InputError, max_npy_bytes, parse_json
from refpos.installed import suite_root

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


def _array_entry(files: dict[str, bytes], rel: str, array: np.ndarray) -> dict[str, Any]:
    """The manifest entry of one array; its ``.npy`` bytes go into ``files`` under ``rel``."""
    a = np.asarray(array)
    data = npy_bytes(a)
    files[rel] = data
    entry = {"file": rel, "dtype": a.dtype.name, "shape": list(a.shape), "sha256": hashlib.sha256(data).hexdigest()}
    if a.ndim == 0:
        entry["value"] = jsonable(a.item())
        if a.dtype.kind == "f":
            entry["hex"] = float(a).hex()
    return entry


def check_case_id(case_id: str) -> str:
    """A case id names a directory under ``cases/``: ``/``-separated names, none empty, ``.`` or ``..``, no
    backslash (what :func:`load_manifest` accepts of a file path); ``ValueError`` naming the id otherwise."""
    try:
        relative_parts(case_dir(case_id))
    except InputError as exc:
        raise ValueError(f"golden case id {case_id!r} is not a directory name under cases/ ({exc})") from None
    return case_id


def case_entry(case: Case, files: dict[str, bytes], *, certify: bool = True) -> dict[str, Any]:
    """A case's manifest entry; the bytes of its arrays go into ``files`` (relative path → bytes)."""
    from refpos.golden.certify import certificate

    check_case_id(case.id)
    inputs = {}
    for name, array in case.inputs.items():
        rel = f"inputs/{case.shared_inputs[name]}.npy" if name in case.shared_inputs else \
            f"{case_dir(case.id)}/{name}.npy"
        inputs[name] = _array_entry(files, rel, array)
    outputs = {}
    worst_ulps: float | None = None
    for name, out in case.outputs.items():
        entry = _array_entry(files, f"{case_dir(case.id)}/{name}.npy", out.array)
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


def build_manifest(entries: list[dict[str, Any]], *, title: str, source: dict[str, Any] | None = None,
                   extra: dict[str, str] | None = None) -> dict[str, Any]:
    """The manifest of ``entries``; ``source`` says how ``refpos golden verify`` regenerates the cases,
    ``extra`` lists the other files of the directory (file → sha256, e.g. ``configs/*.json``)."""
    manifest = {"format": "refpos-golden", "format_version": FORMAT_VERSION, "title": title,
                "generator": generator_versions(), "source": jsonable(source or {"command": "generate"}),
                "comparison": FORMULA, "tolerance_rules": RULES,
                "array_format": ".npy version 1.0, little-endian, C order, never pickled",
                "cases": entries}
    if extra:
        manifest["files"] = extra
    return manifest


def write_cases(root: str | os.PathLike[str], cases: Iterable[Case], *, title: str, certify: bool = True,
                source: dict[str, Any] | None = None, extra_files: dict[str, bytes] | None = None,
                force: bool = False, hook: Any = None) -> list[dict[str, Any]]:
    """Write ``cases`` (and ``extra_files``: relative path → bytes) and the manifest to ``root``, replacing
    what a previous refpos manifest there lists (:func:`refpos.golden.store.replace_directory`: refused for a
    directory refpos did not write, or another source's without ``force``; interrupted, it verifies)."""
    from refpos.golden.store import replace_directory

    files: dict[str, bytes] = {}
    entries = []
    seen = set()
    for case in cases:
        if case.id in seen:
            raise ValueError(f"duplicate golden case id {case.id!r}")
        seen.add(case.id)
        entries.append(case_entry(case, files, certify=certify))
    extra = {}
    for rel, data in (extra_files or {}).items():
        files[rel] = data
        extra[rel] = hashlib.sha256(data).hexdigest()
    replace_directory(root, build_manifest(entries, title=title, source=source, extra=extra), files, force=force,
                      hook=hook)
    return entries


# ----------------------------------------------------------------------------------- reading
def default_golden_dir() -> Path:
    """``REFPOS_GOLDEN_DIR``, else the committed goldens: a checkout's ``golden/``, else the installed
    package's copy (:func:`refpos.installed.suite_root`)."""
    env = os.environ.get("REFPOS_GOLDEN_DIR")
    return Path(env) if env else suite_root() / "golden"


def open_golden(root: str | os.PathLike[str]) -> Directory:
    """The golden directory ``root``, opened once: its files are read through it (:mod:`refpos.directory`)."""
    try:
        return Directory(root)
    except InputError as exc:
        raise GoldenError(f"{exc} (not a golden directory)") from None


def load_manifest(root: str | os.PathLike[str] | Directory) -> dict[str, Any]:
    """Read ``manifest.json`` strictly (no symlink followed, :mod:`refpos.inputs`' JSON rules), validate it
    whole against the schema (:func:`refpos.golden.schema.validate_manifest`) and check that every file it
    names is a plain relative path with no symlink on the way (:func:`check_paths`), before any of them is
    opened; the files themselves are read by :func:`read_case`."""
    if not isinstance(root, Directory):
        with open_golden(root) as directory:
            return load_manifest(directory)
    path = root.name(MANIFEST)
    cap = max_npy_bytes()  # a bad REFPOS_MAX_NPY_BYTES is its own error, not the manifest's
    if root.lstat(MANIFEST) is None:
        raise GoldenError(f"{path}: no golden manifest here (run `refpos golden generate`)")
    try:
        text = root.read_bytes(MANIFEST, what="golden manifest", max_bytes=MAX_JSON_BYTES)
        try:
            manifest = parse_json(text.decode("utf-8-sig"), path)
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text (byte {exc.start}: {text[exc.start:exc.start + 1]!r})") from None
        validate_manifest(manifest, FORMAT_VERSION, max_bytes=cap)
        check_paths(root, manifest)
    except (InputError, SchemaError) as exc:
        message = str(exc)
        raise GoldenError(message if message.startswith(path) else f"{path}: {message}") from None
    return manifest


def check_paths(root: Directory, manifest: dict[str, Any]) -> None:
    """Every file of ``manifest`` is a relative path of plain names, none reserved for refpos's own state
    (:func:`refpos.golden.store.check_entry`: ``manifest.json``, the journal, ``.refpos-*``), and nothing on
    its way is a symlink (``lstat`` through the directory's descriptor; nothing is opened). SchemaError
    otherwise."""
    for case in manifest["cases"]:
        for label, entry in _file_entries(case):
            _check_path(root, entry["file"], f"case {case['id']}: {label}")
    for rel in manifest.get("files", {}):
        _check_path(root, rel, f"files: {rel!r}")


def _check_path(root: Directory, rel: str, label: str) -> None:
    try:
        parts = relative_parts(rel)
    except InputError as exc:
        raise SchemaError(f"{label}: {exc}; golden files lie inside the golden directory") from None
    try:
        check_entry(rel)
    except InputError as exc:
        raise SchemaError(f"{label}: {exc}") from None
    for depth in range(1, len(parts) + 1):
        try:
            info = root.lstat("/".join(parts[:depth]))
        except InputError as exc:
            raise SchemaError(f"{label}: {exc}") from None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise SchemaError(f"{label}: file {rel!r} passes through a symlink ({'/'.join(parts[:depth])}): refpos "
                              "reads golden files without following symlinks, which could leave the golden directory")
        if info is None:
            return  # missing: reported when the case is read


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


def read_case(root: str | os.PathLike[str] | Directory, case: dict[str, Any]
              ) -> tuple[dict[str, dict[str, np.ndarray]], list[str]]:
    """``({"inputs": {...}, "outputs": {...}}, problems)``: every file of a case read once, through the golden
    directory's descriptor without following a symlink; the bytes read are hashed and parsed (a file changed
    between the two cannot pass). A problem (missing, not a regular file, sha256 mismatch, unreadable, shape
    or dtype other than the manifest says) leaves that array out."""
    if not isinstance(root, Directory):
        with open_golden(root) as directory:
            return read_case(directory, case)
    arrays: dict[str, dict[str, np.ndarray]] = {"inputs": {}, "outputs": {}}
    problems = []
    limit = max_npy_bytes() + MAX_HEADER_BYTES + 12
    for kind in ("inputs", "outputs"):
        for name, entry in case.get(kind, {}).items():
            label, rel = f"{kind[:-1]} {name}", entry.get("file")
            try:
                data = root.read_bytes(rel, what=".npy file", max_bytes=limit)
                if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
                    problems.append(f"{label}: sha256 mismatch for {rel} (file changed or tampered)")
                    continue
                a = parse_npy(data, root.name(rel))
            except MissingFile:
                problems.append(f"{label}: missing file {rel!r}")
                continue
            except InputError as exc:
                problems.append(f"{label}: {exc}")
                continue
            if list(a.shape) != entry.get("shape") or a.dtype.name != entry.get("dtype"):
                problems.append(f"{label}: {rel} holds {a.dtype.name}{list(a.shape)}, the manifest says "
                                f"{entry.get('dtype')}{entry.get('shape')}")
                continue
            arrays[kind][name] = a
    return arrays, problems


def check_files(root: str | os.PathLike[str] | Directory, case: dict[str, Any]) -> list[str]:
    """The problems of :func:`read_case` (an empty list: every file of the case is as the manifest says)."""
    return read_case(root, case)[1]


def load_arrays(root: str | os.PathLike[str] | Directory, case: dict[str, Any], kind: str) -> dict[str, np.ndarray]:
    """The ``inputs`` or ``outputs`` arrays of a manifest case, read as :func:`read_case` reads them;
    :class:`GoldenError` naming the first problem."""
    arrays, problems = read_case(root, {"id": case["id"], kind: case.get(kind, {})})
    if problems:
        raise GoldenError(f"case {case['id']}: {problems[0]}")
    return arrays[kind]
