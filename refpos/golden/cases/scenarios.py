"""Golden cases of the worked example (我 愛 你) and of stateful scenarios.

* ``worked-example/*``: every intermediate of :func:`refpos.pipeline.worked_example` (the 我 愛 你 example,
  docs/relative.md#the-worked-example), with the bias before the scale, without it, and after the scale.
* ``scenario/*`` (docs/conventions.md#probe-positions): prefill then decode with position offsets, a left-padded
  batch with per-row positions ``max(cumsum(mask) − 1, 0)``, chunked prefill equal to full prefill. The
  reference computes the *full* result; the spec suite (``spec_tests/test_golden.py``) replays each
  scenario step by step through an adapter and compares the steps with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import refpos
from refpos.golden.cases.common import In, as_xp, call, rng_for, to_np
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_attention, tolerance_integer, tolerance_value
from refpos.golden.files.manifest import Case, Output

#: the RoPE of every scenario: small, default, half layout (adapter-contract dict)
SCENARIO_ROPE: dict[str, Any] = {"rope_type": "default", "rope_theta": 10000.0, "head_dim": 16, "layout": "half"}

_NAMES = {"X+P": "X_plus_P", "S+B": "S_plus_B", "scaled+B": "scaled_plus_B"}


def _exact_attention(logits: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact softmax rows of ``logits`` (H, T, T) and the exact output ``A·v``."""
    a = cert.mp_softmax_rows(logits)
    out = np.empty((*logits.shape[:-1], v.shape[-1]), dtype=object)
    for idx in np.ndindex(out.shape):
        *lead, i, c = idx
        out[idx] = cert.mp.fsum(a[(*lead, i, j)] * cert.mp.mpf(float(v[(*lead, j, c)]))
                                for j in range(logits.shape[-1]))
    return a, out


def worked_example_cases() -> list[Case]:
    cases = []
    for variant, with_bias in (("bias-before-scale", True), ("no-bias", False)):
        trace = {k: to_np(v) for k, v in refpos.worked_example(with_bias=with_bias).items()}
        q, k, v = trace["Q"], trace["K"], trace["V"]
        scale = 0.5  # 1/√4, exact
        inputs = {"q": q, "k": k, "v": v}
        args = [In("q"), In("k"), In("v")]
        if with_bias:
            # the worked example adds B before the scale; after the scale the same logits need B·scale (exact: /2)
            inputs["bias_after_scale"] = trace["B"] * scale
            args.append(In("bias_after_scale"))
        else:
            args.append(None)
        logits = trace["logits"]
        outputs = {}
        for name, a in trace.items():
            entry = Output(a, tolerance_value(a, scale=float(np.abs(a).max()) or 1.0))
            if name == "A":
                entry.certify = lambda lg=logits, vv=v: (_exact_attention(lg, vv)[0], 0.0)
            elif name == "O":
                entry.certify = lambda lg=logits, vv=v: (_exact_attention(lg, vv)[1], 1.0)
            outputs[_NAMES.get(name, name)] = entry
        outputs = {"O": outputs.pop("O"), **outputs}
        cases.append(Case(
            f"worked-example/{variant}", "worked_example", "attention",
            "the worked example 我 愛 你 (docs/relative.md#the-worked-example): every intermediate of "
            f"refpos.worked_example(with_bias={with_bias}); the adapter reproduces O",
            {"call": call("attention", ["O"], *args, None, scale),
             "note": "B is added before the 1/√d scale (the worked example's order); the adapter call adds "
                     "B·scale after it"},
            inputs, outputs))
    # the ALiBi/T5 order: the same bias added after the scale at full strength
    trace = {k: to_np(v) for k, v in refpos.worked_example().items()}
    q, k, v, b = trace["Q"], trace["K"], trace["V"], trace["B"]
    o_after = to_np(refpos.attention(as_xp(q), as_xp(k), as_xp(v), bias=as_xp(b), scale=0.5))
    logits = (trace["S"] * 0.5 + b)
    cases.append(Case(
        "worked-example/bias-after-scale", "worked_example", "attention",
        "variant of the worked example: B added after the scale (ALiBi/T5 order)",
        {"call": call("attention", ["O"], In("q"), In("k"), In("v"), In("bias"), None, 0.5)},
        {"q": q, "k": k, "v": v, "bias": b},
        {"O": Output(o_after, tolerance_value(o_after, scale=2.0),
                     lambda lg=logits, vv=v: (_exact_attention(lg, vv)[1], 1.0))}))
    return cases


# ----------------------------------------------------------------------------------- scenarios
def _rope() -> Any:
    return refpos.rope_config_from_params(SCENARIO_ROPE)


def _rotate(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return to_np(refpos.apply_rope(as_xp(x), as_xp(positions), _rope()))


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None,
            causal: bool = False) -> np.ndarray:
    return to_np(refpos.attention(as_xp(q), as_xp(k), as_xp(v),
                                  mask=None if mask is None else as_xp(mask), causal=causal))


def _tolerance(out: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, max_position: int) -> dict:
    d = SCENARIO_ROPE["head_dim"]
    inv_freq = SCENARIO_ROPE["rope_theta"] ** (-np.arange(0, d, 2) / d)
    qk = float(np.linalg.norm(q, axis=-1).max() * np.linalg.norm(k, axis=-1).max())
    return tolerance_attention(out, qk_norm=qk, v_max=float(np.abs(v).max()), scale=d**-0.5,
                               max_position=max_position, inv_freq=inv_freq, head_dim=d)


def _check_same(name: str, a: np.ndarray, b: np.ndarray) -> None:
    if not np.allclose(a, b, rtol=1e-12, atol=1e-12):
        raise AssertionError(f"scenario {name}: the reference's step-by-step result differs from the full one")


def scenario_cases() -> list[Case]:
    h, t, d = 2, 12, SCENARIO_ROPE["head_dim"]
    cases = []

    cid = "scenario/prefill-decode"
    rng = rng_for(cid)
    q, k, v = (rng.standard_normal((h, t, d)) for _ in range(3))
    prefill, offsets = 8, [0, 1000]
    pos = np.arange(t, dtype=np.int64)
    full = _attend(_rotate(q, pos), _rotate(k, pos), v, causal=True)  # (H, T, D)
    for offset in offsets:  # the reference itself passes the scenario
        k_rot = _rotate(k, pos + offset)
        for step in range(prefill, t):
            q_step = _rotate(q[:, step:step + 1], pos[step:step + 1] + offset)  # (H, 1, D)
            row = _attend(q_step, k_rot[:, :step + 1], v[:, :step + 1])
            _check_same(cid, row[:, 0], full[:, step])
    cases.append(Case(cid, "scenario", None,
                      f"prefill {prefill} tokens, then decode one token at a time with a KV cache, at position "
                      f"offsets {offsets}: every step equals the full causal forward (RoPE is relative)",
                      {"rope": SCENARIO_ROPE, "prefill": prefill, "offsets": offsets},
                      {"q": q, "k": k, "v": v},
                      {"out": Output(full, _tolerance(full, q, k, v, t - 1 + max(offsets)))}))

    cid = "scenario/left-padded-batch"
    rng = rng_for(cid)
    b, t2, pads = 2, 10, [0, 3]
    qb, kb, vb = (rng.standard_normal((b, h, t2, d)) for _ in range(3))
    mask = np.ones((b, t2), dtype=bool)
    for row, n_pad in enumerate(pads):
        mask[row, :n_pad] = False
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int64)  # (B, T): HF's rule
    allowed = mask[:, None, None, :] & np.tril(np.ones((t2, t2), dtype=bool))  # (B, 1, T, T)
    out = np.stack([_attend(_rotate(qb[r], positions[r]), _rotate(kb[r], positions[r]), vb[r], mask=allowed[r])
                    for r in range(b)])  # (B, H, T, D)
    alone = _attend(_rotate(qb[1, :, 3:], pos[:t2 - 3]), _rotate(kb[1, :, 3:], pos[:t2 - 3]), vb[1, :, 3:], causal=True)
    _check_same(cid, alone, out[1, :, 3:])
    cases.append(Case(cid, "scenario", None,
                      "a batch of 2 rows, row 1 left-padded by 3; positions = max(cumsum(mask) - 1, 0) per row; "
                      "keys masked where the attention mask is False, plus causal; fully masked (pad) query rows "
                      "give zeros; the real tokens of row 1 equal the unpadded row alone",
                      {"rope": SCENARIO_ROPE, "pads": pads, "fully_masked": "zeros"},
                      {"q": qb, "k": kb, "v": vb, "attention_mask": mask},
                      {"out": Output(out, _tolerance(out, qb, kb, vb, t2 - 1)),
                       "positions": Output(positions, tolerance_integer()),
                       "out_row1_unpadded": Output(alone, _tolerance(alone, qb, kb, vb, t2 - 1))}))

    cid = "scenario/chunked-prefill"
    rng = rng_for(cid)
    q, k, v = (rng.standard_normal((h, t, d)) for _ in range(3))
    chunk = 5
    q_rot, k_rot = _rotate(q, pos), _rotate(k, pos)
    full = _attend(q_rot, k_rot, v, causal=True)
    for start in range(0, t, chunk):
        stop = min(start + chunk, t)
        allowed = pos[None, :stop] <= pos[start:stop, None]  # (chunk, stop): key j <= query position
        part = _attend(_rotate(q[:, start:stop], pos[start:stop]), k_rot[:, :stop], v[:, :stop], mask=allowed)
        _check_same(cid, part, full[:, start:stop])
    cases.append(Case(cid, "scenario", None,
                      f"chunked prefill in chunks of {chunk}: each chunk's queries attend the cached keys and "
                      "their own chunk causally; the result equals the full causal forward",
                      {"rope": SCENARIO_ROPE, "chunk": chunk}, {"q": q, "k": k, "v": v},
                      {"out": Output(full, _tolerance(full, q, k, v, t - 1))}))
    return cases


# ----------------------------------------------------------------------------------- attention
def attention_cases() -> list[Case]:
    """The attention core at its edges: huge logits, a fully masked row, GQA, causal decode alignment."""
    cases = []
    specs = [
        ("attention/large-logits", "logits up to ~1e3: a softmax without the max shift overflows", 2, 2, 6, 6,
         30.0, False, None),
        ("attention/fully-masked-row", "query 1 may attend to nothing: the documented policy gives a zero row",
         2, 2, 4, 4, 1.0, False, "row"),
        ("attention/gqa-4q-2kv", "4 query heads share 2 key/value heads: head h uses kv head h // 2", 4, 2, 5, 5,
         1.0, True, None),
        ("attention/causal-decode-q3-k8", "3 new queries after 5 cached keys, causal: queries aligned to the end "
         "of the keys (query i sees keys 0 … 5 + i)", 2, 2, 3, 8, 1.0, True, None),
    ]
    for cid, description, hq, hkv, tq, tk, gain, causal, masked in specs:
        rng = rng_for(cid)
        d = 8
        q = rng.standard_normal((hq, tq, d)) * gain
        k = rng.standard_normal((hkv, tk, d)) * gain
        v = rng.standard_normal((hkv, tk, d))
        inputs = {"q": q, "k": k, "v": v}
        mask_arg: Any = None
        mask = None
        if masked:
            mask = np.ones((tq, tk), dtype=bool)
            mask[1] = False
            inputs["mask"] = mask
            mask_arg = In("mask")
        out = to_np(refpos.attention(as_xp(q), as_xp(k), as_xp(v), mask=None if mask is None else as_xp(mask),
                                     causal=causal))
        logits = np.abs(q @ np.swapaxes(np.repeat(k, hq // hkv, axis=0), -1, -2)).max() * d**-0.5  # (H, Tq, Tk)
        entry = tolerance_value(out, scale=float(np.abs(v).max()))
        for dtype in entry:  # a float32 softmax: max|logit|·2^-23 per probability (docs/conventions.md#tolerances)
            if isinstance(entry[dtype], dict) and dtype != "float64":
                entry[dtype]["atol"] = entry[dtype]["atol"] + float(np.abs(v).max()) * tk * logits * 2.0**-23
        cases.append(Case(cid, "attention", "attention", description,
                          {"call": call("attention", ["out"], In("q"), In("k"), In("v"), None, mask_arg, None, causal),
                           "fully_masked": "zeros"},
                          inputs, {"out": Output(out, entry)}))
    return cases
