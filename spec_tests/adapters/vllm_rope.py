"""Adapter: vLLM 0.33's rotary embeddings on their pure-torch path (``forward_native``), float32, CPU.

Run the suite on it (known divergences in ``vllm_rope.xfails.txt``; ``tox -e vllm`` installs vLLM without
its CUDA dependencies)::

    REFPOS_IMPL=spec_tests.adapters.vllm_rope python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/vllm_rope.xfails.txt

What is wired: ``vllm.model_executor.layers.rotary_embedding.get_rope(head_size, max_position,
is_neox_style, rope_parameters, dtype=torch.float32)``, the factory vLLM's models call, and the module's
``forward_native(positions, query)`` (``query`` ``(num_tokens, n_heads·head_size)``). ``is_neox_style``
is the half layout, ``False`` the interleaved (GPT-J) one; the first ``rotary_dim`` channels rotate.
Scaling rules: default, linear, ``dynamic`` (vLLM's *static* rule: the base at ``factor·max_position``
for every length — the contract's ``dynamic_rule = "vllm_static"``), yarn, llama3 and proportional.
LongRoPE (``Phi3LongRoPEScaledRotaryEmbedding``) picks its short or long factors once, from the
engine's ``max_model_len``, not from the current length; it needs a running engine's config and is
reported as unsupported. ω and A come from the module (``_compute_inv_freq``, ``mscale``), cos/sin from its
``cos_sin_cache``. vLLM's attention backends are not wired (they need its engine).

Status: written against vLLM 0.33's sources and not yet run. Importing
``vllm.model_executor.layers.rotary_embedding`` with ``pip install --no-deps vllm`` pulls vLLM's config,
compilation and distributed packages; each missing pure-Python module was installed in turn (the list in
``tox.ini``'s ``[peers] vllm_deps``) and the chain still asked for more when this was written, so no run
is stored in ``spec_tests/results/`` and ``docs/implementations.md`` has no vLLM row.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from typing import Any

import numpy as np
import torch
from vllm.model_executor.layers.rotary_embedding import get_rope

from spec_tests.adapters._contract import integer_positions

INFO: dict[str, Any] = {
    "name": f"vLLM {importlib.metadata.version('vllm')} rotary embeddings (forward_native) + torch {torch.__version__}",
    "dtype": "float32",
    "rope_layout": "half",
    "rope_types": ["default", "linear", "dynamic", "yarn", "llama3", "proportional"],
    "rope_layouts": ["half", "interleaved"],
    "rope_placements": ["first"],
    "description": "spec_tests/adapters/vllm_rope.py: get_rope(...).forward_native",
}

KEYS = {"rope_type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
        "mscale", "mscale_all_dim", "attention_factor", "truncate", "low_freq_factor", "high_freq_factor",
        "short_factor", "long_factor", "head_dim", "partial_rotary_factor", "rotary_dim",
        "max_position_embeddings", "layout", "placement", "dynamic_rule", "softmax_mscale"}
PASSED_ON = ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
             "attention_factor", "truncate", "low_freq_factor", "high_freq_factor", "short_factor", "long_factor")


def _module(rope: dict, top: int) -> Any:
    """``get_rope`` for a contract rope dict; ``top`` = the largest position + 1 the call needs."""
    unknown = set(rope) - KEYS
    if unknown:
        raise ValueError(f"unknown rope keys {sorted(unknown)}")
    rope = {key: value for key, value in rope.items() if value is not None}  # None: the key is unset
    kind, layout = rope.get("rope_type", "default"), rope.get("layout", "half")
    if layout not in ("half", "interleaved"):
        raise NotImplementedError(f"vLLM has the neox (half) and GPT-J (interleaved) styles, not {layout!r}")
    if rope.get("placement", "first") == "last":
        raise NotImplementedError("vLLM rotates the first rotary_dim channels")
    if kind == "dynamic" and rope.get("dynamic_rule") != "vllm_static":
        raise NotImplementedError("vLLM's dynamic rule is static (the base at factor·max_position)")
    if kind == "longrope":  # Phi3LongRoPEScaledRotaryEmbedding reads max_model_len from a running engine
        raise NotImplementedError("vLLM's LongRoPE picks its factors from the engine's max_model_len")
    if kind == "ntk":
        raise NotImplementedError("vLLM's 'ntk' is not the contract's static NTK-aware base")
    head_dim = int(rope["head_dim"])
    rotary = int(rope.get("rotary_dim") or head_dim * rope.get("partial_rotary_factor", 1.0))
    params: dict[str, Any] = {"rope_type": kind, "rope_theta": float(rope.get("rope_theta", 10000.0)),
                              "partial_rotary_factor": rotary / head_dim}
    params.update({k: rope[k] for k in PASSED_ON if k in rope})
    max_position = int(rope.get("max_position_embeddings") or rope.get("original_max_position_embeddings") or top)
    if kind in ("default", "linear", "proportional", "llama3"):
        max_position = max(max_position, top)
    module = get_rope(head_dim, max_position, is_neox_style=layout == "half", rope_parameters=params,
                      dtype=torch.float32)
    if module.cos_sin_cache.shape[0] < top:
        raise NotImplementedError(f"vLLM caches {module.cos_sin_cache.shape[0]} positions for this config, "
                                  f"the call needs {top}")
    return module


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """The module's ``_compute_inv_freq`` (float32) and the ``mscale`` it folds into its cache (1 if none)."""
    module = _module(rope, 1)
    compute = getattr(module, "_compute_inv_freq", None)
    if compute is None or rope.get("rope_type") == "dynamic":
        raise NotImplementedError(f"{type(module).__name__} computes its ω inside its cos/sin cache")
    argument = next(iter(inspect.signature(compute).parameters))  # "base", or YaRN's "scaling_factor"
    inv = compute(module.base if argument == "base" else module.scaling_factor)
    return inv.double().numpy(), float(getattr(module, "mscale", 1.0))


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``cos_sin_cache`` (``[cos | sin]`` per pair) in the contract's channel order."""
    pos = integer_positions(positions, reject_negative=True)
    module = _module(rope, int(pos.max()) + 1 if pos.size else 1)
    rows = module.cos_sin_cache[torch.as_tensor(pos)].double()
    cos, sin = rows.chunk(2, dim=-1)
    if module.is_neox_style:
        return torch.cat([cos, cos], -1).numpy(), torch.cat([sin, sin], -1).numpy()
    return cos.repeat_interleave(2, -1).numpy(), sin.repeat_interleave(2, -1).numpy()


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``forward_native(positions, query)`` with ``query`` = x moved to ``(T, N·head_dim)`` and back."""
    pos = integer_positions(positions, reject_negative=True)
    x = np.asarray(x, dtype=np.float32)
    if pos.ndim == 2:  # (B, T) with x (B, H, T, D): one batch row at a time
        return np.stack([apply_rope(x[b], pos[b], rope, seq_len) for b in range(pos.shape[0])])
    module = _module(rope, int(pos.max()) + 1 if pos.size else 1)
    lead, (t, d) = x.shape[:-2], x.shape[-2:]
    tokens = np.moveaxis(x.reshape(-1, t, d), 1, 0).reshape(t, -1)  # (T, N·D)
    query, _ = module.forward_native(torch.as_tensor(pos), torch.as_tensor(tokens.copy()))
    out = np.moveaxis(query.double().numpy().reshape(t, -1, d), 0, 1)  # (N, T, D)
    return out.reshape(*lead, t, d)
