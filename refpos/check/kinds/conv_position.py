"""``refpos check conv_position``: the frames a speech encoder's layers receive, ``x + e``, from a call of
``conv_positions`` (wav2vec 2.0's weight-normalised or a plain grouped convolution, SEW's stride),
``batch_norm_conv_positions`` (HuBERT's batch norm first: refpos's own call) or ``stacked_conv_positions``
(Data2Vec-audio), against :mod:`refpos.encodings.conv_position` within the bound of a
float32 port per entry (:func:`refpos.encodings.conv_position_mistakes.conv_position_bound`), the mistake named by
:func:`~refpos.encodings.conv_position_mistakes.identify_conv_position`
(docs/conv-position.md#mistakes-refpos-check-names).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck
from refpos.encodings.conv_position_mistakes import (
    CONV_POSITION_MISTAKES,
    ConvPositionInputs,
    conv_position_bound,
    identify_conv_position,
)


def _array(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.float64)


def conv_positions(x: Any, weight: Any, bias: Any, groups: int, activation: str, stride: int = 1,
                   weight_g: Any = None) -> ConvPositionInputs:
    """The inputs of a ``conv_positions`` call: weight-normalised when ``weight_g`` is given, else a plain kernel."""
    return ConvPositionInputs("weight_norm" if weight_g is not None else "plain", _array(x), (_array(weight),),
                              (_array(bias),), groups, activation, stride=stride, weight_g=_array(weight_g))


def batch_norm_conv_positions(x: Any, weight: Any, bias: Any, groups: int, activation: str, running_mean: Any,
                              running_var: Any, norm_weight: Any, norm_bias: Any, eps: float) -> ConvPositionInputs:
    """The inputs of HuBERT's ``conv_pos_batch_norm`` form: ``conv_positions`` (a plain kernel) of the frames after
    a batch norm of their channels with the running statistics: refpos's own call (no contract function)."""
    stats = tuple(_array(a) for a in (running_mean, running_var, norm_weight, norm_bias))
    return ConvPositionInputs("batch_norm", _array(x), (_array(weight),), (_array(bias),), groups, activation,
                              batch_norm=(*stats, eps))


def stacked_conv_positions(x: Any, weights: Any, biases: Any, groups: int, activation: str, eps: float
                           ) -> ConvPositionInputs:
    """The inputs of a ``stacked_conv_positions`` call (one kernel ``(C, C/G, K)`` and bias per layer)."""
    return ConvPositionInputs("stacked", _array(x), tuple(_array(weights)), tuple(_array(biases)), groups, activation,
                              eps=eps)


def _wrong(inputs: ConvPositionInputs, name: str) -> np.ndarray | None:
    mistake = next(m for m in CONV_POSITION_MISTAKES if m.name == name)
    return mistake.compute(inputs) if inputs.form in mistake.forms else None


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Small layers of 8 channels in 2 groups: weight-normalised with an even kernel, with a stride, plain, and
    HuBERT's batch norm first, and three stacked layers."""
    rng = np.random.default_rng(37)
    c, g = 8, 2

    def layer(k: int) -> dict[str, Any]:
        weight = rng.standard_normal((c, c // g, k)) / np.sqrt(k * c / g)
        return {"x": rng.standard_normal((2, 12, c)), "weight": weight, "bias": 0.1 * rng.standard_normal(c),
                "groups": g, "activation": "gelu"}

    return [("conv_positions", {**layer(4), "weight_g": rng.uniform(0.5, 1.5, 4)}),
            ("conv_positions", {**layer(5), "stride": 2, "weight_g": rng.uniform(0.5, 1.5, 5)}),
            ("conv_positions", layer(6)),
            ("batch_norm_conv_positions", {**layer(4), "running_mean": 0.1 * rng.standard_normal(c),
                                           "running_var": rng.uniform(0.5, 2.0, c),
                                           "norm_weight": rng.uniform(0.5, 1.5, c),
                                           "norm_bias": 0.1 * rng.standard_normal(c), "eps": 1e-5}),
            ("stacked_conv_positions", {"x": rng.standard_normal((2, 12, c)),
                                        "weights": rng.standard_normal((3, c, c // g, 5)) / np.sqrt(5 * c / g),
                                        "biases": 0.1 * rng.standard_normal((3, c)), "groups": g,
                                        "activation": "gelu", "eps": 1e-5})]


CONV_POSITION_CHECK = KindCheck(
    kind="conv_position", calls=(conv_positions, batch_norm_conv_positions, stacked_conv_positions),
    reference=lambda inputs: (inputs.reference(), conv_position_bound(inputs)),
    identify=identify_conv_position, mistakes={m.name: m.description for m in CONV_POSITION_MISTAKES}, wrong=_wrong,
    examples=_examples)

__all__ = ["CONV_POSITION_CHECK", "batch_norm_conv_positions", "conv_positions", "stacked_conv_positions"]
