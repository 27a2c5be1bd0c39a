"""``refpos check vision_rope``: patch vectors rotated by their row and column from a call of ``apply_vision_rope``
(the adapter contract's: ``x``, ``positions``, a ``rope`` dict; the form also ``"dinov3"``, with real coordinates,
or ``"mlcd"``, as the reference adapter takes them), against :mod:`refpos.rope.vision` within the bound
of a float32 port per token (:func:`refpos.rope.vision_bound.token_bound`), the mistake named by
:func:`~refpos.rope.vision_mistakes.identify_vision_rope` (docs/vision-rope.md#mistakes).

Two calls of refpos's own take what the contract's has no argument for: ``apply_vision_rope_prefixed(x, positions,
rope, prefix_angles)``, the tokens before the patches turned by given angles (MLCD's and LLaVA-OneVision-1.5's
learned class angles, ``(P, D/2)``), and ``apply_vision3d_rope(x, positions, rope)``, a 3-D form's
(``"minimax_m3_vl"``, ``"vjepa2"``; :mod:`refpos.rope.vision3d`) positions ``(..., N, 3)``, last axis ``(t, h, w)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.rope.vision import VisionRope
from refpos.rope.vision3d import VISION_ROPES_3D, VisionRope3D
from refpos.rope.vision3d_mistakes import VisionRope3DInputs
from refpos.rope.vision_mistakes import VISION_ROPE_MISTAKES, VisionRopeInputs, identify_vision_rope

#: each key of the contract's ``rope`` dict -> the :class:`~refpos.rope.vision.VisionRope` field it sets (the keys
#: are the reference adapter's ``VISION_KEYS``, which the tests compare)
ROPE_FIELDS = {"form": "kind", "head_dim": "head_dim", "rope_theta": "theta", "sections": "sections",
               "layout": "axial_layout"}


def vision_rope_of(rope: Mapping[str, Any]) -> VisionRope | VisionRope3D:
    """The :class:`~refpos.rope.vision.VisionRope` of a contract ``rope`` dict ``{"form", "head_dim",
    "rope_theta"}`` (with ``"sections"`` and ``"layout"`` for the axial form), read as the reference adapter reads
    it, or the :class:`~refpos.rope.vision3d.VisionRope3D` of a 3-D form's; unknown keys, or sections and a layout
    for a named form: ValueError naming ``rope``."""
    if not isinstance(rope, Mapping):
        raise TypeError(f"rope must be a dict {{'form', 'head_dim', 'rope_theta', …}}, got {type(rope).__name__}")
    unknown = sorted(set(rope) - set(ROPE_FIELDS))
    if unknown:
        raise ValueError(f"rope: unknown vision rope keys {unknown}; the keys are {tuple(ROPE_FIELDS)}")
    if rope.get("form") != "axial" and (rope.get("sections") is not None or rope.get("layout") is not None):
        raise ValueError(f"rope: sections and layout are the axial form's; the {rope.get('form')!r} form fixes "
                         "its own")
    given = {ROPE_FIELDS[key]: value for key, value in rope.items() if value is not None}
    if given.get("kind") in VISION_ROPES_3D:
        return VisionRope3D(**{"head_dim": None, **given})
    return VisionRope(**{"kind": None, "head_dim": None, **given})


def _two_d(rope: dict, function: str) -> VisionRope:
    vision = vision_rope_of(rope)
    if isinstance(vision, VisionRope3D):
        raise ValueError(f"rope: the {vision.kind} form rotates (t, h, w): call apply_vision3d_rope, not {function}")
    return vision


def apply_vision_rope(x: Any, positions: Any, rope: dict) -> VisionRopeInputs:
    """The inputs of an ``apply_vision_rope`` call (a 2-D form)."""
    return VisionRopeInputs(np.asarray(x, dtype=np.float64), np.asarray(positions), _two_d(rope, "apply_vision_rope"))


def apply_vision_rope_prefixed(x: Any, positions: Any, rope: dict, prefix_angles: Any) -> VisionRopeInputs:
    """The inputs of refpos's ``apply_vision_rope_prefixed`` call: a 2-D form's rotation of ``x`` ``(..., P + N,
    D)``, its first ``P`` tokens turned by ``prefix_angles`` ``(P, D/2)``, the patches at ``positions``
    ``(..., N, 2)`` (:func:`refpos.rope.vision.apply_vision_rope` with ``prefix_angles``)."""
    if prefix_angles is None:
        raise ValueError("prefix_angles: give the (P, head_dim/2) angles of the tokens before the patches (without "
                         "them, call apply_vision_rope)")
    return VisionRopeInputs(np.asarray(x, dtype=np.float64), np.asarray(positions),
                            _two_d(rope, "apply_vision_rope_prefixed"), np.asarray(prefix_angles))


def apply_vision3d_rope(x: Any, positions: Any, rope: dict) -> VisionRope3DInputs:
    """The inputs of refpos's ``apply_vision3d_rope`` call: a 3-D form (``"minimax_m3_vl"``, ``"vjepa2"``) at
    positions ``(..., N, 3)``, last axis ``(t, h, w)`` (:func:`refpos.rope.vision3d.apply_vision3d_rope`)."""
    vision = vision_rope_of(rope)
    if not isinstance(vision, VisionRope3D):
        raise ValueError(f"rope: form must be one of {VISION_ROPES_3D} (3-D), got {vision.kind!r}: call "
                         "apply_vision_rope")
    return VisionRope3DInputs(np.asarray(x, dtype=np.float64), np.asarray(positions), vision)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Qwen2-VL's merge-block order on a 4 × 6 grid, Pixtral's row-major 3 × 5 grid at coordinates past 300,
    Llama 4's 1-based 4 × 4 grid with its class token last, an axial 2-D call at θ = 100 in the interleaved layout,
    an axial 3-D video call (2 frames of 2 × 3), DINOv3's centres of a 3 × 4 grid after its class token and 4
    registers (θ = 100, its config's), MLCD's 3 × 4 grid after its class token and its learned angles, and the 3-D
    forms on a head of 26 channels (d = 8: 24 rotated, 2 passed through): MiniMax-M3-VL's 3 frames of 4 × 4 in merge
    blocks at θ = 1000, V-JEPA 2's 4 frames of 3 × 3."""
    from refpos.rope.vision import (
        dinov3_patch_positions,
        llama4_patch_positions,
        pixtral_patch_positions,
        qwen_patch_positions,
    )
    from refpos.rope.vision3d import thw_patch_positions, vjepa2_patch_positions

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
    out: list[tuple[str, dict[str, Any]]] = [
        ("apply_vision_rope", {"x": rng.standard_normal((len(positions), rope["head_dim"])),
                               "positions": np.asarray(positions), "rope": rope}) for positions, rope in calls]
    mlcd = pixtral_patch_positions(3, 4)  # MLCD's class token first, turned by its learned angles
    out.append(("apply_vision_rope_prefixed", {"x": rng.standard_normal((13, 16)), "positions": mlcd,
                                               "rope": {"form": "mlcd", "head_dim": 16, "rope_theta": 10000.0},
                                               "prefix_angles": rng.uniform(-3.0, 3.0, (1, 8))}))
    for form, theta, positions in (("minimax_m3_vl", 1000.0, thw_patch_positions([(3, 4, 4)])),
                                   ("vjepa2", 10000.0, vjepa2_patch_positions(np.arange(36), 3))):
        out.append(("apply_vision3d_rope", {"x": rng.standard_normal((len(positions), 26)), "positions": positions,
                                            "rope": {"form": form, "head_dim": 26, "rope_theta": theta}}))
    return out


VISION_ROPE_CHECK = KindCheck(
    kind="vision_rope", calls=(apply_vision_rope, apply_vision_rope_prefixed, apply_vision3d_rope),
    reference=lambda inputs: inputs.reference(),
    identify=identify_vision_rope, mistakes={m.name: m.description for m in VISION_ROPE_MISTAKES},
    wrong=partial(mistake_output, VISION_ROPE_MISTAKES), examples=_examples, page="docs/vision-rope.md#mistakes")

__all__ = ["ROPE_FIELDS", "VISION_ROPE_CHECK", "apply_vision3d_rope", "apply_vision_rope", "apply_vision_rope_prefixed",
           "vision_rope_of"]
