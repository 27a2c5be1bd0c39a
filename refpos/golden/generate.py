"""``refpos golden``: generate, verify, model, list.

* ``refpos golden generate [--out DIR] [--no-certify]`` — every case (deterministic), certified against
  mpmath, into ``golden/`` (the default directory, :func:`refpos.golden.files.manifest.default_golden_dir`).
* ``refpos golden verify [--golden-dir DIR] [--certify]`` — check every file's sha256, regenerate every
  case and compare each output within its float64 tolerance; prints ``MISMATCH <case id>: …`` per
  problem and exits 1 on any (2 when the directory or manifest is unusable).
* ``refpos golden model CONFIG.json --out DIR [--positions 0,1,4096 | --positions P.npy] [--seq-len L]``
  — the per-model RoPE case set for any config.json.
* ``refpos golden list [--golden-dir DIR] [--family F]`` — case ids, functions and certified ulps.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from refpos.golden.exact.entries import compare
from refpos.golden.files.manifest import Case, case_entry, load_manifest, open_golden, read_case, write_cases
from refpos.inputs import MAX_JSON_BYTES, InputError

#: the kernels the committed golden bytes come from. NumPy and OpenBLAS choose their kernels by CPU, and on a
#: CPU with AVX-512 NumPy's float64 pow, exp, log, sin and cos (and OpenBLAS's matmul) round differently by
#: about one ulp, so ``golden generate`` would write other bytes (within tolerance: ``golden verify`` passes).
#: With this environment NumPy dispatches no further than AVX2 and OpenBLAS uses its Haswell kernels: the same
#: bytes on every x86-64 CPU with AVX2 and FMA (refpos/tests/test_golden_bytes.py regenerates them).
PINNED_KERNELS = {
    "NPY_ENABLE_CPU_FEATURES": "SSE SSE2 SSE3 SSSE3 SSE41 POPCNT SSE42 AVX F16C FMA3 AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
}

TITLE = "refpos golden outputs: every encoding family, the worked example, real model RoPE, boundaries, scenarios"


def all_cases() -> list[Case]:
    """Every case of ``refpos golden generate``, in manifest order: each family of the registry in turn
    (:data:`refpos.golden.registry.FAMILIES`)."""
    from refpos.golden.registry import FAMILIES

    return [case for family in FAMILIES.values() for case in family.cases()]


def model_source(config: dict[str, Any], name: str, positions: list[int] | None, seq_len: int | None,
                 max_position: int | None = None, assume: dict[str, str] | None = None) -> dict:
    source = {"command": "model", "name": name, "config": config, "positions": positions, "seq_len": seq_len}
    source = source if max_position is None else {**source, "max_position": max_position}
    return source if assume is None else {**source, "assume": assume}


def regenerate(manifest: dict[str, Any]) -> list[Case]:
    """Rebuild the cases of a manifest from its ``source`` (generate, or model with its config)."""
    source = manifest.get("source", {"command": "generate"})
    if source.get("command") == "model":
        from refpos.golden.cases.rope import model_cases

        positions = source.get("positions")
        return model_cases(source["config"], source["name"],
                           positions=None if positions is None else np.asarray(positions, dtype=np.int64),
                           seq_len=source.get("seq_len"), max_position=source.get("max_position"),
                           assume=source.get("assume"))
    return all_cases()


def finite_cases(cases: list[Case]) -> list[Case]:
    """``cases`` if every input and output is finite; else ``ValueError`` naming the first non-finite one.

    A model's RoPE is finite for finite inputs whatever its rule, so an infinity or NaN there comes from a
    parameter that overflows (an ``attention_factor`` of 1e308 times a rotated pair of size 2); goldens of
    infinities would let any implementation that overflows the same way pass."""
    for case in cases:
        for kind, arrays in (("input", case.inputs), ("output", {n: o.array for n, o in case.outputs.items()})):
            for name, array in arrays.items():
                a = np.asarray(array)
                if a.dtype.kind == "f" and not bool(np.isfinite(a).all()):
                    bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
                    raise ValueError(f"golden case {case.id}: {kind} {name}{list(bad)} is {a[bad]}: the config's "
                                     "parameters overflow float64 (e.g. an attention_factor or factor too large); "
                                     "refpos writes no golden of a non-finite value")
    return cases


@functools.lru_cache(maxsize=4)
def _regenerated(source_json: str) -> dict[str, Case]:
    return {c.id: c for c in regenerate({"source": json.loads(source_json)})}


def regenerated_cases(manifest: dict[str, Any]) -> dict[str, Case]:
    """:func:`regenerate` by case id, kept for the process (``refpos check CASE`` regenerates its case)."""
    source = manifest.get("source", {"command": "generate"})
    return _regenerated(json.dumps(source, sort_keys=True))


def extra_files(source: dict[str, Any]) -> dict[str, bytes]:
    """The files beside the cases: for ``golden generate``, ``configs/<model>.json``, the configs the model
    cases read and the vision-language configs (for ``golden model`` runs)."""
    if source.get("command", "generate") != "generate":
        return {}
    from refpos.golden.cases.mrope import vlm_configs
    from refpos.golden.cases.rope import model_configs, slug

    return {f"configs/{slug(name)}.json": (json.dumps(entry["config"], indent=1) + "\n").encode("utf8")
            for name, entry in {**model_configs(), **vlm_configs()}.items()}


def generate(out: Path, *, certify: bool = True, force: bool = False) -> list[dict]:
    """Write every case to ``out`` with ``configs/<model>.json`` (:func:`extra_files`)."""
    source = {"command": "generate"}
    return write_cases(out, all_cases(), title=TITLE, certify=certify, source=source,
                       extra_files=extra_files(source), force=force)


def _params_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_params_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_params_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):  # True == 1 in Python; not in a manifest
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) or isinstance(b, float):
            try:
                return math.isclose(float(a), float(b), rel_tol=1e-13, abs_tol=0.0)
            except OverflowError:
                return False
        return a == b
    return type(a) is type(b) and a == b  # the string "1e300" is not the number 1e300


def _first_difference(fresh: Any, stored: Any, where: str = "") -> str:
    """Where two JSON values first differ, e.g. ``float32.atol[3]: regenerated 4.77e-07, manifest 1e+300``."""
    if isinstance(fresh, dict) and isinstance(stored, dict):
        for key in sorted(set(fresh) | set(stored)):
            if key not in fresh or key not in stored:
                return f"{where}{key}: only in the {'manifest' if key in stored else 'regenerated one'}"
            if not _params_equal(fresh[key], stored[key]):
                return _first_difference(fresh[key], stored[key], f"{where}{key}.")
    if isinstance(fresh, list) and isinstance(stored, list) and len(fresh) == len(stored):
        for i, (a, b) in enumerate(zip(fresh, stored, strict=True)):
            if not _params_equal(a, b):
                return _first_difference(a, b, f"{where.rstrip('.')}[{i}].")
    return f"{where.rstrip('.') or 'value'}: regenerated {fresh!r}, manifest {stored!r}"


#: the fields of a case that regeneration must reproduce exactly (the arrays are compared separately)
CASE_FIELDS = ("family", "function", "description", "primary_output", "parameters")


def case_problems(case: dict[str, Any], new: Case, arrays: dict[str, dict[str, np.ndarray]], *,
                  certify: bool = False) -> list[str]:
    """What of a manifest case regeneration does not reproduce: a field of :data:`CASE_FIELDS`, an input or
    output the generator does not make (or one it makes that is missing), an array's dtype or shape, an
    input's values, an output outside its regenerated tolerance, a tolerance (empty: verified).

    ``arrays`` are the case's files as :func:`refpos.golden.files.manifest.read_case` read them."""
    from refpos.golden.exact.certify import certificate

    fresh = case_entry(new, {}, certify=False)
    problems = []
    for key in CASE_FIELDS:
        if not _params_equal(fresh[key], case.get(key)):
            problems.append(f"{key} differs from the regenerated case "
                            f"({_first_difference(fresh[key], case.get(key))})")
    for kind in ("inputs", "outputs"):
        made, listed = fresh[kind], case.get(kind, {})
        for name in sorted(set(listed) - set(made)):
            problems.append(f"{kind[:-1]} {name}: not made by the generator (the manifest lists it, regeneration "
                            "does not)")
        for name in sorted(set(made) - set(listed)):
            problems.append(f"{kind[:-1]} {name}: made by the generator but missing from the manifest")
        for name in sorted(set(made) & set(listed)):
            entry, stored = listed[name], arrays[kind].get(name)
            if (entry["dtype"], entry["shape"]) != (made[name]["dtype"], made[name]["shape"]):
                problems.append(f"{kind[:-1]} {name}: the manifest says {entry['dtype']}{entry['shape']}, "
                                f"regeneration makes {made[name]['dtype']}{made[name]['shape']}")
            elif stored is None:
                continue  # unreadable: already a problem of the files
            elif kind == "inputs":
                if not np.array_equal(stored, new.inputs[name]):
                    problems.append(f"input {name} differs from the regenerated input")
            else:
                problems += _output_problems(name, entry, made[name], stored, new.outputs[name], certify, certificate)
    return problems


def _output_problems(name: str, entry: dict[str, Any], made: dict[str, Any], stored: np.ndarray, out: Any,
                     certify: bool, certificate: Any) -> list[str]:
    problems = []
    fresh_tolerance = made["tolerance"]
    if not _params_equal(fresh_tolerance, entry["tolerance"]):
        problems.append(f"output {name}: the tolerance differs from the regenerated one "
                        f"({_first_difference(fresh_tolerance, entry['tolerance'])})")
    try:  # under the regenerated tolerance: the manifest's own is not trusted
        result = compare(out.array, stored, fresh_tolerance, "float64")
    except (ValueError, KeyError) as exc:
        return [*problems, f"output {name}: {exc}"]
    if not result["ok"]:
        problems.append(f"output {name} regenerated outside tolerance (max |diff| {result['max_abs_error']:.3g}, "
                        f"{result['max_ratio']:.3g}× the tolerance at {result['worst_index']})")
    if certify and out.certify is not None:
        cert = certificate(stored, out.certify, fresh_tolerance)
        if not cert["within_float64_tolerance"]:
            problems.append(f"output {name} is not within tolerance of the mpmath value "
                            f"({cert['max_error_ulps']} ulps)")
    return problems


def verify(root: Path, *, certify: bool = False) -> list[str]:
    """Problems of a golden directory (empty list: everything verified); raises GoldenError if unusable.

    Every file's sha256; every case regenerated from the manifest's ``source`` and compared whole
    (:func:`case_problems`); every case the generator makes present; the other files (``files``) equal to
    the regenerated ones (:func:`extra_files`)."""
    with open_golden(root) as directory:
        manifest = load_manifest(directory)
        fresh = regenerated_cases(manifest)
        problems = []
        for case in manifest["cases"]:
            cid = case["id"]
            arrays, file_problems = read_case(directory, case)
            problems += [f"{cid}: {p}" for p in file_problems]
            new = fresh.get(cid)
            if new is None:
                problems.append(f"{cid}: the generator has no such case")
                continue
            problems += [f"{cid}: {p}" for p in case_problems(case, new, arrays, certify=certify)]
        listed = {c["id"] for c in manifest["cases"]}
        problems += [f"{cid}: generated by this version but absent from the manifest"
                     for cid in fresh if cid not in listed]
        problems += _extra_file_problems(directory, manifest)
    return problems


def _extra_file_problems(directory: Any, manifest: dict[str, Any]) -> list[str]:
    expected = {rel: hashlib.sha256(data).hexdigest() for rel, data in extra_files(manifest.get("source", {})).items()}
    listed = manifest.get("files", {})
    problems = [f"{rel}: not made by the generator" for rel in sorted(set(listed) - set(expected))]
    problems += [f"{rel}: made by the generator but missing from the manifest's files"
                 for rel in sorted(set(expected) - set(listed))]
    for rel in sorted(set(listed) & set(expected)):
        try:
            data = directory.read_bytes(rel, what="file", max_bytes=MAX_JSON_BYTES)
        except InputError as exc:
            problems.append(f"{rel}: {exc}")
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != listed[rel]:
            problems.append(f"{rel}: sha256 mismatch (file changed or tampered)")
        elif digest != expected[rel]:
            problems.append(f"{rel}: differs from the regenerated file")
    return problems
