"""The registry of the contract calls of vision and audio layer records: what ``refpos golden model`` writes for each
such layer of a config, and what ``refpos check <kind> --config`` takes from it.

One :class:`ModelKind` record per kind (:data:`MODEL_KINDS`) says, for a layer record of
:func:`refpos.model_positions`:

* ``plan``: the adapter-contract function the layer is a call of (``spec_tests/README.md``) and the arguments the
  record fixes (a grid's way and extra rows, a window's form and size, a kernel's groups and activation, …), or a
  sentence saying why the layer has no case;
* ``free``: the calls' other arguments, ``(label, arguments)`` each: seeded weights where the model's are checkpoint
  weights (tables, kernels, MLP weights, the Fourier matrix; at the record's row counts, a few channels wide: every
  channel is computed alike) and the inputs the record reads (an image grid at the native size and at one that
  forces resampling, a packed tower's ``(t, h, w)`` grids, frames);
* ``shapes``: the arrays whose shape the record fixes (a table's rows), for :func:`layer_arguments`.

The cases and the merge of a call file's arguments with a record's are :mod:`refpos.golden.cases.model_kind_cases`
(each record's ``reference``: the output and a float32 port's bound, from the kind's formula module, as the kind's
check computes them, :data:`refpos.check.kinds.BY_KIND`). :data:`ELSEWHERE` says, for every other kind, which module
writes its cases or why it has none; the meta-test (``refpos/tests/test_golden_model_kinds.py``) asks every kind of
:data:`refpos.models.kinds.KINDS` for one of the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from refpos.golden.cases import model_kind_inputs as site
from refpos.golden.cases import model_kind_layout as layout
from refpos.golden.cases.model_kind_references import (
    axis_tables_reference,
    bias_table_reference,
    conv_reference,
    decomposed_reference,
    fourier_reference,
    grid_reference,
    rope_reference,
    sincos_reference,
    sinusoid_reference,
    tiled_grid_reference,
)

#: channels of a seeded table or kernel (the model's width is in the record; every channel is computed alike)
SEEDED_WIDTH = site.SEEDED_WIDTH
#: the most (query, key) pairs of a case's attention (a global layer of a large grid is refused by name)
MAX_PAIRS = 1 << 20

Plan = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class ModelKind:
    """How a kind's layer record becomes contract calls (module docstring)."""

    kind: str
    plan: Callable[[Any], Plan | str]
    free: Callable[[Any, np.random.Generator], list[tuple[str, dict[str, Any]]]]
    reference: Callable[[Any, dict[str, Any]], tuple[np.ndarray, Any]]
    shapes: Callable[[Any], dict[str, tuple[int, ...]]] = lambda layer: {}


def way_of(variant: Any) -> dict[str, Any]:
    """A grid way as ``resample_position_table`` takes it: :data:`~refpos.encodings.grid_variants.WAY_FIELDS`."""
    from refpos.encodings.grid_variants import WAY_FIELDS

    return {key: getattr(variant, key) for key in WAY_FIELDS if key != "read" or variant.read != WAY_FIELDS["read"]}


def _grid_plan(layer: Any) -> Plan | str:
    if getattr(layer, "window", 0):
        return (f"it adds a {layer.window} × {layer.window} window table tiled over the resampled grid "
                "(refpos.encodings.grid_windowed), which no contract function computes")
    if layer.variant is None:
        first = ", each patch's row plus the first" if layer.way == "fixed_first_row" else ""  # ViTPose's backbone
        return f"its table is added as it is, at the native grid {list(layer.grid)} only{first}: the positions are " \
            "the checkpoint's rows, no formula of refpos's"
    if layer.grid[0] != layer.grid[1]:
        return (f"its native grid {list(layer.grid)} is not square, and resample_position_table reads a square table "
                "(its side the square root of the grid rows)")
    return "resample_position_table", {"way": way_of(layer.variant), "prefix_tokens": layer.prefix,
                                       "suffix_tokens": layer.suffix}


def _other_grid(layer: Any) -> list[int]:
    """A patch grid that forces resampling: one axis shrinks, one grows (multiples of a packed tower's merge)."""
    m, (h, w) = max(layer.merge, 1), layer.grid
    other = [max(m, (h - 1) // m * m), (w + 2 + m - 1) // m * m]
    return other if tuple(other) != tuple(layer.grid) else [h + m, w + m]


def _grid_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    table = rng.standard_normal((layer.table_rows, min(layer.dim, SEEDED_WIDTH)))
    native = layer.variant.native_as_is and layer.grid[0] == layer.grid[1]  # IDEFICS: the table itself, no formula
    grids = [_other_grid(layer)] if native else [list(layer.grid), _other_grid(layer)]
    return [(f"{'native' if tuple(g) == layer.grid else 'resampled'}-{g[0]}x{g[1]}", {"table": table, "grid": g})
            for g in grids]


def _bias_table_plan(layer: Any) -> Plan:
    fixed: dict[str, Any] = {"form": layer.form, "window": list(layer.window)}
    if layer.form == "beit":
        fixed["table_window"] = list(layer.window)
    if layer.form == "swinv2":
        fixed["pretrained_window"] = None if layer.pretrained_window is None else list(layer.pretrained_window)
    return "window_bias", fixed


def _bias_table_rows(layer: Any) -> int:
    """``(2·W_h − 1)(2·W_w − 1)`` rows, and BEiT's 3 CLS rows."""
    return (2 * layer.window[0] - 1) * (2 * layer.window[1] - 1) + (3 if layer.form == "beit" else 0)


def _bias_table_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    if layer.form == "swinv2":  # the continuous MLP: 2 → 16 → heads (Swin v2's is 512 wide)
        w1, b1 = rng.standard_normal((2, 16)), rng.standard_normal(16)
        return [("mlp", {"w1": w1, "b1": b1, "w2": rng.standard_normal((16, layer.n_heads)) / 4})]
    return [("table", {"table": rng.standard_normal((_bias_table_rows(layer), layer.n_heads))})]


def _bias_table_shapes(layer: Any) -> dict[str, tuple[int, ...]]:
    return {} if layer.form == "swinv2" else {"table": (_bias_table_rows(layer), layer.n_heads)}


#: conv_position form -> its contract function
CONV_FUNCTIONS = {"weight_norm": "conv_positions", "plain": "conv_positions", "batch_norm": "batch_norm_conv_positions",
                  "stacked": "stacked_conv_positions"}


def _conv_plan(layer: Any) -> Plan:
    fixed: dict[str, Any] = {"groups": layer.groups, "activation": layer.activation}
    if layer.form in ("weight_norm", "plain"):
        fixed["stride"] = layer.stride
    return CONV_FUNCTIONS[layer.form], fixed


def _conv_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """Frames of 2 channels per group, longer than the kernel (``2K + 3`` frames, a batch of 2)."""
    c, k = 2 * layer.groups, layer.kernel
    scale = 1 / np.sqrt(k * c / layer.groups)
    x = rng.standard_normal((2, 2 * k + 3, c))
    if layer.form == "stacked":
        return [("frames", {"x": x, "weights": scale * rng.standard_normal((layer.layers, c, c // layer.groups, k)),
                            "biases": 0.1 * rng.standard_normal((layer.layers, c)), "eps": 1e-5})]
    out = {"x": x, "weight": scale * rng.standard_normal((c, c // layer.groups, k)),
           "bias": 0.1 * rng.standard_normal(c)}
    if layer.form == "weight_norm":
        out["weight_g"] = rng.uniform(0.5, 1.5, k)
    if layer.form == "batch_norm":
        out |= {"running_mean": 0.1 * rng.standard_normal(c), "running_var": rng.uniform(0.5, 2.0, c),
                "norm_weight": rng.uniform(0.5, 1.5, c), "norm_bias": 0.1 * rng.standard_normal(c), "eps": 1e-5}
    return [("frames", out)]


def _conv_shapes(layer: Any) -> dict[str, tuple[int, ...]]:
    if layer.form == "stacked":
        return {"weights": (layer.layers, -1, -1, layer.kernel)}
    return {"weight": (-1, -1, layer.kernel)}


def _decomposed_plan(layer: Any) -> Plan | str:
    n = layer.grid[0] * layer.grid[1]
    if n * n > MAX_PAIRS:
        return (f"its {'window' if layer.windowed else 'global'} attention over the {list(layer.grid)} grid has "
                f"{n * n} (query, key) pairs, past the {MAX_PAIRS} a golden case holds")
    return "add_decomposed_rel_pos", {"q_size": list(layer.grid), "k_size": list(layer.grid)}


def _decomposed_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    n, (rh, rw), d = layer.grid[0] * layer.grid[1], layer.params()["table_rows"], layer.head_dim
    return [("window" if layer.windowed else "global", {
        "attn": rng.standard_normal((1, n, n)), "q": rng.standard_normal((1, n, d)),
        "rel_pos_h": rng.standard_normal((rh, d)), "rel_pos_w": rng.standard_normal((rw, d))})]


def _decomposed_shapes(layer: Any) -> dict[str, tuple[int, ...]]:
    rh, rw = layer.params()["table_rows"]
    return {"rel_pos_h": (rh, layer.head_dim), "rel_pos_w": (rw, layer.head_dim)}


#: sincos2d builder -> its contract function
SINCOS_FUNCTIONS = {"grid": "sincos_2d_grid", "mask": "sine_position_map", "coordinates": "sine_coordinates"}


#: the parameters of each contract function a case calls, in order, with the defaults a call may leave out (the
#: check's functions, refpos.check.kinds, take the same: refpos/tests/test_golden_model_kinds.py compares them)
PARAMETERS: Mapping[str, tuple[str | tuple[str, Any], ...]] = MappingProxyType({
    "resample_position_table": ("table", "grid", "way", ("prefix_tokens", 0), ("suffix_tokens", 0)),
    "window_bias": ("form", "window", ("table", None), ("table_window", None), ("w1", None), ("b1", None),
                    ("w2", None), ("pretrained_window", None)),
    "conv_positions": ("x", "weight", "bias", "groups", "activation", ("stride", 1), ("weight_g", None)),
    "batch_norm_conv_positions": ("x", "weight", "bias", "groups", "activation", "running_mean", "running_var",
                                  "norm_weight", "norm_bias", "eps"),
    "stacked_conv_positions": ("x", "weights", "biases", "groups", "activation", "eps"),
    "add_decomposed_rel_pos": ("attn", "q", "rel_pos_h", "rel_pos_w", "q_size", "k_size"),
    "sincos_2d_grid": ("height", "width", "dim", ("temperature", 10000.0), ("axes", "yx"), ("flatten", "row_major"),
                       ("cls_rows", 0)),
    "sine_position_map": ("mask", "num_features", ("temperature", 10000.0), ("normalize", True), ("scale", None),
                          ("offset", 0.0), ("eps", 1e-06)),
    "sine_coordinates": ("coords", "num_features", ("temperature", 10000.0), ("scale", 2 * math.pi),
                         ("swap_xy", True), ("layout", "interleaved"), ("rule", "paired")),
    "fourier_features": ("coords", "gaussian"),
    "sam_prompt_features": ("points", "image_size", "gaussian"),
    "sinusoid_1d": ("positions", "dim", "spacing", "layout", ("first", "sin"), ("base", 10000.0),
                    ("frequency_scale", 1.0), ("amplitude", 1.0)),
    "apply_vision_rope": ("x", "positions", "rope"),
    "apply_vision_rope_prefixed": ("x", "positions", "rope", "prefix_angles"),
    "apply_vision3d_rope": ("x", "positions", "rope"),
    "axis_table_positions": ("indices", "row_table", "column_table", "variant"),
    "tiled_input_positions": ("embedding", "tile_table", "gate", "pre_table", "pre_gate", "post_table", "post_gate",
                              "aspect_ratio_id", "max_num_tiles"),
    "box_positions": ("x_table", "y_table", "h_table", "w_table", "bbox"),
    "layout_bias": ("rel_table", "x_table", "y_table", "positions", "bbox", "head_dim", ("max_distance", 128),
                    ("max_2d_distance", 256)),
    "shaw_key_terms": ("q", "table", "left", "right", "offset", "sign", ("block", None), ("scale", None)),
})


def parameter_names(function: str) -> list[str]:
    """The parameters of contract function ``function``, in order (:data:`PARAMETERS`)."""
    return [p if isinstance(p, str) else p[0] for p in PARAMETERS[function]]


def _contract_keywords(function: str, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` the contract function takes, and the names it does not."""
    names = parameter_names(function)
    return ({k: list(v) if isinstance(v, tuple) else v for k, v in values.items() if k in names},
            sorted(k for k in values if k not in names))


def _sincos_plan(layer: Any) -> Plan | str:
    function = SINCOS_FUNCTIONS[layer.record.builder]
    width = "dim" if layer.record.builder == "grid" else "num_features"
    fixed, unknown = _contract_keywords(function, {**layer.record.parameters, **dict(layer.settings)})
    if unknown:
        return f"the variant {layer.variant}'s keywords {unknown} are no parameters of {function}"
    return function, {width: layer.features, **fixed}


def _sincos_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    builder = layer.record.builder
    if builder == "grid":
        grids = [list(layer.grid)] if layer.grid is not None else [[4, 6], [3, 5]]  # a fixed table: its own grid
        return [(f"grid-{h}x{w}", {"height": h, "width": w}) for h, w in grids]
    if builder == "mask":
        mask = np.ones((2, 6, 9), dtype=bool)
        mask[0, 4:, :], mask[1, :, 5:] = False, False  # a padded batch: rows, then columns
        return [("padded-mask", {"mask": mask})]
    return [("coordinates", {"coords": rng.uniform(0.0, 1.0, (2, 5, 4 if layer.variant.endswith("box") else 2))})]


def _fourier_plan(layer: Any) -> Plan:
    return ("sam_prompt_features", {}) if layer.variant == "sam_prompts" else ("fourier_features", {})


def _fourier_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    from refpos.encodings.fourier import grid_centre_coordinates

    gaussian = rng.standard_normal((2, layer.m))
    if layer.variant == "sam_prompts":
        return [("points", {"points": rng.uniform(0, 640, (2, 5, 2)), "image_size": [480, 640],
                            "gaussian": gaussian})]
    return [("grid-4x6", {"coords": np.asarray(grid_centre_coordinates(4, 6)), "gaussian": gaussian})]


def _sinusoid_plan(layer: Any) -> Plan | str:
    params = layer.params()
    if params["at"] != "input" or params["standardize"] or params["amplitude"] not in ("one", "inverse_sqrt_dim") \
            or layer.past is None:
        return (f"the variant {layer.variant} (at {params['at']}, amplitude {params['amplitude']}, standardised "
                f"{params['standardize']}) is no call of sinusoid_1d")
    fixed = {k: params[k] for k in ("spacing", "layout", "first", "base", "frequency_scale") if k in params}
    amplitude = 1.0 if params["amplitude"] == "one" else layer.dim ** -0.5
    return "sinusoid_1d", {"dim": layer.dim, **fixed, "amplitude": amplitude}


def _sinusoid_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """The frames' positions: ``past`` (the stack's first position) onward, 24 frames."""
    return [("frames", {"positions": np.arange(layer.past, layer.past + 24, dtype=np.int64)})]


def _rope_plan(layer: Any) -> Plan | str:
    """A 3-D form's layer: ``apply_vision3d_rope``; one whose tokens before the patches turn by a weight's learned
    angles: ``apply_vision_rope_prefixed``; any other: ``apply_vision_rope`` (its unrotated tokens at (0, 0)); the
    rope dict the record's form, head size and θ. Tokens before each frame (``per_frame``): the call of one image,
    one frame, whose tokens come once."""
    from refpos.rope.vision import VisionRope

    rope = layer.rope
    spec: dict[str, Any] = {"form": rope.kind, "head_dim": rope.head_dim, "rope_theta": float(rope.theta)}
    if not isinstance(rope, VisionRope):
        return "apply_vision3d_rope", {"rope": spec}
    if rope.kind == "axial":
        spec |= {"sections": list(rope.sections), "layout": rope.axial_layout}
    if layer.prefix and layer.prefix_weight is not None:
        return "apply_vision_rope_prefixed", {"rope": spec}
    return "apply_vision_rope", {"rope": spec}


def _rope_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """The tokens the layer rotates at the record's positions
    (:meth:`~refpos.models.kinds.vision_rope.VisionRopeLayer.patch_positions`): a windowed layer's window, a fixed
    grid at its scale, a 3-D form's clip of 2 frames of 4 × 6 patches (V-JEPA 2: of its ``side``², every token of
    them), else a 4 × 6 image (4 × 4 where the form reads a square: Llama 4's, its class token last) in merge blocks
    of 2 where the form reads them, or in raster order where the record reads it so; tokens before the patches
    unrotated at (0, 0), angle 0, or turned by seeded learned angles ``prefix_angles`` ``(P, D/2)``, uniform in
    ``[−π, π)``, where the record names their weight."""
    from refpos.rope.vision import VisionRope

    sides = (layer.window, layer.window) if layer.window else layer.grid
    if not isinstance(layer.rope, VisionRope):
        side = layer.side or 4
        grid = (2, side, side) if layer.rope.kind == "vjepa2" else (2, 4, 6)
        positions = np.asarray(layer.patch_positions(grid, 2))
        return [(f"clip-{grid[0]}x{grid[1]}x{grid[2]}", {
            "x": rng.standard_normal((len(positions), layer.rope.head_dim)), "positions": positions})]
    if sides is not None:
        label = f"{'window' if layer.window else 'grid'}-{sides[0]}x{sides[1]}"
        positions = layer.patch_positions()
    else:
        grid = (1, 4, 4) if layer.square else (1, 4, 6)
        label = f"grid-{grid[1]}x{grid[2]}" + (f"-windows-{layer.window_order}" if layer.window_order else "")
        positions = layer.patch_positions(grid, 1 if layer.raster else 2)
    positions = np.asarray(positions)
    extra: dict[str, Any] = {}
    if layer.prefix and layer.prefix_weight is not None:  # learned angles: seeded, the checkpoint's weight
        extra["prefix_angles"] = rng.uniform(-np.pi, np.pi, (layer.prefix, layer.rope.head_dim // 2))
        label += f"-prefix-{layer.prefix}"
    elif layer.prefix:  # at (0, 0): angle 0
        positions = np.concatenate([np.zeros((layer.prefix, 2), dtype=positions.dtype), positions])
        label += "" if layer.rope.kind == "dinov3" else f"-prefix-{layer.prefix}"  # DINOv3's always has one
    rows = len(positions) + (layer.prefix if extra else 0)
    return [(label, {"x": rng.standard_normal((rows, layer.rope.head_dim)), "positions": positions, **extra})]


def _rope_shapes(layer: Any) -> dict[str, tuple[int, ...]]:
    out = {"x": (-1, layer.rope.head_dim)}
    if layer.prefix and layer.prefix_weight is not None:
        out["prefix_angles"] = (layer.prefix, layer.rope.head_dim // 2)
    return out


def _axis_tables_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    from refpos.encodings.axis_tables import AXIS_TABLE_VARIANTS

    side = max(min(layer.rows - 1, 6), 1)  # a grid the tables reach, numbered from 1 (row 0: Pix2Struct's padding)
    r, c = np.meshgrid(np.arange(1, side + 1), np.arange(1, side + 1), indexing="ij")
    grid = np.stack([r.ravel(), c.ravel()], axis=1)
    if AXIS_TABLE_VARIANTS[layer.variant].padding == "none":  # padding patches of zeros read row 0 of both tables
        indices = np.concatenate([grid, [[0, 0], [0, 0]]])
    else:  # (x, y) ids from 0, a patch of one id −1 and a padding patch (−1, −1)
        indices = np.concatenate([grid[:, ::-1] - 1, [[-1, 1], [1, -1], [-1, -1]]])
    indices = indices.astype(np.int64)
    width = min(layer.dim, SEEDED_WIDTH)
    return [("patches", {"indices": indices, "row_table": rng.standard_normal((layer.rows, width)),
                         "column_table": rng.standard_normal((layer.rows, width))})]


def _registry(*records: ModelKind) -> Mapping[str, ModelKind]:
    return MappingProxyType({record.kind: record for record in records})


#: kind -> how its layer records become contract calls
MODEL_KINDS: Mapping[str, ModelKind] = _registry(
    ModelKind("grid", _grid_plan, _grid_free, grid_reference, lambda layer: {"table": (layer.table_rows, -1)}),
    ModelKind("bias_table", _bias_table_plan, _bias_table_free, bias_table_reference, _bias_table_shapes),
    ModelKind("conv_position", _conv_plan, _conv_free, conv_reference, _conv_shapes),
    ModelKind("decomposed", _decomposed_plan, _decomposed_free, decomposed_reference, _decomposed_shapes),
    ModelKind("sincos2d", _sincos_plan, _sincos_free, sincos_reference),
    ModelKind("fourier", _fourier_plan, _fourier_free, fourier_reference, lambda layer: {"gaussian": (2, layer.m)}),
    ModelKind("sinusoid1d", _sinusoid_plan, _sinusoid_free, sinusoid_reference),
    ModelKind("vision_rope", _rope_plan, _rope_free, rope_reference, _rope_shapes),
    ModelKind("axis_tables", lambda layer: ("axis_table_positions", {"variant": layer.variant}), _axis_tables_free,
              axis_tables_reference, lambda layer: {"row_table": (layer.rows, -1), "column_table": (layer.rows, -1)}),
    ModelKind("tiled_grid", lambda layer: ("tiled_input_positions", {"max_num_tiles": layer.tiles}),
              site.tiled_grid_free, tiled_grid_reference, lambda layer: {"embedding": (layer.rows, -1), **{
                  k: (layer.ids, -1) for k in ("tile_table", "pre_table", "post_table")}}),
    ModelKind("box_tables", *layout.BOX_TABLES), ModelKind("layout_bias", *layout.LAYOUT_BIAS),
    ModelKind("shaw_key", site.shaw_key_plan, site.shaw_key_free, site.shaw_key_reference, site.shaw_key_shapes),
)


#: the kinds whose layers ``refpos golden model`` writes elsewhere, or why a kind's layers have no case
ELSEWHERE: Mapping[str, str] = MappingProxyType({
    "rope": "written by refpos.golden.cases.rope.model_cases",
    "mrope": "written by refpos.golden.cases.rope.model_cases",
    **{kind: "written by refpos.golden.cases.models.encoding_model_cases"
       for kind in ("alibi", "t5", "learned", "sinusoidal", "deberta")},
    "rope_2d": "GLM's 2-D RoPE is pinned by the rope-2d/ cases of apply_rope_2d; a config's layer sets only its head "
               "size and θ, and refpos golden model writes no case of it",
    "none": "a layer without positions has nothing to pin",
    "no_attention": "a layer without attention has no positions",
})


__all__ = ["ELSEWHERE", "MODEL_KINDS", "PARAMETERS", "SEEDED_WIDTH", "ModelKind", "parameter_names", "way_of"]
