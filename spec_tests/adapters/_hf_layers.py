"""transformers' DeBERTa-v2 attention and vision-tower RoPE behind the adapter contract (used by
``hf_transformers.py``; every number comes out of transformers, float32 as the models run).

* ``deberta_log_buckets`` — ``make_log_bucket_position`` of ``models/deberta_v2`` (its float32 logarithms).
* ``deberta_attention_logits`` — ``DisentangledSelfAttention`` of ``models/deberta_v2``: the content term as its
  forward forms it, ``q·kᵀ / scaled_size_sqrt(q, 1 + n)``, plus its ``disentangled_attention_bias``. The
  contract's position tables are the module's projected relative embeddings: the module is built with
  ``hidden_size = 2·H·d`` (``attention_head_size = d``), the embeddings row ``r`` holds ``pos_key[:, r]`` then
  ``pos_query[:, r]``, and ``pos_key_proj`` / ``pos_query_proj`` select their half (identity weights, zero
  bias), so the bias reads exactly the given tables. The relative positions are the model's (``build_relative
  _position``) for ``arange(T)``, and its ``make_log_bucket_position`` of ``pᵢ − pⱼ`` for given positions.
* ``apply_vision_rope`` — the vision towers' rotary modules on ``(N, 2)`` coordinates (h, w) and the tower's
  rotation: ``qwen2_vl`` (``Qwen2VLVisionRotaryEmbedding`` + ``apply_rotary_pos_emb_vision``) and ``pixtral``
  (``PixtralVisionRotaryEmbedding`` + ``apply_rotary_pos_emb``). Llama 4's tower precomputes one image
  size's grid (``Llama4VisionRotaryEmbedding``, with its CLS row) and takes no coordinates; the axial form of
  vision libraries is not a transformers tower: both ``NotImplementedError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers.models.deberta_v2 import configuration_deberta_v2, modeling_deberta_v2
from transformers.models.pixtral import configuration_pixtral, modeling_pixtral
from transformers.models.qwen2_vl import configuration_qwen2_vl, modeling_qwen2_vl

from spec_tests.adapters._contract import integer_positions, vision_settings


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()


# -------------------------------------------------------------------------------------------- DeBERTa
def deberta_log_buckets(relative, position_buckets: int, max_relative_positions: int) -> np.ndarray:
    """``make_log_bucket_position(δ, position_buckets, max_relative_positions)`` as int64."""
    rel = torch.as_tensor(integer_positions(relative, reject_negative=False))
    return modeling_deberta_v2.make_log_bucket_position(rel, position_buckets, max_relative_positions).to(
        torch.int64).numpy()


def _disentangled(h: int, d: int, position_buckets: int, max_relative_positions: int,
                  pos_att_type: list[str]) -> Any:
    """A ``DisentangledSelfAttention`` whose position projections pass the given tables through."""
    config = configuration_deberta_v2.DebertaV2Config(
        hidden_size=2 * h * d, num_attention_heads=h, relative_attention=True, position_buckets=position_buckets,
        max_relative_positions=max_relative_positions, pos_att_type=list(pos_att_type), share_att_key=False)
    config.attention_head_size = d
    module = modeling_deberta_v2.DisentangledSelfAttention(config).eval()
    eye = torch.eye(h * d)
    with torch.no_grad():
        for name, weight in (("pos_key_proj", torch.cat([eye, 0 * eye], 1)),
                             ("pos_query_proj", torch.cat([0 * eye, eye], 1))):
            if hasattr(module, name):
                getattr(module, name).weight.copy_(weight)
                getattr(module, name).bias.zero_()
    return module


def deberta_attention_logits(q, k, pos_key, pos_query, position_buckets: int, max_relative_positions: int,
                             pos_att_type: list[str], positions=None) -> np.ndarray:
    """``(H, T, T)`` logits of ``DisentangledSelfAttention``: content term and ``disentangled_attention_bias``."""
    q, k = torch.as_tensor(np.asarray(q), dtype=torch.float32), torch.as_tensor(np.asarray(k), dtype=torch.float32)
    if q.ndim != 3 or k.shape != q.shape:
        raise NotImplementedError("DisentangledSelfAttention here: q and k (H, T, d), self-attention")
    h, _, d = q.shape
    module = _disentangled(h, d, position_buckets, max_relative_positions, pos_att_type)
    span = module.pos_ebd_size
    tables = [torch.zeros(2 * span, h * d) if table is None else
              torch.as_tensor(np.asarray(table), dtype=torch.float32).transpose(0, 1).reshape(2 * span, h * d)
              for table in (pos_key, pos_query)]
    rel_embeddings = torch.cat(tables, dim=1)  # row r: pos_key[:, r] then pos_query[:, r]
    if positions is None:
        relative = modeling_deberta_v2.build_relative_position(q, k, module.position_buckets,
                                                               module.max_relative_positions)
    else:
        pos = torch.as_tensor(integer_positions(positions, reject_negative=False))
        relative = pos[:, None] - pos[None, :]
        if module.position_buckets > 0 and module.max_relative_positions > 0:  # as build_relative_position
            relative = modeling_deberta_v2.make_log_bucket_position(relative, module.position_buckets,
                                                                    module.max_relative_positions)
        relative = relative.to(torch.long)[None]
    scale_factor = 1 + ("c2p" in module.pos_att_type) + ("p2c" in module.pos_att_type)  # as the forward counts
    with torch.no_grad():
        scale = modeling_deberta_v2.scaled_size_sqrt(q, scale_factor)
        content = torch.bmm(q, k.transpose(-1, -2) / scale.to(dtype=q.dtype))  # as the forward forms it
        bias = module.disentangled_attention_bias(q, k, relative, rel_embeddings, scale_factor)
    return _np(content + bias)


# ---------------------------------------------------------------------------------------- vision RoPE


def _vision_module(form: str, d: int, theta: float) -> tuple[Any, Any]:
    """The tower's rotary module for head size ``d`` and its rotation of ``x`` ``(heads, N, D)``."""
    rope_parameters = {"rope_type": "axial", "rope_theta": theta}
    if form == "qwen2_vl":  # the tower's attention holds q as (N, heads, D)
        config = configuration_qwen2_vl.Qwen2VLVisionConfig(embed_dim=d, num_heads=1, rope_parameters=rope_parameters)
        return (modeling_qwen2_vl.Qwen2VLVisionRotaryEmbedding(config), lambda x, cos, sin: modeling_qwen2_vl.
                apply_rotary_pos_emb_vision(x.transpose(0, 1), x.transpose(0, 1), cos, sin)[0].transpose(0, 1))
    config = configuration_pixtral.PixtralVisionConfig(hidden_size=d, num_attention_heads=1, head_dim=d,
                                                       rope_parameters=rope_parameters)
    return (modeling_pixtral.PixtralVisionRotaryEmbedding(config),
            lambda x, cos, sin: modeling_pixtral.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)[0])


def apply_vision_rope(x, positions, rope: dict) -> np.ndarray:
    """Patches ``x`` ``(..., N, D)`` at coordinates ``(N, 2)`` (h, w), rotated by the tower of ``rope["form"]``."""
    form, d, theta, _, _, pos = vision_settings(rope, positions)
    if form == "axial":
        raise NotImplementedError("the axial form of vision libraries: no transformers tower computes it")
    if form == "llama4":
        raise NotImplementedError("Llama4VisionRotaryEmbedding precomputes the grid of one image size (with its CLS "
                                  "row) and takes no coordinates")
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != d or x.shape[-2] != pos.shape[-2]:
        raise ValueError(f"x must be (..., N, head_dim) with N = {pos.shape[-2]}, got {x.shape}")
    if pos.ndim != 2:
        raise NotImplementedError(f"the towers take one coordinate row per patch, (N, 2), got {pos.shape}")
    module, rotate = _vision_module(form, d, theta)
    xt = torch.as_tensor(x, dtype=torch.float32).reshape(-1, x.shape[-2], d)  # (heads, N, D)
    with torch.no_grad():
        cos, sin = module(xt, torch.as_tensor(pos))  # (N, D)
        return _np(rotate(xt, cos, sin)).reshape(x.shape)
