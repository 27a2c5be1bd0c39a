"""A vision tower fed patches with each image's patch grid (SigLIP 2's NaFlex tower): ``pixel_values`` as flattened
patches ``(1, N, C·p²)``, ``spatial_shapes`` ``(1, 2)`` the image's ``(h, w)`` in patches, and a mask of its
patches ``(1, N)``, ones on the ``h·w`` patches of the image and zeros on the ``N − h·w`` padding patches after them.

Found by the forward's parameter names (:data:`SHAPE_INPUTS`), never by model type. The native size is the table's
own square grid ``(s, s)`` (``s² = num_patches``), unpadded; the resampled size a grid that is not square,
``(⌈s/2⌉, s + 2)`` (one axis shrunk, the other grown: a resampling with its axes swapped differs), followed by one
padding row of ``w`` patches (the mask then tells the image's patches from the padding).
"""

from __future__ import annotations

import inspect
from typing import Any

#: the names a forward takes each image's ``(h, w)`` patch grid by, beside flattened patches fed as its
#: ``pixel_values`` (SigLIP 2's NaFlex tower)
SHAPE_INPUTS = ("spatial_shapes",)


def shapes_input(params: Any) -> str | None:
    """The name under which a forward whose parameters are ``params`` takes each image's ``(h, w)`` patch grid, or
    None where it takes none."""
    return next((name for name in SHAPE_INPUTS if name in params), None)


def _get(config: Any, key: str) -> Any:
    return config.get(key) if isinstance(config, dict) else getattr(config, key, None)


def _side(config: Any) -> int:
    """``s``, the side of the config's square table: ``√num_patches``, else ``image_size / patch_size``."""
    count = _get(config, "num_patches")
    if isinstance(count, int) and count > 0 and round(count**0.5) ** 2 == count:
        return round(count**0.5)
    image, patch = _get(config, "image_size"), _get(config, "patch_size")
    if isinstance(image, int) and isinstance(patch, int) and patch > 0 and image >= patch:
        return image // patch
    raise ValueError(f"config: no square table side from num_patches={count!r} or image_size={image!r} / "
                     f"patch_size={patch!r}")


def shape_grid(config: Any, size: str) -> tuple[int, int, int]:
    """``(h, w, padding)`` of the patches fed at ``size`` (module docstring): ``(s, s, 0)`` native, and
    ``(⌈s/2⌉, s + 2, s + 2)`` resampled (one padding row)."""
    if size not in ("native", "resampled"):
        raise ValueError(f"size: 'native' or 'resampled', not {size!r}")
    s = _side(config)
    return (s, s, 0) if size == "native" else (max(1, -(-s // 2)), s + 2, s + 2)


def shaped_candidates(config: Any) -> dict[str, list[tuple[int, ...]]]:
    """``{"native": [shape], "resampled": [shape]}``: the flattened patches ``(1, h·w + padding, C·p²)`` of
    :func:`shape_grid`."""
    channels = _get(config, "num_channels") or 3
    patch = _get(config, "patch_size") or 16
    return {size: [(1, h * w + padding, channels * patch * patch)] for size in ("native", "resampled")
            for h, w, padding in [shape_grid(config, size)]}


def shaped_inputs(params: Any, grid: tuple[int, ...] | None, shape: tuple[int, ...]) -> dict[str, Any]:
    """What such a forward is fed beside patches of ``shape`` ``(1, N, C·p²)`` whose image is ``grid``
    ``(1, h, w)``: ``spatial_shapes`` ``[[h, w]]``, and each mask it takes over the patches (a parameter named
    ``…mask``), ones on the first ``h·w`` and zeros on the padding; ``{}`` for any other forward."""
    import torch

    name = shapes_input(params)
    if name is None or grid is None or len(shape) != 3:
        return {}
    _, h, w = grid
    if h * w > shape[1]:
        raise ValueError(f"grid: {h}×{w} patches exceed the {shape[1]} fed")
    mask = torch.zeros((shape[0], shape[1]), dtype=torch.long)
    mask[:, : h * w] = 1
    masks = {key: mask.clone() for key, param in params.items()
             if key.endswith("mask") and param.kind is not inspect.Parameter.VAR_KEYWORD}
    return {name: torch.tensor([[h, w]] * shape[0], dtype=torch.long), **masks}
