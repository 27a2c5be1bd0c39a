"""Adapter: vLLM 0.33's rotary embeddings on their pure-torch path (``forward_native``), float32, CPU.

Run the suite on it (known divergences in ``vllm_rope.xfails.txt``; ``tox -e vllm`` installs vLLM without
its CUDA dependencies)::

    REFPOS_IMPL=spec_tests.adapters.vllm_rope python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/vllm_rope.xfails.txt

What is wired: ``vllm.model_executor.layers.rotary_embedding.get_rope(head_size, max_position,
is_neox_style, rope_parameters, dtype=torch.float32)``, the factory vLLM's models call, and the module's
``forward_native(positions, query)`` (``query`` ``(num_tokens, n_heads·head_size)``). ``is_neox_style``
is the half layout, ``False`` the interleaved (GPT-J) one; the first ``rotary_dim`` channels rotate.
Scaling rules: default, linear, ``dynamic`` (vLLM's *static* rule, the contract's ``dynamic_rule =
"vllm_static"``: ``DynamicNTKScalingRotaryEmbedding`` sets its base once from ``max_position /
max_trained_positions``, so the adapter passes the serving length ``factor·max_position_embeddings`` as
``max_position`` and ``max_position_embeddings`` as ``max_trained_positions``, as vLLM's model config code
does), yarn, llama3, longrope and proportional.
LongRoPE (``Phi3LongRoPEScaledRotaryEmbedding``) picks its short or long factors once, when it is built,
from the engine's ``max_model_len`` (long iff ``max_model_len > original_max_position_embeddings``), not
from the current length; the adapter builds it as ``get_rope`` does under an engine config whose
``max_model_len`` is the call's L (``seq_len``, else ``max(positions) + 1``; none for ``rope_frequencies``
without ``seq_len``: the short factors), the recipe of spec_tests/README.md. ω and A come from the
module (``_compute_inv_freq``, ``mscale``), cos/sin from its ``cos_sin_cache``. vLLM's attention backends
are not wired (they need its engine).

Install (``tox -e vllm``): ``pip install --no-deps vllm==0.33.0`` and the pure-Python distributions its
import of ``vllm.model_executor.layers.rotary_embedding`` loads (``tox.ini``, ``[peers] vllm_deps``); no
CUDA package, no compiled vLLM extension (``vllm._C`` is missing on CPU and only warned about). vLLM's
``CustomOp`` reads the engine config when a module is built, so each module is built inside
``set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu")))``.

M-RoPE (a rope dict with ``mrope_section``, default or yarn): ``get_rope`` builds ``MRotaryEmbedding``
(vllm/model_executor/layers/rotary_embedding/mrope.py), contiguous sections or, with
``mrope_interleaved``, its ``apply_interleaved_rope``; both layouts. ``apply_rope`` is its
``forward_native(positions (3, T), query, key)``; ``rope_cos_sin`` the rotation, by that same
``forward_native``, of a probe query with 1 in each pair's first channel and 0 in its second (the rotated
pair is exactly ``(cos, sin)``), since the section split happens inside it; ``(3, B, T)`` positions are
one batch row at a time. ``mrope_position_ids`` is not wired: vLLM builds the ids in each model's
``get_mrope_input_positions`` (vllm/model_executor/models/qwen2_vl.py, ...), and importing those modules
needs torchvision (transformers' Qwen2-VL image processor), which this CPU install leaves out.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import Phi3LongRoPEScaledRotaryEmbedding, get_rope

from spec_tests.adapters._contract import (
    adapter_info,
    check_rope_keys,
    integer_positions,
    is_mrope,
    kind_and_layout,
    pair_probe,
    probe_tables,
    rope_settings,
    rotary_width,
)

#: get_rope's rules wired here, neox (half) and GPT-J (interleaved) styles, the first rotary_dim channels
INFO: dict[str, Any] = adapter_info(
    f"vLLM {importlib.metadata.version('vllm')} rotary embeddings (forward_native) + torch {torch.__version__}",
    "float32", "spec_tests/adapters/vllm_rope.py: get_rope(...).forward_native",
    rope_types=["default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional"],
    rope_layouts=["half", "interleaved"], rope_placements=["first"])

#: the engine config a CustomOp needs at construction (vllm/model_executor/custom_op.py, dispatch_forward):
#: the default VllmConfig on the CPU device (without vLLM's compiled extension no platform is detected)
_CONFIG = VllmConfig(device_config=DeviceConfig(device="cpu"))
PASSED_ON = ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
             "attention_factor", "truncate", "low_freq_factor", "high_freq_factor", "short_factor", "long_factor")


def _module(rope: dict, top: int) -> Any:
    """``get_rope`` for a contract rope dict; ``top`` = the largest position + 1 the call needs."""
    rope = rope_settings(rope, "vLLM's get_rope", mrope=True)  # unknown keys: ValueError; None values: unset
    kind, layout = kind_and_layout(rope, "vLLM (neox = half, GPT-J = interleaved)", ("half", "interleaved"))
    if kind == "dynamic" and rope.get("dynamic_rule") != "vllm_static":
        raise NotImplementedError("vLLM's dynamic rule is static (the base at factor·max_position)")
    if kind == "ntk":
        raise NotImplementedError("vLLM's 'ntk' is not the contract's static NTK-aware base")
    head_dim = int(rope["head_dim"])
    rotary = rotary_width(rope)
    params: dict[str, Any] = {"rope_type": kind, "rope_theta": float(rope.get("rope_theta", 10000.0)),
                              "partial_rotary_factor": rotary / head_dim}
    params.update({k: rope[k] for k in PASSED_ON if k in rope})
    if "mrope_section" in rope:  # get_rope builds MRotaryEmbedding for default and yarn
        if kind not in ("default", "yarn"):
            raise NotImplementedError(f"vLLM's get_rope builds M-RoPE for default and yarn, not {kind!r}")
        params["mrope_section"] = list(rope["mrope_section"])
        params["mrope_interleaved"] = bool(rope.get("mrope_interleaved", False))
    max_position = int(rope.get("max_position_embeddings") or rope.get("original_max_position_embeddings") or top)
    if kind in ("default", "linear", "proportional", "llama3"):
        max_position = max(max_position, top)
    if kind == "dynamic":  # the static rule's L = s·L_max: vLLM's max_position is the serving length, and
        # max_trained_positions the trained one (models/config.py passes max_model_len and the config's length)
        serving = float(rope["factor"]) * max_position
        if serving != int(serving):
            raise NotImplementedError(f"vLLM's max_position is an integer; factor·max_position_embeddings = {serving}")
        params["max_trained_positions"], max_position = max_position, int(serving)
    with set_current_vllm_config(_CONFIG):  # CustomOp.__init__ reads the current config to pick its forward
        module = get_rope(head_dim, max_position, is_neox_style=layout == "half", rope_parameters=params,
                          dtype=torch.float32)
    if module.cos_sin_cache.shape[0] < top:
        raise NotImplementedError(f"vLLM caches {module.cos_sin_cache.shape[0]} positions for this config, "
                                  f"the call needs {top}")
    return module


def _longrope(rope: dict, length: int | None) -> Any:
    """``Phi3LongRoPEScaledRotaryEmbedding`` with the arguments ``get_rope`` gives it
    (vllm/model_executor/layers/rotary_embedding/__init__.py), built under an engine config whose
    ``max_model_len`` is ``length`` (``None``: the original length, so the short factors)."""
    rope = rope_settings(rope, "vLLM's LongRoPE")  # unknown keys: ValueError; None values: unset
    kind_and_layout(rope, "vLLM's Phi3LongRoPEScaledRotaryEmbedding (neox style only)", ("half",))
    if rope.get("attention_factor") is not None:
        raise NotImplementedError("vLLM's LongRoPE takes short_mscale / long_mscale, not attention_factor")
    original = rope["original_max_position_embeddings"]  # get_rope indexes rope_parameters: KeyError if absent
    max_position = rope.get("max_position_embeddings") or round(rope.get("factor", 1.0) * original)  # HF's factor
    engine = SimpleNamespace(compilation_config=_CONFIG.compilation_config,  # what __init__ and CustomOp read
                             model_config=SimpleNamespace(max_model_len=original if length is None else length))
    with set_current_vllm_config(engine):
        return Phi3LongRoPEScaledRotaryEmbedding(
            int(rope["head_dim"]), rotary_width(rope), int(max_position), original,
            float(rope.get("rope_theta", 10000.0)), True, torch.float32, rope["short_factor"], rope["long_factor"],
            short_mscale=rope.get("short_mscale"), long_mscale=rope.get("long_mscale"))  # get_rope's extra_kwargs


def _longrope_rows(module: Any, pos: np.ndarray) -> torch.Tensor:
    """Rows of ``long_short_cos_sin_cache`` at ``pos`` as ``forward`` picks them: short rows first, the
    long ones from offset ``original_max_position_embeddings``."""
    original, top = module.original_max_position_embeddings, int(pos.max()) + 1 if pos.size else 1
    if not module.use_long_rope and top > original:
        raise NotImplementedError(f"vLLM's short LongRoPE cache covers positions < {original}")
    if module.use_long_rope and top > module.max_position_embeddings:
        raise NotImplementedError(f"vLLM's long LongRoPE cache covers positions < {module.max_position_embeddings}")
    offset = original if module.use_long_rope else 0
    return module.long_short_cos_sin_cache[torch.as_tensor(pos + offset)]


def _length(pos: np.ndarray, seq_len: int | None) -> int:
    return int(seq_len) if seq_len is not None else (int(pos.max()) + 1 if pos.size else 1)


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """The module's ``_compute_inv_freq`` (float32; divided by the factor for linear, whose
    ``_compute_cos_sin_cache`` divides the positions instead) and the ``mscale`` it folds into its cache;
    LongRoPE: the factors and mscale the module picked for an engine of ``max_model_len = seq_len``."""
    if rope.get("rope_type") == "longrope":
        module = _longrope(rope, seq_len)
        factors, mscale = ((module.long_factor, module.long_mscale) if module.use_long_rope
                           else (module.short_factor, module.short_mscale))
        return module._compute_inv_freq(factors).double().numpy(), float(mscale)
    module = _module(rope, 1)
    compute = getattr(module, "_compute_inv_freq", None)
    if compute is None or rope.get("rope_type") == "dynamic":
        raise NotImplementedError(f"{type(module).__name__} computes its ω inside its cos/sin cache")
    argument = next(iter(inspect.signature(compute).parameters))  # "base", or YaRN's "scaling_factor"
    inv = compute(module.base if argument == "base" else module.scaling_factor).double()
    if hasattr(module, "scaling_factors"):  # linear: the cache divides the positions, t / factor, not ω
        inv = inv / module.scaling_factors[0]
    return inv.numpy(), float(getattr(module, "mscale", 1.0))


def _mrope_cos_sin(pos: np.ndarray, rope: dict) -> tuple[np.ndarray, np.ndarray]:
    """M-RoPE's cos/sin as ``MRotaryEmbedding.forward_native`` forms them (its section split or
    ``apply_interleaved_rope`` lives inside it): the rotation of a :func:`~spec_tests.adapters._contract.pair_probe`.
    Positions ``(3, B, T)``: one module, one batch row per call (forward_native takes ``(3, T)``)."""
    if pos.ndim > 3:
        raise NotImplementedError("vLLM's MRotaryEmbedding takes positions (T,), (3, T) or (3, B, T)")
    module = _module(rope, int(pos.max()) + 1 if pos.size else 1)
    d, layout = module.rotary_dim, "half" if module.is_neox_style else "interleaved"

    def tables(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        probe = torch.from_numpy(pair_probe(rows.shape[-1], module.head_size, d, layout))  # (T, head_size)
        out, _ = module.forward_native(torch.as_tensor(rows), probe, probe)  # the key's rotation discarded
        return probe_tables(out.double().numpy(), d, layout)

    if pos.ndim < 3:
        return tables(pos)
    per_row = [tables(pos[:, b]) for b in range(pos.shape[1])]
    return np.stack([c for c, _ in per_row]), np.stack([s for _, s in per_row])


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``cos_sin_cache`` (``[cos | sin]`` per pair) in the contract's channel order (M-RoPE:
    :func:`_mrope_cos_sin`)."""
    pos = integer_positions(positions, reject_negative=True)
    if is_mrope(rope):
        return _mrope_cos_sin(pos, rope)
    if rope.get("rope_type") == "longrope":
        module = _longrope(rope, _length(pos, seq_len))
        rows = _longrope_rows(module, pos).double()
        cos, sin = rows.chunk(2, dim=-1)
        return torch.cat([cos, cos], -1).numpy(), torch.cat([sin, sin], -1).numpy()
    module = _module(rope, int(pos.max()) + 1 if pos.size else 1)
    rows = module.cos_sin_cache[torch.as_tensor(pos)].double()
    cos, sin = rows.chunk(2, dim=-1)
    if module.is_neox_style:
        return torch.cat([cos, cos], -1).numpy(), torch.cat([sin, sin], -1).numpy()
    return cos.repeat_interleave(2, -1).numpy(), sin.repeat_interleave(2, -1).numpy()


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``forward_native(positions, query)`` with ``query`` = x moved to ``(T, N·head_dim)`` and back; one
    module for the call, positions ``(B, T)`` (M-RoPE: ``(3, B, T)``) one batch row at a time."""
    pos = integer_positions(positions, reject_negative=True)
    x = np.asarray(x, dtype=np.float32)
    check_rope_keys(rope, "vLLM's get_rope", mrope=True)
    mrope = is_mrope(rope)
    if rope.get("rope_type") == "longrope":  # forward(positions, query, key): the key gets the same rotation
        module = _longrope(rope, _length(pos, seq_len))
        _longrope_rows(module, pos)  # the same bounds as the cache rows forward reads
    else:
        module = _module(rope, int(pos.max()) + 1 if pos.size else 1)
    if pos.ndim == (3 if mrope else 2):  # with x (B, H, T, D)
        rows = [pos[:, b] if mrope else pos[b] for b in range(pos.shape[-2])]
        return np.stack([_rotate(module, x[b], rows[b], rope) for b in range(len(rows))])
    return _rotate(module, x, pos, rope)


def _rotate(module: Any, x: np.ndarray, pos: np.ndarray, rope: dict) -> np.ndarray:
    """One call of the module on x ``(..., T, D)`` at positions ``(T,)`` (M-RoPE: ``(3, T)``)."""
    lead, (t, d) = x.shape[:-2], x.shape[-2:]
    tokens = torch.as_tensor(np.moveaxis(x.reshape(-1, t, d), 1, 0).reshape(t, -1).copy())  # (T, N·D)
    if rope.get("rope_type") == "longrope":
        query, _ = module.forward(torch.as_tensor(pos), tokens, tokens.clone())
    else:  # MRotaryEmbedding.forward_native asserts a key: the same tokens (not written), its rotation discarded
        query, _ = module.forward_native(torch.as_tensor(pos), tokens, tokens if is_mrope(rope) else None)
    out = np.moveaxis(query.double().numpy().reshape(t, -1, d), 0, 1)  # (N, T, D)
    return out.reshape(*lead, t, d)
