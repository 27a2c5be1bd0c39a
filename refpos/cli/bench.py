"""``refpos bench``: time refpos beside the machine's floors (and torch, when installed)."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform

import numpy as np

from refpos.backend import get_xp
from refpos.cli.options import BENCH_LENGTH, COUNT, GIB, WIDTH, Number, help_with, memory_bytes, require
from refpos.parallel import num_threads
from refpos.tools.bench import (
    SUITES,
    Record,
    bench_attention,
    bench_floors,
    bench_golden,
    bench_pipeline,
    format_bytes,
)
from refpos.tools.bench_rope import bench_rope
from refpos.tools.measure import (
    torch_module,
)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", choices=SUITES, help="what to measure")
    parser.add_argument("--backend", default=None, help="numpy (default), cupy or array_api_strict")
    parser.add_argument("--sizes", type=BENCH_LENGTH, nargs="+", default=None,
                        help=help_with(BENCH_LENGTH, "sequence lengths T"))
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    parser.add_argument("--heads", type=WIDTH, default=1, help=help_with(WIDTH, "attention heads (attention suite)"))
    parser.add_argument("--head-dim", type=WIDTH, default=64, help=help_with(WIDTH, "head size (attention suite)"))
    parser.add_argument("--chunk-size", type=BENCH_LENGTH, default=1024,
                        help=help_with(BENCH_LENGTH, "chunked_attention block size"))
    parser.add_argument("--causal", action="store_true", help="causal attention")
    parser.add_argument("--full-limit-gib", type=GIB, default=8.0,
                        help=help_with(GIB, "skip the matmul floor where its T×T probabilities would exceed this"))
    parser.add_argument("--shape", type=SHAPE_DIM, nargs=4, default=[1, 32, 4096, 128], metavar=("B", "H", "T", "D"),
                        help=help_with(SHAPE_DIM, "x for the rope suite (D even)"))
    parser.add_argument("--layouts", nargs="+", default=["half", "interleaved"],
                        choices=["half", "interleaved", "deinterleaved"], help="rope suite layouts")
    parser.add_argument("--rotary-dims", type=SHAPE_DIM, nargs="+", default=None, metavar="d",
                        help=help_with(SHAPE_DIM, "rope suite: rotated channels, even and at most D (default: D and "
                                                  "D/2, the rest passed through)"))
    parser.add_argument("--check-heads", type=COUNT, nargs="+", default=None, metavar="H",
                        help=help_with(COUNT, "check suite: candidates of (H, 131072, 128) float32 "
                                       "(default 1 4 16 32: 64 MiB to 2 GiB)"))
    parser.add_argument("--rounds", type=COUNT, default=2, help=help_with(COUNT, "check suite: alternating rounds "
                                                                                 "per size"))
    parser.add_argument("--dir", default=None, help="check suite: where the .npy files go (default: the temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    require(parser, _fits_in_memory)


#: one dimension of the rope suite's x (B, H, T, D)
SHAPE_DIM = Number(int, minimum=1, maximum=2**24)


def _fits_in_memory(args: argparse.Namespace) -> str | None:
    """A refusal when the arrays a suite allocates, counted from below, exceed the machine's memory.

    attention: q, k, v and the output ``(1, H, T, D)`` per size, and the two ``(1, H, T, T)`` arrays of the
    matmul floor where ``--full-limit-gib`` lets it run; rope: x, its rotation and the copy floor
    ``(B, H, T, D)``; pipeline: the scores, logits and weights ``(8, T, T)`` the layer's trace keeps.
    """
    item = max(np.dtype(d).itemsize for d in args.dtypes)
    if args.suite == "attention":
        sizes, heads, dim = args.sizes or [16384], args.heads, args.head_dim
        need = max(4 * heads * t * dim * item + (2 * heads * t * t * item if heads * t * t * item
                                                  <= args.full_limit_gib * 2**30 else 0) for t in sizes)
        return memory_bytes("q, k, v and the output", need, f"--sizes {max(sizes)} --heads {heads} --head-dim {dim}")
    if args.suite == "rope":
        if args.shape[3] % 2:
            return f"--shape: D = {args.shape[3]} must be even (rotation pairs)"
        for d in args.rotary_dims or []:
            if d % 2 or d > args.shape[3]:
                return f"--rotary-dims: {d} must be even and at most D = {args.shape[3]}"
        return memory_bytes("x, its rotation and a copy", 3 * math.prod(args.shape) * item,
                            "--shape " + " ".join(str(n) for n in args.shape))
    if args.suite == "pipeline":
        t = max(args.sizes or [2048])
        return memory_bytes("attention scores, logits and weights", 3 * 8 * t * t * item, f"--sizes {t}")
    return None


def run(args: argparse.Namespace) -> int:
    xp = get_xp(args.backend)
    if args.suite == "floors":
        records = bench_floors(xp, args.dtypes)
    elif args.suite == "attention":
        records = bench_attention(xp, args.sizes or [1024, 2048, 4096, 8192, 16384], args.dtypes, args.heads,
                                  args.head_dim, args.chunk_size, args.causal, args.full_limit_gib)
    elif args.suite == "rope":
        records = bench_rope(xp, args.dtypes, tuple(args.shape), args.layouts, args.rotary_dims)
    elif args.suite == "golden":
        records = bench_golden(None)
    elif args.suite == "check":
        records = _bench_check(args)
    else:
        records = bench_pipeline(xp, args.sizes or [512, 2048], args.dtypes)
    meta = {"machine": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "backend": xp.__name__, "refpos_threads": num_threads()}
    torch = torch_module()
    if torch is not None:
        meta["torch"] = torch.__version__
        meta["torch_threads"] = torch.get_num_threads()
    if args.json:
        print(json.dumps({"meta": meta, "records": records}, indent=1))
    else:
        print(" ".join(f"{k}={v}" for k, v in meta.items()))
        for rec in records:
            print(format_record(rec))
    return 0


def _bench_check(args: argparse.Namespace) -> list[Record]:
    """``refpos bench check``: refuses to start when the largest pair of files would not fit on the disk."""
    import sys

    from refpos.tools.bench_check import DEFAULT_HEADS, bench_check, disk_free, needed_bytes

    heads = tuple(args.check_heads or DEFAULT_HEADS)  # each >= 1 (the option's type)
    need, free = needed_bytes(heads), disk_free(args.dir)
    if need > free:
        raise ValueError(f"the check suite writes {format_bytes(need)} at a time, {format_bytes(free)} are free")
    return bench_check(heads, rounds=args.rounds, directory=args.dir,
                       progress=lambda line: print(f"refpos bench check: {line}", file=sys.stderr, flush=True))


def format_record(rec: Record) -> str:
    parts = []
    for key, value in rec.items():
        if key.endswith("_bytes"):
            parts.append(f"{key[:-6]}={format_bytes(value)}")
        elif key.endswith("_s"):
            parts.append(f"{key}={value * 1e3:.2f}ms")
        elif key.endswith("_tflops"):
            parts.append(f"{key}={value:.3f}")
        elif key.endswith("_gbs"):
            parts.append(f"{key}={value:.1f}")
        elif key.startswith("load_"):  # the machine's load average, not a ratio
            parts.append(f"{key}={value if value is None else round(value, 2)}")
        elif isinstance(value, float):
            parts.append(f"{key}={value:.2f}x")
        elif key not in ("suite", "backend"):
            parts.append(f"{key}={value}")
    return f"[{rec['suite']}] " + " ".join(parts)
