r"""The ``vision_rope`` comparison: a vision tower's 2-D RoPE (MiniMax-M3-VL's 3-D one:
:mod:`survey.pixel_kinds.vision_rope_thw`),
observed at the model's rotary apply function.

Every layer of a tower rotates its patches alike (:mod:`refpos.models.kinds.vision_rope`), so the first call of
the modeling module's rotary apply function at each size (:func:`survey.pixels.rotations`: its query and key
before and after, the first head) is what refpos's claim predicts: :func:`refpos.rope.vision.apply_vision_rope` of
the query and key before, at the positions the claim's form gives each patch of the grid that was fed
(:func:`claimed_positions`). The native size and the resampled one (a non-square grid) are both compared.
Tokens before the patches (the record's ``prefix``: DINOv3's class and register tokens, MLCD's class token) turn by
given angles (:func:`prefix_angles_of`): zero (DINOv3), or the model's own ``class_pos_emb`` (MLCD, LLaVA-OneVision-1.5:
a weight, read from the run's site of that name, which the comparison then accounts for). A layer whose prefix holds
query tokens (EoMT-DINOv3's last layers) is compared on the calls of its own token count only (the run keeps the
first call of each query shape: a layer with the queries and one without), and is not reached where the run kept
none; every layer skips the calls whose patches are no grid of its form (another layer's), and is not reached where
it skips all. A layer with positions of its own (SAM 3's windowed and global layers: the record's
``window`` or ``grid``) is judged by :mod:`survey.pixel_kinds.vision_rope_windows`; V-JEPA 2's 3-D form, which
turns each axis's block in a call of its own, by :mod:`survey.pixel_kinds.vision_rope_blocks`. A call recorded
without its query (the function given its tensors by keyword) is not reached.

**Bound.** A correct port computes the angle ``p·ω`` and the rotation in float32. Output channel ``c`` of pair
``(c, c')`` at coordinate ``p`` (the row or column the pair reads) is off by at most

.. math:: |x_c, x_{c'}|_2 \bigl((K + 1 + |\ln\omega_c|)\,\epsilon\,p\,\omega_c + C\bigr),

the 1-D RoPE bound of :mod:`survey.compare` (:meth:`survey.rotation.Channels.bound`, ``K`` the roundings of the
inverse frequency, ``C`` the cosine, sine and rotation's 16 ulp), with each channel's own coordinate. A run in
float64 is within it too. DINOv3 computes its coordinates in float32, off by up to 3ε absolutely (a division, then
``−1``): the channel's coordinate is taken as ``|c| + 1`` (``K + 1 ≥ 3``). A given angle ``α`` (MLCD's class token)
takes the bound of ``p·ω = |α|``.

**Wrong answers** (each the claim with one thing changed; a list of the survey's own, beside the catalogue of ``refpos
check vision_rope`` in :mod:`refpos.rope.vision_mistakes`, which several of them repeat: that catalogue reads a contract
call, not a tower's run with its patch order and prefix weights): each other named form (Qwen2-VL's, Pixtral's, Llama
4's, Step 3.5's and Kimi K2.5's frequencies, axis order and layout), the row and column swapped, positions counted from
1 (from 0 where the record counts them from 1: Muse's towers), the patches taken row-major where the claim orders
them in merge blocks or in windows (or in merge blocks where it orders them row-major: the other forms, and Qwen2-VL's
form in a tower whose record reads it in raster order), the other pair
layout (``half`` ↔ ``interleaved``, where the form is an axial one), θ of 10000 where the claim's differs, and no
rotation; for DINOv3, the patch indices instead of the normalised centres, the corners instead of the centres, no 2π,
and the prefix tokens rotated (as if at the corner (−1, −1)); for MLCD, the class token unrotated (Qwen2-VL's form,
which MLCD's patches share, is then no wrong answer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    pixtral_patch_positions,
    qwen_patch_positions,
    vision_angles,
    vision_frequencies,
    vision_place_pairs,
    vision_split_pairs,
)
from refpos.rope.vision3d import VisionRope3D
from survey.pixel_kinds.base import Outcome, graded, image_patch_grid
from survey.pixels import PixelRun, Site
from survey.rotation import Channels

#: the named forms of 2-D vision RoPE on integer positions (the wrong forms a claim is graded against)
FORMS = ("qwen2_vl", "pixtral", "llama4", "step3p7", "kimi_k25")


def _grid(run: PixelRun, size: str, tokens: int) -> tuple[int, int, int] | None:
    """The ``(t, h, w)`` patch grid fed at ``size``: the one given with flattened patches, else the image's grid of
    ``tokens`` patches (:func:`survey.pixel_kinds.base.image_patch_grid`)."""
    if size in run.grids:
        t, h, w = run.grids[size]
        return int(t), int(h), int(w)
    hw = image_patch_grid(tokens, run.shapes[size])
    return None if hw is None else (1, *hw)


def claimed_grid(record: Any, run: PixelRun, size: str, tokens: int) -> tuple[int, int, int] | None:
    """The ``(t, h, w)`` grid of the ``tokens`` after the prefix the layer rotates at ``size``: Llama 4's square of
    ``tokens − 1`` patches (its class token last) for a record that reads a square, else :func:`_grid`."""
    if record.square:
        side = round(max(tokens - 1, 0) ** 0.5)
        return (1, side, side) if side * side == tokens - 1 else None
    return _grid(run, size, tokens)


def claimed_positions(record: Any, run: PixelRun, size: str, tokens: int) -> np.ndarray | None:
    """``(tokens, 2)`` positions the record gives the ``tokens`` it rotates after its prefix at ``size``
    (:meth:`refpos.models.kinds.vision_rope.VisionRopeLayer.patch_positions` of the grid fed, in the run's merge
    blocks; Gemma 4's tokens past the grid padding patches); ``None`` where the tokens are no grid the record
    reads (another layer's call)."""
    grid = claimed_grid(record, run, size, tokens)
    if grid is None:
        return None
    count = grid[0] * grid[1] * grid[2]
    padding = tokens - count if record.rope.kind == "gemma4" and grid[0] == 1 and tokens > count else 0
    try:
        positions = record.patch_positions(grid, run.merge, padding=padding)
    except ValueError:  # a grid the form does not read (not whole merge blocks, a video for an image form)
        return None
    return positions if len(positions) == tokens else None


def other_order(positions: np.ndarray, grid: tuple[int, int, int], merge: int, start: int, blocks: bool
                ) -> np.ndarray | None:
    """The claim's patches in the other order (a wrong answer): in ``merge`` blocks where ``blocks``, else
    row-major, counted from ``start``; ``None`` where that is the claim's own order."""
    t, h, w = grid
    if blocks and merge > 1 and h % merge == 0 and w % merge == 0:
        other = qwen_patch_positions([grid], spatial_merge_size=merge) + start
    else:
        other = np.tile(pixtral_patch_positions(h, w), (t, 1)) + start
    return None if np.array_equal(other, positions) else other


def channels_of(rope: VisionRope, positions: np.ndarray) -> tuple[Channels, np.ndarray]:
    """The claim's rotation per output channel (:class:`survey.rotation.Channels`: each channel its own partner
    and speed) and the coordinate each channel reads, ``(N, D)``."""
    axes, omega = vision_frequencies(rope)
    d = rope.head_dim
    index = np.arange(d)
    first, second = (np.asarray(c, dtype=np.int64) for c in vision_split_pairs(index, rope))  # pair j's channels
    partner = index.copy()
    partner[first], partner[second] = second, first
    per_pair = positions[:, list(axes)]  # (N, D/2): p_{a(j)}
    speeds = Channels(index, partner, np.ones(d), np.asarray(vision_place_pairs(omega, omega, rope)))
    return speeds, np.asarray(vision_place_pairs(per_pair, per_pair, rope))


def _dinov3_mutants(rope: VisionRope, positions: np.ndarray, prefix: np.ndarray
                    ) -> dict[str, tuple[VisionRope, np.ndarray, np.ndarray] | None]:
    """DINOv3's wrong answers (module docstring): the patch indices ``i`` recovered from ``c = (2i + 1)/n − 1``."""
    sides = np.array([len(np.unique(positions[:, 0])), len(np.unique(positions[:, 1]))], dtype=np.float64)
    index = np.rint((positions + 1.0) * sides / 2.0 - 0.5)  # (N, 2): i per axis
    rotated = np.asarray(vision_angles(np.full((prefix.shape[0], 2), -1.0), rope))  # (P, D/2): at (−1, −1)
    out: dict[str, tuple[VisionRope, np.ndarray, np.ndarray] | None] = {
        f"the {form} form at the patch indices": (VisionRope(form, rope.head_dim, rope.theta),
                                                  index.astype(np.int64), prefix) for form in FORMS}
    out["row and column swapped"] = (rope, positions[:, ::-1].copy(), prefix)
    out["patch indices, not normalised centres"] = (rope, index, prefix)
    out["corners, not centres"] = (rope, 2.0 * index / sides - 1.0, prefix)
    out["no 2π"] = (rope, positions / (2.0 * np.pi), prefix)
    out["prefix tokens rotated (at (−1, −1))"] = None if not prefix.shape[0] else (rope, positions, rotated)
    out["θ = 10000"] = None if rope.theta == 10000.0 else (VisionRope("dinov3", rope.head_dim, 10000.0), positions,
                                                           prefix)
    return out


def mutants(rope: VisionRope, grid: tuple[int, int, int] | None, merge: int, positions: np.ndarray,
            prefix: np.ndarray | None = None, raster: bool = False, start: int = 0, window: int = 0
            ) -> dict[str, tuple[VisionRope, np.ndarray, np.ndarray | None] | None]:
    """The wrong answers of the module docstring, each a ``(rope, positions, prefix angles)`` (``None``: not one
    here); ``grid`` the patches fed (merged in ``merge`` blocks), ``prefix`` the claim's angles of the tokens before
    them, ``raster``: the claim reads the ``qwen2_vl`` form's patches row-major (the record's ``raster``), ``start``
    and ``window``: the record's first coordinate and window order (a claim from 1 has positions from 0 as its
    wrong answer)."""
    if rope.kind == "dinov3":
        assert prefix is not None
        return dict(_dinov3_mutants(rope, positions, prefix))
    indices = np.maximum(positions, 0)  # the named forms take no padding position (Gemma 4's −1)
    out: dict[str, tuple[VisionRope, np.ndarray, np.ndarray | None] | None] = {
        f"the {form} form": (VisionRope(form, rope.head_dim, rope.theta), indices, prefix)
        for form in FORMS if form != rope.kind and not (rope.kind == "mlcd" and form == "qwen2_vl")}
    padded = np.all(positions == -1, axis=-1, keepdims=True)
    out["padding patches at (0, 0)"] = None if not padded.any() else (rope, np.where(padded, 0, positions), prefix)
    out["row and column swapped"] = (rope, positions[:, ::-1].copy(), prefix)
    if start:
        out["positions from 0"] = (rope, positions - start, prefix)
    else:
        out["positions from 1"] = (rope, positions + 1, prefix)
    if rope.kind not in ("llama4", "gemma4") and grid is not None:
        other = other_order(positions, grid, merge, start, blocks=rope.kind != "qwen2_vl" or raster)
        out["patch order (merge blocks vs row-major)"] = None if other is None else (rope, other, prefix)
    if window and grid is not None:
        plain = other_order(positions, grid, merge, start, blocks=False)
        out["patches row-major, not window by window"] = None if plain is None else (rope, plain, prefix)
    if rope.kind == "axial":
        flipped = "interleaved" if rope.layout == "half" else "half"
        out["pair layout swapped"] = (VisionRope("axial", rope.head_dim, rope.theta, rope.sections, flipped),
                                      positions, prefix)
    if prefix is not None and prefix.shape[0]:
        out["class token unrotated"] = None if not np.any(prefix) else (rope, positions, np.zeros_like(prefix))
    out["θ = 10000"] = None if rope.theta == 10000.0 else (
        VisionRope(rope.kind, rope.head_dim, 10000.0, rope.sections, rope.axial_layout), positions, prefix)
    return out


def prefix_angles_of(record: Any, sites: list[Site]) -> tuple[np.ndarray, str] | None:
    """``((P, D/2) angles, site path)`` of the record's tokens before the patches: zeros where they are unrotated
    (path ``""``), else the parameter ``prefix_weight`` of the site of that name among ``sites`` (the run's: every
    layer reads it, where the first layer's record accounts for it); ``None``: no such site."""
    prefix, weight = getattr(record, "prefix", 0), getattr(record, "prefix_weight", None)
    half = record.rope.head_dim // 2
    if weight is None:
        return np.zeros((prefix, half)), ""
    for site in sites:
        for name, value in site.params.items():
            if name.rsplit(".", 1)[-1] == weight and value.size == prefix * half:
                return np.asarray(value, dtype=np.float64).reshape(prefix, half), site.path
    return None


def rope_sites(sites: list[Site]) -> tuple[str, ...]:
    """The sites a vision RoPE accounts for: the rotary module's frequencies, a buffer its code computes (never a
    drawn parameter) named for them (``inv_freq``)."""
    return tuple(site.path for site in sites if not site.initial and site.params
                 and all("freq" in name.rsplit(".", 1)[-1] for name in site.params))


def claim_and_bound(rope: VisionRope, x: np.ndarray, positions: np.ndarray, prefix: np.ndarray,
                    relative: float = 0.0) -> tuple[np.ndarray, Any]:
    """refpos's rotation of ``x`` (prefix, then patches) and its bound per output channel (module docstring);
    ``relative``: the coordinates' own relative error (a scale rounded to float32), carried as more roundings."""
    speeds, per_channel = channels_of(rope, positions)
    if rope.kind == "dinov3":
        per_channel = np.abs(per_channel) + 1.0  # the float32 coordinate's absolute error
    per_channel = np.abs(per_channel) * (1.0 + relative)
    if prefix.shape[0]:
        _, omega = vision_frequencies(rope)
        given = np.abs(prefix) / omega  # (P, D/2): the coordinate whose angle is |α|
        per_channel = np.concatenate([np.asarray(vision_place_pairs(given, given, rope)), per_channel], axis=0)
    claim = apply_vision_rope(x, positions, rope, prefix_angles=prefix if prefix.shape[0] else None)
    return np.asarray(claim), speeds.bound(x, per_channel)


def rotary_calls(run: PixelRun, head_dim: int) -> list[tuple[str, str, np.ndarray, np.ndarray]] | str:
    """``(size, call name, query or key before, after)`` in float64 for every first rotary apply call the run
    recorded, or why there is nothing to compare: ``"not reached: …"`` (no apply function ran) or ``"wrong: …"``
    (transformers rotates another number of channels per head than ``head_dim``)."""
    if not run.applied or not any(run.applied.values()):
        return "not reached: no rotary apply function of transformers' modeling modules ran (the rotation is " \
               "computed inline)"
    out = []
    for size, calls in run.applied.items():
        for call in calls:
            if not call.before:
                return (f"not reached: {call.name} at the {size} size: no query or key recorded (its tensors passed "
                        f"by keyword)")
            for before, after in zip(call.before, call.after, strict=False):
                x, y = before.astype(np.float64), after.astype(np.float64)
                if x.shape[-1] != head_dim or x.shape != y.shape:
                    return (f"wrong: {call.name} at the {size} size: transformers rotates {x.shape[-1]} channels per "
                            f"head, refpos's claim {head_dim}")
                out.append((size, call.name, x, y))
    return out


def unusable(why: str, stack: str, accounted: tuple[str, ...]) -> Outcome:
    """The outcome of :func:`rotary_calls`' reason ``why`` (``"status: cause"``) there is nothing to compare, the
    cause named by its ``stack`` unless it is wrong."""
    status, _, cause = why.partition(": ")
    return Outcome(status, cause if status == "wrong" else f"{stack}: {cause}", accounted)


def compare_vision_rope(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """The query and key after the first rotary apply call at each size against refpos's rotation of them before
    (module docstring)."""
    rope = record.rope
    accounted = rope_sites(sites)
    if isinstance(rope, VisionRope3D) and rope.kind == "minimax_m3_vl":
        from survey.pixel_kinds.vision_rope_thw import compare_thw

        return compare_thw(record, run, accounted)
    if getattr(record, "window", 0) or getattr(record, "grid", None) is not None:
        from survey.pixel_kinds.vision_rope_windows import compare_windows

        return compare_windows(record, run, accounted)
    if isinstance(rope, VisionRope3D) and rope.kind == "vjepa2":
        from survey.pixel_kinds.vision_rope_blocks import compare_vjepa2

        return compare_vjepa2(record, run, accounted)
    if not isinstance(rope, VisionRope):
        return Outcome("not reached", f"{record.stack} layer {record.index}: the survey compares 2-D vision RoPE and "
                       f"MiniMax-M3-VL's 3-D form; this claim is {rope.kind}'s (a {type(rope).__name__})", accounted)
    given = prefix_angles_of(record, run.sites)  # every layer reads the weight: the run's sites, not the free ones
    if given is None:
        return Outcome("not reached", f"{record.stack}: no site holds the weight {record.prefix_weight} that turns "
                       "the tokens before the patches", accounted)
    prefix, site = given
    accounted += (site,) if site else ()
    observed = rotary_calls(run, rope.head_dim)
    if isinstance(observed, str):
        return unusable(observed, record.stack, accounted)
    cases, unmatched = [], []
    queries = getattr(record, "queries", 0)
    raster = bool(getattr(record, "raster", False))
    start, window = getattr(record, "start", 0), getattr(record, "window_order", 0)
    for size, call, x, y in observed:
        patches = x.shape[0] - prefix.shape[0]
        positions = claimed_positions(record, run, size, patches)
        if positions is None:  # another layer's call (its tokens differ), or none of this layer's
            unmatched.append(f"{call} at the {size} size: {patches} patches are no grid of the {rope.kind} form's")
            continue
        claim, bound = claim_and_bound(rope, x, positions, prefix)
        grid = claimed_grid(record, run, size, patches)
        wrong = {name: None if m is None else np.asarray(apply_vision_rope(
            x, m[1], m[0], prefix_angles=None if m[2] is None or not m[2].shape[0] else m[2]))
            for name, m in mutants(rope, grid, run.merge, positions, prefix, raster, start, window).items()}
        wrong["no rotation"] = x
        cases.append((y, claim, bound, wrong))
    if not cases and queries:
        return Outcome("not reached", f"{record.stack} layer {record.index}: its {queries} query tokens join the "
                       "sequence before the class token; no rotary call the run kept has them", accounted)
    if not cases:
        return Outcome("not reached", unmatched[0], accounted)
    return graded(cases, accounted, f"{record.stack} vision_rope({rope.kind})")
