"""Golden outputs through the adapter: every golden case whose function the adapter provides.

Each case of ``golden/manifest.json`` with a ``call`` is replayed as ``function(*args)`` on the adapter
and every returned output is compared with the stored reference within the tolerance entry of the
adapter's declared dtype (``INFO["dtype"]``; golden/README.md gives the formula). The scenario cases
(prefill then decode, left padding, chunked prefill) are replayed step by step with ``apply_rope`` and
``attention``. Cases whose function the adapter lacks are skipped with the reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rope_support import layout_perm
from support import declared_dtype, declared_support, nan_note, require

from refpos.golden.entries import compare
from refpos.golden.manifest import default_golden_dir, find_case, load_arrays, load_manifest
from refpos.pairs import span_bounds
from refpos.rope.params import rope_config_from_params

ROOT = default_golden_dir()
MANIFEST = load_manifest(ROOT)
CALL_CASES = [c for c in MANIFEST["cases"] if c["parameters"].get("call")]


def _args(case: dict[str, Any], inputs: dict[str, np.ndarray]) -> list[Any]:
    out = []
    for spec in case["parameters"]["call"]["args"]:
        if "input" in spec:
            out.append(inputs[spec["input"]])
        elif "param" in spec:
            out.append(case["parameters"][spec["param"]])
        else:
            out.append(spec["value"])
    return out


def _reduce_pairs(value: np.ndarray, reference: np.ndarray, layout: str, what: str) -> np.ndarray:
    """A layout's full cos/sin table (T, 2m) -> the stored per-pair columns (T, m), checking the repeat."""
    if value.shape[-1] != 2 * reference.shape[-1]:
        return value
    first, second = (value[..., 0::2], value[..., 1::2]) if layout == "interleaved" else \
        (value[..., : reference.shape[-1]], value[..., reference.shape[-1]:])
    np.testing.assert_array_equal(first, second, err_msg=f"{what}: the {layout} table must repeat each pair's value")
    return first


def _assert_within(case: dict[str, Any], name: str, value: Any, reference: np.ndarray, dtype: str) -> None:
    value = np.asarray(value)
    what = f"golden case {case['id']}, output {name}"
    call = case["parameters"].get("call", {})
    if call.get("reduce") == "pairs":
        value = _reduce_pairs(value, reference, case["parameters"]["rope"].get("layout", "half"), what)
    assert value.shape == reference.shape, f"{what}: shape {value.shape}, expected {reference.shape}"
    result = compare(value, reference, case["outputs"][name]["tolerance"], dtype)
    nan = nan_note(value, reference)
    if nan:  # the largest error among the entries that are numbers (a NaN has no size to report)
        finite = np.where(np.isnan(value) & ~np.isnan(reference), reference, value)
        result = {**compare(finite, reference, case["outputs"][name]["tolerance"], dtype), "ok": False,
                  "n_bad": result["n_bad"]}
    assert result["ok"], (f"{what}: {nan}{result['message']} ({result['n_bad']} elements outside); diagnose with "
                          f"`refpos check {case['id']} your_output.npy --dtype {dtype}`")


# --------------------------------------------------------------------------- layouts an adapter declares
#: the channel each pair coordinate is read from / written to, per layout, for a span of 2m channels: the
#: canonical order is (u_0 … u_{m-1}, v_0 … v_{m-1}); half reads and writes it, interleaved reads and writes
#: (2j, 2j + 1), deinterleaved reads (2j, 2j + 1) and writes half (docs/conventions.md#pair-layouts)
READS_INTERLEAVED = {"half": False, "interleaved": True, "deinterleaved": True}
WRITES_INTERLEAVED = {"half": False, "interleaved": True, "deinterleaved": False}


def _order(interleaved: bool, width: int) -> np.ndarray:
    """Channel of each canonical pair coordinate: identity, or the fixed permutation 2j + c."""
    return layout_perm(width) if interleaved else np.arange(width)


def _span_of(rope: dict[str, Any]) -> tuple[int, int]:
    cfg = rope_config_from_params(rope)
    return span_bounds(cfg.head_dim, cfg.rotary_width, cfg.placement)


def replay_layout(case: dict[str, Any]) -> str | None:
    """The layout a RoPE golden case is replayed in: ``None`` when the adapter declares its own layout (or
    declares none), else the first declared layout. The tiny layout cases (rope-layout/) test the layout
    itself and are never converted: in an undeclared layout they are skipped."""
    rope = case["parameters"].get("rope")
    if not isinstance(rope, dict):
        return None
    declared = declared_support().get("rope_layouts")
    stored = rope.get("layout", "half")
    if declared is None or stored in declared:
        return None
    if case["id"].startswith("rope-layout/"):
        pytest.skip(f"a layout case in the {stored} layout, which the adapter does not declare ({list(declared)})")
    return next(layout for layout in ("half", "interleaved", "deinterleaved") if layout in declared)


def convert_case(case: dict[str, Any], inputs: dict[str, np.ndarray], target: str
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The case as the same computation in layout ``target``: the rope dict's layout replaced and ``x`` read
    through the fixed permutation (apply_half(P x) = P apply_interleaved(x)); :func:`converted_output`
    brings the output back."""
    parameters = {**case["parameters"], "rope": {**case["parameters"]["rope"], "layout": target}}
    stored = case["parameters"]["rope"].get("layout", "half")
    if "x" not in inputs:
        return {**case, "parameters": parameters}, inputs
    start, stop = _span_of(case["parameters"]["rope"])
    read_stored = _order(READS_INTERLEAVED[stored], stop - start)
    read_target = _order(READS_INTERLEAVED[target], stop - start)
    x = inputs["x"].copy()
    canonical = inputs["x"][..., start:stop][..., read_stored]  # (u…, v…) of each pair
    x[..., start + read_target] = canonical  # where the target layout reads them
    return {**case, "parameters": parameters}, {**inputs, "x": x}


def converted_output(case: dict[str, Any], value: np.ndarray, target: str) -> np.ndarray:
    """An apply_rope output in layout ``target`` written back in the case's stored layout."""
    stored = case["parameters"]["rope"].get("layout", "half")
    start, stop = _span_of(case["parameters"]["rope"])
    canonical = np.asarray(value)[..., start:stop][..., _order(WRITES_INTERLEAVED[target], stop - start)]
    out = np.array(value, dtype=np.float64)
    out[..., start + _order(WRITES_INTERLEAVED[stored], stop - start)] = canonical
    return out


@pytest.mark.parametrize("case", CALL_CASES, ids=[c["id"] for c in CALL_CASES])
def test_golden_case(impl, case):
    """Each golden case through the adapter; a RoPE case in a layout the adapter does not declare is replayed
    in a declared one through the fixed permutation (Meta's checkpoint conversion), so an interleaved-only
    library is tested on every model (the layout cases themselves are never converted)."""
    call = case["parameters"]["call"]
    function = require(impl, call["function"])
    inputs = load_arrays(ROOT, case, "inputs")
    outputs = load_arrays(ROOT, case, "outputs")
    target = replay_layout(case)
    replayed, inputs = (case, inputs) if target is None else convert_case(case, inputs, target)
    result = function(*_args(replayed, inputs))
    returned = tuple(result) if len(call["returns"]) > 1 else (result,)
    assert len(returned) == len(call["returns"]), f"{call['function']} returned {len(returned)} values"
    dtype = declared_dtype(impl)
    for name, value in zip(call["returns"], returned, strict=True):
        if target is not None and call["function"] == "apply_rope":
            value = converted_output(case, value, target)
        _assert_within(replayed if call.get("reduce") == "pairs" else case, name, value, outputs[name], dtype)


# ------------------------------------------------------------------------------------ scenarios
def _scenario(case_id: str) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, np.ndarray]]:
    case = find_case(MANIFEST, case_id)
    return case, load_arrays(ROOT, case, "inputs"), load_arrays(ROOT, case, "outputs")


def test_scenario_prefill_then_decode_with_offsets(impl):
    apply_rope, attention = require(impl, "apply_rope", "attention")
    case, inp, out = _scenario("scenario/prefill-decode")
    rope, prefill, dtype = case["parameters"]["rope"], case["parameters"]["prefill"], declared_dtype(impl)
    q, k, v = inp["q"], inp["k"], inp["v"]
    t = q.shape[-2]
    for offset in case["parameters"]["offsets"]:
        pos = np.arange(t) + offset
        k_cache = np.asarray(apply_rope(k, pos, rope, None))
        full = np.asarray(attention(np.asarray(apply_rope(q, pos, rope, None)), k_cache, v, None, None, None, True))
        _assert_within(case, "out", full, out["out"], dtype)
        for step in range(prefill, t):  # one new token: the cached keys 0 … step, no mask needed
            q_step = np.asarray(apply_rope(q[:, step:step + 1], pos[step:step + 1], rope, None))
            row = np.asarray(attention(q_step, k_cache[:, : step + 1], v[:, : step + 1]))
            _assert_within(case, "out", row[:, 0][:, None], out["out"][:, step][:, None], dtype)


def _left_padded_batch(impl: Any) -> tuple[dict[str, Any], dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The left-padded batch, each row rotated at its own positions and attended under its padding mask:
    (case, stored outputs, attention output (B, H, T, dv), which query rows see at least one key (B, T))."""
    apply_rope, attention = require(impl, "apply_rope", "attention")
    case, inp, out = _scenario("scenario/left-padded-batch")
    rope = case["parameters"]["rope"]
    mask = inp["attention_mask"]
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)  # per-row positions from the mask (HF's rule)
    assert np.array_equal(positions, out["positions"]), "the scenario's stored positions (a suite error)"
    t = mask.shape[1]
    allowed = mask[:, None, None, :] & np.tril(np.ones((t, t), dtype=bool))  # (B, 1, T, T)
    rows = []
    for b in range(mask.shape[0]):
        qr = np.asarray(apply_rope(inp["q"][b], positions[b], rope, None))
        kr = np.asarray(apply_rope(inp["k"][b], positions[b], rope, None))
        rows.append(np.asarray(attention(qr, kr, inp["v"][b], None, allowed[b])))
    return case, out, np.stack(rows), allowed[:, 0].any(axis=-1)


def test_scenario_left_padded_batch(impl):
    """Padding and per-row positions: every query that sees a real token gets the reference output."""
    case, out, got, sees_a_key = _left_padded_batch(impl)
    dtype = declared_dtype(impl)
    real = np.broadcast_to(sees_a_key[:, None, :, None], got.shape)  # (B, H, T, dv)
    _assert_within(case, "out", np.where(real, got, out["out"]), out["out"], dtype)
    n_pad = case["parameters"]["pads"][1]
    _assert_within(case, "out_row1_unpadded", got[1, :, n_pad:], out["out_row1_unpadded"], dtype)


def test_scenario_left_padded_batch_padding_queries(impl):
    """The fully-masked-row policy inside the scenario: a padding query that sees no key gives zeros."""
    _, _, got, sees_a_key = _left_padded_batch(impl)
    padding = got.transpose(0, 2, 1, 3)[~sees_a_key]  # (n padding queries, H, dv)
    assert padding.size, "the scenario has padding queries"
    assert np.all(padding == 0.0), f"padding queries (no key to attend) give {padding[padding != 0.0][:4]}, not zeros"


def test_scenario_chunked_prefill(impl):
    apply_rope, attention = require(impl, "apply_rope", "attention")
    case, inp, out = _scenario("scenario/chunked-prefill")
    rope, chunk, dtype = case["parameters"]["rope"], case["parameters"]["chunk"], declared_dtype(impl)
    q, k, v = inp["q"], inp["k"], inp["v"]
    t = q.shape[-2]
    pos = np.arange(t)
    parts = []
    for start in range(0, t, chunk):
        stop = min(start + chunk, t)
        q_chunk = np.asarray(apply_rope(q[:, start:stop], pos[start:stop], rope, None))
        k_seen = np.asarray(apply_rope(k[:, :stop], pos[:stop], rope, None))
        allowed = pos[None, :stop] <= pos[start:stop, None]  # (chunk, stop)
        parts.append(np.asarray(attention(q_chunk, k_seen, v[:, :stop], None, allowed)))
    _assert_within(case, "out", np.concatenate(parts, axis=-2), out["out"], dtype)
