r"""The ``conv_position`` comparison: a convolutional position module, observed as its input and output.

The module's input ``x`` and output ``e`` are read as frames ``(B, T, C)`` (SEW's module takes and returns
``(B, C, T)``: transposed), and compared as the sum the encoder's layers receive, with the reference of that sum
from the module's weights, in each form refpos claims:

* ``weight_norm``: one kernel as its direction ``v`` and magnitudes ``g`` (one per tap), at stride 1 (wav2vec 2.0)
  or at SEW's squeeze stride ``s``;
* ``plain``: one kernel;
* ``stacked``: Data2Vec-audio's layers ``layers.0 … layers.{L−1}``, each a plain kernel, a layer norm without
  parameters (torch's default ``eps = 10⁻⁵``: ``Data2VecAudioPositionalConvLayer`` builds its ``nn.LayerNorm``
  without one) and the activation.

The sum: ``x + e`` at stride 1; at stride ``s`` the mean of each ``s`` frames (``SEWEncoder.forward``'s
``AvgPool1d(s, s)``, a partial last window dropped) plus ``e``, both cut to the shorter length. The survey forms
the sum (and the mean) from the recorded tensors, so its bound is the kind's per entry
(:func:`refpos.encodings.conv_position_mistakes.conv_position_bound`, which holds the mean's ``(s + 1)·u·|x̄|``)
plus ``u·|x + e|`` for the survey's own addition.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, absent, graded, mistakes_of, unit
from survey.pixels import PixelRun, Site

#: the forms compared (HuBERT's batch norm before the kernel is not)
FORMS = ("weight_norm", "plain", "stacked")
#: the epsilon of Data2Vec-audio's layer norm between stacked convolutions (torch's ``nn.LayerNorm`` default)
STACKED_EPS = 1e-5


def _frames(tensor: np.ndarray, channels: int) -> np.ndarray:
    """A recorded ``(B, T, C)`` or ``(B, C, T)`` tensor as frames ``(B, T, C)``."""
    if tensor.ndim == 3 and tensor.shape[-1] != channels and tensor.shape[1] == channels:
        tensor = np.swapaxes(tensor, 1, 2)
    return tensor.astype(np.float64)


def _summed(x: np.ndarray, e: np.ndarray, stride: int) -> np.ndarray:
    """What the layers receive: ``x + e``, or the mean of each ``stride`` frames plus ``e`` (module docstring).

    Written here on purpose rather than calling :func:`refpos.encodings.conv_position.add_conv_positions`: this is
    the observed side, and a mistake in refpos's sum must not cancel against the reference that uses it."""
    if stride > 1:
        windows = x.shape[1] // stride
        x = x[:, :windows * stride].reshape(x.shape[0], windows, stride, x.shape[2]).mean(axis=2)
    length = min(x.shape[1], e.shape[1])
    return x[:, :length] + e[:, :length]


def _layers(params: dict[str, np.ndarray]) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """``(kernel, bias)`` of each ``layers.{i}.conv`` of a stacked module, in order."""
    found: dict[int, dict[str, np.ndarray]] = {}
    for name, value in params.items():
        match = re.search(r"layers\.(\d+)\.conv\.(weight|bias)$", name)
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [(found[i].get("weight"), found[i].get("bias")) for i in sorted(found)]


def _inputs(record: Any, site: Site, x: np.ndarray) -> Any:
    """refpos's ``check conv_position`` inputs from the site's weights and the frames ``x``; a ``str`` saying what
    is missing, or ``ValueError`` naming what the claim does not fit."""
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs

    params = {name: p.astype(np.float64) for name, p in site.params.items()}
    if record.form == "stacked":
        layers = _layers(params)
        if not layers or any(w is None for w, _ in layers):
            return f"no stacked convolution layers found ({', '.join(params)})"
        if len(layers) != record.layers:
            raise ValueError(f"transformers stacks {len(layers)} convolutions, refpos claims {record.layers}")
        return ConvPositionInputs("stacked", x, tuple(w for w, _ in layers), tuple(b for _, b in layers),
                                  record.groups, record.activation, eps=STACKED_EPS)
    bias = next((p for n, p in params.items() if n.endswith("conv.bias")), None)
    g = next((p for n, p in params.items() if n.endswith("weight.original0") or n.endswith("weight_g")), None)
    v = next((p for n, p in params.items() if n.endswith("weight.original1") or n.endswith("weight_v")), None)
    kernel = next((p for n, p in params.items() if n.endswith("conv.weight")), None)
    if bias is None or (v is None and kernel is None):
        return f"no convolution weight and bias found ({', '.join(params)})"
    if record.form == "weight_norm" and g is not None and v is not None:
        return ConvPositionInputs("weight_norm", x, (v,), (bias,), record.groups, record.activation,
                                  stride=record.stride, weight_g=g.reshape(-1))
    return ConvPositionInputs("plain", x, (kernel if kernel is not None else v,), (bias,), record.groups,
                              record.activation, stride=record.stride)


def compare_conv_position(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A convolutional position module: its input and output against its weights (module docstring)."""
    from refpos.encodings.conv_position_mistakes import conv_position_bound

    site = next((s for s in sites if s.is_module and any(c.module_in is not None and c.module_out is not None
                                                          for c in s.captures.values())), None)
    if site is None:
        return absent(run, "no position module fed the frames (sites: "
                       f"{', '.join(s.path for s in sites) or 'none'})")
    if record.form not in FORMS:
        return Outcome("not reached", f"{site.path}: the survey compares the {', '.join(FORMS)} forms, refpos "
                       f"claims {record.form}", (site.path,))
    channels = max((p.shape[0] for p in site.params.values() if p.ndim == 3), default=0)  # a kernel's (C, C/G, K)
    cases = []
    for capture in site.captures.values():
        x, e = _frames(capture.module_in, channels), _frames(capture.module_out, channels)
        inputs = _inputs(record, site, x)
        if isinstance(inputs, str):
            return Outcome("not reached", f"{site.path}: {inputs}", (site.path,))
        width = inputs.weights[0].shape[-1]
        if width != record.kernel:
            return Outcome("wrong", f"{site.path}: transformers' kernel is {width} taps, refpos claims "
                           f"{record.kernel}", (site.path,))
        zeroed = None if capture.module_zeroed is None else _frames(capture.module_zeroed, channels)
        observed = e if returns_input(x, zeroed) else _summed(x, e, record.stride)  # OmniASR's x + e, or e
        cases.append((observed, inputs.reference(),
                      conv_position_bound(inputs, unit=unit(run)) + unit(run) * np.abs(observed),
                      mistakes_of("conv_position", inputs)))
    return graded(cases, (site.path,), f"{site.path} conv_position")


def returns_input(x: np.ndarray, zeroed: np.ndarray | None) -> bool:
    """Whether the module returns its input plus the embedding (OmniASR) rather than the embedding alone
    (wav2vec 2.0, whose encoder adds it): with its parameters zeroed its output is then its input (plus the
    activation at 0, one constant), while the embedding alone does not vary with the frames."""
    if zeroed is None or zeroed.shape != x.shape:
        return False
    z, x = zeroed.astype(np.float64), x.astype(np.float64)
    return bool(np.ptp(z - x, axis=-2).max() <= 1e-6 * np.abs(x).max() < np.ptp(z, axis=-2).max())
