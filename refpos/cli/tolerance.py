"""``refpos tolerance``: the error a correct implementation in a dtype can show, per probe position."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.cli.options import BASE, EVEN_WIDTH, POSITION, SEQ_LEN, help_with
from refpos.golden.forms import FORMS, check_forms
from refpos.golden.tolerance import (
    ANGLE_ROUNDOFF,
    MANTISSA,
    check_dtype,
    describe,
    first_rejected_position,
    frequency_promise,
    rope_tolerance,
    value_tolerance,
)


def _probe_positions(max_position: int) -> list[int]:
    out = {0, 1, max_position}
    p = 2
    while p < max_position:
        out.update((p, p - 1) if p >= 256 else (p,))
        p *= 2
    return sorted(x for x in out if 0 <= x <= max_position)


def _frequencies_from_config(path: str, seq_len: int | None) -> tuple[Any, float, str]:
    """The frequencies and attention factor of a config.json; per-layer configs: every layer type's ω
    together and the largest A (the tolerance grows with max ω and with A)."""

    import refpos

    try:
        layer_types = refpos.models.hf_layer_types(path) or (None,)
        ropes = [refpos.models.from_hf_config(path, layer_type=lt) for lt in layer_types]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"--config {path} does not resolve: {exc}") from None
    tables = [refpos.rope_frequencies(r, seq_len=seq_len, xp="numpy") for r in ropes]
    inv_freq = np.concatenate([np.asarray(to_numpy(w)) for w, _ in tables])
    names = ", ".join(f"{lt}: {r.rope_type}" for lt, r in zip(layer_types, ropes, strict=True)) if layer_types[0] \
        else ropes[0].rope_type
    return inv_freq, max(float(a) for _, a in tables), f"{path} ({names})"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos tolerance``."""
    parser.add_argument("--dtype", default="float32", help="float64, float32, bfloat16 or float16")
    parser.add_argument("--max-position", type=POSITION, default=131072,
                        help=help_with(POSITION, "largest position to report (default 131072)"))
    parser.add_argument("--config", help="a model config.json: use its frequencies and attention factor")
    parser.add_argument("--seq-len", type=SEQ_LEN, default=None,
                        help=help_with(SEQ_LEN, "sequence length for the resolver"))
    parser.add_argument("--head-dim", type=EVEN_WIDTH, default=128,
                        help=help_with(EVEN_WIDTH, "head size of the default table (without --config; default 128)"))
    parser.add_argument("--theta", type=BASE, default=10000.0,
                        help=help_with(BASE, "base θ of the default RoPE table (without --config; default 10000)"))
    parser.add_argument("--forms", default=None,
                        help="comma-separated forms of the computation (docs/conventions.md#tolerances: "
                             f"{', '.join(FORMS)}); a kind left out: every form of it the dtype admits")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """``refpos tolerance``: print the error a correct implementation in ``--dtype`` can show."""

    dtype = check_dtype(args.dtype)
    forms = check_forms(dtype, args.forms.split(",") if args.forms else None)
    if args.config:
        inv_freq, factor, source = _frequencies_from_config(args.config, args.seq_len)
    else:
        inv_freq = args.theta ** -(np.arange(0, args.head_dim, 2) / args.head_dim)
        factor, source = 1.0, f"default RoPE (θ = {args.theta:g}, head_dim {args.head_dim})"
    positions = np.array(_probe_positions(args.max_position), dtype=np.int64)
    unit = to_numpy(rope_tolerance(dtype, positions, inv_freq, forms=forms))
    qk = to_numpy(rope_tolerance(dtype, positions, inv_freq, magnitude=factor, forms=forms))
    w_tol = to_numpy(value_tolerance(dtype, np.abs(inv_freq)))
    rows = [{"position": int(p), "cos_sin_atol": float(a), "qk_atol_per_unit_pair_norm": float(b)}
            for p, a, b in zip(positions, unit, qk, strict=True)]
    # where correct code (½ ulp of the output + p·max ω·u, docs/conventions.md#tolerances) passes a fixed atol:
    # every dtype, from the same model as the table (never above it)
    fixed = {str(atol): first_rejected_position(dtype, atol, inv_freq, args.max_position) for atol in (1e-5, 1e-6)}
    rounding = 0.5 * 2.0 ** -MANTISSA[dtype]  # the output's own rounding at |pair| = 1
    result = {
        "dtype": dtype,
        "source": source,
        "max_inv_freq": float(np.max(np.abs(inv_freq))),
        "attention_factor": factor,
        "inv_freq_rtol": float(w_tol.max() / max(float(np.max(np.abs(inv_freq))), 1e-300)),
        "rule": describe("rope", dtype),
        "forms": {name: FORMS[name].bound_text() for name in forms},
        "positions": rows,
        "fixed_atol_rejects_correct_code_from": fixed,
        "frequencies": frequency_promise(dtype, inv_freq, args.max_position),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"refpos tolerance: dtype {dtype}; frequencies: {source}")
    print(f"  max ω = {result['max_inv_freq']:.10g}, attention factor A = {factor:.10g}")
    print("  rule: atol(p) = m·|p|·max_j k_j·ω_j·u + storage(m), m the pair's size, for the forms in force "
          "(docs/conventions.md#tolerances):")
    for name, bound in result["forms"].items():
        print(f"    {name} ({FORMS[name].kind}): {bound}")
    print(f"  inv_freq, slopes and other position-independent values: {describe('value', dtype)['reason']}")
    print(f"{'position':>10}  {'cos/sin atol':>13}  {'q/k atol per unit pair norm':>28}")
    for r in rows:
        print(f"{r['position']:>10}  {r['cos_sin_atol']:>13.3e}  {r['qk_atol_per_unit_pair_norm']:>28.3e}")
    for atol, first in fixed.items():
        if first is None:
            print(f"  a fixed atol of {atol} rejects no correct {dtype} code up to position {args.max_position}")
        elif first == 0:
            print(f"  a fixed atol of {atol} rejects correct {dtype} code from position 0: rounding to {dtype} "
                  f"alone is up to {rounding:.3g} per unit of |pair|")
        else:
            print(f"  a fixed atol of {atol} rejects correct {dtype} code from position ≈ {first} "
                  f"(correct code errs by ½ ulp + p·max ω·{ANGLE_ROUNDOFF[dtype]:.3g})")
    print(f"  frequencies: {result['frequencies']}")
    if dtype != "float64" and args.max_position >= 2**24:
        print("  note: float32 positions are inexact from 2^24 = 16777216 on")
    return 0
