"""``refpos check vision_rope``: patch vectors rotated by their row and column from a call of ``apply_vision_rope``
(the adapter contract's: ``x``, ``positions``, a ``rope`` dict; the form also ``"dinov3"``, with real coordinates,
or ``"mlcd"``, as the reference adapter takes them), against :mod:`refpos.rope.vision` within the bound
of a float32 port per token (:func:`refpos.rope.vision_mistakes.token_bound`), the mistake named by
:func:`~refpos.rope.vision_mistakes.identify_vision_rope` (docs/vision-rope.md#mistakes).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.rope.vision import VisionRope
from refpos.rope.vision_mistakes import VISION_ROPE_MISTAKES, VisionRopeInputs, identify_vision_rope

#: each key of the contract's ``rope`` dict -> the :class:`~refpos.rope.vision.VisionRope` field it sets (the keys
#: are the reference adapter's ``VISION_KEYS``, which the tests compare)
ROPE_FIELDS = {"form": "kind", "head_dim": "head_dim", "rope_theta": "theta", "sections": "sections",
               "layout": "axial_layout"}


def vision_rope_of(rope: Mapping[str, Any]) -> VisionRope:
    """The :class:`~refpos.rope.vision.VisionRope` of a contract ``rope`` dict ``{"form", "head_dim",
    "rope_theta"}`` (with ``"sections"`` and ``"layout"`` for the axial form), read as the reference adapter reads
    it; unknown keys, or sections and a layout for a named form: ValueError naming ``rope``."""
    if not isinstance(rope, Mapping):
        raise TypeError(f"rope must be a dict {{'form', 'head_dim', 'rope_theta', …}}, got {type(rope).__name__}")
    unknown = sorted(set(rope) - set(ROPE_FIELDS))
    if unknown:
        raise ValueError(f"rope: unknown vision rope keys {unknown}; the keys are {tuple(ROPE_FIELDS)}")
    if rope.get("form") != "axial" and (rope.get("sections") is not None or rope.get("layout") is not None):
        raise ValueError(f"rope: sections and layout are the axial form's; the {rope.get('form')!r} form fixes "
                         "its own")
    given = {ROPE_FIELDS[key]: value for key, value in rope.items() if value is not None}
    return VisionRope(**{"kind": None, "head_dim": None, **given})


def apply_vision_rope(x: Any, positions: Any, rope: dict) -> VisionRopeInputs:
    """The inputs of an ``apply_vision_rope`` call."""
    return VisionRopeInputs(np.asarray(x, dtype=np.float64), np.asarray(positions), vision_rope_of(rope))


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Qwen2-VL's merge-block order on a 4 × 6 grid, Pixtral's row-major 3 × 5 grid at coordinates past 300,
    Llama 4's 1-based 4 × 4 grid with its class token last, an axial 2-D call at θ = 100 in the interleaved layout,
    an axial 3-D video call (2 frames of 2 × 3) and DINOv3's centres of a 3 × 4 grid after its class token and 4
    registers (θ = 100, its config's)."""
    from refpos.rope.vision import (
        dinov3_patch_positions,
        llama4_patch_positions,
        pixtral_patch_positions,
        qwen_patch_positions,
    )

    rng = np.random.default_rng(7)
    video = np.stack(np.meshgrid(np.arange(2), np.arange(2), np.arange(3), indexing="ij"), axis=-1).reshape(-1, 3)
    calls = [(qwen_patch_positions([(1, 4, 6)]), {"form": "qwen2_vl", "head_dim": 32, "rope_theta": 10000.0}),
             (pixtral_patch_positions(3, 5) + np.array([300, 280]), {"form": "pixtral", "head_dim": 32,
                                                                     "rope_theta": 10000.0}),
             (llama4_patch_positions(4), {"form": "llama4", "head_dim": 16, "rope_theta": 10000.0}),
             (pixtral_patch_positions(3, 4), {"form": "axial", "head_dim": 16, "rope_theta": 100.0,
                                              "sections": [4, 4], "layout": "interleaved"}),
             (video, {"form": "axial", "head_dim": 24, "rope_theta": 10000.0, "sections": [4, 4, 4],
                      "layout": "half"}),
             (dinov3_patch_positions(3, 4, prefix=5), {"form": "dinov3", "head_dim": 32, "rope_theta": 100.0})]
    return [("apply_vision_rope", {"x": rng.standard_normal((len(positions), rope["head_dim"])),
                                   "positions": np.asarray(positions), "rope": rope})
            for positions, rope in calls]


VISION_ROPE_CHECK = KindCheck(
    kind="vision_rope", calls=(apply_vision_rope,), reference=VisionRopeInputs.reference,
    identify=identify_vision_rope, mistakes={m.name: m.description for m in VISION_ROPE_MISTAKES},
    wrong=partial(mistake_output, VISION_ROPE_MISTAKES), examples=_examples, page="docs/vision-rope.md#mistakes")

__all__ = ["ROPE_FIELDS", "VISION_ROPE_CHECK", "apply_vision_rope", "vision_rope_of"]
