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
from refpos.check.run import (
    Unusable,
    check_alibi,
    check_deberta,
    check_rope,
    check_sinusoid,
    check_t5,
    default_dtype,
    same_shape,
)
from refpos.check.tables_stream import relative_grid
from refpos.cli import check_config
from refpos.cli.options import BASE, EVEN_WIDTH, LENGTH, MAX_WIDTH, SEQ_LEN, WIDTH, Number, help_with, require
from refpos.cli.progress import ProgressBar
from refpos.encodings.alibi import FORMS
from refpos.encodings.deberta import deberta_attention_span
from refpos.encodings.sinusoidal import LAYOUTS, SPACINGS
from refpos.encodings.t5 import check_bucket_args
from refpos.golden.npy import read_npy
from refpos.golden.npy_file import open_npy
from refpos.outputs import check_output
from refpos.tools.figures import FORMATS
from refpos.validation import printable


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos check``."""
    parser.add_argument("target", help="rope, alibi, t5, deberta, sinusoid, learned (with --config), or a golden "
                                       "case id")
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


#: targets whose candidate is read block by block (refpos.check.stream, refpos.golden.npy_file)
_STREAMED = ("rope", "alibi", "t5", "deberta", "sinusoid")


def _need(value: Any, flag: str, target: str) -> Any:
    if value is None:
        raise Unusable(f"refpos check {target} needs {flag}")
    return value


def _load(path: str | None, flag: str, target: str, *, blocks: bool = False) -> Any:
    """The strict reader; ``blocks``: the header checked and the data left in the file, read block by block by
    the check with explicit reads (:func:`refpos.golden.npy_file.open_npy`: a file truncated meanwhile is an
    error line, where a memory map would die by SIGBUS)."""
    path = _need(path, flag, target)
    return open_npy(path) if blocks else read_npy(path)


def _rope_config(args: argparse.Namespace) -> Any:
    _need(args.config, "--config CONFIG.json", "rope")
    return check_config.rope_of(args)[0]


def _relative(args: argparse.Namespace, candidate: Any, target: str, *, query_minus_key: bool = False) -> Any:
    """The relative positions of a bucket check: ``--relative`` (read block by block), or the grid of
    ``--q-len × --k-len`` as a view of one line of ``Tq + Tk − 1`` values."""
    if args.relative:
        return open_npy(args.relative)
    q_len = _need(args.q_len, "--relative REL.npy or --q-len", target)
    k_len = _need(args.k_len, "--k-len", target)
    same_shape(candidate, (q_len, k_len), "--q-len × --k-len buckets")  # before building (Tq, Tk)
    return relative_grid(q_len, k_len, query_minus_key=query_minus_key)


def _dispatch(args: argparse.Namespace) -> dict[str, Any]:
    target = args.target
    cand_path = args.candidate or args.candidate_file
    candidate = _load(cand_path, "--candidate Y.npy", target, blocks=target in _STREAMED)
    if candidate.size == 0:  # every comparison of nothing passes
        raise Unusable(f"the candidate {cand_path} holds no elements (shape {tuple(candidate.shape)}): nothing "
                       "to check")
    dtype = args.dtype or default_dtype(candidate)
    if args.config and target in check_config.TARGET_KINDS and target != "rope":
        with ProgressBar(f"refpos check {target}", quiet=args.quiet) as progress:
            return check_config.check_layer(args, target, candidate, dtype, progress)
    if target == "rope":
        rope = _rope_config(args)
        if args.strict and rope.not_modelled:
            raise Unusable(f"--strict: not modelled: {sorted(rope.not_modelled)}")
        x = _load(args.input, "--input X.npy", target, blocks=True)
        positions = _load(args.positions, "--positions P.npy", target)
        with ProgressBar(f"refpos check {target}", quiet=args.quiet) as progress:
            result = check_rope(candidate, x, positions, rope, seq_len=args.seq_len, dtype=dtype, progress=progress)
        return {**result, "not_modelled": dict(rope.not_modelled)}
    if target == "alibi":
        with ProgressBar(f"refpos check {target}", quiet=args.quiet) as progress:
            return check_alibi(candidate, _need(args.heads, "--heads N", target), q_len=args.q_len, k_len=args.k_len,
                               form=args.form, dtype=dtype, head_dim=args.head_dim, progress=progress)
    if target == "t5":
        rel = _relative(args, candidate, target)
        with ProgressBar(f"refpos check {target}", quiet=args.quiet) as progress:
            return check_t5(candidate, rel, bidirectional=not args.causal, num_buckets=args.num_buckets,
                            max_distance=args.max_distance, progress=progress)
    if target == "deberta":
        rel = _relative(args, candidate, target, query_minus_key=True)  # δ = query − key
        with ProgressBar(f"refpos check {target}", quiet=args.quiet) as progress:
            return check_deberta(candidate, rel, position_buckets=_need(args.position_buckets, "--position-buckets",
                                                                        target),
                                 max_relative_positions=_need(args.max_relative_positions,
                                                              "--max-relative-positions", target), progress=progress)
    if target == "sinusoid":
        if args.positions:
            positions = read_npy(args.positions)
        else:
            length = _need(args.length, "--positions or --length", target)
            same_shape(candidate, (length, _need(args.dim, "--dim D", target)), "--length × --dim")  # before arange
            positions = np.arange(length)
        with ProgressBar(f"refpos check {target}", quiet=args.quiet) as progress:
            return check_sinusoid(candidate, positions, dim=_need(args.dim, "--dim D", target), base=args.base,
                                  layout=args.layout, spacing=args.spacing, dtype=dtype, progress=progress)
    return check_case(target, candidate, golden_dir=args.golden_dir, output=args.output, dtype=args.dtype)


def _print(result: dict[str, Any]) -> None:
    from refpos.check.identify_text import report_lines

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
    from refpos.golden.manifest import GoldenError

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
