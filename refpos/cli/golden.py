"""``refpos golden``: generate, verify, list and show golden directories; golden cases for any config.json."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from refpos.bounds import parse_int, shown_text
from refpos.cli import golden_show
from refpos.cli.options import LENGTH, MAX_POSITION, POSITION, SEQ_LEN, help_with
from refpos.cli.positions import add_assume, assumptions, refuse_unknown, resolve
from refpos.golden.cases.rope import slug
from refpos.golden.files.manifest import GoldenError, default_golden_dir, load_manifest, write_cases
from refpos.golden.files.npy import read_npy
from refpos.golden.generate import finite_cases, generate, model_source, verify
from refpos.installed import BUNDLED
from refpos.models.hf import load_hf_config
from refpos.models.releases import parse_version
from refpos.validation import printable

FORCE_HELP = "replace the goldens of another model (or of another golden command) already in --out"


def model_name(config: dict, path: Path) -> str:
    """The name a model's cases are filed under: the config's ``_name_or_path`` (the hub id it was saved
    from, e.g. ``meta-llama/Llama-3.1-8B``), else its first ``architectures`` entry, else the name of the
    directory holding the config (the file's own name, ``config.json``, names no model)."""
    for value in (config.get("_name_or_path"), (config.get("architectures") or [None])[0]
                  if isinstance(config.get("architectures"), list) else None):
        if isinstance(value, str) and slug(value):
            return value
    directory = path if path.is_dir() else path.parent
    return Path(os.path.abspath(directory)).name or "model"


def checked_name(name: str, flag: str) -> str:
    """``name`` if its case names (:func:`refpos.golden.cases.rope.slug`) are directory names; else
    ``ValueError`` naming ``flag``."""
    file_name = slug(name)
    if not file_name or set(file_name) <= {"."}:
        raise ValueError(f"{flag} {name!r} gives the case directory name {file_name!r}, which names no directory: "
                         "use letters, digits, '.', '_' or '-', not only dots")
    return name


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos golden``."""
    sub = parser.add_subparsers(dest="golden_command", required=True, metavar="ACTION")
    gen = sub.add_parser("generate", help="write every golden case (deterministic)")
    gen.add_argument("--out", type=Path, default=None, help="directory (default: the repository's golden/)")
    gen.add_argument("--no-certify", action="store_true", help="skip the mpmath certification")
    gen.add_argument("--force", action="store_true", help=FORCE_HELP)
    ver = sub.add_parser("verify", help="check sha256s, regenerate and compare every case")
    ver.add_argument("--golden-dir", type=Path, default=None)
    ver.add_argument("--certify", action="store_true", help="also re-check every certificate with mpmath")
    mod = sub.add_parser("model", help="the per-model case set for any config.json: every layer kind it has")
    mod.add_argument("config", type=Path, help="config.json (or its directory)")
    mod.add_argument("--out", type=Path, required=True)
    mod.add_argument("--positions", default=None, help="comma-separated positions, or a .npy file of int positions")
    mod.add_argument("--seq-len", type=SEQ_LEN, default=None,
                     help=help_with(SEQ_LEN, "default: max(positions) + 1 (HF)"))
    mod.add_argument("--max-position", type=LENGTH, default=None,
                     help=help_with(LENGTH, "probe positions below this instead of the config's declared length "
                                    "(e.g. 1048576)"))
    mod.add_argument("--name", default=None, help="model name in case ids (default: the config's _name_or_path, "
                     "else its architectures, else the name of the directory holding it)")
    mod.add_argument("--no-certify", action="store_true")
    mod.add_argument("--force", action="store_true", help=FORCE_HELP)
    mod.add_argument("--strict", action="store_true",
                     help="fail when a key that changes positions or attention is not modelled")
    add_assume(mod)
    lst = sub.add_parser("list", help="list the cases of a golden directory")
    lst.add_argument("--golden-dir", type=Path, default=None)
    lst.add_argument("--family", default=None)
    golden_show.add_parser(sub)


def _parse_positions(text: str | None) -> list[int] | None:
    if text is None:
        return None
    if text.endswith(".npy"):
        a = read_npy(text)
        if a.dtype.kind not in "iu" or a.ndim != 1:
            raise ValueError(f"--positions {text}: need a 1-D integer array, got {a.dtype}{list(a.shape)}")
        values = [int(v) for v in a]
    else:
        values = []
        for item in text.split(","):  # every item an integer: an empty one (1,,2) is a typo, not nothing
            try:
                values.append(parse_int(item.strip(" ")))
            except ValueError:
                raise ValueError(f"--positions must be comma-separated integers in ASCII digits, or a .npy file; "
                                 f"item {len(values) + 1} of {shown_text(text)} is {shown_text(item)}") from None
    if not values or min(values) < 0 or max(values) > MAX_POSITION:
        raise ValueError(f"--positions must hold at least one position, all >= 0 and <= 2**53 ({POSITION.why})")
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
        print(f"refpos golden {args.golden_command}: error: {printable(msg)}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.golden_command == "show":
        return golden_show.run(args)
    if args.golden_command == "generate":
        if args.out is None and default_golden_dir().parent == BUNDLED:
            raise ValueError("--out DIR is needed: the goldens installed with refpos are its own reference copy")
        out = args.out or default_golden_dir()
        start = time.perf_counter()
        entries = generate(out, certify=not args.no_certify, force=args.force)
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        print(f"refpos golden generate: {len(entries)} cases in {out} ({size / 1e6:.2f} MB, "
              f"{time.perf_counter() - start:.1f} s)")
        return 0
    if args.golden_command == "verify":
        root = args.golden_dir or default_golden_dir()
        start = time.perf_counter()
        problems = verify(root, certify=args.certify)
        for p in problems:
            print(f"MISMATCH {printable(p)}")
        n = len(load_manifest(root)["cases"])
        status = "FAILED" if problems else "ok"
        print(f"refpos golden verify: {n} cases, {len(problems)} problems: {status} "
              f"({time.perf_counter() - start:.1f} s)")
        return 1 if problems else 0
    if args.golden_command == "model":
        config = load_hf_config(args.config)
        if args.transformers_version is not None:  # the release the model runs, over the config's own key
            parse_version("--transformers-version", args.transformers_version)
            config = {**config, "transformers_version": args.transformers_version}
        from refpos.golden.cases.rope import model_cases, model_report

        name = checked_name(args.name, "--name") if args.name is not None else checked_name(
            model_name(config, args.config), "the model name")
        positions = _parse_positions(args.positions)
        assume = assumptions(args)
        resolved = resolve(config, args)
        refuse_unknown(resolved, "refpos golden model")
        report = model_report(config, assume)
        if args.strict and report:
            raise ValueError(f"strict: not modelled: {sorted(report)} (without --strict the cases are written "
                             "and the gaps listed)")
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by finite_cases, not warned
            cases = finite_cases(model_cases(config, name, positions=None if positions is None else
                                             np.asarray(positions), seq_len=args.seq_len,
                                             max_position=args.max_position, assume=assume))
        from refpos.golden.cases.model_kind_cases import kind_reasons

        no_case = kind_reasons(resolved)  # vision and audio layers without a contract call, and why
        if not cases:
            kinds = ", ".join(dict.fromkeys(layer.label for layer in resolved)) or "none"
            gaps = "".join(f"; {k}: {v}" for k, v in sorted({**report, **no_case}.items()))
            raise ValueError(f"{args.config}: no layer of this model has positions refpos writes goldens for (its "
                             f"layers: {kinds}{gaps})")
        source = {**model_source(config, name, positions, args.seq_len, args.max_position, assume),
                  "not_modelled": report, **({"no_case": no_case} if no_case else {})}
        entries = write_cases(args.out, cases, title=f"refpos golden cases for {name}",
                              certify=not args.no_certify, source=source, force=args.force)
        print(f"refpos golden model: {len(entries)} cases for {name} in {args.out}")
        for e in entries:
            print(f"  {printable(e['id'])}")
        print("complete: yes" if not report else f"complete: NO, {len(report)} not modelled (also in the manifest's "
              "source):")
        for key, why in sorted(report.items()):
            print(f"  {printable(key)}: {printable(why)}")
        if no_case:
            print(f"layers without a case ({len(no_case)}, also in the manifest's source):")
            for key, why in sorted(no_case.items()):
                print(f"  {printable(key)}: {printable(why)}")
        return 0
    root = args.golden_dir or default_golden_dir()
    certified = False
    for case in load_manifest(root)["cases"]:
        if args.family and case["family"] != args.family:
            continue
        certified |= case.get("certified_max_error_ulps") is not None
        line = f"{printable(case['id']):<70} {printable(case.get('function') or '-'):<18} {certification(case)}"
        print(line.rstrip())
    if certified:
        print(CERTIFIED)
    return 0


#: what a case's "certified … ulps" means, printed under the list
CERTIFIED = ("certified N ulps: the largest distance of a stored value from its exact value (mpmath, 30 digits),\n"
             "  in ulps of the value's size. A value computed from an angle p·ω inherits the float64 rounding of\n"
             "  that angle, up to about |p·ω|·2⁻⁵³ (1.5e-11 at p = 131071, ω = 1): 10⁴–10⁵ ulps of a value near 1,\n"
             "  and within the float64 tolerance (refpos golden show CASE prints it).")


def certification(case: dict[str, Any]) -> str:
    """``certified N ulps (|err| E, within tolerance)`` for a case of the manifest, ``""`` when not certified."""
    ulps = case.get("certified_max_error_ulps")
    if ulps is None:
        return ""
    entries = [o.get("certified") for o in case.get("outputs", {}).values() if o.get("certified")]
    largest = max((float(e.get("max_abs_error", 0.0)) for e in entries), default=0.0)
    within = [e.get("within_float64_tolerance") for e in entries]
    verdict = "within tolerance" if all(w is not False for w in within) else "OUTSIDE the float64 tolerance"
    return f"certified {ulps:g} ulps (|err| {largest:.2g}, {verdict})"
