"""The figure of vision RoPE (docs/vision-rope.md), registered by :mod:`refpos.tools.plots`.

``vision-rope``: ``cos φ_j`` of two pairs of a head of 32 channels over a 16 × 16 patch grid, for the three forms
transformers ships (:func:`refpos.rope.vision.vision_cos_sin`): pair 1, the second of the first quarter, and pair
9, the second of the second quarter. Qwen2-VL's and Pixtral's first quarter reads the row (stripes across), Llama
4's the column (stripes down); Pixtral's second-quarter pair turns slower (an odd frequency of a head of size D).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
VISION_ROPE_PLOT = ("vision-rope", "cos φ of pairs 1 and 9 (head 32) over a 16x16 patch grid for Qwen2-VL, Pixtral "
                    "and Llama 4", "Qwen2-VL and Pixtral turn pair 1 by the row and pair 9 by the column; Llama 4 "
                    "the reverse. Pixtral's pair 9 has an odd frequency of a head of size 32, slower than "
                    "Qwen2-VL's.", (9.6, 6.0))
#: the grid's side, the head size and the two pairs drawn (the first and the second quarter of the pairs)
SIDE, HEAD_DIM, PAIRS = 16, 32, (1, 9)


def plot_vision_rope(fig: Any) -> None:
    from refpos.pairs import split_pairs
    from refpos.rope.vision import (
        VisionRope,
        llama4_patch_positions,
        pixtral_patch_positions,
        vision_cos_sin,
        vision_frequencies,
    )

    forms = (("qwen2_vl", "Qwen2-VL", pixtral_patch_positions(SIDE, SIDE)),  # row-major 0-based (no merge order)
             ("pixtral", "Pixtral", pixtral_patch_positions(SIDE, SIDE)),
             ("llama4", "Llama 4", llama4_patch_positions(SIDE)[:-1]))  # the class token left out
    for column, (form, title, positions) in enumerate(forms):
        rope = VisionRope(form, HEAD_DIM)
        axes, inv_freq = vision_frequencies(rope)
        cos, _ = vision_cos_sin(positions, rope, xp=np)  # (N, D), in the form's layout
        per_pair, _ = split_pairs(to_numpy(cos), rope.layout)  # (N, D/2): cos φ_j
        for row, j in enumerate(PAIRS):
            ax = fig.add_subplot(len(PAIRS), len(forms), row * len(forms) + column + 1)
            image = ax.imshow(per_pair[:, j].reshape(SIDE, SIDE), cmap="RdBu_r", vmin=-1.0, vmax=1.0,
                              interpolation="nearest")
            ax.set_title(f"{title}: pair {j} reads {'hw'[axes[j]]}, ω = {inv_freq[j]:.3f}")
            ax.set_xlabel("patch column")
            ax.set_ylabel("patch row")
            fig.colorbar(image, ax=ax, fraction=0.046)


__all__ = ["HEAD_DIM", "PAIRS", "SIDE", "VISION_ROPE_PLOT", "plot_vision_rope"]
