"""refpos.encodings.conv_position: the properties of convolutional positional embeddings (docs/conv-position.md),
each shown to fail on a deliberately wrong variant; the catalogue of mistakes and its identifier; bad inputs.

The anchors are refpos/tests/test_anchors_conv_position.py; the contract's properties
spec_tests/test_conv_position.py. Tolerances: which frames and channels an output reads is decided exactly
(a perturbation either reaches an output or leaves it bit-equal); sums compared in another order within
``n·2⁻⁵³·Σ|terms|`` where the test says so.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.conv_position import (
    add_conv_positions,
    conv_position_embedding,
    grouped_conv1d,
    same_pad_trim,
    stacked_conv_position_embedding,
    weight_norm,
)
from refpos.encodings.conv_position_mistakes import (
    CONV_POSITION_MISTAKES,
    ConvPositionInputs,
    conv_position_bound,
    identify_conv_position,
)


@st.composite
def layers(draw):
    """A small grouped convolution: (frames x, kernel, bias, groups)."""
    groups = draw(st.sampled_from([1, 2, 4]))
    per_group = draw(st.integers(1, 3))
    channels = groups * per_group
    kernel = draw(st.integers(1, 8))
    frames = draw(st.integers(kernel, 20))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return (rng.standard_normal((2, frames, channels)), rng.standard_normal((channels, per_group, kernel)),
            rng.standard_normal(channels), groups)


def _np(a) -> np.ndarray:
    return np.asarray(to_numpy(a))


def _reached(embed, x: np.ndarray, frame: int, channel: int) -> np.ndarray:
    """The (frame, channel) entries of the embedding that a change of input frame ``frame``, channel ``channel``
    moves (bit-level)."""
    bumped = x.copy()
    bumped[:, frame, channel] += 1.0
    return np.any(embed(bumped) != embed(x), axis=0)


@given(layer=layers(), data=st.data())
def test_frame_t_reads_frames_t_minus_half_k_onwards_and_only_its_group(xp, layer, data):
    """Output frame t reads input frames ``t − ⌊K/2⌋ … t − ⌊K/2⌋ + K − 1``; output channel o reads the input
    channels of its group only (the weights are drawn non-zero, so every read input moves the output)."""
    x, w, b, groups = layer
    frames, channels, kernel = x.shape[1], x.shape[2], w.shape[2]
    frame, channel = data.draw(st.integers(0, frames - 1)), data.draw(st.integers(0, channels - 1))

    def embed(frames_in):
        return _np(conv_position_embedding(xp.asarray(frames_in), xp.asarray(w), xp.asarray(b), groups=groups,
                                           activation="linear"))

    reached = _reached(embed, x, frame, channel)
    t = np.arange(frames)
    start = t - kernel // 2
    reads_frame = (start <= frame) & (frame < start + kernel)
    group_of = np.arange(channels) // (channels // groups)
    expected = reads_frame[:, None] & (group_of == group_of[channel])[None, :]
    np.testing.assert_array_equal(reached, expected)


def test_the_receptive_field_check_fails_on_the_first_frame_trimmed_and_on_interleaved_groups():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((1, 12, 4)), rng.standard_normal((4, 2, 4)), rng.standard_normal(4)

    def first_trimmed(frames_in):
        y = _np(grouped_conv1d(frames_in, w, b, groups=2, stride=1, padding=2))
        return y[:, 1:]

    t = np.arange(12)
    reached = _reached(first_trimmed, x, 5, 0)
    assert not np.array_equal(reached[:, 0], (t - 2 <= 5) & (5 < t + 2))
    interleaved = np.zeros((4, 4, 4))
    for o in range(4):
        interleaved[o, [o // 2, o // 2 + 2]] = w[o]  # group g reads channels g and g + 2

    def interleaved_groups(frames_in):
        return _np(grouped_conv1d(frames_in, interleaved, b, groups=1, stride=1, padding=2))[:, :-1]

    assert _reached(interleaved_groups, x, 5, 2)[:, 0].any()  # channel 2 (the second group's) reaches the first


@given(layer=layers(), shift=st.integers(1, 6))
def test_the_embedding_is_translation_equivariant(xp, layer, shift):
    """Frames prepended with zeros (what the padding reads anyway) shift the embedding, bit for bit."""
    x, w, b, groups = layer
    shifted = np.concatenate([np.zeros((2, shift, x.shape[2])), x], axis=1)

    def embed(frames_in):
        return _np(conv_position_embedding(xp.asarray(frames_in), xp.asarray(w), xp.asarray(b), groups=groups,
                                           activation="gelu"))

    np.testing.assert_array_equal(embed(shifted)[:, shift:], embed(x))


@given(layer=layers(), stride=st.integers(2, 4))
def test_a_strided_embedding_keeps_every_sth_frame(xp, layer, stride):
    """Stride s keeps frames 0, s, 2s, … of the stride-1 embedding (SEW's squeeze)."""
    x, w, b, groups = layer
    args = (xp.asarray(x), xp.asarray(w), xp.asarray(b))
    full = _np(conv_position_embedding(*args, groups=groups, activation="gelu", stride=1))
    strided = _np(conv_position_embedding(*args, groups=groups, activation="gelu", stride=stride))
    kept = full[:, ::stride][:, : strided.shape[1]]
    np.testing.assert_array_equal(strided[:, : kept.shape[1]], kept)


def test_the_stride_check_fails_when_the_stride_is_ignored():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((1, 10, 2)), rng.standard_normal((2, 1, 3)), rng.standard_normal(2)
    full = _np(conv_position_embedding(x, w, b, groups=2, activation="gelu", stride=1))
    length = _np(conv_position_embedding(x, w, b, groups=2, activation="gelu", stride=2)).shape[1]
    ignored = full[:, :length]  # a port that ran stride 1 and kept the first frames
    assert not np.array_equal(ignored, full[:, ::2][:, :length])


@given(seed=st.integers(0, 2**32 - 1), kernel=st.integers(1, 9), scale=st.floats(0.01, 100.0))
def test_weight_norm_gives_each_tap_the_norm_g_and_ignores_the_scale_of_v(xp, seed, kernel, scale):
    """‖w[:, :, k]‖ = |g_k| over all output and input channels (dim=2), and g·(αv)/‖αv‖ = g·v/‖v‖: within a few
    roundings of a sum of C·C/G squares (24 terms: 30 ulps)."""
    rng = np.random.default_rng(seed)
    v, g = rng.standard_normal((6, 4, kernel)), rng.uniform(0.1, 3.0, kernel)
    w = _np(weight_norm(xp.asarray(v), xp.asarray(g), dim=2))
    np.testing.assert_allclose(np.sqrt((w * w).sum(axis=(0, 1))), g, rtol=30 * 2.0**-53)
    np.testing.assert_allclose(_np(weight_norm(xp.asarray(scale * v), xp.asarray(g), dim=2)), w, rtol=30 * 2.0**-53,
                               atol=30 * 2.0**-53 * np.abs(w).max())
    per_channel = g * v / np.sqrt((v * v).sum(axis=(1, 2), keepdims=True))  # the norm over the wrong axes
    if kernel > 1:
        assert not np.allclose(np.sqrt((per_channel**2).sum(axis=(0, 1))), g, rtol=1e-6)


@given(seed=st.integers(0, 2**32 - 1))
def test_data2vec_layers_are_normalised_before_their_activation(xp, seed):
    """With a linear activation every frame of each layer's output has mean 0 and variance v/(v + ε)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 15, 8))
    weights = [rng.standard_normal((8, 2, 5)) for _ in range(3)]
    biases = [rng.standard_normal(8) for _ in range(3)]
    e = _np(stacked_conv_position_embedding(xp.asarray(x), [xp.asarray(w) for w in weights],
                                            [xp.asarray(b) for b in biases], groups=4, activation="linear", eps=1e-5))
    assert np.all(np.abs(e.mean(axis=-1)) < 1e-14)
    assert np.all(np.abs(e.var(axis=-1) - 1) < 1e-3)  # v/(v + 1e-5) for rows of variance v ≥ 0.01
    unnormalised = x
    for w, b in zip(weights, biases, strict=True):
        unnormalised = _np(conv_position_embedding(unnormalised, w, b, groups=4, activation="linear"))
    assert not np.all(np.abs(unnormalised.mean(axis=-1)) < 1e-14)


def test_sew_adds_the_embedding_to_the_pooled_frames(xp):
    x = np.arange(2 * 7 * 3, dtype=np.float64).reshape(2, 7, 3)
    e = np.ones((2, 4, 3))
    out = _np(add_conv_positions(xp.asarray(x), xp.asarray(e), stride=2))
    np.testing.assert_array_equal(out, (x[:, 0:6:2] + x[:, 1:6:2]) / 2 + 1)  # 3 windows of 2; e cut to 3


# ------------------------------------------------------------------------------------------------ mistakes
def _standard_inputs() -> list[ConvPositionInputs]:
    """Small layers of every form, able to show every mistake (even and odd kernels, a stride, groups)."""
    rng = np.random.default_rng(37)
    c, g = 8, 2

    def kernel(k):
        return rng.standard_normal((c, c // g, k)) / np.sqrt(k * c / g)

    def frames():
        return rng.standard_normal((2, 12, c))

    def bias():
        return 0.1 * rng.standard_normal(c)

    stats = (0.1 * rng.standard_normal(c), rng.uniform(0.5, 2.0, c), rng.uniform(0.5, 1.5, c),
             0.1 * rng.standard_normal(c), 1e-5)
    return [ConvPositionInputs("weight_norm", frames(), (kernel(4),), (bias(),), g, "gelu",
                               weight_g=rng.uniform(0.5, 1.5, 4)),
            ConvPositionInputs("weight_norm", frames(), (kernel(5),), (bias(),), g, "gelu", stride=2,
                               weight_g=rng.uniform(0.5, 1.5, 5)),
            ConvPositionInputs("plain", frames(), (kernel(6),), (bias(),), g, "gelu"),
            ConvPositionInputs("batch_norm", frames(), (kernel(4),), (bias(),), g, "gelu", batch_norm=stats),
            ConvPositionInputs("stacked", frames(), tuple(kernel(5) for _ in range(3)), tuple(bias() for _ in range(3)),
                               g, "gelu", eps=1e-5)]


def test_every_mistake_is_shown_by_a_standard_input_and_named_from_its_output():
    shown = set()
    for inputs in _standard_inputs():
        reference, bound = inputs.reference(), conv_position_bound(inputs)
        for mistake in CONV_POSITION_MISTAKES:
            wrong = mistake.compute(inputs) if inputs.form in mistake.forms else None
            if wrong is None or (mistake.name == "gelu_tanh_for_exact" and inputs.form == "stacked"):
                continue  # the stacked form's bound is above the tanh GELU's largest difference
            assert wrong.shape != reference.shape or np.abs(wrong - reference).max() > 10 * bound.max(), mistake.name
            assert identify_conv_position(wrong, inputs) == mistake.name
            shown.add(mistake.name)
    assert shown == {m.name for m in CONV_POSITION_MISTAKES}


def test_a_correct_float32_port_is_named_nothing():
    """refpos's own functions run on float32 arrays (a float32 weight norm, convolution, GELU, sum) match no
    mistake; neither does the float64 reference."""
    for inputs in _standard_inputs():
        assert identify_conv_position(inputs.reference(), inputs) is None
        as32 = ConvPositionInputs(
            inputs.form, inputs.x.astype(np.float32), tuple(w.astype(np.float32) for w in inputs.weights),
            tuple(b.astype(np.float32) for b in inputs.biases), inputs.groups, inputs.activation, stride=inputs.stride,
            weight_g=None if inputs.weight_g is None else inputs.weight_g.astype(np.float32),
            batch_norm=None if inputs.batch_norm is None else (*(a.astype(np.float32) for a in inputs.batch_norm[:4]),
                                                               inputs.batch_norm[4]), eps=inputs.eps)
        port = as32.reference()
        assert port.dtype == np.float32
        assert identify_conv_position(port, inputs) is None


# ----------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("call", "name"), [
    (lambda: weight_norm(np.ones((4, 2, 3)), np.ones(4), dim=2), "g"),
    (lambda: weight_norm(np.ones((4, 2, 3)), np.ones(3), dim=3), "dim"),
    (lambda: grouped_conv1d(np.ones((1, 5, 4)), np.ones((4, 3, 3)), None, groups=2, stride=1, padding=1), "weight"),
    (lambda: grouped_conv1d(np.ones((5, 4)), np.ones((4, 2, 3)), None, groups=2, stride=1, padding=1), "x"),
    (lambda: grouped_conv1d(np.ones((1, 5, 4)), np.ones((4, 2, 3)), np.ones(3), groups=2, stride=1, padding=1),
     "bias"),
    (lambda: grouped_conv1d(np.ones((1, 5, 4)), np.ones((4, 2, 3)), None, groups=2, stride=0, padding=1), "stride"),
    (lambda: grouped_conv1d(np.ones((1, 2, 4)), np.ones((4, 2, 9)), None, groups=2, stride=1, padding=1), "frames"),
    (lambda: conv_position_embedding(np.ones((1, 5, 4)), np.ones((4, 2, 3)), None, groups=2, activation="mish"),
     "activation"),
    (lambda: same_pad_trim(np.ones((1, 5, 4)), 0), "kernel_size"),
    (lambda: add_conv_positions(np.ones((1, 5, 4)), np.ones((1, 4, 4)), stride=1), "frames"),
    (lambda: stacked_conv_position_embedding(np.ones((1, 5, 4)), [np.ones((4, 2, 3))], [], groups=2,
                                             activation="gelu", eps=1e-5), "biases"),
    (lambda: stacked_conv_position_embedding(np.ones((1, 5, 4)), [np.ones((4, 2, 3))], [None], groups=2,
                                             activation="gelu", eps=0.0), "eps"),
])
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# -------------------------------------------------------------------------------------------------- goldens
def test_golden_cases_are_certified_within_their_tolerance():
    """Every case of refpos.golden.conv_position_cases: refpos's float64 ``x + e`` within the case's float64
    tolerance of the mpmath values, and the reference adapter reproduces it through the case's call."""
    from refpos.golden.conv_position_cases import conv_position_cases
    from refpos.golden.manifest import case_entry
    from refpos.testing import adapter

    for case in conv_position_cases():
        entry = case_entry(case, {}, certify=True)
        assert entry["outputs"]["out"]["certified"]["within_float64_tolerance"], case.id
        call = case.parameters["call"]
        args = [case.inputs[a["input"]] if "input" in a else a["value"] for a in call["args"]]
        np.testing.assert_array_equal(getattr(adapter, call["function"])(*args), case.outputs["out"].array)
