r"""The ``conv_position`` comparison: a convolutional position module, observed as its input and output."""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, graded, mistakes_of, unit
from survey.pixels import PixelRun, Site


def compare_conv_position(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A convolutional position module: its input and output against its weights (module docstring)."""
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs, conv_position_bound

    site = next((s for s in sites if s.is_module and any(c.module_in is not None and c.module_out is not None
                                                          for c in s.captures.values())), None)
    if site is None:
        return Outcome("wrong", "no position module fed the frames (sites: "
                       f"{', '.join(s.path for s in sites) or 'none'})")
    if record.form not in ("weight_norm", "plain") or record.stride != 1:
        return Outcome("not reached", f"{site.path}: the survey compares the weight-norm and plain forms at stride 1 "
                       f"only, refpos claims {record.form} at stride {record.stride}", (site.path,))
    params = {name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1]: p.astype(np.float64)
              for name, p in site.params.items()}
    bias = next((p for n, p in params.items() if n.endswith(".bias")), None)
    g, v = params.get("weight.original0"), params.get("weight.original1")
    kernel = next((p for n, p in params.items() if n.endswith("conv.weight")), None)
    if bias is None or (v is None and kernel is None):
        return Outcome("not reached", f"{site.path}: no convolution weight and bias found ({', '.join(params)})",
                       (site.path,))
    width = (v if v is not None else kernel).shape[-1]
    if width != record.kernel:
        return Outcome("wrong", f"{site.path}: transformers' kernel is {width} taps, refpos claims {record.kernel}",
                       (site.path,))
    cases = []
    for capture in site.captures.values():
        x, e = capture.module_in.astype(np.float64), capture.module_out.astype(np.float64)
        if record.form == "weight_norm" and g is not None:
            inputs = ConvPositionInputs("weight_norm", x, (v,), (bias,), record.groups, record.activation,
                                        weight_g=g.reshape(-1))
        else:
            inputs = ConvPositionInputs("plain", x, (kernel if kernel is not None else v,), (bias,), record.groups,
                                        record.activation)
        reference = inputs.reference()
        observed = e if returns_input(x, capture.module_zeroed) else x[:, :e.shape[1]] + e
        cases.append((observed, reference, conv_position_bound(inputs, unit=unit(run)) + unit(run) * np.abs(observed),
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
