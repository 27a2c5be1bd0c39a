"""Adapter: HuggingFace transformers (5.x) and torch, behind the refpos adapter contract.

Run the suite on it (known divergences listed, with reasons, in ``hf_transformers.xfails.txt``)::

    REFPOS_IMPL=spec_tests.adapters.hf_transformers python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/hf_transformers.xfails.txt

What runs where (every number comes out of the library; the adapter only converts arrays and names):

* RoPE: ``ROPE_INIT_FUNCTIONS`` / ``GPTNeoXRotaryEmbedding`` (its default init honours
  ``partial_rotary_factor``; Llama's ignores it) for ω and A; the rotary module's forward for cos/sin
  (float32, positions as ``position_ids``, HF's own ``seq_len = max(position_ids) + 1`` for dynamic and
  longrope); GPT-NeoX ``apply_rotary_pos_emb`` (half layout, head placement) and GPT-J
  ``apply_rotary_pos_emb`` (interleaved layout) for the rotation. LongRoPE with ``short_mscale`` /
  ``long_mscale`` (Phi-3.5-MoE): ``PhimoeRotaryEmbedding`` (``models/phimoe``), its forward for cos/sin and,
  for ω and A, what that forward uses: ``rope_init_fn(config)`` and the mscale it picks for L.
* M-RoPE (a rope dict with ``mrope_section``; ``_hf_mrope.py``): the text rotary module of the family that
  does that assignment in that layout (Qwen2-VL contiguous/half, GLM-4.1V contiguous/interleaved, Qwen3-VL
  round-robin/half), its forward for cos/sin (positions ``(3, N, T)``) and its ``apply_rotary_pos_emb``;
  ``mrope_position_ids`` through the family's ``get_rope_index`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4.1V).
* Sinusoids: DistilBERT ``create_sinusoidal_embeddings`` (interleaved, paper spacing), Marian
  (concatenated, paper spacing), M2M100 ``get_embedding`` (concatenated, tensor2tensor spacing).
* ALiBi: BLOOM ``build_alibi_tensor`` (slopes and the key-index form, float32).
* T5: ``T5Attention._relative_position_bucket`` and ``compute_bias``.
* DeBERTa-v2 (``make_log_bucket_position``, ``DisentangledSelfAttention``) and the vision towers' RoPE (Qwen2-VL,
  Pixtral): ``_hf_layers.py``.
* Attention: ``torch.nn.functional.scaled_dot_product_attention`` and ``torch.softmax`` in float64.

What HF has no function for raises ``NotImplementedError`` (reported as a skip with the reason).
Importing needs torch and transformers; the ``anchors`` tox env installs them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import transformers
from transformers import modeling_rope_utils
from transformers.models.bloom import modeling_bloom
from transformers.models.distilbert import modeling_distilbert
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.gptj import modeling_gptj
from transformers.models.m2m_100 import modeling_m2m_100
from transformers.models.marian import modeling_marian
from transformers.models.phimoe import modeling_phimoe
from transformers.models.t5 import modeling_t5

from spec_tests.adapters import _hf_mrope
from spec_tests.adapters._contract import alibi_form, is_mrope
from spec_tests.adapters._hf_layers import apply_vision_rope as apply_vision_rope  # contract functions
from spec_tests.adapters._hf_layers import deberta_attention_logits as deberta_attention_logits
from spec_tests.adapters._hf_layers import deberta_log_buckets as deberta_log_buckets
from spec_tests.adapters._hf_mrope import GEOMETRY_KEYS
from spec_tests.adapters._hf_mrope import HF_KEYS as HF_ROPE_KEYS

INFO: dict[str, Any] = {
    "name": f"transformers {transformers.__version__} + torch {torch.__version__}",
    "dtype": "float32",  # RoPE tables, sinusoids, ALiBi are float32 (attention runs in float64)
    "rope_layout": "half",
    "vision_forms": ["qwen2_vl", "pixtral"],
    "description": "spec_tests/adapters/hf_transformers.py: HF modules and torch SDPA, CPU",
}

PHIMOE_KEYS = ("short_mscale", "long_mscale")


def _t(a: Any, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a)).to(dtype)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).numpy() if t.is_floating_point() else t.detach().numpy()


# ---------------------------------------------------------------------------------------- attention
def softmax(logits: np.ndarray, mask: np.ndarray | None = None, fully_masked: str = "zeros") -> np.ndarray:
    """``torch.softmax`` over masked logits (masked entries ``-inf``): a fully masked row is NaN."""
    s = _t(logits)
    if mask is not None:
        s = s.masked_fill(~torch.as_tensor(np.asarray(mask, dtype=bool)), float("-inf"))
    return _np(torch.softmax(s, dim=-1))


def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """torch SDPA (float64, GQA via ``enable_gqa``); bias and mask folded into one additive mask."""
    if softcap is not None:
        raise NotImplementedError("torch SDPA has no logit softcap")
    qt, kt, vt = _t(q), _t(k), _t(v)
    attn_mask = None
    if bias is not None or mask is not None:
        shape = (*qt.shape[:-1], kt.shape[-2])
        additive = _t(bias) if bias is not None else torch.zeros(shape, dtype=torch.float64)
        if mask is not None:
            allowed = torch.as_tensor(np.asarray(mask, dtype=bool))
            additive = additive.masked_fill(~allowed, float("-inf"))
        attn_mask = additive
    out = torch.nn.functional.scaled_dot_product_attention(
        qt, kt, vt, attn_mask=attn_mask, is_causal=causal, scale=scale, enable_gqa=qt.shape[-3] != kt.shape[-3]
    )
    return _np(out)


# ----------------------------------------------------------------------------------------- sinusoids
def sinusoidal(positions, dim, base=10000.0, layout="interleaved", spacing="paper") -> np.ndarray:
    """HF float32 tables: DistilBERT (interleaved, paper), Marian (concat, paper), M2M100 (concat, t2t)."""
    if base != 10000.0:
        raise NotImplementedError("HF sinusoid tables hard-code base 10000")
    pos = np.asarray(positions, dtype=np.int64)
    n_pos = int(pos.max()) + 1 if pos.size else 1
    if (layout, spacing) == ("interleaved", "paper"):
        table = torch.empty(n_pos, dim)
        modeling_distilbert.create_sinusoidal_embeddings(n_pos, dim, table)
    elif (layout, spacing) == ("concat", "paper"):
        table = modeling_marian.MarianSinusoidalPositionalEmbedding(n_pos, dim).create_weight()
    elif (layout, spacing) == ("concat", "tensor2tensor"):
        if dim == 2:  # a finding: get_embedding divides log(10000) by half_dim - 1 = 0
            raise NotImplementedError("M2M100 get_embedding(n, 2) raises ZeroDivisionError (half_dim - 1 = 0)")
        # row r of get_embedding is position r (the model itself looks rows up from padding_idx + 1)
        table = modeling_m2m_100.M2M100SinusoidalPositionalEmbedding.get_embedding(n_pos, dim)
    else:
        raise NotImplementedError(f"no HF sinusoid with layout {layout!r} and spacing {spacing!r}")
    return _np(table)[pos]


# --------------------------------------------------------------------------------------------- ALiBi
def _bloom(n_heads: int, k_len: int) -> torch.Tensor:
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    ones = torch.ones(1, max(k_len, 2), dtype=torch.int64)
    return modeling_bloom.build_alibi_tensor(ones, n_heads, torch.float32)[:, 0, :]  # (H, Tk): m_h · j


def alibi_slopes(n_heads: int) -> np.ndarray:
    """BLOOM's float32 slopes (the key-index bias at key 1)."""
    return _np(_bloom(n_heads, 2)[:, 1])


def alibi_bias(n_heads: int, q_len: int, k_len: int, form: str = "causal") -> np.ndarray:
    """BLOOM builds the key-index form ``m_h·j`` only; the other forms are not in HF."""
    alibi_form(form, "key_index", "BLOOM")
    rows = _np(_bloom(n_heads, k_len)[:, :k_len])  # (H, Tk)
    return np.broadcast_to(rows[:, None, :], (n_heads, q_len, k_len)).copy()


# ------------------------------------------------------------------------------------------------ T5
def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128) -> np.ndarray:
    """``T5Attention._relative_position_bucket`` (HF validates nothing: bad arguments are not rejected)."""
    rel = torch.as_tensor(np.asarray(relative_position, dtype=np.int64))
    return _np(modeling_t5.T5Attention._relative_position_bucket(rel, bidirectional, num_buckets, max_distance))


def t5_bias(table, q_positions, k_positions, bidirectional=True, max_distance=128) -> np.ndarray:
    """``T5Attention.compute_bias`` with ``table`` as ``relative_attention_bias``; keys at ``arange(Tk)``,
    queries contiguous from ``past_seen_tokens`` (what HF can express)."""
    table = np.asarray(table, dtype=np.float64)
    q_pos, k_pos = np.asarray(q_positions), np.asarray(k_positions)
    if q_pos.ndim != 1 or not np.array_equal(k_pos, np.arange(k_pos.size)) or (
        q_pos.size and not np.array_equal(q_pos, q_pos[0] + np.arange(q_pos.size))
    ):
        raise NotImplementedError("HF compute_bias takes keys at arange(Tk) and contiguous queries")
    config = transformers.T5Config(num_heads=table.shape[1], relative_attention_num_buckets=table.shape[0],
                                   relative_attention_max_distance=max_distance, is_decoder=not bidirectional,
                                   d_model=8, d_kv=4)
    layer = modeling_t5.T5Attention(config, has_relative_attention_bias=True)
    with torch.no_grad():
        layer.relative_attention_bias.weight.copy_(torch.as_tensor(table, dtype=torch.float32))
        bias = layer.compute_bias(q_pos.size, k_pos.size, past_seen_tokens=int(q_pos[0]) if q_pos.size else 0)
    return _np(bias[0])  # (H, Tq, Tk)


# ---------------------------------------------------------------------------------------------- RoPE
def _is_phimoe(rope: dict) -> bool:
    """LongRoPE with ``short_mscale`` / ``long_mscale`` (Phi-3.5-MoE): ``PhimoeRotaryEmbedding``'s rule."""
    return rope.get("rope_type") == "longrope" and any(rope.get(k) is not None for k in PHIMOE_KEYS)


def _rotary_module(rope: dict) -> tuple[Any, int, int, str]:
    """(rotary module, head_dim, rotary size d, layout) for a contract rope dict: GPT-NeoX's, or Phi-MoE's
    for LongRoPE with ``short_mscale`` / ``long_mscale``."""
    phimoe = _is_phimoe(rope)
    unknown = (set(rope) - set(HF_ROPE_KEYS) - set(GEOMETRY_KEYS) - {"dynamic_rule", "softmax_mscale"}
               - (set(PHIMOE_KEYS) if phimoe else set()))
    if unknown:
        raise NotImplementedError(f"keys with no HF equivalent: {sorted(unknown)}")
    if rope.get("dynamic_rule", "hf") != "hf":
        raise NotImplementedError(f"dynamic_rule {rope['dynamic_rule']!r}: HF has only its own (stateful) rule")
    kind = rope.get("rope_type", "default")
    if kind != "default" and kind not in modeling_rope_utils.ROPE_INIT_FUNCTIONS:
        raise NotImplementedError(f"rope_type {kind!r} is not in transformers' ROPE_INIT_FUNCTIONS")
    if rope.get("placement", "first") != "first":
        raise NotImplementedError(f"placement {rope['placement']!r} (GPT-NeoX rotates the first channels)")
    head_dim = int(rope["head_dim"])
    prf = rope.get("partial_rotary_factor", 1.0)
    if rope.get("rotary_dim") is not None:
        prf = rope["rotary_dim"] / head_dim
    params = {key: rope[key] for key in HF_ROPE_KEYS if rope.get(key) is not None}
    params.setdefault("rope_type", "default")
    params.setdefault("rope_theta", 10000.0)
    params["partial_rotary_factor"] = prf
    if phimoe:  # PhimoeConfig validates both mscales as numbers: a missing one is its own error
        if rope.get("layout", INFO["rope_layout"]) != "half" or prf != 1.0:
            raise NotImplementedError("Phi-MoE rotates the whole head in the half layout")
        params.update({key: rope.get(key) for key in PHIMOE_KEYS})
        config = transformers.PhimoeConfig(hidden_size=head_dim, num_attention_heads=1, num_key_value_heads=1,
                                           rope_parameters=params,
                                           max_position_embeddings=int(rope.get("max_position_embeddings", 2048)))
        return modeling_phimoe.PhimoeRotaryEmbedding(config), head_dim, head_dim, "half"
    config = transformers.GPTNeoXConfig(hidden_size=head_dim, num_attention_heads=1, rope_parameters=params,
                                        max_position_embeddings=int(rope.get("max_position_embeddings", 2048)))
    module = modeling_gpt_neox.GPTNeoXRotaryEmbedding(config)
    layout = rope.get("layout", INFO["rope_layout"])
    if layout not in ("half", "interleaved"):
        raise NotImplementedError(f"layout {layout!r}")
    return module, head_dim, int(head_dim * prf), layout


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """``(inv_freq, attention_factor)`` from transformers' init function for ``rope_type`` (M-RoPE: the
    family module's ``inv_freq`` and ``attention_scaling``)."""
    if is_mrope(rope):
        if seq_len is not None and rope.get("rope_type") in ("dynamic", "longrope"):
            raise NotImplementedError("HF's M-RoPE modules derive seq_len from max(position_ids) + 1")
        module, _ = _hf_mrope.rotary_module(rope)
        return _np(module.inv_freq), float(module.attention_scaling)
    module, *_ = _rotary_module(rope)
    if _is_phimoe(rope):  # its forward: ω from rope_init_fn(config) (no seq_len), A = its mscale for L
        inv_freq, _ = module.rope_init_fn(module.config)
        probe = torch.tensor([[0, (seq_len or 1) - 1]])  # forward picks the mscale from max(position_ids) + 1
        cos, _ = module(torch.zeros(1, dtype=torch.float32), probe)  # cos(0·ω) = 1 times the mscale
        return _np(inv_freq), float(cos[0, 0, 0])
    kind = rope.get("rope_type", "default")
    init = (module.compute_default_rope_parameters if kind == "default"
            else modeling_rope_utils.ROPE_INIT_FUNCTIONS[kind])
    inv_freq, factor = init(module.config, "cpu", seq_len=seq_len)
    return _np(inv_freq), float(factor)


def _check_seq_len(pos: np.ndarray, rope: dict, seq_len: int | None) -> None:
    """HF's dynamic and longrope modules take ``L = max(position_ids) + 1``: another ``seq_len`` is not
    expressible."""
    if seq_len is not None and rope.get("rope_type") in ("dynamic", "longrope") and pos.size and (
        seq_len != int(pos.max()) + 1
    ):
        raise NotImplementedError("HF derives seq_len from max(position_ids) + 1")


def _cos_sin(positions, rope: dict, seq_len: int | None) -> tuple[torch.Tensor, torch.Tensor, int, str]:
    """The 1-D rotary module's forward: float32 cos/sin ``(..., T, d)`` (half-layout order), A included."""
    module, _, _, layout = _rotary_module(rope)
    pos = np.asarray(positions, dtype=np.int64)
    _check_seq_len(pos, rope, seq_len)
    ids = torch.as_tensor(pos.reshape(-1, pos.shape[-1]) if pos.ndim else pos.reshape(1, 1))  # (B, T)
    cos, sin = module(torch.zeros(1, dtype=torch.float32), ids)  # (B, T, w): w = d, head_dim for proportional
    width = cos.shape[-1]
    shape = (*pos.shape, width) if pos.ndim else (width,)
    return cos.reshape(shape), sin.reshape(shape), width, layout


def _mrope_cos_sin(positions, rope: dict, seq_len: int | None) -> tuple[torch.Tensor, torch.Tensor, str]:
    """An M-RoPE family module's cos/sin (:func:`spec_tests.adapters._hf_mrope.cos_sin`), in its own order."""
    pos = np.asarray(positions, dtype=np.int64)
    _check_seq_len(pos, rope, seq_len)
    return _hf_mrope.cos_sin(pos, rope)


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin in the layout's channel order (interleaved: each pair's value repeated, as GPT-J; M-RoPE:
    the family module's tables as they are, already in its layout's order)."""
    if is_mrope(rope):
        cos, sin, _ = _mrope_cos_sin(positions, rope, seq_len)
        return _np(cos), _np(sin)
    cos, sin, d, layout = _cos_sin(positions, rope, seq_len)
    if layout == "interleaved":
        cos = torch.repeat_interleave(cos[..., : d // 2], 2, dim=-1)
        sin = torch.repeat_interleave(sin[..., : d // 2], 2, dim=-1)
    return _np(cos), _np(sin)


def _head_axis(cos: torch.Tensor, sin: torch.Tensor, x_ndim: int, pos_ndim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin with a head axis where x has one beyond the positions' axes ((B, T) with x (B, H, T, D))."""
    for _ in range(x_ndim - 1 - pos_ndim):
        cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)
    return cos, sin


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """GPT-NeoX ``apply_rotary_pos_emb`` (half) or GPT-J's (interleaved) on the first d channels, float32
    (M-RoPE: the family's own ``apply_rotary_pos_emb``)."""
    xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
    if is_mrope(rope):
        cos, sin, family = _mrope_cos_sin(positions, rope, seq_len)
        cos, sin = _head_axis(cos, sin, xt.ndim, cos.ndim - 1)  # the table's axes less the channels
        return _np(_hf_mrope.apply(xt, cos, sin, family).reshape(xt.shape))
    cos, sin, d, layout = _cos_sin(positions, rope, seq_len)
    cos, sin = _head_axis(cos, sin, xt.ndim, max(np.ndim(positions), 1))
    if layout == "half":
        shape = xt.shape
        while xt.ndim < cos.ndim + 1:  # HF unsqueezes cos at dim 0: give x that leading axis
            xt = xt.unsqueeze(0)
        out, _ = modeling_gpt_neox.apply_rotary_pos_emb(xt, xt, cos, sin, unsqueeze_dim=0)
        return _np(out.reshape(shape))
    # GPT-J: tensor (B, T, H, D) with sin/cos (B, T, d/2); move T before a single "head" axis
    span = xt[..., :d]
    lead = span.shape[:-2]
    flat = span.reshape(-1, span.shape[-2], d)  # (N, T, d)
    cos_h = torch.broadcast_to(cos[..., : d // 2], (*lead, span.shape[-2], d // 2)).reshape(-1, span.shape[-2], d // 2)
    sin_h = torch.broadcast_to(sin[..., : d // 2], (*lead, span.shape[-2], d // 2)).reshape(-1, span.shape[-2], d // 2)
    rotated = modeling_gptj.apply_rotary_pos_emb(flat[:, :, None, :], sin_h, cos_h)[:, :, 0, :]  # (N, T, d)
    return _np(torch.cat([rotated.reshape(span.shape), xt[..., d:]], dim=-1))


def mrope_position_ids(layout: list, family: str, spatial_merge_size: int = 2,
                       tokens_per_second: float | None = None) -> np.ndarray:
    """The family's own ``get_rope_index`` (``_hf_mrope.rope_index``): ``(3, T)`` ids, rows t, h, w."""
    return _hf_mrope.rope_index(layout, family, spatial_merge_size, tokens_per_second)
