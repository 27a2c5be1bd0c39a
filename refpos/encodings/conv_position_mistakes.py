r"""The catalogued mistakes of convolutional positional embeddings, the kind's tolerance, and an identifier.

**Tolerance** (:func:`conv_position_bound`): what a correct port computing in float32 (``u = 2⁻²⁴``; an anchor
passes ``u = 2⁻⁵³`` for a float64 library) may differ by, per entry of the encoder's input ``x + e``:

* the convolution: a sum of ``n = K·C/G`` products and the bias, in any order, with ``x`` and ``w`` stored in
  the precision: ``(n + 3)·u·S`` where ``S = Σ|w||x| + |b|`` is the sum of the magnitudes of that entry's terms;
* the weight norm ``g·v/‖v‖`` (when the port computes it): the norm of ``m = C·C/G`` squares, a square root, a
  division and a product move each weight by ``(m/2 + 3)·u`` relative, so the entry by ``(m/2 + 3)·u·S``;
* HuBERT's batch norm before the convolution: five roundings of each normalised frame, ``5u·|x̂|``, carried
  into the convolution as ``Σ|w|·5u|x̂|``;
* the activation: a slope of at most 1.13 (GELU's largest, ``Φ(x) + xφ(x)`` at ``x = √2``; ReLU 1, SiLU 1.1)
  times the error above, and its own evaluation, ``4u·|e| + u·|y|`` (``erf``, a sum and two products; the
  ``u·|y|`` covers ``1 + erf`` cancelling for negative ``y``);
* Data2Vec-audio's layer norm (no parameters) after each convolution: an error ``Δ`` of the row moves
  ``(y − μ)/σ`` by at most ``(2 + |ŷ|)·Δ/σ`` (``σ`` the row's deviation) and its own evaluation adds
  ``(C + 6)·u·|ŷ|``; the next layer reads the result as its input error (``Σ|w|·Δ``);
* the sum ``x + e`` (SEW: the mean of ``s`` frames, ``(s + 1)·u·|x̄|``): ``u·|x + e|``.

These are worst-case bounds (any summation order); at wav2vec2's size they are far above a real float32
error, which is why the catalogue is shown on small inputs (:func:`identify_conv_position` separates the tanh
GELU from the exact one only where the bound is below their largest difference, 4.7·10⁻⁴).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from refpos.backend import to_numpy
from refpos.core.activations import ACTIVATIONS
from refpos.encodings.conv_position import (
    add_conv_positions,
    batch_norm,
    conv_position_embedding,
    grouped_conv1d,
    layer_norm,
    stacked_conv_position_embedding,
    weight_norm,
)
from refpos.validation import check_choice

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24
#: the largest slope of each activation (GELU: Φ(x) + xφ(x) at x = √2; tanh GELU the same within 10⁻³; SiLU
#: 1.0998 at x ≈ 2.4; ReLU 1)
SLOPE = {"gelu": 1.13, "gelu_python": 1.13, "gelu_new": 1.13, "gelu_pytorch_tanh": 1.13, "relu": 1.0,
         "silu": 1.1, "swish": 1.1, "linear": 1.0}
#: the forms: weight-normalised (wav2vec2 …), a plain kernel (OmniASR), batch norm then a plain kernel (HuBERT's
#: conv_pos_batch_norm), stacked layers with layer norm (Data2Vec-audio)
CONV_FORMS = ("weight_norm", "plain", "batch_norm", "stacked")


@dataclass(frozen=True)
class ConvPositionInputs:
    """The inputs of one convolutional positional embedding, NumPy float64.

    ``weights`` holds one kernel ``(C, C/G, K)`` per layer (one but for ``"stacked"``; the direction ``v`` for
    ``"weight_norm"``, with ``weight_g`` its magnitudes ``(K,)``); ``batch_norm`` is ``(running_mean,
    running_var, weight, bias, eps)``; ``eps`` the layer norm's of ``"stacked"``.
    """

    form: str
    x: np.ndarray
    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    groups: int
    activation: str
    stride: int = 1
    weight_g: np.ndarray | None = None
    batch_norm: tuple | None = None
    eps: float | None = None

    def __post_init__(self) -> None:
        check_choice("form", self.form, CONV_FORMS)

    def kernel(self) -> np.ndarray:
        """The kernel the convolution uses (the weight norm applied where the form has one)."""
        if self.form == "weight_norm":
            return np.asarray(to_numpy(weight_norm(self.weights[0], self.weight_g, dim=2)))
        return self.weights[0]

    def frames(self) -> np.ndarray:
        """What the convolution reads: ``x``, or its batch norm."""
        if self.form == "batch_norm":
            *stats, eps = self.batch_norm
            return np.asarray(to_numpy(batch_norm(self.x, *stats, eps=eps)))
        return self.x

    def embedding(self, activation: str | None = None) -> np.ndarray:
        name = activation or self.activation
        if self.form == "stacked":
            return np.asarray(to_numpy(stacked_conv_position_embedding(
                self.x, list(self.weights), list(self.biases), groups=self.groups, activation=name, eps=self.eps)))
        return np.asarray(to_numpy(conv_position_embedding(self.frames(), self.kernel(), self.biases[0],
                                                           groups=self.groups, activation=name, stride=self.stride)))

    def reference(self) -> np.ndarray:
        """refpos's ``x + e`` (SEW: the pooled frames plus ``e``)."""
        return np.asarray(to_numpy(add_conv_positions(self.x, self.embedding(), stride=self.stride)))


# -------------------------------------------------------------------------------------------------- bound
def _conv_magnitudes(h: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None, inputs: ConvPositionInputs,
                     stride: int) -> np.ndarray:
    """``S = Σ|w||x| + |b|`` per output entry, after the trim."""
    k = kernel.shape[2]
    s = np.asarray(to_numpy(grouped_conv1d(np.abs(h), np.abs(kernel), None if bias is None else np.abs(bias),
                                           groups=inputs.groups, stride=stride, padding=k // 2)))
    return s[:, :-1] if k % 2 == 0 else s


def _activation_bound(y_error: np.ndarray, y: np.ndarray, e: np.ndarray, activation: str, unit: float) -> np.ndarray:
    return SLOPE[activation] * y_error + unit * (4 * np.abs(e) + np.abs(y))


def _values_and_bound(inputs: ConvPositionInputs, unit: float) -> tuple[np.ndarray, np.ndarray]:
    """The embedding recomputed step by step, for the magnitudes the bound reads, and the bound itself."""
    act = ACTIVATIONS[inputs.activation]
    if inputs.form == "stacked":
        h, h_error = inputs.x, unit * np.abs(inputs.x)  # the frames stored in the precision
        for kernel, bias in zip(inputs.weights, inputs.biases, strict=True):
            k, c = kernel.shape[2], kernel.shape[0]
            n = k * kernel.shape[1]
            carried = _conv_magnitudes(h_error, kernel, None, inputs, 1)
            magnitude = _conv_magnitudes(h, kernel, bias, inputs, 1)
            y = np.asarray(to_numpy(grouped_conv1d(h, kernel, bias, groups=inputs.groups, stride=1, padding=k // 2)))
            y = y[:, :-1] if k % 2 == 0 else y
            y_error = carried + (n + 3) * unit * magnitude
            sigma = np.sqrt(np.var(y, axis=-1, keepdims=True) + inputs.eps)
            normed = np.asarray(to_numpy(layer_norm(y, eps=inputs.eps)))
            ln_error = (2 + np.abs(normed)) * y_error.max(axis=-1, keepdims=True) / sigma
            ln_error = ln_error + (c + 6) * unit * np.abs(normed)
            h_next = np.asarray(to_numpy(act(normed)))
            h_error = _activation_bound(ln_error, normed, h_next, inputs.activation, unit)
            h = h_next
        e, e_error = h, h_error
    else:
        frames, kernel, bias = inputs.frames(), inputs.kernel(), inputs.biases[0]
        k = kernel.shape[2]
        n = k * kernel.shape[1]
        magnitude = _conv_magnitudes(frames, kernel, bias, inputs, inputs.stride)
        relative = n + 3
        if inputs.form == "weight_norm":
            relative += kernel.shape[0] * kernel.shape[1] / 2 + 3
        y_error = relative * unit * magnitude
        if inputs.form == "batch_norm":
            y_error = y_error + _conv_magnitudes(5 * unit * np.abs(frames), kernel, None, inputs, inputs.stride)
        y = np.asarray(to_numpy(grouped_conv1d(frames, kernel, bias, groups=inputs.groups, stride=inputs.stride,
                                               padding=k // 2)))
        y = y[:, :-1] if k % 2 == 0 else y
        e = np.asarray(to_numpy(act(y)))
        e_error = _activation_bound(y_error, y, e, inputs.activation, unit)
    return e, e_error


def embedding_bound(inputs: ConvPositionInputs, *, unit: float = U32) -> np.ndarray:
    """The tolerance of every entry of the embedding ``e`` (:meth:`ConvPositionInputs.embedding`) for a port
    computing in precision ``unit`` (module docstring)."""
    return _values_and_bound(inputs, unit)[1]


def conv_position_bound(inputs: ConvPositionInputs, *, unit: float = U32) -> np.ndarray:
    """The tolerance of every entry of ``x + e`` (the shape of :meth:`ConvPositionInputs.reference`): the module
    docstring's bound for a port computing in precision ``unit`` (float32 by default)."""
    e, e_error = _values_and_bound(inputs, unit)
    out = inputs.reference()
    pooled_error = (inputs.stride + 1) * unit * np.abs(out - e[:, : out.shape[1]])
    return e_error[:, : out.shape[1]] + pooled_error + unit * np.abs(out)


# ------------------------------------------------------------------------------------------------ mistakes
@dataclass(frozen=True)
class ConvPositionMistake:
    """A catalogued mistake: its name, one line saying what the port did, the forms it can happen in, and the
    wrong ``x + e`` from the same inputs (``None`` where the inputs cannot show it)."""

    name: str
    description: str
    forms: tuple[str, ...]
    compute: Callable[[ConvPositionInputs], np.ndarray | None]


def _added(inputs: ConvPositionInputs, e: np.ndarray) -> np.ndarray:
    return np.asarray(to_numpy(add_conv_positions(inputs.x, e, stride=inputs.stride)))


def _trim_first(inputs: ConvPositionInputs) -> np.ndarray | None:
    if inputs.form == "stacked" or inputs.weights[0].shape[2] % 2:
        return None
    kernel = inputs.kernel()
    k = kernel.shape[2]
    y = np.asarray(to_numpy(grouped_conv1d(inputs.frames(), kernel, inputs.biases[0], groups=inputs.groups,
                                           stride=inputs.stride, padding=k // 2)))
    return _added(inputs, np.asarray(to_numpy(ACTIVATIONS[inputs.activation](y[:, 1:]))))


def _with_kernel(inputs: ConvPositionInputs, kernel: np.ndarray) -> np.ndarray:
    plain = replace(inputs, form="plain" if inputs.form == "weight_norm" else inputs.form, weights=(kernel,),
                    weight_g=None)
    return _added(inputs, plain.embedding())


def _norm_per_channel(inputs: ConvPositionInputs) -> np.ndarray:
    v, g = inputs.weights[0], np.asarray(inputs.weight_g).reshape(1, 1, -1)
    return _with_kernel(inputs, g * v / np.sqrt((v * v).sum(axis=(1, 2), keepdims=True)))


def _regrouped(inputs: ConvPositionInputs, channels: np.ndarray) -> np.ndarray | None:
    """The kernel of each output channel applied to other input channels (``channels[g, i]``: the input channel
    that group g's i-th kernel column reads), as one dense convolution."""
    if inputs.form == "stacked" or inputs.groups == 1:
        return None
    kernel = inputs.kernel()
    c_out, k = kernel.shape[0], kernel.shape[2]
    dense = np.zeros((c_out, inputs.x.shape[2], k))
    for o in range(c_out):
        group = o // (c_out // inputs.groups)
        np.add.at(dense[o], channels[group], kernel[o])
    x = replace(inputs, groups=1)
    return _added(inputs, np.asarray(to_numpy(conv_position_embedding(
        x.frames(), dense, inputs.biases[0], groups=1, activation=inputs.activation, stride=inputs.stride))))


def _groups_interleaved(inputs: ConvPositionInputs) -> np.ndarray | None:
    g, per = inputs.groups, inputs.x.shape[2] // inputs.groups
    return _regrouped(inputs, np.arange(g * per).reshape(per, g).T)  # group g reads g, g + G, g + 2G, …


def _groups_ignored(inputs: ConvPositionInputs) -> np.ndarray | None:
    per = inputs.x.shape[2] // inputs.groups
    return _regrouped(inputs, np.tile(np.arange(per), (inputs.groups, 1)))  # every group reads the first


def _other_activation(name: str, only: tuple[str, ...] | None = None):
    def compute(inputs: ConvPositionInputs) -> np.ndarray | None:
        if only is not None and inputs.activation not in only:
            return None
        return _added(inputs, inputs.embedding(activation=name))
    return compute


def _stride_ignored(inputs: ConvPositionInputs) -> np.ndarray | None:
    if inputs.stride == 1:
        return None
    full = replace(inputs, stride=1).embedding()
    pooled_length = inputs.x.shape[1] // inputs.stride
    return _added(inputs, full[:, :pooled_length])


def _layer_norm_missing(inputs: ConvPositionInputs) -> np.ndarray:
    h = inputs.x
    for kernel, bias in zip(inputs.weights, inputs.biases, strict=True):
        h = np.asarray(to_numpy(conv_position_embedding(h, kernel, bias, groups=inputs.groups,
                                                        activation=inputs.activation)))
    return _added(inputs, h)


def _batch_norm_missing(inputs: ConvPositionInputs) -> np.ndarray:
    return _added(inputs, replace(inputs, form="plain").embedding())


SINGLE = ("weight_norm", "plain", "batch_norm")

#: the catalogue, in the order the identifier tries it
CONV_POSITION_MISTAKES: tuple[ConvPositionMistake, ...] = (
    ConvPositionMistake("trim_first_frame", "an even kernel's extra frame removed at the start instead of the end "
                        "(PyTorch's padding='same'): every frame reads one frame later", SINGLE, _trim_first),
    ConvPositionMistake("weight_norm_per_channel", "the weight norm taken per output channel (torch's default "
                        "dim=0) instead of per kernel tap over all channels (dim=2)", ("weight_norm",),
                        _norm_per_channel),
    ConvPositionMistake("weight_norm_missing", "the direction v used as the kernel, without g/‖v‖",
                        ("weight_norm",), lambda i: _with_kernel(i, i.weights[0])),
    ConvPositionMistake("groups_interleaved", "group g reads input channels g, g + G, g + 2G, … instead of its "
                        "contiguous block", SINGLE, _groups_interleaved),
    ConvPositionMistake("groups_ignored", "every output channel reads the first C/G input channels (the groups "
                        "dropped)", SINGLE, _groups_ignored),
    ConvPositionMistake("activation_missing", "the convolution's output added without its activation",
                        CONV_FORMS, _other_activation("linear")),
    ConvPositionMistake("gelu_tanh_for_exact", "GELU's tanh approximation where the model uses the exact (erf) "
                        "GELU", CONV_FORMS, _other_activation("gelu_new", only=("gelu", "gelu_python"))),
    ConvPositionMistake("embedding_not_added", "the frames passed on without the positional embedding", CONV_FORMS,
                        lambda i: _added(i, np.zeros_like(i.embedding()))),
    ConvPositionMistake("stride_ignored", "SEW's strided convolution run with stride 1 (its first frames added to "
                        "the pooled ones)", SINGLE, _stride_ignored),
    ConvPositionMistake("layer_norm_missing", "Data2Vec-audio's layers without their layer norm", ("stacked",),
                        _layer_norm_missing),
    ConvPositionMistake("batch_norm_missing", "HuBERT's batch norm before the convolution left out",
                        ("batch_norm",), _batch_norm_missing),
)


def _within(candidate: np.ndarray, values: np.ndarray, bound: np.ndarray | float) -> bool:
    return candidate.shape == values.shape and bool(np.all(np.abs(candidate - values) <= bound))


def identify_conv_position(candidate: object, inputs: ConvPositionInputs) -> str | None:
    """The name of the catalogued mistake whose ``x + e`` the candidate matches, or ``None``: ``None`` for a correct
    port (within :func:`conv_position_bound` of the reference, first) and for an output no mistake explains. A
    mistake's output is compared within the reference's largest bound plus its own rounding ``u·|value|``."""
    got = np.asarray(to_numpy(candidate), dtype=np.float64)
    bound = conv_position_bound(inputs)
    if _within(got, inputs.reference(), bound):
        return None
    for mistake in CONV_POSITION_MISTAKES:
        wrong = mistake.compute(inputs) if inputs.form in mistake.forms else None
        if wrong is not None and _within(got, wrong, bound.max() + U32 * np.abs(wrong)):
            return mistake.name
    return None
