"""``refpos bench``: time refpos beside the machine's floors (and torch, when installed)."""

from __future__ import annotations

import argparse
import json
import os
import platform

import numpy as np

from refpos.backend import get_xp
from refpos.parallel import num_threads
from refpos.tools.bench import (
    SUITES,
    Record,
    bench_attention,
    bench_floors,
    bench_golden,
    bench_pipeline,
    bench_rope,
    format_bytes,
)
from refpos.tools.measure import (
    torch_module,
)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", choices=SUITES, help="what to measure")
    parser.add_argument("--backend", default=None, help="numpy (default), cupy or array_api_strict")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="sequence lengths T")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    parser.add_argument("--heads", type=int, default=1, help="attention heads (attention suite)")
    parser.add_argument("--head-dim", type=int, default=64, help="head size (attention suite)")
    parser.add_argument("--chunk-size", type=int, default=1024, help="chunked_attention block size")
    parser.add_argument("--causal", action="store_true", help="causal attention")
    parser.add_argument("--full-limit-gib", type=float, default=8.0,
                        help="skip the matmul floor where its T×T probabilities would exceed this")
    parser.add_argument("--shape", type=int, nargs=4, default=[1, 32, 4096, 128], metavar=("B", "H", "T", "D"),
                        help="x for the rope suite")
    parser.add_argument("--layouts", nargs="+", default=["half", "interleaved"],
                        choices=["half", "interleaved", "deinterleaved"], help="rope suite layouts")
    parser.add_argument("--check-heads", type=int, nargs="+", default=None, metavar="H",
                        help="check suite: candidates of (H, 131072, 128) float32 (default 1 4 16 32: 64 MiB to 2 GiB)")
    parser.add_argument("--rounds", type=int, default=2, help="check suite: alternating rounds per size")
    parser.add_argument("--dir", default=None, help="check suite: where the .npy files go (default: the temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def run(args: argparse.Namespace) -> int:
    xp = get_xp(args.backend)
    if args.suite == "floors":
        records = bench_floors(xp, args.dtypes)
    elif args.suite == "attention":
        records = bench_attention(xp, args.sizes or [1024, 2048, 4096, 8192, 16384], args.dtypes, args.heads,
                                  args.head_dim, args.chunk_size, args.causal, args.full_limit_gib)
    elif args.suite == "rope":
        records = bench_rope(xp, args.dtypes, tuple(args.shape), args.layouts)
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

    heads = tuple(args.check_heads or DEFAULT_HEADS)
    if min(heads) < 1:
        raise ValueError(f"--check-heads must be >= 1, got {min(heads)}")
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
        elif isinstance(value, float):
            parts.append(f"{key}={value:.2f}x")
        elif key not in ("suite", "backend"):
            parts.append(f"{key}={value}")
    return f"[{rec['suite']}] " + " ".join(parts)
