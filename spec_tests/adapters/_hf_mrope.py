"""transformers' M-RoPE behind the adapter contract: the vision-language text rotary modules and
``get_rope_index`` (used by ``hf_transformers.py``; every number comes out of transformers).

Which module rotates an M-RoPE dict (docs/mrope.md): the assignment and the layout pick the family whose
text rotary module does exactly that, and its own ``apply_rotary_pos_emb`` rotates.

========================  =================  ==========================================================
assignment                layout             transformers 5.24
========================  =================  ==========================================================
contiguous                half               ``qwen2_vl`` ``Qwen2VLRotaryEmbedding`` (full width only)
contiguous                interleaved        ``glm4v`` ``Glm4vTextRotaryEmbedding`` (partial rotary too)
interleaved (round-robin) half               ``qwen3_vl`` ``Qwen3VLTextRotaryEmbedding`` (full width only)
interleaved               interleaved        none: ``NotImplementedError``
========================  =================  ==========================================================

Position ids: the family's ``<Family>Model.get_rope_index`` on ``input_ids`` of zeros, ``mm_token_type_ids``
(0 text, 1 image, 2 video) built from the layout, the grids as ``image_grid_thw`` / ``video_grid_thw``,
Qwen2.5-VL's ``second_per_grid_ts`` (float32, as its processor's tensors) and an attention mask of ones;
``self`` is a stand-in holding the family's real config (``spatial_merge_size``, ``tokens_per_second``)
and the class's own ``get_vision_position_ids``. transformers finds the vision items as runs of one token
type (``itertools.groupby`` of ``mm_token_type_ids``), so two items of one modality with no text between
(and, for Qwen3-VL and GLM-4.1V, the frames of one video, which their prompts separate by timestamp text)
read as one item: such a layout is ``NotImplementedError``, as is an item with no token.
"""

from __future__ import annotations

import functools
import importlib
import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from refpos.rope.rules import RULES
from spec_tests.adapters._contract import MROPE_KEYS

#: (mrope_interleaved, layout) -> family whose text rotary module does that
FAMILY_OF = {(False, "half"): "qwen2_vl", (False, "interleaved"): "glm4v", (True, "half"): "qwen3_vl"}
#: family -> (text config class, text rotary class)
ROTARY = {"qwen2_vl": ("Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding"),
          "glm4v": ("Glm4vTextConfig", "Glm4vTextRotaryEmbedding"),
          "qwen3_vl": ("Qwen3VLTextConfig", "Qwen3VLTextRotaryEmbedding")}
#: family -> (model class with get_rope_index, top-level config class)
MODELS = {"qwen2_vl": ("Qwen2VLModel", "Qwen2VLConfig"), "qwen2_5_vl": ("Qwen2_5_VLModel", "Qwen2_5_VLConfig"),
          "qwen3_vl": ("Qwen3VLModel", "Qwen3VLConfig"), "glm4v": ("Glm4vModel", "Glm4vConfig")}
PER_FRAME = ("qwen3_vl", "glm4v")  # get_rope_index splits video_grid_thw into one-frame grids
#: the rope_parameters keys transformers reads (those of the registry's rules that transformers has), and the
#: contract's geometry keys (the adapter's own)
HF_KEYS = ("rope_type", "rope_theta", *sorted(set().union(*(rule.config_keys for rule in RULES.values()
                                                             if rule.transformers))))
GEOMETRY_KEYS = ("head_dim", "partial_rotary_factor", "rotary_dim", "max_position_embeddings", "layout", "placement")
OTHER_KEYS = GEOMETRY_KEYS + tuple(sorted(MROPE_KEYS))


def _modeling(family: str, kind: str = "modeling") -> Any:
    return importlib.import_module(f"transformers.models.{family}.{kind}_{family}")


def family_of(rope: dict) -> str:
    """The family whose text rotary module rotates ``rope`` (table in the module docstring)."""
    unknown = {k for k, v in rope.items() if v is not None} - set(HF_KEYS) - set(OTHER_KEYS)
    if unknown:
        raise NotImplementedError(f"keys with no equivalent in transformers' M-RoPE modules: {sorted(unknown)}")
    if rope.get("placement", "first") != "first":
        raise NotImplementedError("transformers' M-RoPE modules rotate the first channels")
    layout = rope.get("layout") or "half"
    family = FAMILY_OF.get((bool(rope.get("mrope_interleaved")), layout))
    if family is None:
        raise NotImplementedError(f"no transformers M-RoPE module with the interleaved assignment and the "
                                  f"{layout!r} layout (Qwen3-VL's round-robin is half layout)")
    return family


def rotary_module(rope: dict) -> tuple[Any, str]:
    """(the family's text rotary module built from ``rope``, family)."""
    family = family_of(rope)
    head_dim = int(rope["head_dim"])
    prf = rope["rotary_dim"] / head_dim if rope.get("rotary_dim") is not None else rope.get("partial_rotary_factor")
    if family != "glm4v" and prf not in (None, 1.0):  # their apply_rotary_pos_emb rotates every channel
        raise NotImplementedError(f"{ROTARY[family][1]} rotates the whole head (partial rotary: GLM-4.1V only)")
    params = {key: rope[key] for key in HF_KEYS if rope.get(key) is not None}
    params.setdefault("rope_type", "default")
    params.setdefault("rope_theta", 10000.0)
    params["mrope_section"] = list(rope["mrope_section"])
    if family == "qwen3_vl":
        params["mrope_interleaved"] = True
    if prf is not None:
        params["partial_rotary_factor"] = prf
    config_cls, rotary_cls = ROTARY[family]
    config = getattr(_modeling(family, "configuration"), config_cls)(
        hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim, rope_parameters=params,
        max_position_embeddings=int(rope.get("max_position_embeddings", 2048)))
    return getattr(_modeling(family), rotary_cls)(config), family


def position_ids(positions: np.ndarray) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Contract positions as the rotary modules' ``position_ids`` and the axes the table keeps: ``(T,)``
    -> ``(1, T)`` (the module expands it to t = h = w); ``(3, ..., T)`` -> ``(3, N, T)``; anything else is
    handed over as it is, so what transformers makes of it is what the suite sees."""
    pos = np.asarray(positions, dtype=np.int64)
    if pos.ndim == 1:
        return torch.as_tensor(pos[None, :]), pos.shape
    if pos.ndim >= 2 and pos.shape[0] == 3:
        return torch.as_tensor(pos.reshape(3, -1, pos.shape[-1])), pos.shape[1:]  # (3, N, T)
    return torch.as_tensor(pos), pos.shape


def cos_sin(positions, rope: dict) -> tuple[torch.Tensor, torch.Tensor, str]:
    """The family module's forward: float32 cos/sin ``(..., T, w)`` in its own channel order, A included."""
    module, family = rotary_module(rope)
    ids, axes = position_ids(positions)
    cos, sin = module(torch.zeros(1, dtype=torch.float32), ids)  # (N, T, w)
    shape = (*axes, cos.shape[-1])
    return cos.reshape(shape), sin.reshape(shape), family


def apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, family: str) -> torch.Tensor:
    """The family's ``apply_rotary_pos_emb`` with cos/sin already broadcastable to ``x``."""
    while x.ndim < cos.ndim + 1:  # it unsqueezes cos at dim 0: give x that leading axis
        x = x.unsqueeze(0)
    out, _ = _modeling(family).apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)
    return out


# ------------------------------------------------------------------------------------- position ids
def _items(layout: list, family: str) -> list[tuple[int, tuple[int, int, int], float | None]]:
    """(token type, grid, seconds) per item as get_rope_index consumes them (videos split per frame for
    Qwen3-VL and GLM-4.1V)."""
    out = []
    for item in layout:
        if not isinstance(item, (list, tuple)) or not item or item[0] not in ("text", "image", "video"):
            raise ValueError(f"layout items are ('text', n), ('image', grid) or ('video', grid, seconds); got {item!r}")
        if item[0] == "text":
            out.append((0, (int(item[1]), 1, 1), None))
            continue
        grid = tuple(int(g) for g in item[1])
        if item[0] == "image":
            out.append((1, grid, None))
        elif family in PER_FRAME:
            out += [(2, (1, grid[1], grid[2]), None)] * max(grid[0], 0)
        else:
            out.append((2, grid, float(item[2]) if len(item) > 2 else 1.0))
    return out


def rope_index(layout: list, family: str, spatial_merge_size: int, tokens_per_second: float | None) -> np.ndarray:
    """``<Family>Model.get_rope_index`` of the layout: its ``(3, T)`` position ids."""
    if family not in MODELS:
        raise ValueError(f"family must be one of {sorted(MODELS)}, got {family!r}")
    vision: dict[str, Any] = {"spatial_merge_size": int(spatial_merge_size)}
    if tokens_per_second is not None:
        if family != "qwen2_5_vl":
            raise NotImplementedError(f"transformers' {family} get_rope_index reads no tokens_per_second")
        if float(tokens_per_second) != int(tokens_per_second):
            raise NotImplementedError("Qwen2_5_VLVisionConfig.tokens_per_second is an int field")
        vision["tokens_per_second"] = int(tokens_per_second)  # None: the config's own default
    model_cls, config_cls = MODELS[family]
    config = getattr(_modeling(family, "configuration"), config_cls)(vision_config=vision)
    model = getattr(_modeling(family), model_cls)
    fake = SimpleNamespace(config=config)  # what get_rope_index reads of self
    fake.get_vision_position_ids = functools.partial(model.get_vision_position_ids, fake)

    items, k = _items(layout, family), int(spatial_merge_size)
    counts = [g[0] if kind == 0 else g[0] * (g[1] // k) * (g[2] // k) for kind, g, _ in items]
    if any(c <= 0 for c in counts):
        raise NotImplementedError("an item with no token (a grid of size <= 0, or smaller than the merge) has no "
                                  "token run for get_rope_index to find")
    vision_kinds = [kind for kind, _, _ in items]
    runs = [key for key, _ in itertools.groupby(vision_kinds)]
    if sum(1 for key in runs if key) != sum(1 for key in vision_kinds if key):
        raise NotImplementedError("two items of one modality with no text between read as one in get_rope_index "
                                  "(it groups runs of one token type)")
    types = torch.tensor([[kind for (kind, _, _), n in zip(items, counts, strict=True) for _ in range(n)]])  # (1, T)
    images = [g for kind, g, _ in items if kind == 1]
    videos = [g for kind, g, _ in items if kind == 2]
    kwargs: dict[str, Any] = {}
    if family == "qwen2_5_vl" and videos:
        kwargs["second_per_grid_ts"] = torch.tensor([s for kind, _, s in items if kind == 2], dtype=torch.float32)
    ids, _ = model.get_rope_index(fake, torch.zeros_like(types), types,
                                  image_grid_thw=torch.tensor(images) if images else None,
                                  video_grid_thw=torch.tensor(videos) if videos else None,
                                  attention_mask=torch.ones_like(types), **kwargs)
    return ids[:, 0].numpy()  # (3, T)
