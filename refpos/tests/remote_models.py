"""Re-implementations, in torch float64, of the position code of the models that ship their own code: written from
the math of each family's public source (the file and functions named beside each function), independent of
refpos. The anchors (refpos/tests/test_anchors_remote.py) hold refpos's records to them.

Every function takes a query ``x`` of shape ``(T, D)`` (one head; the rotation is the same on every head) and the
positions of its rows, and returns what the family's code hands to attention: the query rotated (and scaled, for
Qwen's log-n). The ALiBi families return the bias ``(H, Tq, Tk)``. All arithmetic is float64; the sources run
float32 or half precision, which is a precision of theirs, not a convention.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the re-implementations of the remote-code families use torch")

#: where each re-implementation's math was read (the family-table rows cite the same files)
SOURCES = {
    "chatglm_v1": "github:laocheyujie/ChatGLM-6B/chatglm-6b/modeling_chatglm.py: RotaryEmbedding.forward, "
                  "apply_rotary_pos_emb_index, SelfAttention",
    "chatglm": "github:xiaoye-LLM/MIQA/chatglm3-6b/modeling_chatglm.py: RotaryEmbedding.forward_impl, "
               "apply_rotary_pos_emb, SelfAttention",
    "chatglm_version": "github:NVIDIA/TensorRT-LLM/tensorrt_llm/models/chatglm/config.py: "
                       "ChatGLMConfig.from_hugging_face",
    "qwen": "github:alibaba/MNN/transformers/llm/export/llm_models/Qwen-1_8B/modeling_qwen.py: "
            "RotaryEmbedding.update_rotary_pos_emb_cache, apply_rotary_pos_emb, QWenModel.get_ntk_alpha, "
            "QWenAttention.forward",
    "baichuan": "github:vllm-project/vllm/vllm/model_executor/models/baichuan.py: BaichuanForCausalLM, "
                "BaiChuanAttention, _get_alibi_slopes",
    "jais": "github:vllm-project/vllm/vllm/model_executor/models/jais.py: _get_alibi_slopes, JAISAttention, JAISModel",
    "phi3small": "github:vllm-project/vllm/vllm/model_executor/models/phi3_small.py: Phi3SmallSelfAttention",
    "codeshell": "github:wwnaitang/CodeShell-7B-Chat-int4/modeling_codeshell.py: CodeShellRotaryEmbedding, "
                 "CodeShellAttention._init_rope, apply_rotary_pos_emb",
}


def _half(x: Any) -> Any:
    """``rotate_half``: ``[x1, x2] -> [-x2, x1]`` over the last axis."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def _frequencies(base: float, dim: int) -> Any:
    """``1 / base ** (arange(0, dim, 2) / dim)``, float64."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def neox(x: Any, positions: Any, inv_freq: Any) -> Any:
    """The first ``2 · len(inv_freq)`` channels rotated in half-split pairs (``cat(freqs, freqs)``, ``rotate_half``),
    the rest passed through: the llama-style apply of every family below but ChatGLM2+."""
    angles = torch.outer(torch.as_tensor(positions, dtype=torch.float64), inv_freq)  # (T, d/2)
    emb = torch.cat((angles, angles), dim=-1)
    d = emb.shape[-1]
    rot, rest = x[..., :d], x[..., d:]
    return torch.cat((rot * emb.cos() + _half(rot) * emb.sin(), rest), dim=-1)


# --------------------------------------------------------------------------------------------------- ChatGLM
def chatglm_version(config: dict[str, Any]) -> str:
    """The release whose code a config runs, as TensorRT-LLM's ``ChatGLMConfig.from_hugging_face`` infers it from the
    name the config was saved under (``glm4``, ``chatglm3``, ``chatglm2``); ``chatglm`` for the 2-D first release."""
    if config.get("position_encoding_2d"):
        return "chatglm"
    name = str(config.get("_name_or_path", "")).lower()
    for version in ("glm4", "chatglm3", "chatglm2"):
        if version in name.replace("-", "").replace("_", ""):
            return version
    raise ValueError(f"no ChatGLM release in {name!r}")


def chatglm(x: Any, positions: Any, config: dict[str, Any]) -> Any:
    """ChatGLM2/3, GLM-4: ``RotaryEmbedding(rotary_dim // 2)`` over ``rotary_dim = kv_channels``; ``forward_impl``
    builds ``theta = 1 / base ** (arange(0, n_elem, 2) / n_elem)`` and ``idx_theta = outer(seq_idx, theta)``;
    ``apply_rotary_pos_emb`` rotates the first ``n_elem`` channels as pairs ``(x[2i], x[2i + 1])``. ChatGLM2-32k's
    file divides ``seq_idx`` by ``rope_ratio``; ChatGLM3's and GLM-4's multiply the base by it."""
    version = chatglm_version(config)
    ratio = float(config.get("rope_ratio", 1.0))
    n_elem = (config.get("kv_channels") or config["hidden_size"] // config["num_attention_heads"]) // 2
    base = 10000.0 * ratio if version in ("chatglm3", "glm4") else 10000.0
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=torch.float64) / n_elem))
    seq = torch.as_tensor(positions, dtype=torch.float64)
    seq = seq / ratio if version == "chatglm2" else seq
    idx_theta = torch.outer(seq, theta)  # (T, n_elem / 2)
    cos, sin = idx_theta.cos(), idx_theta.sin()
    rot, rest = x[..., :n_elem], x[..., n_elem:]
    pairs = rot.reshape(*rot.shape[:-1], n_elem // 2, 2)
    out = torch.stack((pairs[..., 0] * cos - pairs[..., 1] * sin, pairs[..., 1] * cos + pairs[..., 0] * sin), -1)
    return torch.cat((out.flatten(-2), rest), dim=-1)


def chatglm_2d(x: Any, positions: Any, block_positions: Any, config: dict[str, Any]) -> Any:
    """ChatGLM-6B: ``RotaryEmbedding(hidden_size // (num_attention_heads * 2), base=10000)``; the query chunked in
    two halves, the first rotated (``rotate_half``) at ``position_ids``, the second at ``block_position_ids``."""
    dim = config["hidden_size"] // (2 * config["num_attention_heads"])
    inv_freq = _frequencies(10000.0, dim)
    first, second = x.chunk(2, dim=-1)
    return torch.cat((neox(first, positions, inv_freq), neox(second, block_positions, inv_freq)), dim=-1)


# ------------------------------------------------------------------------------------------------------ Qwen
def qwen_ntk_alpha(length: int, seq_length: int) -> float:
    """``QWenModel.get_ntk_alpha``: ``2 ** ceil(log2(L / seq_length) + 1) - 1``, at least 1 (``math.log`` as the
    source takes it)."""
    context_value = math.log(length / seq_length, 2) + 1
    return max(2 ** math.ceil(context_value) - 1, 1)


def qwen(x: Any, positions: Any, config: dict[str, Any], length: int) -> Any:
    """Qwen-1: ``RotaryEmbedding(dim, base=rotary_emb_base)`` with ``dim = kv_channels · rotary_pct`` (the whole
    ``kv_channels`` at 1.0), its base raised to ``base · alpha ** (dim / (dim - 2))`` with ``alpha`` from the first
    pass's length when ``use_dynamic_ntk``; ``apply_rotary_pos_emb`` rotates the first ``dim`` channels half-split;
    ``QWenAttention.forward`` multiplies the query by ``logn_list[p] = log(p + 1, seq_length)`` past
    ``seq_length`` when ``use_logn_attn``."""
    seq_length = config["seq_length"]
    pct = config.get("rotary_pct", 1.0)
    dim = config["kv_channels"] if pct == 1.0 else int(config["kv_channels"] * pct)
    alpha = qwen_ntk_alpha(length, seq_length) if config.get("use_dynamic_ntk", True) else 1.0
    base = config.get("rotary_emb_base", 10000) * alpha ** (dim / (dim - 2))
    out = neox(x, positions, _frequencies(base, dim))
    if config.get("use_logn_attn", True):
        logn = torch.tensor([math.log(int(p) + 1, seq_length) if int(p) + 1 > seq_length else 1.0
                             for p in positions], dtype=torch.float64)
        out = out * logn[:, None]
    return out


# ---------------------------------------------------------------------------------------------------- ALiBi
def alibi_slopes(n: int) -> list[float]:
    """``_get_alibi_slopes`` of vLLM's Baichuan and Jais: the ALiBi paper's slopes, in Python floats."""
    def power_of_2(m: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start**i for i in range(m)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n - closest]


def alibi_bias(n_heads: int, q_positions: Any, k_positions: Any) -> Any:
    """vLLM's ALiBi bias ``slope_h · (j - i)`` for query position ``i`` and key position ``j``, ``(H, Tq, Tk)``."""
    slopes = torch.tensor(alibi_slopes(n_heads), dtype=torch.float64)
    q = torch.as_tensor(q_positions, dtype=torch.float64)
    k = torch.as_tensor(k_positions, dtype=torch.float64)
    return slopes[:, None, None] * (k[None, None, :] - q[None, :, None])


# ----------------------------------------------------------------------------------------- llama-style RoPE
def llama3_frequencies(inv_freq: Any, scaling: dict[str, Any]) -> Any:
    """Llama 3.1's three wavelength bands (what EXAONE-3.5's ``rope_scaling`` of type llama3 runs)."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    out = torch.where(wavelength > original / low, inv_freq / factor, inv_freq)
    middle = (wavelength >= original / high) & (wavelength <= original / low)
    return torch.where(middle, blended, out)


def llama_style(x: Any, positions: Any, config: dict[str, Any], length: int, *, base: float | None = None,
                dim: int | None = None) -> Any:
    """The rotary module of the families that copy Llama's (InternLM2, MiniCPM, DeciLM, Orion, XVERSE, Aquila,
    EXAONE, CodeShell, StableLM-epoch, Falcon's RW, Phi's first release, Baichuan's 7B): a base (``rope_theta``,
    10000 without it), the first ``dim`` channels half-split, and the ``rope_scaling`` types they read: ``linear``
    (positions / factor), ``dynamic`` (``base · (s L / L_max − (s − 1)) ** (d / (d − 2))`` past ``L_max``), llama3."""
    head = config.get("hidden_size", config.get("n_embd")) // config.get("num_attention_heads", config.get("n_head"))
    dim = head if dim is None else dim
    base = float(config.get("rope_theta", 10000.0)) if base is None else base
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    positions = torch.as_tensor(positions, dtype=torch.float64)
    limit = config.get("max_position_embeddings", config.get("n_positions"))
    if kind == "dynamic" and length > limit:
        s = scaling["factor"]
        base = base * ((s * length / limit) - (s - 1)) ** (dim / (dim - 2))
    inv_freq = _frequencies(base, dim)
    if kind == "linear":
        positions = positions / scaling["factor"]
    elif kind == "llama3":
        inv_freq = llama3_frequencies(inv_freq, scaling)
    return neox(x, positions, inv_freq)


def phi3small(x: Any, positions: Any, config: dict[str, Any]) -> Any:
    """Phi-3-small in vLLM: base ``rope_embedding_base``, without ``rope_scaling`` a linear scaling by
    ``rope_position_scale`` (positions divided by it), half-split over the whole head."""
    positions = torch.as_tensor(positions, dtype=torch.float64) / config.get("rope_position_scale", 1.0)
    head = config["hidden_size"] // config["num_attention_heads"]
    return neox(x, positions, _frequencies(float(config["rope_embedding_base"]), head))




def reference(config: dict[str, Any], x: Any, positions: Any, length: int) -> Any:
    """What the family's own code hands to attention for the query ``x`` ``(T, D)`` at ``positions`` (``(2, T)``
    for ChatGLM-6B's two axes) when the first pass was ``length`` tokens long (the families dispatched by
    ``model_type``, as their ``auto_map`` would load them)."""
    model_type = config["model_type"]
    head = config.get("hidden_size", config.get("n_embd")) // config.get("num_attention_heads", config.get("n_head"))
    if model_type == "chatglm":
        return chatglm_2d(x, positions[0], positions[1], config) if config.get("position_encoding_2d") else \
            chatglm(x, positions, config)
    if model_type == "qwen":
        return qwen(x, positions, config, length)
    if model_type == "phi3small":
        return phi3small(x, positions, config)
    if model_type in ("codeshell", "RefinedWebModel"):  # the base their rotary modules are built with
        return llama_style(x, positions, config, length, base=10000.0)
    if model_type == "phi-msft":
        return llama_style(x, positions, config, length, base=10000.0, dim=config["rotary_dim"])
    if model_type == "stablelm_epoch":
        return llama_style(x, positions, config, length, dim=int(head * config["rope_pct"]))
    return llama_style(x, positions, config, length)


__all__ = ["SOURCES", "alibi_bias", "alibi_slopes", "chatglm", "chatglm_2d", "chatglm_version", "llama_style",
           "neox", "phi3small", "qwen", "qwen_ntk_alpha", "reference"]
