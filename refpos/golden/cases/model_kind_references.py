"""The output and the bound of a vision or audio layer record's contract call, one function per kind (the
``reference`` of :data:`refpos.golden.cases.model_kinds.MODEL_KINDS`): the kind's formula module's inputs built from
the record and the call's arguments, as the kind's check builds them (:data:`refpos.check.kinds.BY_KIND`), their
reference and a float32 port's bound (per entry, or one for all).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import numpy as np


def grid_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``grid`` layer's call and a float32 port's bound: the table resampled to the call's patch
    grid the layer's way (``GridInputs``, ``grid_tolerance``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance

    inputs = GridInputs(np.asarray(a["table"], dtype=np.float64), tuple(a["grid"]), layer.variant,
                        prefix_tokens=layer.prefix, suffix_tokens=layer.suffix)
    return np.asarray(inputs.resample()), grid_tolerance(inputs)


def bias_table_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``bias_table`` layer's call and a float32 port's bound: the window's bias of the layer's form
    (``BiasTableInputs``, ``bias_table_bound``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.bias_table_mistakes import BiasTableInputs, bias_table_bound

    def window(w: Any) -> tuple[int, int] | None:
        return None if w is None else tuple(w)

    mlp = (a["w1"], a["b1"], a["w2"]) if "w1" in a else None
    inputs = BiasTableInputs(layer.form, tuple(layer.window), table=a.get("table"),
                             table_window=window(a.get("table_window")), mlp=mlp,
                             pretrained_window=window(a.get("pretrained_window")))
    return np.asarray(inputs.reference()), bias_table_bound(inputs)


def conv_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``conv`` layer's call and a float32 port's bound: the convolution of the frames in the
    layer's form (``ConvPositionInputs``, ``conv_position_bound``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs, conv_position_bound

    common = (layer.groups, layer.activation)
    if layer.form == "stacked":
        inputs = ConvPositionInputs("stacked", a["x"], tuple(a["weights"]), tuple(a["biases"]), *common, eps=a["eps"])
    elif layer.form == "batch_norm":
        stats = tuple(a[k] for k in ("running_mean", "running_var", "norm_weight", "norm_bias"))
        inputs = ConvPositionInputs("batch_norm", a["x"], (a["weight"],), (a["bias"],), *common,
                                    batch_norm=(*stats, a["eps"]))
    else:
        inputs = ConvPositionInputs(layer.form, a["x"], (a["weight"],), (a["bias"],), *common, stride=layer.stride,
                                    weight_g=a.get("weight_g"))
    return np.asarray(inputs.reference()), conv_position_bound(inputs)


def decomposed_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``decomposed`` layer's call and a float32 port's bound: ``attn`` plus the decomposed terms
    over the layer's grid; the bound the terms' plus the sum's rounding, ``u·|logits|``.

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.decomposed_mistakes import UNIT_ROUNDOFF, DecomposedInputs, decomposed_tolerance

    terms = DecomposedInputs(a["q"], a["rel_pos_h"], a["rel_pos_w"], tuple(layer.grid), tuple(layer.grid))
    logits = a["attn"] + terms.terms()
    return logits, decomposed_tolerance(terms) + UNIT_ROUNDOFF["float32"] * np.abs(logits)


def sincos_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``sincos`` layer's call and a float32 port's bound: the sin–cos embedding of the record's
    builder and keywords (``Sincos2dInputs``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.sincos2d_mistakes import Sincos2dInputs
    from refpos.encodings.sincos2d_variants import SineVariant

    builder = layer.record.builder
    call = SineVariant(f"a call of {builder}", builder, MappingProxyType({}), "the call's arguments", (),
                       "refpos golden model", "the record's keywords")
    keywords = {k: tuple(v) if isinstance(v, list) and k == "temperature" else v for k, v in a.items()}
    return Sincos2dInputs(call, keywords).reference()


def fourier_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``fourier`` layer's call and a float32 port's bound: SAM's Fourier features of grid centres
    or of pixel prompts (``FourierInputs``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.fourier_mistakes import FourierInputs

    if layer.variant == "sam_prompts":
        return FourierInputs("sam_prompts", a["points"], a["gaussian"], image_size=tuple(a["image_size"])).reference()
    return FourierInputs("sam", a["coords"], a["gaussian"]).reference()


def sinusoid_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``sinusoid`` layer's call and a float32 port's bound: ``sinusoid_1d`` of the positions with
    the record's keywords (``Sinusoid1dInputs``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.sinusoid1d_mistakes import Sinusoid1dInputs
    from refpos.encodings.sinusoid1d_variants import SinusoidVariant

    keys = ("spacing", "layout", "first", "base", "frequency_scale")
    call = SinusoidVariant("a call of sinusoid_1d", MappingProxyType({}), "given", "given", "the call's positions",
                           (), "refpos golden model", "the record's keywords",
                           config_keys=MappingProxyType({k: (k, None) for k in keys}))
    return Sinusoid1dInputs(call, a["dim"], {k: v for k, v in a.items() if k != "dim"}).reference()


def rope_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``rope`` layer's call and a float32 port's bound: the patches rotated by the layer's vision
    RoPE (``VisionRopeInputs``, after tokens turned by the call's ``prefix_angles``; a 3-D form's:
    ``VisionRope3DInputs``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.rope.vision3d import VisionRope3D
    from refpos.rope.vision3d_mistakes import VisionRope3DInputs
    from refpos.rope.vision_mistakes import VisionRopeInputs

    x, positions = np.asarray(a["x"], dtype=np.float64), np.asarray(a["positions"])
    if isinstance(layer.rope, VisionRope3D):
        return VisionRope3DInputs(x, positions, layer.rope).reference()
    prefix = a.get("prefix_angles")
    return VisionRopeInputs(x, positions, layer.rope, None if prefix is None else np.asarray(prefix)).reference()


def axis_tables_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``axis_tables`` layer's call and a float32 port's bound: the row and column tables read at
    the indices, the layer's variant (``AxisTableInputs``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.axis_tables_mistakes import axis_table_inputs

    return axis_table_inputs(a["indices"], a["row_table"], a["column_table"], layer.variant).reference()


def tiled_grid_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``tiled_grid`` layer's call and a float32 port's bound: what each tile's rows gain before the
    local encoder at the call's tables, gates and aspect-ratio id (``TiledGridInputs``).

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.tiled_grid_mistakes import tiled_grid_inputs

    return tiled_grid_inputs(*(a[k] for k in ("embedding", "tile_table", "gate", "pre_table", "pre_gate",
                                              "post_table", "post_gate", "aspect_ratio_id")),
                             layer.tiles).reference()


__all__ = ["axis_tables_reference", "bias_table_reference", "conv_reference", "decomposed_reference",
           "fourier_reference", "grid_reference", "rope_reference", "sincos_reference",
           "sinusoid_reference", "tiled_grid_reference"]
