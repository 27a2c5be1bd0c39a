"""``refpos check``: compare a candidate ``.npy`` with the reference and name the mistake it matches."""

from __future__ import annotations

import argparse
import builtins
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from refpos.check.case import check_case
from refpos.check.shared.arrays import Unusable, default_dtype
from refpos.check.shared.request import Request
from refpos.check.targets import TARGETS, target_of
from refpos.cli import check_config
from refpos.cli.options import BASE, EVEN_WIDTH, LENGTH, MAX_WIDTH, SEQ_LEN, WIDTH, Number, help_with, require
from refpos.cli.progress import ProgressBar
from refpos.encodings.alibi import FORMS
from refpos.encodings.deberta import deberta_attention_span
from refpos.encodings.sinusoidal import LAYOUTS, SPACINGS
from refpos.encodings.t5 import check_bucket_args
from refpos.golden.files.npy import read_npy
from refpos.golden.files.npy_file import open_npy
from refpos.outputs import check_output
from refpos.tools.figures import FORMATS
from refpos.validation import printable


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos check``."""
    parser.add_argument("target", help=f"{', '.join(TARGETS)} (refpos.check.targets), or a golden case id")
    parser.add_argument("candidate_file", nargs="?", default=None, help="candidate .npy (golden case form)")
    parser.add_argument("--candidate", default=None, help="the candidate output (.npy)")
    parser.add_argument("--dtype", default=None, help="dtype the candidate computed in (default: from the file)")
    parser.add_argument("--json", action="store_true", help='print {"ok": ..., "diagnosis": [...]}')
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr (none when not a terminal)")
    parser.add_argument("--config", help="the model's config.json: the check's parameters from its layer")
    parser.add_argument("--layer-type", default=None, help="rope: layer type of a per-layer config")
    parser.add_argument("--strict", action="store_true",
                        help="rope: unusable (exit 2) when the config asks for something refpos does not model")
    parser.add_argument("--input", help="rope: the input x (..., T, head_dim) (.npy)")
    parser.add_argument("--positions", help="rope, sinusoid: integer positions (.npy)")
    parser.add_argument("--seq-len", type=SEQ_LEN, default=None,
                        help=help_with(SEQ_LEN, "rope: L (default max(positions) + 1)"))
    parser.add_argument("--heads", type=WIDTH, help=help_with(WIDTH, "alibi: number of heads"))
    parser.add_argument("--q-len", type=LENGTH, default=None,
                        help=help_with(LENGTH, "alibi, t5, deberta: queries, the last q_len of the k_len keys"))
    parser.add_argument("--k-len", type=LENGTH, default=None, help=help_with(LENGTH, "alibi, t5, deberta: keys"))
    parser.add_argument("--form", default="causal", choices=FORMS, help="alibi (default causal)")
    parser.add_argument("--head-dim", type=WIDTH, default=None,
                        help=help_with(WIDTH, "alibi: head size (tests the 1/√d mistake)"))
    parser.add_argument("--relative", help="t5: relative positions memory − query; deberta: query − key (.npy)")
    parser.add_argument("--causal", action="store_true", help="t5: decoder (unidirectional) buckets")
    parser.add_argument("--num-buckets", type=BUCKETS, default=32, help=help_with(BUCKETS, "t5 (default 32)"))
    parser.add_argument("--max-distance", type=LENGTH, default=128, help=help_with(LENGTH, "t5 (default 128)"))
    parser.add_argument("--position-buckets", type=BUCKETS, default=None,
                        help=help_with(BUCKETS, "deberta: the config's position_buckets"))
    parser.add_argument("--max-relative-positions", type=LENGTH, default=None,
                        help=help_with(LENGTH, "deberta: the config's max_relative_positions (resolved, >= 1)"))
    parser.add_argument("--dim", type=EVEN_WIDTH, help=help_with(EVEN_WIDTH, "sinusoid: width"))
    parser.add_argument("--length", type=LENGTH, help=help_with(LENGTH, "sinusoid: positions 0 … length − 1"))
    parser.add_argument("--base", type=BASE, default=10000.0, help=help_with(BASE, "sinusoid (default 10000)"))
    parser.add_argument("--layout", default="interleaved", choices=LAYOUTS, help="sinusoid (default interleaved)")
    parser.add_argument("--spacing", default="paper", choices=SPACINGS, help="sinusoid (default paper)")
    parser.add_argument("--call", default=None,
                        help="the vision and audio kinds: the JSON call file naming the contract function and its "
                             "arguments (docs/diagnosis.md#the-catalogue-vision-and-audio-kinds)")
    parser.add_argument("--output", default=None, help="golden case: which output (default: the primary)")
    parser.add_argument("--golden-dir", type=Path, default=None)
    check_config.configure(parser)
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw the fit (fitted against reference frequency per pair; ALiBi: slope per head) "
                             "into this .svg or .png file (a new file; never through a symlink)")
    parser.add_argument("--force", action="store_true", help="with --plot: replace an existing file")
    require(parser, _options_agree)


#: T5 bucket counts (the bidirectional ones must be even and at least 4: checked with --max-distance)
BUCKETS = Number(int, minimum=2, maximum=MAX_WIDTH)


def _options_agree(args: argparse.Namespace) -> str | None:
    """The options of one target that must agree: one form of each input, ``--q-len <= --k-len``, T5's
    bucket arguments."""
    if args.plot is not None and args.plot.suffix.lower() not in FORMATS:
        return f"--plot must name a .svg or .png file, got {str(args.plot)!r}"
    lengths = args.q_len is not None or args.k_len is not None
    for what, conflict in (
            ("CANDIDATE_FILE and --candidate", args.candidate_file is not None and args.candidate is not None),
            ("t5/deberta: --relative and --q-len/--k-len", args.target in ("t5", "deberta") and bool(args.relative)
             and lengths),
            ("sinusoid: --positions and --length", args.target == "sinusoid" and bool(args.positions)
             and args.length is not None)):
        if conflict:
            return f"{what} both given: give one"
    t5_lengths = args.target in ("t5", "deberta") and not args.relative
    if (args.target == "alibi" or t5_lengths) and args.q_len is not None and args.k_len is not None \
            and args.q_len > args.k_len:
        return (f"--q-len {args.q_len} > --k-len {args.k_len}: the queries are the last q_len of the k_len keys "
                "(query i at position k_len − q_len + i), so --q-len must be <= --k-len")
    if args.target == "t5":
        try:
            check_bucket_args(not args.causal, args.num_buckets, args.max_distance)
        except ValueError as exc:
            return f"--num-buckets {args.num_buckets} --max-distance {args.max_distance}" + \
                (" --causal" if args.causal else "") + f": {exc}"
    if args.target == "deberta" and args.position_buckets is not None and args.max_relative_positions is not None:
        try:
            deberta_attention_span(args.position_buckets, args.max_relative_positions)
        except ValueError as exc:
            return f"--position-buckets {args.position_buckets} --max-relative-positions " \
                f"{args.max_relative_positions}: {exc}"
    return None


def _candidate(args: argparse.Namespace, streamed: bool) -> Any:
    """The candidate file, read by the strict reader; ``streamed``: its header checked and the data left in the
    file, read block by block by the check with explicit reads (:func:`refpos.golden.files.npy_file.open_npy`: a
    file truncated meanwhile is an error line, where a memory map would die by SIGBUS)."""
    path = args.candidate or args.candidate_file
    if path is None:
        raise Unusable(f"refpos check {args.target} needs --candidate Y.npy")
    candidate = open_npy(path) if streamed else read_npy(path)
    if candidate.size == 0:  # every comparison of nothing passes
        raise Unusable(f"the candidate {path} holds no elements (shape {tuple(candidate.shape)}): nothing to check")
    return candidate


def _dispatch(args: argparse.Namespace) -> dict[str, Any]:
    """The target's run (:data:`refpos.check.targets.TARGETS`) on the candidate, the options and, with
    ``--config``, the model's layer; a word that is not a target is a golden case id."""
    target = target_of(args.target)
    candidate = _candidate(args, streamed=target is not None and target.streamed)
    if target is None:
        return check_case(args.target, candidate, golden_dir=args.golden_dir, output=args.output, dtype=args.dtype)
    if args.config and "--config" not in target.flags:
        raise Unusable(f"refpos check {target.name} does not read --config: it takes {', '.join(target.flags)}")
    layer = check_config.layer_of(args, target.name) if args.config else None
    request = Request(target.name, candidate, args.dtype or default_dtype(candidate), vars(args), layer)
    with ProgressBar(f"refpos check {target.name}", quiet=args.quiet) as progress:
        request.progress = progress
        return target.run(request)


def _print(result: dict[str, Any]) -> None:
    from refpos.check.report import report_lines

    def print(line: str) -> None:  # a case id, a config key: strings refpos did not write are shown escaped
        builtins.print(printable(line))

    status = "OK" if result["ok"] else "FAIL"
    where = result.get("worst_index")
    print(f"refpos check {result['target']}: {status} ({result['dtype']}): max |candidate − reference| = "
          f"{result['max_abs_error']:.3g}, {result['max_ratio']:.3g}× the tolerance"
          + (f" at index {tuple(where)}" if where and not result["ok"] else "")
          + ("" if result["ok"] else f"; {result.get('n_outside', 0)} elements outside"))
    if not result["ok"]:
        for line in report_lines(result):
            print(f"  {line}")
    for d in result["diagnosis"]:
        print(f"  diagnosis {d['id']}: {d['evidence']}")
    if not result["ok"] and not any(d["id"] != "error_profile" for d in result["diagnosis"]):
        print("  no known mistake of the catalogue matches (docs/diagnosis.md)")
    for key, why in sorted(result.get("not_modelled", {}).items()):
        print(f"  not modelled: {key}: {why}")
    if "golden_note" in result:
        print(f"  golden: {result['golden_note']}")


def _finite_json(value: Any) -> Any:
    """Strict JSON: non-finite numbers as the strings "inf", "-inf", "nan"."""
    if isinstance(value, dict):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_json(v) for v in value]
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if np.isfinite(v) else ("nan" if v != v else ("inf" if v > 0 else "-inf"))
    if isinstance(value, np.integer):
        return int(value)
    return value


def run(args: argparse.Namespace) -> int:
    """``refpos check``: 0 within tolerance, 1 outside, 2 unusable input (one line, never a traceback)."""
    from refpos.golden.files.manifest import GoldenError

    try:
        if args.plot is not None:  # refused before the check, not after it
            check_output(args.plot, force=args.force)
        result = _dispatch(args)
        if result.get("n_nan"):  # the largest error is NaN where the candidate has a NaN (not inf)
            result["max_abs_error"] = float("nan")
    except (Unusable, GoldenError, ValueError, TypeError, KeyError, OSError, IndexError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(printable(f"refpos check {args.target}: error: {msg}"), file=sys.stderr)
        return 2
    if args.plot is not None:
        from refpos.tools.plots_fit import draw_identification

        draw_identification(result, args.plot, force=args.force)  # refused, or no matplotlib: exit 2 in refpos.cli
    if args.json:
        print(json.dumps(_finite_json(result)))
    else:
        _print(result)
    return 0 if result["ok"] else 1
