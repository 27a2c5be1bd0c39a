"""What transformers' run showed, read from a :class:`survey.probe.Probe`: the layers that attended, the
reference call of each (its query and key before rotation), position biases and position tables.

A layer is an entry of a layer list (``model.layers.3``, ``encoder.block.0``): the outermost list being run
when attention was called. A list under an ``encoder`` is an encoder stack, any other a decoder stack;
cross-attention calls (module names with ``cross``, ``encdec``, ``encoder_attn``) are set aside here: a layer's
cross-attention claim is compared with them by :mod:`survey.cross`.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from survey.probe import Call, Probe, digest, squeezed

CROSS = re.compile(r"cross|encdec|enc_dec|encoder_attn|crossattention", re.IGNORECASE)
#: entries of an additive mask at or below this are "masked" (transformers uses finfo.min or -inf)
MASKED = -1e30
#: tensor arguments of an attention call that are not biases
NOT_BIAS = frozenset({"position_ids", "cache_position", "s_aux", "sinks", "cu_seq_lens_q", "cu_seq_lens_k"})
MASK_BIAS = "attention_mask (finite entries that differ within a row)"


def role(list_path: str) -> str:
    """``encoder`` for a layer list under an encoder, else ``decoder``: the outermost path component that names
    one of the two decides (``decoder.bert.encoder.layer``, an encoder–decoder model's BERT decoder, is the
    decoder's; a component naming both, ``encoder_decoder``, decides nothing)."""
    for part in list_path.split("."):
        if ("encoder" in part) != ("decoder" in part):
            return "encoder" if "encoder" in part else "decoder"
    return "decoder"


def layer_calls(run: Any) -> dict[tuple[str, int], list[int]]:
    """Self-attention call indices of a run per (layer list path, index)."""
    out: dict[tuple[str, int], list[int]] = {}
    for i, call in enumerate(run.calls):
        if call.layer is None or CROSS.search(call.path):
            continue
        out.setdefault(call.layer, []).append(i)
    return out


def inline_layers(probe: Probe) -> dict[tuple[str, int], list[int]]:
    """For a model that called no eager attention function: its attention modules' layers, each with no
    call (``encoder.layer.3.attention.self`` is layer 3 of ``encoder.layer``)."""
    out: dict[tuple[str, int], list[int]] = {}
    for path in probe.module_types:
        found = re.match(r"^(.*?)\.(\d+)(\.|$)", path)
        if found and not CROSS.search(path):
            out.setdefault((found.group(1), int(found.group(2))), [])
    return out


def input_carries_positions(probe: Probe) -> bool:
    """Whether some attention module's input changed with the positions alone (run B, or run D's last rows
    for a model without position ids): the stack's input carries an absolute encoding."""
    t = probe.positions.size
    for path, inputs in probe.a.inputs.items():
        if probe.position_ids_taken and not _same(inputs, probe.b.inputs.get(path)):
            return True
        if probe.d is not None and not _same(inputs, [x[..., -t:, :] for x in probe.d.inputs.get(path, [])]):
            return True
    return False


def _same(a: list[np.ndarray] | None, b: list[np.ndarray] | None) -> bool:
    return a is not None and b is not None and len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def reference(probe: Probe, index: int) -> tuple[Call | None, str]:
    """The reference call of run A's call ``index`` and its mode: ``"identity"`` (its rotary tables were the
    identity: run B, or run C where the layer's input carries positions), ``"zero"`` (run B by position 0
    alone: the layer computes its rotation from the position ids), ``"shifted"`` (a model without position
    ids: run D's last rows, the same tokens at positions shifted by :data:`survey.probe.SHIFT`), or None with
    the reason."""
    call = probe.a.calls[index]
    if len(probe.b.calls) != len(probe.a.calls) or len(probe.c.calls) != len(probe.a.calls):
        return None, "the runs called attention a different number of times"
    inputs_a = probe.a.inputs.get(call.path)
    identity = bool(probe.b.neutralized.get(call.path))
    if _same(inputs_a, probe.b.inputs.get(call.path)) and (identity or probe.position_ids_taken):
        return probe.b.calls[index], "identity" if identity else "zero"
    if probe.d is not None and len(probe.d.calls) == len(probe.a.calls):
        t = probe.positions.size
        tail = [x[..., -t:, :] for x in probe.d.inputs.get(call.path, [])]
        if _same(inputs_a, tail):
            shifted = probe.d.calls[index]
            return Call(shifted.path, shifted.layer, shifted.query[..., -t:, :], shifted.key[..., -t:, :],
                        None, {}, shifted.scaling), "shifted"
    if _same(inputs_a, probe.c.inputs.get(call.path)):
        return probe.c.calls[index], "identity"
    if probe.d is not None:
        return None, ("the layer's input carries the positions (an absolute encoding), and the model takes no "
                      "position ids")
    return None, "the layer's input differs between runs of the same positions"


#: names of arguments that carry positions into an attention module
POSITION_ARGUMENT = re.compile(r".*(pos|rot|freq|alibi|rel|bias|cos|sin).*", re.IGNORECASE)


def handed_positions(probe: Probe, path: str) -> list[str]:
    """The tensor arguments of attention module ``path`` in run A whose names say they carry positions."""
    return [name for name in probe.a.handed.get(path, {}) if POSITION_ARGUMENT.fullmatch(name)]


def _varies_in_rows(values: np.ndarray, mask: np.ndarray | None) -> bool:
    """Whether ``values`` (..., Tq, Tk) differ within a row over the keys the mask lets a query see: a
    per-row constant is no bias (the softmax removes it)."""
    seen = np.isfinite(values) & (values > MASKED)
    if mask is not None and mask.dtype.kind == "f" and mask.shape[-2:] == values.shape[-2:]:
        seen = seen & np.broadcast_to(mask > MASKED, np.broadcast_shapes(mask.shape, values.shape))
        values = np.broadcast_to(values, seen.shape)
    high = np.where(seen, values, -np.inf).max(axis=-1)
    low = np.where(seen, values, np.inf).min(axis=-1)
    return bool(np.any(np.isfinite(high) & (high > low)))


def biases(call: Call) -> list[str]:
    """Names of the additive terms of a call that differ within a row of the logits: bias tensors, and a
    mask with finite entries other than one constant per row."""
    found = [name for name, t in call.tensors.items() if name not in NOT_BIAS and t.dtype.kind == "f"
             and t.ndim >= 2 and _varies_in_rows(t, call.mask)]
    if call.mask is not None and call.mask.dtype.kind == "f" and _varies_in_rows(call.mask, None):
        found.append(MASK_BIAS)
    return found


def position_biases(probe: Probe, index: int) -> list[str]:
    """The additive terms of run A's call ``index`` that depend on positions alone: the same in run E (other
    tokens at the same positions). A term that changes with the tokens is content (Doge's dynamic mask)."""
    call = probe.a.calls[index]
    found = biases(call)
    if not found or probe.e is None or len(probe.e.calls) != len(probe.a.calls):
        return found
    other = probe.e.calls[index]

    def same(name: str) -> bool:
        a, e = (call.mask, other.mask) if name == MASK_BIAS else (call.tensors.get(name), other.tensors.get(name))
        return a is not None and e is not None and a.shape == e.shape and np.array_equal(a, e)
    return [name for name in found if same(name)]


def own_positions(probe: Probe) -> tuple[Any, np.ndarray]:
    """The run in which the model chose its own positions (run A, or the run without position ids), and
    those positions counted from 0: where a learned table's offset and a sinusoid are read."""
    if probe.own is not None:
        return probe.own, np.arange(probe.positions.size)
    return probe.a, probe.positions


def rotates(vectors: np.ndarray, run: Any) -> bool:
    """Whether ``vectors`` (a table's rows read, a positional module's output) were handed to a rotary apply
    function of ``run`` as its table: RoFormer reads its sinusoid from an embedding and rotates the query and
    key by it inside attention; that table is the rotation's, not an encoding added to the stack's input."""
    tables = {table for record in run.applied for table in getattr(record, "tables", [])}
    return bool(tables) and digest(squeezed(vectors)) in tables


def input_modules(probe: Probe) -> list[str]:
    """The positional modules of the run where the model chose its own positions whose output is no rotary
    apply function's table (:func:`rotates`): encodings added to a stack's input."""
    run = own_positions(probe)[0]
    return [path for path, out in run.positional.items() if not rotates(out, run)]


def position_lookups(probe: Probe, trained: bool | None = None) -> list[tuple[str, int, int]]:
    """``(table, offset, rows)`` of every embedding lookup read at the model's own positions plus a constant
    (:func:`own_positions`): a learned (or stored sinusoid) position table; ``trained`` selects trainable
    (learned) or frozen (sinusoid) tables only. A table a rotary apply function rotates by (:func:`rotates`)
    is the rotation's, and not listed."""
    out = []
    run, positions = own_positions(probe)
    for lookup in run.lookups:
        if (trained is not None and lookup.trained != trained) or rotates(lookup.vectors, run):
            continue
        offset = read_offset(lookup, positions, run)
        found = (lookup.table, offset, lookup.rows)
        if offset is not None and found not in out:
            out.append(found)
    return out


def read_offset(lookup: Any, positions: np.ndarray, run: Any) -> int | None:
    """The constant ``c`` such that ``lookup`` read row ``p + c`` for the tokens at ``positions``, or None.

    The tokens' rows come first. A model that pads its sequence to a multiple of its attention window (LED,
    Longformer) reads the padding's rows after them: a longer read counts where some attention module of the
    run took that many rows (a relative table read over ``2T - 1`` distances is no such read)."""
    indices, t = lookup.indices, positions.size
    if indices.ndim == 0 or indices.shape[-1] < t:
        return None
    if indices.shape[-1] != t and indices.shape[-1] not in padded_lengths(run):
        return None
    offsets = indices.reshape(-1, indices.shape[-1])[:, :t] - positions
    return int(offsets.flat[0]) if np.all(offsets == offsets.flat[0]) else None


def padded_lengths(run: Any) -> set[int]:
    """The sequence lengths the attention modules of ``run`` took (their hidden states' rows)."""
    return {int(x.shape[-2]) for inputs in run.inputs.values() for x in inputs if x.ndim >= 2}


def fingerprint(probe: Probe) -> str:
    """A digest of run A's queries and keys (rounded to 5 decimals): the same tiny model run by the same code
    gives the same one, so two releases whose digests differ computed something else (or drew other weights)."""
    import hashlib

    h = hashlib.sha1()
    for call in probe.a.calls:
        for x in (call.query, call.key):
            h.update(repr(x.shape).encode() + np.round(x.astype(np.float64), 5).tobytes())
    return h.hexdigest()[:12]


def observed_kinds(probe: Probe) -> list[str]:
    """The encodings seen in transformers' run, by what the calls and lookups showed."""
    kinds = []
    calls = layer_calls(probe.a)
    rotated = False
    for indices in calls.values():
        for i in indices:
            ref, _ = reference(probe, i)
            a = probe.a.calls[i]
            if ref is not None and (not np.array_equal(a.query, ref.query) or not np.array_equal(a.key, ref.key)):
                rotated = True
    rotated = rotated or any(not np.array_equal(b, a) for record in probe.a.applied
                             for b, a in zip(record.before, record.after, strict=False))
    if rotated:
        kinds.append("rope")
    if any("alibi" in b.name.lower() for b in probe.a.builders) or any(
            "alibi" in k for handed in probe.a.handed.values() for k in handed):
        kinds.append("alibi")
    if any("bucket" in b.name for b in probe.a.builders):
        kinds.append("relative buckets")
    elif any(position_biases(probe, i) for indices in calls.values() for i in indices):
        kinds.append("relative bias")
    if position_lookups(probe, trained=True):
        kinds.append("learned")
    added = input_modules(probe)
    described = [probe.positional.get(path, ("", True)) for path in added]
    fixed = [name for name, trainable in described if "sinus" in name.lower() or not trainable]
    if fixed or position_lookups(probe, trained=False):
        kinds.append("sinusoidal")
    elif added and "learned" not in kinds:
        kinds.append("learned")
    if not kinds and not calls and probe.module_types:
        kinds.append("inline attention")
    return kinds or (["none"] if calls else ["no attention"])
