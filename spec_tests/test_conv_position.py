"""Spec: convolutional positional embeddings of speech encoders (``conv_positions``, ``stacked_conv_positions``;
docs/conv-position.md).

The oracles below loop over frames and channels with the formulas of docs/conv-position.md#the-math,
independently of any implementation: ``y[b, t, o] = bias[o] + Σ_k Σ_i w[o, i, k]·x[b, s·t + k − ⌊K/2⌋, g(o)·C/G + i]``
(frames outside the input are 0; ``g(o) = ⌊o/(C/G)⌋``), the last frame dropped when ``K`` is even, the
activation (``math.erf`` for the exact GELU), and the sum with the frames (stride s: their mean over windows of
``s``). With ``weight_g`` the kernel is ``g_k·v[:, :, k]/‖v[:, :, k]‖``. Data2Vec-audio's layers add a layer norm
without parameters before each activation.

Properties: an output frame reads exactly the frames ``t − ⌊K/2⌋ … t − ⌊K/2⌋ + K − 1`` and the channels of
its group; scaling ``v`` leaves a weight-normalised embedding unchanged. Tolerances: ``encoding_support.tol``
by the declared dtype, the bound scaled by the sum of the magnitudes of each output's terms. The
``test_mutant_*`` tests run each check on a deliberately wrong adapter (a catalogued mistake of
refpos.encodings.conv_position_mistakes) and show it fails.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from encoding_support import tol
from hypothesis import given
from support import assert_within, require

from refpos.testing.strategies_conv_position import conv_position_cases, stacked_conv_position_cases

ACTIVATION = {
    "gelu": lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))),
    "gelu_new": lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
    "relu": lambda v: max(v, 0.0),
    "swish": lambda v: v / (1 + math.exp(-v)) if v > -700 else 0.0,
}


def _conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, groups: int, stride: int) -> np.ndarray:
    batch, frames = x.shape[0], x.shape[1]
    c_out, per_group, k = w.shape
    pad = k // 2
    t_out = (frames + 2 * pad - k) // stride + 1
    y = np.zeros((batch, t_out, c_out))
    for b in range(batch):
        for t in range(t_out):
            for o in range(c_out):
                first = (o // (c_out // groups)) * per_group
                total = 0.0 if bias is None else float(bias[o])
                for kk in range(k):
                    frame = stride * t + kk - pad
                    if 0 <= frame < frames:
                        total += float(w[o, :, kk] @ x[b, frame, first: first + per_group])
                y[b, t, o] = total
    return y[:, :-1] if k % 2 == 0 else y


def _act(name: str, y: np.ndarray) -> np.ndarray:
    return np.vectorize(ACTIVATION[name], otypes=[float])(y)


def _added(x: np.ndarray, e: np.ndarray, stride: int) -> np.ndarray:
    if stride > 1:
        windows = x.shape[1] // stride
        x = x[:, : windows * stride].reshape(x.shape[0], windows, stride, x.shape[2]).mean(axis=2)
    length = min(x.shape[1], e.shape[1])
    return x[:, :length] + e[:, :length]


def oracle(case: dict) -> np.ndarray:
    w = case["weight"]
    if case["weight_g"] is not None:
        w = case["weight_g"] * w / np.sqrt((w * w).sum(axis=(0, 1)))
    e = _act(case["activation"], _conv(case["x"], w, case["bias"], case["groups"], case["stride"]))
    return _added(case["x"], e, case["stride"])


def stacked_oracle(case: dict) -> tuple[np.ndarray, float]:
    """``x + e`` of the stacked layers, and how much they can amplify an error: per layer the convolution's
    ``max_o Σ|w|`` times the layer norm's ``(2 + max|ŷ|)/min σ`` (an error Δ of a row moves ``(y − μ)/σ`` by at
    most ``(2 + |ŷ|)·Δ/σ``), the activations' slopes at most 1.13."""
    h, gain = case["x"], 1.0
    for w, b in zip(case["weights"], case["biases"], strict=True):
        y = _conv(h, w, b, case["groups"], 1)
        sigma = np.sqrt(y.var(-1, keepdims=True) + case["eps"])
        y = (y - y.mean(-1, keepdims=True)) / sigma
        gain = max(gain, 1.0) * np.abs(w).sum(axis=(1, 2)).max() * (2 + np.abs(y).max()) / sigma.min() * 1.13
        h = _act(case["activation"], y)
    return case["x"] + h, float(gain)


def _scale(case: dict) -> float:
    """The size of an output's terms: Σ|w||x| over a kernel, at most, plus the frames' largest value."""
    w = case.get("weight", case.get("weights"))
    return float(np.abs(w).sum(axis=(-2, -1)).max() * np.abs(case["x"]).max() + np.abs(case["x"]).max()) + 1.0


# ------------------------------------------------------------------------------------------------- checks
def check_formula(conv_positions, case: dict, impl) -> None:
    t = tol(impl)
    assert_within(conv_positions(**case), oracle(case), rtol=t["rtol"], atol=t["atol"] * _scale(case))


def check_stacked_formula(stacked_conv_positions, case: dict, impl) -> None:
    """The dtype's bound on one layer's sums, carried through the layers' gain (``stacked_oracle``)."""
    t = tol(impl)
    expected, gain = stacked_oracle(case)
    assert_within(stacked_conv_positions(**case), expected, rtol=t["rtol"], atol=t["atol"] * _scale(case) * gain)


def check_receptive_field(conv_positions, case: dict, impl) -> None:
    """Changing input frame f, channel c moves exactly the outputs that read it, and ``x`` itself at (f, c), for
    every channel c. A bias of 10 keeps every pre-activation positive, so ReLU is the identity there and each read
    moves its output by ``w[o, i, k] ≠ 0``."""
    case = {**case, "stride": 1, "activation": "relu", "bias": np.full_like(case["bias"], 10.0)}
    x, base = case["x"], conv_positions(**case)
    k, c, groups = case["weight"].shape[2], x.shape[2], case["groups"]
    frame, t = x.shape[1] // 2, np.arange(x.shape[1])
    for channel in range(c):
        bumped = x.copy()
        bumped[:, frame, channel] += 1.0
        moved = np.any(conv_positions(**{**case, "x": bumped}) != base, axis=0)
        expected = ((t - k // 2 <= frame) & (frame < t - k // 2 + k))[:, None] & (
            (np.arange(c) // (c // groups)) == channel // (c // groups))[None, :]
        expected[frame, channel] = True  # x + e: the frame itself
        np.testing.assert_array_equal(moved, expected, err_msg=f"the outputs input channel {channel} reaches")


def check_scale_of_v(conv_positions, case: dict, impl) -> None:
    """With ``weight_g``, ``weight`` is a direction: scaling it changes nothing."""
    case = {**case, "weight_g": np.linspace(0.5, 1.5, case["weight"].shape[2])}
    t = tol(impl)
    assert_within(conv_positions(**{**case, "weight": 3.0 * case["weight"]}), conv_positions(**case),
                  rtol=t["rtol"], atol=t["atol"] * _scale(case))


# -------------------------------------------------------------------------------------------------- tests
@given(case=conv_position_cases())
def test_conv_positions_match_the_formula(impl, case):
    check_formula(require(impl, "conv_positions"), case, impl)


@given(case=stacked_conv_position_cases())
def test_stacked_conv_positions_match_the_formula(impl, case):
    check_stacked_formula(require(impl, "stacked_conv_positions"), case, impl)


@given(case=conv_position_cases(max_kernel=6))
def test_an_output_reads_its_frames_and_its_group_only(impl, case):
    check_receptive_field(require(impl, "conv_positions"), case, impl)


@given(case=conv_position_cases())
def test_the_weight_norm_ignores_the_scale_of_v(impl, case):
    check_scale_of_v(require(impl, "conv_positions"), case, impl)


def test_an_unknown_activation_names_the_parameter(impl):
    conv_positions = require(impl, "conv_positions")
    with pytest.raises(ValueError, match="activation"):
        conv_positions(np.ones((1, 6, 2)), np.ones((2, 1, 3)), None, 2, "mish")


# ------------------------------------------------------------------------------------------------ mutants
def _mutant(mistake_name: str):
    """``conv_positions`` computing the catalogued mistake (refpos.encodings.conv_position_mistakes)."""
    from refpos.encodings.conv_position_mistakes import CONV_POSITION_MISTAKES, ConvPositionInputs

    mistake = next(m for m in CONV_POSITION_MISTAKES if m.name == mistake_name)

    def conv_positions(x, weight, bias, groups, activation, stride=1, weight_g=None):
        form = "plain" if weight_g is None else "weight_norm"
        inputs = ConvPositionInputs(form, x, (weight,), (bias,), groups, activation, stride=stride, weight_g=weight_g)
        wrong = mistake.compute(inputs) if form in mistake.forms else None
        return inputs.reference() if wrong is None else wrong
    return conv_positions


def _stacked_mutant(stacked_conv_positions):
    from refpos.encodings.conv_position_mistakes import CONV_POSITION_MISTAKES, ConvPositionInputs

    mistake = next(m for m in CONV_POSITION_MISTAKES if m.name == "layer_norm_missing")

    def wrong(x, weights, biases, groups, activation, eps):
        return mistake.compute(ConvPositionInputs("stacked", x, tuple(weights), tuple(biases), groups, activation,
                                                  eps=eps))
    return wrong


def _fixed() -> dict:
    rng = np.random.default_rng(11)
    return {"x": rng.standard_normal((1, 10, 4)), "weight": rng.uniform(0.2, 1.0, (4, 2, 4)),
            "bias": 0.1 * rng.standard_normal(4), "groups": 2, "activation": "gelu", "stride": 1,
            "weight_g": None}


REFERENCE = SimpleNamespace(INFO={"dtype": "float64"})


@pytest.mark.parametrize(("check", "mistake", "changes"), [
    (check_formula, "trim_first_frame", {}), (check_formula, "gelu_tanh_for_exact", {}),
    (check_formula, "stride_ignored", {"stride": 2}), (check_formula, "embedding_not_added", {}),
    (check_formula, "weight_norm_per_channel", {"weight_g": np.array([0.5, 1.0, 1.5, 2.0])}),
    (check_receptive_field, "trim_first_frame", {}), (check_receptive_field, "groups_interleaved", {}),
    (check_receptive_field, "groups_ignored", {}),
    (check_scale_of_v, "weight_norm_missing", {}),
])
def test_mutant_fails_the_check(check, mistake, changes):
    with pytest.raises(AssertionError):
        check(_mutant(mistake), {**_fixed(), **changes}, REFERENCE)


def test_mutant_without_layer_norm_fails_the_stacked_formula():
    rng = np.random.default_rng(3)
    case = {"x": rng.standard_normal((1, 9, 4)), "weights": rng.standard_normal((2, 4, 2, 3)),
            "biases": rng.standard_normal((2, 4)), "groups": 2, "activation": "gelu", "eps": 1e-5}
    with pytest.raises(AssertionError):
        check_stacked_formula(_stacked_mutant(None), case, REFERENCE)

