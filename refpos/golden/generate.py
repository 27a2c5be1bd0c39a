"""``refpos golden``: generate, verify, model, list.

* ``refpos golden generate [--out DIR] [--no-certify]`` — every case (deterministic), certified against
  mpmath, into ``golden/`` (the default directory, :func:`refpos.golden.default_golden_dir`).
* ``refpos golden verify [--golden-dir DIR] [--certify]`` — check every file's sha256, regenerate every
  case and compare each output within its float64 tolerance; prints ``MISMATCH <case id>: …`` per
  problem and exits 1 on any (2 when the directory or manifest is unusable).
* ``refpos golden model CONFIG.json --out DIR [--positions 0,1,4096 | --positions P.npy] [--seq-len L]``
  — the per-model RoPE case set for any config.json.
* ``refpos golden list [--golden-dir DIR] [--family F]`` — case ids, functions and certified ulps.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from refpos.golden.manifest import (
    Case,
    GoldenError,
    check_files,
    compare,
    default_golden_dir,
    load_arrays,
    load_manifest,
    write_cases,
)
from refpos.golden.npy import read_npy
from refpos.rope.hf import load_hf_config

TITLE = "refpos golden outputs: every encoding family, the worked example, real model RoPE, boundaries, scenarios"


def all_cases() -> list[Case]:
    """Every case of ``refpos golden generate``, in manifest order."""
    from refpos.golden.cases import encoding_cases
    from refpos.golden.rope_cases import all_model_cases, boundary_cases, layout_cases
    from refpos.golden.scenarios import attention_cases, scenario_cases, worked_example_cases

    return (encoding_cases() + worked_example_cases() + attention_cases() + layout_cases() + all_model_cases()
            + boundary_cases() + scenario_cases())


def _model_source(config: dict[str, Any], name: str, positions: list[int] | None, seq_len: int | None) -> dict:
    return {"command": "model", "name": name, "config": config, "positions": positions, "seq_len": seq_len}


def regenerate(manifest: dict[str, Any]) -> list[Case]:
    """Rebuild the cases of a manifest from its ``source`` (generate, or model with its config)."""
    source = manifest.get("source", {"command": "generate"})
    if source.get("command") == "model":
        from refpos.golden.rope_cases import model_cases

        positions = source.get("positions")
        return model_cases(source["config"], source["name"],
                           positions=None if positions is None else np.asarray(positions, dtype=np.int64),
                           seq_len=source.get("seq_len"))
    return all_cases()


def _write(root: Path, cases: list[Case], source: dict[str, Any], *, certify: bool, title: str) -> list[dict]:
    return write_cases(root, cases, title=title, certify=certify, source=source)


def generate(out: Path, *, certify: bool = True) -> list[dict]:
    """Write every case to ``out`` (and ``configs/<model>.json``, the configs the model cases read)."""
    from refpos.golden.rope_cases import model_configs, slug

    entries = _write(out, all_cases(), {"command": "generate"}, certify=certify, title=TITLE)
    configs = out / "configs"
    if configs.is_dir():
        shutil.rmtree(configs)
    configs.mkdir(parents=True)
    for name, entry in model_configs().items():
        (configs / f"{slug(name)}.json").write_text(json.dumps(entry["config"], indent=1) + "\n", encoding="utf8")
    return entries


def _params_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_params_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_params_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-13, abs_tol=0.0)
        except (TypeError, ValueError):
            return a == b
    return a == b


def verify(root: Path, *, certify: bool = False) -> list[str]:
    """Problems of a golden directory (empty list: everything verified); raises GoldenError if unusable."""
    from refpos.golden.certify import certificate
    from refpos.golden.manifest import _jsonable

    manifest = load_manifest(root)
    fresh = {c.id: c for c in regenerate(manifest)}
    problems = []
    seen = set()
    for case in manifest["cases"]:
        cid = case["id"]
        seen.add(cid)
        file_problems = check_files(root, case)
        problems += [f"{cid}: {p}" for p in file_problems]
        if file_problems:
            continue
        new = fresh.get(cid)
        if new is None:
            problems.append(f"{cid}: the generator has no such case any more")
            continue
        if not _params_equal(_jsonable(new.parameters), case.get("parameters")):
            problems.append(f"{cid}: parameters differ from the regenerated case")
        stored_in = load_arrays(root, case, "inputs")
        for name, array in new.inputs.items():
            same = name in stored_in and stored_in[name].shape == array.shape and np.array_equal(stored_in[name], array)
            if not same:
                problems.append(f"{cid}: input {name} differs from the regenerated input")
        stored_out = load_arrays(root, case, "outputs")
        for name, out in new.outputs.items():
            entry = case["outputs"].get(name)
            if entry is None or name not in stored_out:
                problems.append(f"{cid}: output {name} missing from the manifest")
                continue
            try:
                result = compare(out.array, stored_out[name], entry["tolerance"], "float64")
            except (ValueError, KeyError) as exc:
                problems.append(f"{cid}: output {name}: {exc}")
                continue
            if not result["ok"]:
                problems.append(f"{cid}: output {name} regenerated outside tolerance (max |diff| "
                                f"{result['max_abs_error']:.3g}, {result['max_ratio']:.3g}× the tolerance at "
                                f"{result['worst_index']})")
            if certify and out.certify is not None:
                cert = certificate(stored_out[name], out.certify, entry["tolerance"])
                if not cert["within_float64_tolerance"]:
                    problems.append(f"{cid}: output {name} is not within tolerance of the mpmath value "
                                    f"({cert['max_error_ulps']} ulps)")
    for cid in fresh:
        if cid not in seen:
            problems.append(f"{cid}: generated by this version but absent from the manifest")
    return problems


# -------------------------------------------------------------------------------------------- CLI
def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos golden``."""
    sub = parser.add_subparsers(dest="golden_command", required=True, metavar="ACTION")
    gen = sub.add_parser("generate", help="write every golden case (deterministic)")
    gen.add_argument("--out", type=Path, default=None, help="directory (default: the repository's golden/)")
    gen.add_argument("--no-certify", action="store_true", help="skip the mpmath certification")
    ver = sub.add_parser("verify", help="check sha256s, regenerate and compare every case")
    ver.add_argument("--golden-dir", type=Path, default=None)
    ver.add_argument("--certify", action="store_true", help="also re-check every certificate with mpmath")
    mod = sub.add_parser("model", help="the per-model RoPE case set for any config.json")
    mod.add_argument("config", type=Path, help="config.json (or its directory)")
    mod.add_argument("--out", type=Path, required=True)
    mod.add_argument("--positions", default=None, help="comma-separated positions, or a .npy file of int positions")
    mod.add_argument("--seq-len", type=int, default=None, help="default: max(positions) + 1 (HF)")
    mod.add_argument("--name", default=None, help="model name in case ids (default: the config's directory)")
    mod.add_argument("--no-certify", action="store_true")
    lst = sub.add_parser("list", help="list the cases of a golden directory")
    lst.add_argument("--golden-dir", type=Path, default=None)
    lst.add_argument("--family", default=None)


def _parse_positions(text: str | None) -> list[int] | None:
    if text is None:
        return None
    if text.endswith(".npy"):
        a = read_npy(text)
        if a.dtype.kind not in "iu" or a.ndim != 1:
            raise ValueError(f"--positions {text}: need a 1-D integer array, got {a.dtype}{list(a.shape)}")
        values = [int(v) for v in a]
    else:
        try:
            values = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"--positions must be comma-separated integers or a .npy file, got {text!r}") from None
    if not values or min(values) < 0:
        raise ValueError("--positions must hold at least one position, all >= 0")
    return values


def run(args: argparse.Namespace) -> int:
    """``refpos golden …``: exit 0 on success, 1 on a verification failure, 2 on unusable input."""
    try:
        return _run(args)
    except ImportError as exc:  # mpmath is a test extra: the generator and the certificates need it
        print(f"refpos golden {args.golden_command}: error: {exc} (install the test extra: pip install "
              "'refpos[test]')", file=sys.stderr)
        return 2
    except (GoldenError, ValueError, TypeError, KeyError, OSError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"refpos golden {args.golden_command}: error: {msg}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.golden_command == "generate":
        out = args.out or default_golden_dir()
        start = time.perf_counter()
        entries = generate(out, certify=not args.no_certify)
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        print(f"refpos golden generate: {len(entries)} cases in {out} ({size / 1e6:.2f} MB, "
              f"{time.perf_counter() - start:.1f} s)")
        return 0
    if args.golden_command == "verify":
        root = args.golden_dir or default_golden_dir()
        start = time.perf_counter()
        problems = verify(root, certify=args.certify)
        for p in problems:
            print(f"MISMATCH {p}")
        n = len(load_manifest(root)["cases"])
        status = "FAILED" if problems else "ok"
        print(f"refpos golden verify: {n} cases, {len(problems)} problems: {status} "
              f"({time.perf_counter() - start:.1f} s)")
        return 1 if problems else 0
    if args.golden_command == "model":
        config = load_hf_config(args.config)
        from refpos.golden.rope_cases import model_cases

        name = args.name or (args.config.name if args.config.is_dir() else args.config.parent.name or args.config.stem)
        positions = _parse_positions(args.positions)
        cases = model_cases(config, name, positions=None if positions is None else np.asarray(positions),
                            seq_len=args.seq_len)
        entries = _write(args.out, cases, _model_source(config, name, positions, args.seq_len),
                         certify=not args.no_certify, title=f"refpos golden RoPE cases for {name}")
        print(f"refpos golden model: {len(entries)} cases for {name} in {args.out}")
        for e in entries:
            print(f"  {e['id']}")
        return 0
    root = args.golden_dir or default_golden_dir()
    for case in load_manifest(root)["cases"]:
        if args.family and case["family"] != args.family:
            continue
        ulps = case.get("certified_max_error_ulps")
        print(f"{case['id']:<70} {case.get('function') or '-':<18} "
              f"{'' if ulps is None else f'certified {ulps:g} ulps'}")
    return 0
