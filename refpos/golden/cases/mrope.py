"""Golden M-RoPE cases of a vision-language config: cos/sin and apply at multimodal probe layouts.

``refpos golden model CONFIG.json`` on a config that resolves to M-RoPE (``mrope_section`` set;
docs/mrope.md) writes, besides ``rope/<model>/frequencies``, two cases per probe layout:

* ``rope/<model>/<layout>/cos-sin``: ``rope_cos_sin(positions, rope, seq_len)`` at the layout's
  ``(3, T)`` position ids, stored per pair ``(T, m)``;
* ``rope/<model>/<layout>/apply``: ``apply_rope(x, positions, rope, seq_len)`` of a seeded ``x (T, D)``.

Probe layouts, built by :func:`refpos.models.mm_positions.mm_position_ids` with the config's family and
settings (:func:`refpos.models.mm_positions.mm_settings_from_config`; ``qwen2_vl``'s rules for a family
whose ids refpos does not follow):

* ``text``: 8 text tokens (M-RoPE equals 1-D RoPE);
* ``image``: 3 text tokens, an image of 8 × 12 patches (4 × 6 tokens), 2 text tokens;
* ``video``: 2 text tokens, a video of 4 × 8 × 8 patches, 1 s per temporal patch, 2 text tokens;
* ``text-after-image``: 4 text tokens, a 16 × 8 image, 16 text tokens (the text continues after the
  image's largest side, not after its token count);
* Omni families also ``audio`` (2 text tokens, 12 audio tokens, 2 text tokens) and ``video-with-audio``
  (the video above with 50 audio tokens of its own track, interleaved by time).

Exact values: mpmath at 50 digits, each pair at the position of its axis
(:func:`mp_mrope_cos_sin`). Tolerance: the RoPE rule at each token's largest position over the axes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

import numpy as np

import refpos
from refpos.golden.cases.common import as_xp, to_np
from refpos.golden.cases.rope_builders import apply_case, cos_sin_case
from refpos.golden.exact import certify as cert
from refpos.golden.files.manifest import Case
from refpos.models.mm_layout import config_position_ids, config_rules
from refpos.models.mm_positions import MM_RULES, Audio, Image, Text, Video
from refpos.pairs import split_pairs
from refpos.rope.mrope import pair_axes

#: probe layout name -> spans (grids in patches, before the spatial merge of 2)
PROBE_LAYOUTS = {
    "text": [Text(8)],
    "image": [Text(3), Image((1, 8, 12)), Text(2)],
    "video": [Text(2), Video((4, 8, 8), seconds_per_grid=1.0), Text(2)],
    "text-after-image": [Text(4), Image((1, 16, 8)), Text(16)],
    "audio": [Text(2), Audio(12), Text(2)],
    "video-with-audio": [Text(2), Video((4, 8, 8), seconds_per_grid=1.0, audio_tokens=50), Text(2)],
}
#: the layouts of families with audio (the others take the first four)
_AUDIO_LAYOUTS = ("audio", "video-with-audio")


def vlm_configs() -> dict[str, Any]:
    """The real vision-language configs (``refpos/data/vlm_configs.json``: each with its source)."""
    text = resources.files("refpos").joinpath("data/vlm_configs.json").read_text(encoding="utf8")
    return json.loads(text)


def probe_layouts(config: dict[str, Any]) -> tuple[str, ...]:
    """The probe layouts of a config's family (with ``audio`` and ``video-with-audio`` for the Omni families)."""
    audio = MM_RULES[config_rules(config, default_family="qwen2_vl")["family"][0]].tmrope is not None
    return tuple(name for name in PROBE_LAYOUTS if audio or name not in _AUDIO_LAYOUTS)


def layout_positions(config: dict[str, Any], layout: str) -> np.ndarray:
    """The ``(3, T)`` ids of a probe layout under the config's family rules (``qwen2_vl``'s for another family)."""
    if layout not in probe_layouts(config):
        raise ValueError(f"layout {layout!r} is not a probe layout of this config's family: "
                         f"{list(probe_layouts(config))}")
    return config_position_ids(config, PROBE_LAYOUTS[layout], default_family="qwen2_vl")[0]


def mp_mrope_cos_sin(positions: np.ndarray, inv_freq: list, factor: Any, axes: tuple[int, ...]) -> tuple[list, list]:
    """Exact ``A·cos(p_{a(j)}·ω_j)``, ``A·sin(…)`` as nested lists ``[T][m]``."""
    cos, sin = [], []
    for t in range(positions.shape[1]):
        row_c, row_s = [], []
        for j, w in enumerate(inv_freq):
            c, s = cert.mp.cos_sin(cert._f(int(positions[axes[j], t])) * w)
            row_c.append(factor * c)
            row_s.append(factor * s)
        cos.append(row_c)
        sin.append(row_s)
    return cos, sin


def mrope_case_sets(rope: Any, config: dict[str, Any], *, key: str, description: str,
                    parameters: dict[str, Any], params: dict[str, Any],
                    shared_x: Callable[[int, int], tuple[str, np.ndarray]]) -> list[Case]:
    """cos-sin and apply cases of one M-RoPE at every probe layout (``key``: the case id prefix).

    ``params`` is the portable rope dict and ``shared_x(head_dim, rows)`` the seeded input of the model
    cases (both from :mod:`refpos.golden.cases.rope`, which calls this).
    """
    axes = pair_axes(rope.mrope_section, rope.mrope_scheme)
    cases = []
    for layout in probe_layouts(config):
        positions = layout_positions(config, layout)  # (3, T)
        seq_len = int(positions.max()) + 1
        per_token = positions.max(axis=0)  # (T,): the largest position any pair of the token reads
        inv_freq, factor = (to_np(a) for a in refpos.rope_frequencies(rope, seq_len=seq_len))
        cos, sin = (split_pairs(to_np(a), rope.layout, side="written")[0]  # (T, m) per pair
                    for a in refpos.rope_cos_sin(as_xp(positions), rope, seq_len=seq_len))
        memo: dict[str, tuple[list, list]] = {}

        def exact_tables(positions: np.ndarray = positions, seq_len: int = seq_len,
                         memo: dict = memo) -> tuple[list, list]:
            if "tables" not in memo:
                memo["tables"] = mp_mrope_cos_sin(positions, cert.mp_inv_freq(params, seq_len),
                                                  cert.mp_attention_factor(params, seq_len), axes)
            return memo["tables"]

        shared = {"model": parameters.get("model"), "layer_type": None, "rope": params, "seq_len": seq_len,
                  "layout": layout, "spans": [repr(s) for s in PROBE_LAYOUTS[layout]],
                  "resolved_in": f"{key}/frequencies"}
        cases.append(cos_sin_case(f"{key}/{layout}/cos-sin", f"{description}: A·cos and A·sin per pair at the "
                                  f"(3, T) ids of the {layout} probe layout", shared, positions, per_token,
                                  (cos, sin), inv_freq, factor, exact_tables))
        name, x = shared_x(rope.head_dim, positions.shape[1])
        cases.append(apply_case(f"{key}/{layout}/apply", f"{description}: rotated x (T, D) at the {layout} probe "
                                "layout", shared, positions, per_token, rope, params, seq_len, inv_freq, factor,
                                name, x, exact_tables))
    return cases
