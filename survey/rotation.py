r"""The rotation of a RoPE claim, per output channel: refpos's prediction of a call's query and key, the
float32 bound of each channel (derived in :mod:`survey.compare`'s docstring), and the rotation compared as a
map at the model's rotary apply function."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.pairs import span_bounds
from survey.claims import LayerClaim, LayerResult
from survey.probe import Call, Probe

EPS32 = 2.0**-24
#: the roundings of a float32 inverse frequency besides the exponent's (θ, the power, the reciprocal, a rule's
#: factor and blend: the module docstring's K)
RULE_ROUNDINGS = 8
#: the float32 cosine and sine, the products by the attention factor, the rotation's products and sum, relative
#: to the pair's norm (the module docstring's C: 16 ulp)
ROPE_CONSTANT = 16 * EPS32
SCALE_RTOL = 1e-6
#: a decoding step projects its tokens in a call of another shape than run B's, so its query before the rotation
#: differs from the reference's by the float32 dot product's rounding, at most :math:`n\,\epsilon\sum_i |w_i
#: h_i|`: bounded by this fraction of the row's largest entry (n up to :math:`2^{10}` terms of its size)
ROW_RTOL = 2.0**-14
#: the layers below a decoding step's layer ran their products (the MLPs' matmuls; attention returns zeros) on the
#: step's rows alone, another shape than run B's, so the hidden states entering the layer differ from run B's rows
#: of the same tokens by those products' rounding: up to :math:`2^6` float32 ulps of the row's largest entry
#: (:math:`2^{-24}`: a few ulps for each of up to 8 layers' two products). A sixteenth of ROW_RTOL, so the query
#: the step projects from them stays within the step's bound; a position reaching the hidden states (a table
#: added at the input) moves them by far more
INPUT_RTOL = 2.0**-18


def rounded_alike(step: np.ndarray, reference: np.ndarray) -> bool:
    """Whether a decoding step's hidden states are run B's rows of the same tokens up to the rounding of the
    layers below (:data:`INPUT_RTOL` of each row's largest entry)."""
    if step.shape != reference.shape:
        return False
    bound = INPUT_RTOL * np.abs(reference).max(axis=-1, keepdims=True)
    return bool(np.all(np.abs(step.astype(np.float64) - reference) <= bound))


@dataclass(frozen=True)
class Channels:
    """A claim's rotation per output channel: the input channel each reads at position 0 (``source``) with its
    gain there (``gain``: the attention factor, 1 past the rotated span), the other channel of its pair
    (``partner``; itself when unrotated) and its angular speed ``omega`` (radians per position)."""

    source: np.ndarray
    partner: np.ndarray
    gain: np.ndarray
    omega: np.ndarray

    def bound(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The float32 bound of the module docstring for input ``x`` (..., T, d) at ``positions`` (T,), or
        ``(T, d)`` where each output channel reads its own coordinate (a vision RoPE's row or column):
        elementwise, in output channels."""
        norm = np.sqrt(x[..., self.source] ** 2 + np.where(self.partner != self.source, 1.0, 0.0)
                       * x[..., self.partner] ** 2)
        with np.errstate(divide="ignore"):
            log_omega = np.where(self.omega > 0, np.abs(np.log(self.omega)), 0.0)
        at = np.abs(positions).astype(np.float64)
        at = at[:, None] if at.ndim == 1 else at  # (T, 1) or per channel (T, d)
        angle = (RULE_ROUNDINGS + 1 + log_omega) * EPS32 * at * self.omega
        return np.abs(self.gain) * norm * (angle + ROPE_CONSTANT)


def channels(rope: Any, seq_len: int) -> Channels:
    """The claim's rotation per output channel (:class:`Channels`), read off refpos's rotation of each unit
    vector at positions 0 and 1 with the frequencies of sequence length ``seq_len``."""
    return _channels(rope, int(seq_len))


@functools.lru_cache(maxsize=256)
def _channels(rope: Any, seq_len: int) -> Channels:
    import refpos

    d = rope.head_dim
    inv, factor = refpos.rope_frequencies(rope, seq_len=seq_len)
    frequencies = (inv, factor)
    at = [refpos.to_numpy(refpos.apply_rope(np.eye(d)[:, None, :], np.array([p]), rope,
                                            frequencies=frequencies))[:, 0, :] for p in (0, 1)]
    source = np.abs(at[0]).argmax(axis=0)  # output c reads input source[c] at position 0
    gain = at[0][source, np.arange(d)]
    other = np.abs(at[1]).copy()
    other[source, np.arange(d)] = 0.0
    partner = np.where(other.max(axis=0) > 0, other.argmax(axis=0), source)
    cos = at[1][source, np.arange(d)] / gain
    sin = np.abs(at[1][partner, np.arange(d)]) / np.abs(gain) * (partner != source)
    return Channels(source, partner, gain, np.arctan2(sin, cos))


def before_rotation(rope: Any, x: np.ndarray, mode: str) -> np.ndarray:
    """The query (or key) before rotation, from the reference run's: the claim's own rotation at position 0
    undone. At position 0 RoPE is ``A·P`` (``A`` the attention factor, ``P`` the identity, or for the
    ``deinterleaved`` layout the regrouping permutation that transformers' apply function performs whatever
    its tables): a reference taken with identity tables went through ``P`` alone, one taken at position 0
    through ``A·P``."""

    step = _step_at_zero(rope, x.shape[-1], mode)  # x_ref = x_pre @ step, a (scaled) permutation
    return x @ step.T / np.max(step) ** 2


@functools.cache
def _step_at_zero(rope: Any, d: int, mode: str) -> np.ndarray:
    import refpos

    at_zero = refpos.to_numpy(refpos.apply_rope(np.eye(d), np.zeros(d, dtype=np.int64), rope))  # row i: e_i at 0
    _, factor = refpos.rope_frequencies(rope, seq_len=1)
    step = at_zero / float(factor) if mode == "identity" else at_zero
    nonzero = np.count_nonzero(step, axis=1)
    if not (np.all(nonzero == 1) and np.all(np.count_nonzero(step, axis=0) == 1)):
        raise ValueError("RoPE at position 0 is not a scaled permutation")  # its inverse would not be its transpose
    return step


def predict(claim: LayerClaim, ref: Call, rotation: np.ndarray, scaled: np.ndarray, mode: str,
            key_rotation: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """refpos's prediction of a call's (query, key) from the reference call, with their elementwise bounds:
    ``rotation`` the positions the claim's rotation reads for the queries (``key_rotation`` for the keys,
    the same by default), ``scaled`` those its query scale reads."""
    import refpos

    key_rotation = rotation if key_rotation is None else key_rotation
    q, k = ref.query, ref.key
    scale = np.ones(scaled.size) if claim.query_scale is None else np.asarray(
        claim.query_scale(scaled + claim.offset), dtype=np.float64)
    if claim.query_scale is not None:  # the reference ran at position 0: its query carries the scale there
        q = q / float(np.asarray(claim.query_scale(np.zeros(1, dtype=np.int64)), dtype=np.float64)[0])
    if claim.kind == "rope":
        q, k = before_rotation(claim.rope, q, mode), before_rotation(claim.rope, k, mode)
        length = int(max(rotation.max(), key_rotation.max())) + 1 + claim.offset
        frequencies = refpos.rope_frequencies(claim.rope, seq_len=length)
        q_rot = claim.gain * refpos.to_numpy(refpos.apply_rope(q, rotation + claim.offset, claim.rope,
                                                               frequencies=frequencies))
        k_rot = claim.gain * refpos.to_numpy(refpos.apply_rope(k, key_rotation + claim.offset, claim.rope,
                                                               frequencies=frequencies))
        speeds = channels(claim.rope, length)
        bound_q, bound_k = speeds.bound(q, rotation), speeds.bound(k, key_rotation)
    else:
        q_rot, k_rot = q, k
        # no rotation: a float32 product at most, relative to the largest entry (a reference run on more tokens,
        # the shifted one, projects in a call of another shape)
        bound_q = np.full(q.shape, SCALE_RTOL * np.abs(q).max())
        bound_k = np.full(k.shape, SCALE_RTOL * np.abs(k).max())
    q_pred = q_rot * scale[..., :, None]
    return q_pred, k_rot, bound_q * np.abs(scale)[:, None] + SCALE_RTOL * np.abs(q_pred).max(), bound_k


def predict_shifted(claim: LayerClaim, ref: Call, rotation: np.ndarray, shift: int,
                    key_rotation: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""refpos's prediction of a call's (query, key) from the same tokens ``shift`` places later (run D of a model
    that takes no position ids), with their elementwise bounds: :math:`q = U_{-s}\,q_D`.

    Run D's query is :math:`q_D = A\,U_{p+s}\,q_0` (:math:`q_0` the query before rotation, :math:`U` the rotation
    without the attention factor). Turning each of its pairs back by :math:`s\,\omega_j` (the claim's rotation with
    the other ``angle_sign`` at position ``s`` and factor 1, on the half-split pairs a ``deinterleaved`` rotation
    writes) leaves :math:`A\,U_p\,q_0`, the call's query, whatever the positions :math:`p` are and whatever
    :math:`A` is: the frequencies, direction, span and layout are compared; where the positions start and the
    attention factor are not (the rotation compared as a map at the apply function compares them). The bound is the
    two rotations' own (:class:`Channels`): the float32 angle rounding at :math:`p` and at :math:`p + s`."""
    import refpos

    key_rotation = rotation if key_rotation is None else key_rotation
    rope = claim.rope
    back = dataclasses.replace(rope, angle_sign=-rope.angle_sign,
                               layout="half" if rope.layout == "deinterleaved" else rope.layout)
    length = int(max(rotation.max(), key_rotation.max())) + 1 + claim.offset + shift
    inv, factor = refpos.rope_frequencies(rope, seq_len=length)
    speeds = channels(rope, length)
    out = []
    for x, at in ((ref.query, rotation), (ref.key, key_rotation)):
        turned = refpos.to_numpy(refpos.apply_rope(x.astype(np.float64), np.full(at.size, shift, dtype=np.int64),
                                                   back, frequencies=(inv, 1.0)))
        before = before_rotation(rope, turned, "identity") / float(factor)  # q_0, in the input's channel order
        at = at + claim.offset
        out.append((turned, speeds.bound(before, at) + speeds.bound(before, at + shift)))
    (q, bound_q), (k, bound_k) = out
    return q, k, bound_q, bound_k


def _time_axis_last(x: np.ndarray, t: int) -> np.ndarray | None:
    """``x`` with its token axis second last (apply functions take (B, H, T, d) or (B, T, H, d))."""
    if x.ndim >= 2 and x.shape[-2] == t:
        return x
    if x.ndim >= 3 and x.shape[-3] == t:
        return np.swapaxes(x, -2, -3)
    return None


def rotated_map(rope: Any, x: np.ndarray, positions: np.ndarray, gain: float = 1.0, offset: int = 0
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """refpos's rotation of a rotary apply function's input ``x`` (..., T, w) at ``positions`` (T,) shifted by
    ``offset``, times ``gain``, with its float32 bound (:class:`Channels`): ``w`` the head size, or the rotated
    span's width where the model slices the span out before the call (the rest of the head then reads zeros);
    None for another width."""
    import refpos

    start, stop = span_bounds(rope.head_dim, rope.rotary_width, rope.placement)  # the rotated channels
    width = x.shape[-1]
    if width == rope.head_dim:
        full = x
    elif width == stop - start:
        full = np.zeros((*x.shape[:-1], rope.head_dim))
        full[..., start:stop] = x
    else:
        return None
    at = positions + offset
    length = int(at.max()) + 1
    frequencies = refpos.rope_frequencies(rope, seq_len=length)
    predicted = gain * refpos.to_numpy(refpos.apply_rope(full, at, rope, frequencies=frequencies))
    bound = abs(gain) * channels(rope, length).bound(full, at)
    if width != rope.head_dim:
        predicted, bound = predicted[..., start:stop], bound[..., start:stop]
    return predicted, bound


def check_map(claim: LayerClaim, probe: Probe, path: str, seen: Any) -> LayerResult | None:
    """The rotation as a map, where the modeling module's rotary apply function ran in the layer: its output
    against refpos's rotation of its input (on the rotated span when the model slices the span out before the
    call), at the positions the claim's rotation reads. A call from the layer's indexer is compared with the
    claim's indexer RoPE where refpos gives one. None where no apply function ran in the layer."""
    from survey.seen import positions_of as _positions
    from survey.seen import unrotated

    records = [a for a in seen.run.applied if a.layer == (path, claim.index)]
    if not records or claim.kind != "rope":
        return None
    if (unrun := unrotated(claim, seen)) is not None:
        return LayerResult(claim.stack, claim.index, claim.kind, "exact", None, unrun)
    positions = _positions(claim, seen, "rotation")
    worst = 0.0
    for record in records:
        indexer = "indexer" in record.caller
        rope = claim.indexer if indexer and claim.indexer is not None else claim.rope
        for before, after in zip(record.before, record.after, strict=False):
            x = _time_axis_last(before.astype(np.float64), positions.size)
            y = _time_axis_last(after.astype(np.float64), positions.size)
            if x is None or y is None or x.shape != y.shape:
                return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                                   f"{seen.name}: {record.name}: no token axis of {positions.size} in {before.shape}")
            mapped = rotated_map(rope, x, positions, claim.gain, claim.offset)
            if mapped is None:
                start, stop = span_bounds(rope.head_dim, rope.rotary_width, rope.placement)
                return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                                   f"{seen.name}: rotated width{' (indexer)' if indexer else ''}: transformers "
                                   f"{x.shape[-1]}, refpos {rope.head_dim} (span {stop - start})")
            predicted, bound = mapped
            errors = np.abs(predicted - y)
            worst = max(worst, float(errors.max()))
            if np.any(errors > bound):
                token, channel = (int(v[0]) for v in np.nonzero(
                    (errors > bound).reshape(-1, *errors.shape[-2:]).any(axis=0)))
                return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", worst,
                                   f"{seen.name}: rotation{' (indexer)' if indexer else ''} "
                                   f"({record.name.rsplit('.', 1)[-1]}, its input against its output): max |Δ| "
                                   f"{worst:.3g} (first over its bound: position {int(positions[token])}, "
                                   f"channel {channel})")
    return LayerResult(claim.stack, claim.index, claim.kind, "exact", worst,
                       f"{seen.name}: the rotation compared at the model's rotary apply function")


def check_applied(claim: LayerClaim, probe: Probe, path: str) -> LayerResult:
    """A layer whose attention is computed inline: the rotation at its modeling module's rotary apply
    function (:func:`check_map`) in every run."""
    records = [a for a in probe.a.applied if a.layer == (path, claim.index)]
    if claim.kind == "none":
        if records:
            return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                               f"transformers rotates in this layer ({records[0].name.rsplit('.', 1)[-1]})")
        if probe.a.applied:
            return LayerResult(claim.stack, claim.index, claim.kind, "exact", None,
                               "the model's rotary apply function runs in other layers, not in this one")
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None, "attention computed inline")
    if not records:
        return LayerResult(claim.stack, claim.index, claim.kind, "mismatch" if probe.a.applied else "not reached",
                           None, "transformers' rotary apply function does not run in this layer" if probe.a.applied
                           else "attention computed inline, and no rotary apply function runs")
    if claim.query_scale is not None:
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           "attention computed inline: the query scale cannot be isolated")
    # a model that takes no position ids rotates by the positions it chooses: the map is read at the slots, which
    # every source reads in these runs (a model adding an offset of its own would differ there)
    from survey.seen import seen_of

    results = [r for seen in seen_of(probe) if (r := check_map(claim, probe, path, seen)) is not None]
    wrong = [r for r in results if r.status != "exact"]
    if wrong:
        return wrong[0]
    return LayerResult(claim.stack, claim.index, claim.kind, "exact", max((r.error or 0.0) for r in results),
                       "read at the model's rotary apply function (attention computed inline)")
