"""Adapter: torchtune 0.6 (``RotaryPositionalEmbeddings``, ``Llama3ScaledRoPE``,
``Qwen2RotaryPositionalEmbeddings``, the attention call of ``MultiHeadAttention``), float32, CPU.

Run the suite on it (known divergences in ``torchtune.xfails.txt``; ``tox -e torchtune`` installs it)::

    REFPOS_IMPL=spec_tests.adapters.torchtune python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/torchtune.xfails.txt

What torchtune implements, and what is wired:

* RoPE, interleaved pairs ``(2j, 2j+1)``: ``torchtune.modules.RotaryPositionalEmbeddings`` (``default``)
  and ``torchtune.models.llama3_1.Llama3ScaledRoPE`` (``llama3``); half-split pairs ``(j, j + d/2)``:
  ``torchtune.models.qwen2.Qwen2RotaryPositionalEmbeddings`` (``default``; Phi-3's module is the same
  code). Each rotates the whole head (no partial rotary), caches cos/sin for positions
  ``0 … max_seq_len − 1`` in float32 and looks rows up by ``input_pos``. ``ω`` is the module's float32
  ``theta`` buffer; A = 1. No other scaling rule exists in torchtune.
* The attention core: ``torchtune.modules.attention_utils._sdpa_or_flex_attention()``, the call
  ``MultiHeadAttention`` makes (torch SDPA on CPU), with k/v heads expanded as ``MultiHeadAttention``
  does (``expand`` of each kv head over its ``q_per_kv`` query heads: head h reads ``h // q_per_kv``).
* Not in torchtune: sinusoids, ALiBi, T5, a learned absolute table for text (CLIP's
  ``TokenPositionalEmbedding`` adds its whole table, it looks nothing up), the relative encodings.

Shapes: torchtune's modules take ``x`` ``(b, s, n_h, h_d)`` and ``input_pos`` ``(b, s)`` or ``(s,)``;
the contract's ``(..., T, D)`` is moved to that form and back.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np
import torch
from torchtune.models.llama3_1 import Llama3ScaledRoPE
from torchtune.models.qwen2._positional_embeddings import Qwen2RotaryPositionalEmbeddings
from torchtune.modules import RotaryPositionalEmbeddings
from torchtune.modules.attention_utils import _sdpa_or_flex_attention

from spec_tests.adapters._contract import (
    attention_shapes,
    batch_of_heads,
    integer_positions,
    rope_settings,
    rotary_width,
)

INFO: dict[str, Any] = {
    "name": f"torchtune {importlib.metadata.version('torchtune')} + torch {torch.__version__}",
    "dtype": "float32",
    "rope_layout": "interleaved",
    "rope_types": ["default", "llama3"],
    "rope_layouts": ["half", "interleaved"],
    "rope_placements": [],
    "description": "spec_tests/adapters/torchtune.py: torchtune's RoPE modules and MultiHeadAttention's SDPA call",
}


def _module(rope: dict, max_seq_len: int) -> tuple[torch.nn.Module, str]:
    """The torchtune module for a contract rope dict, with its cache covering ``max_seq_len`` positions."""
    rope = rope_settings(rope, "torchtune")  # unknown keys: ValueError; None values: unset
    kind, layout = rope.get("rope_type", "default"), rope.get("layout", "half")
    head_dim = int(rope["head_dim"])
    if rotary_width(rope) != head_dim:
        raise NotImplementedError("torchtune's RoPE modules rotate the whole head (no partial rotary)")
    theta = float(rope.get("rope_theta", 10000.0))
    if layout == "interleaved" and kind == "default":
        return RotaryPositionalEmbeddings(head_dim, max_seq_len=max_seq_len, base=theta), layout
    if layout == "interleaved" and kind == "llama3":
        return Llama3ScaledRoPE(head_dim, max_seq_len=max_seq_len, base=theta, scale_factor=rope["factor"],
                                low_freq_factor=rope["low_freq_factor"], high_freq_factor=rope["high_freq_factor"],
                                old_context_len=rope["original_max_position_embeddings"]), layout
    if layout == "half" and kind == "default":
        return Qwen2RotaryPositionalEmbeddings(head_dim, max_seq_len=max_seq_len, base=theta), layout
    if kind not in ("default", "llama3"):
        raise NotImplementedError(f"rope_type {kind!r}: torchtune has default and llama3 RoPE only")
    raise NotImplementedError(f"torchtune has no {kind} RoPE in the {layout!r} layout")


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """The module's float32 ``theta`` buffer (its ω); A = 1 (torchtune has no attention factor)."""
    module, _ = _module(rope, 1)
    return module.theta.double().numpy(), 1.0


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the module's cos/sin cache at ``positions``, in the contract's channel order."""
    pos = integer_positions(positions, reject_negative=False)
    module, layout = _module(rope, int(pos.max()) + 1 if pos.size else 1)
    rows = module.cache[torch.as_tensor(pos)].double()
    if layout == "interleaved":  # cache (..., d/2, 2): (cos, sin) per pair
        cos, sin = rows[..., 0], rows[..., 1]
        return cos.repeat_interleave(2, -1).numpy(), sin.repeat_interleave(2, -1).numpy()
    d = rows.shape[-1] // 2  # half: cache (..., 2d) = [cos, cos | sin, sin]
    return rows[..., :d].numpy(), rows[..., d:].numpy()


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``module(x, input_pos=positions)`` in float32, ``x`` moved to ``(b, s, n_h, h_d)`` and back."""
    pos = integer_positions(positions, reject_negative=False)  # torchtune indexes its cache from the end
    module, _ = _module(rope, int(pos.max()) + 1 if pos.size else 1)
    xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
    t, d = xt.shape[-2:]
    if pos.ndim == 1:  # (T,): every leading axis of x is a "head" of one sequence
        lead = xt.shape[:-2]
        xs = xt.reshape(1, -1, t, d).transpose(1, 2)  # (1, T, N, D)
        out = module(xs, input_pos=torch.as_tensor(pos)).transpose(1, 2)  # (1, N, T, D)
        return out.reshape(*lead, t, d).double().numpy()
    if pos.ndim == 2 and xt.ndim == 4:  # (B, T) with x (B, H, T, D)
        out = module(xt.transpose(1, 2), input_pos=torch.as_tensor(pos)).transpose(1, 2)  # (B, H, T, D)
        return out.double().numpy()
    raise NotImplementedError(f"positions of shape {pos.shape} with x of shape {tuple(xt.shape)}")


# ---------------------------------------------------------------------------------------- attention
@batch_of_heads  # the contract's (..., H, T, d), 3-D included, as the 4-D arrays the library takes
def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """``_sdpa_or_flex_attention()(q, k, v, mask, dropout_p=0, is_causal)`` in float64, as
    ``MultiHeadAttention`` calls it: kv heads expanded over their query heads, a boolean mask
    ``(b, s_q, s_k)`` (True = may attend), no bias, no softcap, scale ``d^-1/2``."""
    if bias is not None:
        raise NotImplementedError("torchtune's MultiHeadAttention adds no bias to the logits")
    if softcap is not None:
        raise NotImplementedError("torchtune's MultiHeadAttention has no logit softcap")
    if scale is not None and scale != np.asarray(q).shape[-1] ** -0.5:
        raise NotImplementedError("torchtune's MultiHeadAttention scales by head_dim^-1/2 only")
    b, h, t_q, _, h_kv, t_k = attention_shapes(q, k, "torchtune", "(b, n_h, s, h_d)")
    qt, kt, vt = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    q_per_kv = h // h_kv  # MultiHeadAttention: k.view(b, s, n_kv, 1, d).expand(b, s, n_kv, q_per_kv, d)
    kt = kt[:, :, None].expand(b, h_kv, q_per_kv, t_k, kt.shape[-1]).reshape(b, h, t_k, -1)
    vt = vt[:, :, None].expand(b, h_kv, q_per_kv, t_k, vt.shape[-1]).reshape(b, h, t_k, -1)
    if causal and mask is not None:
        raise NotImplementedError("torchtune passes either a mask or is_causal, not both")
    allowed = None
    if mask is not None:
        m = torch.as_tensor(np.asarray(mask, dtype=bool))
        m = torch.broadcast_to(m, (*m.shape[:-2], t_q, t_k))
        if m.ndim == 4:  # (B, H, Tq, Tk): one mask for every head, or not expressible
            m = m[:, 0] if bool((m == m[:, :1]).all()) else None
        elif m.ndim == 3:  # (H, Tq, Tk)
            m = m[0] if bool((m == m[:1]).all()) else None
        if m is None:
            raise NotImplementedError("torchtune's mask is (b, s_q, s_k), shared by the heads")
        allowed = torch.broadcast_to(m, (b, t_q, t_k))
    return _sdpa_or_flex_attention()(qt, kt, vt, allowed, 0.0, bool(causal)).numpy()
