"""Golden cases of the fixed 2-D sin–cos embeddings (docs/sincos2d.md), one per form a model family uses.

* ``sincos2d/grid-…``: :func:`refpos.encodings.sincos2d.sincos_2d_grid` of a non-square grid — MAE (columns first,
  a CLS row), RT-DETR (rows first, temperature 20), OmDet-Turbo (column-major tokens);
* ``sincos2d/mask-…``: :func:`~refpos.encodings.sincos2d.sine_position_map` of a padded batch of masks (no row or
  column padded entirely) — DETR, Deformable DETR (offset −0.5), DAB-DETR (temperatures 20 and 30);
* ``sincos2d/coordinates-…``: :func:`~refpos.encodings.sincos2d.sine_coordinates` — the decoders' boxes (y, x, w, h
  blocks), Deformable DETR's proposals (x, y, w, h), SAM 2's pointer offsets (doubled frequencies, scale 1).

Exact values: mpmath at :data:`refpos.golden.certify.DIGITS` digits from the stated parameters (the float64 inputs
as exact numbers; 2π exact where the contract's ``scale`` is left to its default). Tolerance: the kind's bound per
row (refpos/encodings/sincos2d_mistakes.py) through :func:`refpos.golden.angle_entries.angle_entry`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.sincos2d_mistakes import Sincos2dInputs
from refpos.golden import certify as cert
from refpos.golden.angle_entries import angle_entry
from refpos.golden.cases import In, call, rng_for
from refpos.golden.manifest import Case, Output


def mp_features(c: Any, width: int, temperature: float, layout: str = "interleaved", rule: str = "paired") -> list:
    """The ``width`` exact values of one coordinate's block (docs/sincos2d.md#the-math)."""
    mp = cert.mp
    half = width // 2
    out = [None] * width
    for k in range(half):
        exponent = mp.mpf(2 * k) / width if rule == "paired" else mp.mpf(2 * (k // 2)) / half
        s, co = mp.sin(c * mp.mpf(temperature) ** (-exponent)), mp.cos(c * mp.mpf(temperature) ** (-exponent))
        cols = (2 * k, 2 * k + 1) if layout == "interleaved" else (k, k + half)
        out[cols[0]], out[cols[1]] = s, co
    return out


def _mp_grid(height: int, width: int, dim: int, temperature: float, axes: str, flatten: str, cls_rows: int) -> list:
    mp = cert.mp
    rows = [[mp.mpf(0)] * dim for _ in range(cls_rows)]
    for t in range(height * width):
        y, x = (t // width, t % width) if flatten == "row_major" else (t % height, t // height)
        first, second = (y, x) if axes == "yx" else (x, y)
        rows.append(mp_features(mp.mpf(first), dim // 2, temperature, "concat")
                    + mp_features(mp.mpf(second), dim // 2, temperature, "concat"))
    return rows


def _mp_mask(mask: np.ndarray, num_features: int, temperature: Any, offset: float) -> np.ndarray:
    mp = cert.mp
    t_y, t_x = temperature if isinstance(temperature, list) else (temperature, temperature)
    eps, two_pi = mp.mpf(1e-6), 2 * mp.pi
    out = np.empty((*mask.shape, 2 * num_features), dtype=object)
    for n, i, j in np.ndindex(mask.shape):
        y = (int(mask[n, : i + 1, j].sum()) + mp.mpf(offset)) / (int(mask[n, :, j].sum()) + eps) * two_pi
        x = (int(mask[n, i, : j + 1].sum()) + mp.mpf(offset)) / (int(mask[n, i, :].sum()) + eps) * two_pi
        out[n, i, j] = mp_features(y, num_features, t_y) + mp_features(x, num_features, t_x)
    return out


def _mp_coordinates(coords: np.ndarray, settings: dict[str, Any]) -> np.ndarray:
    mp = cert.mp
    n = coords.shape[-1]
    order = [1, 0, *range(2, n)] if settings["swap_xy"] and n >= 2 else list(range(n))
    out = np.empty((coords.shape[0], n * settings["num_features"]), dtype=object)
    for p in range(coords.shape[0]):
        row: list = []
        for i in order:
            row += mp_features(mp.mpf(float(coords[p, i])) * mp.mpf(settings["scale"]), settings["num_features"],
                               settings["temperature"], settings["layout"], settings["rule"])
        out[p] = row
    return out


def grid_cases() -> list[Case]:
    cases = []
    for name, variant, settings in [
        ("mae-3x5-d16", "mae", {"height": 3, "width": 5, "dim": 16, "temperature": 10000.0}),
        ("rt_detr-4x6-d32-t20", "rt_detr", {"height": 4, "width": 6, "dim": 32, "temperature": 20.0}),
        ("omdet_turbo-3x5-d16", "omdet_turbo", {"height": 3, "width": 5, "dim": 16, "temperature": 10000.0}),
    ]:
        inputs = Sincos2dInputs(variant, {k: v for k, v in settings.items() if k != "temperature" or variant != "mae"})
        kw = inputs.keywords()
        table, bound = inputs.reference()
        args = [kw["height"], kw["width"], kw["dim"], float(kw["temperature"]), kw["axes"], kw["flatten"],
                kw["cls_rows"]]
        cases.append(Case(
            f"sincos2d/grid-{name}", "sincos2d", "sincos_2d_grid",
            f"fixed 2-D sin-cos table of a {kw['height']}x{kw['width']} grid, dim {kw['dim']}, axes {kw['axes']}, "
            f"{kw['flatten']} tokens, {kw['cls_rows']} CLS rows, temperature {kw['temperature']:g} ({variant}; "
            "docs/sincos2d.md#the-math)",
            {"call": call("sincos_2d_grid", ["table"], *args)}, {},
            {"table": Output(table, angle_entry(bound[:, 0]), lambda a=args: (_mp_grid(*a), 1.0))}))
    return cases


def _mask() -> np.ndarray:
    """A batch of two images padded as a detector's processor pads them: a narrower one, a shorter one."""
    mask = np.zeros((2, 5, 7), dtype=bool)
    mask[0, :, :5] = True
    mask[1, :3, :] = True
    return mask


def mask_cases() -> list[Case]:
    cases = []
    for name, variant, extra in [("detr", "detr", {}), ("deformable_detr", "deformable_detr", {}),
                                 ("dab_detr-t20-t30", "dab_detr", {"temperature": (20.0, 30.0), "scale": None})]:
        # Deformable DETR's offset sends a row or column padded entirely to −0.5/ε·2π ≈ −3·10⁶ rad (no digit of
        # it survives float32): its case reads an image without padding
        mask = np.ones((1, 5, 7), dtype=bool) if variant == "deformable_detr" else _mask()
        inputs = Sincos2dInputs(variant, {"mask": mask, "num_features": 8, **extra})
        kw = inputs.keywords()
        embedding, bound = inputs.reference()
        temperature = list(kw["temperature"]) if isinstance(kw["temperature"], tuple) else kw["temperature"]
        args = [In("mask"), 8, temperature, True, None, kw["offset"], kw["eps"]]
        cases.append(Case(
            f"sincos2d/mask-{name}", "sincos2d", "sine_position_map",
            f"DETR-form sine embedding of {mask.shape[0]} mask(s) 5x7 ({int((~mask).sum())} padded pixels), 8 "
            "channels per axis, temperature "
            f"{temperature}, offset {kw['offset']} ({variant}; docs/sincos2d.md#the-math)",
            {"call": call("sine_position_map", ["embedding"], *args)}, {"mask": mask},
            {"embedding": Output(embedding, angle_entry(bound.max(axis=(0, 1, 3))),
                                 lambda m=mask, t=temperature, o=kw["offset"]: (_mp_mask(m, 8, t, o), 1.0))}))
    return cases


def coordinate_cases() -> list[Case]:
    cases = []
    for name, variant, n, width in [("anchors-boxes", "anchors", 4, 16),
                                    ("deformable_proposals", "deformable_proposals", 4, 16),
                                    ("sam2_pointers", "sam2_pointers", 1, 32)]:
        cid = f"sincos2d/coordinates-{name}"
        coords = rng_for(cid).random((6, n))
        inputs = Sincos2dInputs(variant, {"coords": coords, "num_features": width})
        kw = inputs.keywords()
        features, bound = inputs.reference()
        settings = {k: kw[k] for k in ("num_features", "temperature", "scale", "swap_xy", "layout", "rule")}
        cases.append(Case(
            cid, "sincos2d", "sine_coordinates",
            f"sine features of {coords.shape[0]} points of {n} coordinates in [0, 1], {width} channels each, "
            f"scale {kw['scale']:.6g}, swap_xy {kw['swap_xy']}, {kw['layout']}, {kw['rule']} ({variant}; "
            "docs/sincos2d.md#the-math)",
            {"call": call("sine_coordinates", ["features"], In("coords"), *settings.values())}, {"coords": coords},
            {"features": Output(features, angle_entry(bound[:, 0]), lambda c=coords, s=settings:
                                (_mp_coordinates(c, s), 1.0))}))
    return cases


def sincos2d_cases() -> list[Case]:
    """Every fixed 2-D sin–cos case."""
    return grid_cases() + mask_cases() + coordinate_cases()
