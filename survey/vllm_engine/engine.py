"""vLLM on the CPU, one process: its engine config, a single-process distributed group, and its attention recorded.

vLLM builds a model as ``cls(vllm_config=..., prefix="")`` under :func:`vllm.config.set_current_vllm_config`:
every layer reads the engine config when it is built, its parallel linear layers the tensor-parallel group.
:func:`start` sets both up once per process: a ``gloo`` process group of world size 1 on the loopback address,
and vLLM's model parallel groups of size 1. :func:`engine_config` builds the engine config of one tiny model
from its ``config.json`` (float32, eager, every custom op on its ``forward_native`` path: the CPU wheel has no
compiled extension). A speculative draft (an EAGLE head, a multi-token prediction layer) is built as a draft of
itself: the engine config names its own model config as the draft's (:class:`DraftOnly`), and its forward is given
the target's hidden states it reads (:func:`draft_hidden_states`), the same in every run of the probe.

vLLM's attention layers (:class:`vllm.model_executor.layers.attention.Attention` and its subclasses,
:class:`~vllm.model_executor.layers.attention.mla_attention.MLAAttention`) hand the query and key, already
rotated by the model's ``rotary_emb``, to a kernel backend that needs a GPU or vLLM's compiled extension.
:func:`record_attention` puts a stand-in in their place, and in that of every subclass loaded that builds or
calls otherwise (chunked local, encoder-only, cross attention), for the duration: it keeps what the constructor was
given (heads, head size, scale, ALiBi slopes, sliding window), records each call's query and key as a
:class:`survey.probe.Call` (``(1, H, T, d)``, float64 copies) and returns zeros, as the transformers probe does
(:mod:`survey.probe`): each layer's input is then the same whatever attention did. So does every state-space or
linear-attention mixer (:func:`_zero_mixer`). An MLA layer's key is put
together as the transformers models hand it to attention: the latent's key part through ``kv_b_proj``, then the
rotated ``k_pe`` on every head. A layer that reads another layer's cache (vLLM's KV sharing: Gemma 3n's last
layers, ``kv_sharing_target_layer_name``) is handed no key: its call is recorded with the key that layer's last
call was handed, the keys it attends over (:data:`SHARED_KEYS`); any other call handed no key (a cross-attention
whose encoder the probe, running input ids alone, does not run: Whisper's decoder) stops the run, by name.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from survey.probe import Call, _np

_started = False
#: why a call handed no key is recorded with another layer's: vLLM's KV-sharing layers write no cache of their own
#: and attend over their target layer's (``Attention(kv_sharing_target_layer_name=...)``), as transformers' shared
#: layers read the target's cached keys
SHARED_KEYS = "kv_sharing_target_layer_name"


def start() -> None:
    """Import vLLM quietly and set up its single-process distributed group (once per process)."""
    global _started
    if _started:
        return
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "1")
    import torch
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    torch.set_num_threads(1)
    _experts_without_kernels()
    with socket.socket() as s:  # a free port on the loopback address for the one-process group
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        initialize_model_parallel(1, 1)
    _started = True


def _experts_without_kernels() -> None:
    """A mixture of experts' kernels need a GPU or vLLM's compiled CPU extension: on this platform vLLM chooses its
    CPU kernel for the layer to be built, and the layer returns zeros (the experts' share of the residual stream
    left out; positions reach a layer through its attention, which is what is compared). The config check that
    refuses an ungated expert activation (Nemotron-H's relu²) on any platform but a GPU's is run as for a gated
    one: it guards a kernel that is never run here."""
    import torch
    from vllm.model_executor.layers.fused_moe import unquantized_fused_moe_method as method
    from vllm.model_executor.layers.fused_moe.config import FusedMoEConfig
    from vllm.model_executor.layers.fused_moe.runner.moe_runner import MoERunner

    method.select_unquantized_moe_backend = lambda moe_config: (method.UnquantizedMoeBackend.CPU, None)
    checked = FusedMoEConfig.__post_init__

    def check_ungated(self: Any) -> None:  # the platform check of an ungated activation (relu²: Nemotron-H)
        if self.is_act_and_mul:  # refuses a CPU, whose kernel is never run here: checked as a gated one's
            return checked(self)
        derived = FusedMoEConfig.is_act_and_mul
        FusedMoEConfig.is_act_and_mul = True
        try:
            checked(self)
        finally:
            FusedMoEConfig.is_act_and_mul = derived
    FusedMoEConfig.__post_init__ = check_ungated

    def no_experts(self: Any, hidden_states: Any, router_logits: Any, *args: Any, **kwargs: Any) -> Any:
        return torch.zeros_like(hidden_states)
    MoERunner.forward = no_experts


def fill_inspection_cache() -> None:
    """vLLM inspects each model class once (in a subprocess, cached on disk); doing it for every class at once
    costs what one costs."""
    from vllm.model_executor.models.registry import ModelRegistry

    ModelRegistry.fill_model_info_cache()


class DraftOnly:
    """The speculative config a draft model reads when it is built: its own model config as the draft's, one
    speculative token, every other setting unset (None) — no target model is loaded beside it."""

    def __init__(self, model_config: Any) -> None:
        self.draft_model_config = model_config
        self.num_speculative_tokens = 1

    def __getattr__(self, name: str) -> None:
        return None


def engine_config(directory: Path, draft: bool = False) -> Any:
    """The engine config of the model whose ``config.json`` is in ``directory``: float32, eager, on the CPU, every
    custom op on its native torch path; for a speculative ``draft``, naming its own model config as the draft's
    (:class:`DraftOnly`)."""
    from vllm.config import CompilationConfig, DeviceConfig, ModelConfig, VllmConfig

    model = ModelConfig(model=str(directory), tokenizer=str(directory), skip_tokenizer_init=True, dtype="float32",
                        enforce_eager=True, trust_remote_code=False, max_model_len=None)
    config = VllmConfig(model_config=model, device_config=DeviceConfig(device="cpu"),
                        compilation_config=CompilationConfig(custom_ops=["none"]))
    if draft:
        object.__setattr__(config, "speculative_config", DraftOnly(model))
    return config


def draft_hidden_states(config: Any, tokens: int) -> Any:
    """The target's hidden states a draft's forward reads, ``(tokens, hidden_size)``: N(0, 1) from a fixed seed, so
    every run of the probe gives the draft the same (positions reach its layers through their rotary module)."""
    import torch

    generator = torch.Generator().manual_seed(7)
    return torch.randn(tokens, config.model_config.hf_config.hidden_size, generator=generator)


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """One architecture's engine config, build and runs, with what vLLM keeps for the whole process put back after.

    A vLLM process serves one model; the survey builds every architecture of the registry in one process, and vLLM
    leaves two things behind that would reach the next one:

    * ``get_rope`` hands out one rotary module per geometry (``_ROPE_DICT``), and some model classes change theirs
      once built (``Ernie4_5ForCausalLM`` sets ``is_neox_style = False`` on the module of the Llama layers it
      reuses: Llama 4's text model, of the same geometry, was then handed adjacent-pair rotation). The cache is
      emptied before and after.
    * reading a ``config.json`` whose model type is in vLLM's config registry sets ``model_type`` on that config
      class and registers it with transformers' ``AutoConfig`` (``deepseek_v32`` and ``kimi_k2`` are
      transformers' ``DeepseekV3Config``: after DeepSeek-V3.2 was read, every DeepSeek-V3 config said
      ``deepseek_v32`` and ``AutoConfig`` built ``deepseek_v32`` as a V3 config). Each registry class's own
      ``model_type`` and ``AutoConfig``'s registrations are put back as they were.
    """
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.model_executor.layers import rotary_embedding
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    absent = object()
    classes: dict[type, Any] = {}
    for name in list(_CONFIG_REGISTRY.keys()):
        with contextlib.suppress(Exception):  # a config class that does not import here is never registered
            cls = _CONFIG_REGISTRY[name]
            classes[cls] = cls.__dict__.get("model_type", absent)
    registered = dict(CONFIG_MAPPING._extra_content)
    rotary_embedding._ROPE_DICT.clear()
    try:
        yield
    finally:
        rotary_embedding._ROPE_DICT.clear()
        for cls, value in classes.items():
            if value is absent:
                if "model_type" in cls.__dict__:
                    delattr(cls, "model_type")
            else:
                cls.model_type = value
        CONFIG_MAPPING._extra_content.clear()
        CONFIG_MAPPING._extra_content.update(registered)


def build(architecture: str, config: Any, seed: int = 0) -> Any:
    """Model class ``architecture`` of vLLM's registry built under ``config`` (:func:`engine_config`), every
    parameter drawn from N(0, 0.02²) (vLLM allocates them uninitialized; weights are loaded later)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.models.registry import ModelRegistry

    cls, _ = ModelRegistry.resolve_model_cls([architecture], config.model_config)
    torch.set_default_dtype(torch.float32)
    with set_current_vllm_config(config), torch.device("cpu"):
        model = cls(vllm_config=config, prefix="")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.is_floating_point():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
    return model.eval()


#: architectures whose forward takes the token embeddings vLLM's model runner computes first
#: (``model.embed_input_ids(input_ids)``) and refuses to run without them: the dual encoder served for pooling
#: (``clip.py``: ``assert inputs_embeds is not None``) and Gemma 3n's multimodal model (``gemma3n_mm.py``:
#: "inputs_embeds is required on the first PP rank", its per-layer embeddings computed from the ids by that call)
EMBEDS_FIRST = frozenset({"CLIPModel", "Gemma3nForConditionalGeneration"})


def forward(model: Any, config: Any, ids: np.ndarray, positions: np.ndarray) -> Any:
    """vLLM's forward of one sequence: token ids ``(T,)`` and positions ``(T,)`` (or ``(3, T)`` for M-RoPE), in a
    forward context without attention metadata (the recorded attention needs none); ``intermediate_tensors=None``
    (one pipeline stage) where the forward requires it; for an architecture of :data:`EMBEDS_FIRST`, the token
    embeddings ``model.embed_input_ids(ids)`` handed as ``inputs_embeds`` beside the ids, as vLLM's runner hands
    them."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context

    inputs = {"input_ids": torch.as_tensor(ids), "positions": torch.as_tensor(positions)}
    if EMBEDS_FIRST & set(getattr(config.model_config.hf_config, "architectures", None) or []):
        with set_current_vllm_config(config), torch.no_grad():
            inputs["inputs_embeds"] = model.embed_input_ids(inputs["input_ids"])
    parameters = inspect.signature(model.forward).parameters
    if "hidden_states" in parameters:  # a speculative draft
        inputs["hidden_states"] = draft_hidden_states(config, len(ids))
    stages = parameters.get("intermediate_tensors")
    if stages is not None and stages.default is inspect.Parameter.empty:  # InternLM2's: a required argument
        inputs["intermediate_tensors"] = None  # what vLLM's runner passes without pipeline stages
    with set_current_vllm_config(config), set_forward_context(None, config, num_tokens=len(ids)), torch.no_grad():
        return model(**inputs)


# ---------------------------------------------------------------------------------------- attention stand-in
def _keep(self: Any, signature: inspect.Signature, args: tuple, kwargs: dict) -> None:
    """What an attention layer's constructor was given, kept on the stand-in."""
    import torch

    torch.nn.Module.__init__(self)
    bound = signature.bind(self, *args, **kwargs)
    bound.apply_defaults()
    given = {k: v for k, v in bound.arguments.items() if k != "self"}
    given.update(given.pop("extra_impl_args", {}) or {})
    self.given = given
    self.num_heads = given["num_heads"]
    self.head_size = given.get("head_size") or given.get("qk_nope_head_dim", 0) + given.get("qk_rope_head_dim", 0)
    self.num_kv_heads = given.get("num_kv_heads") or self.num_heads
    self.head_size_v = given.get("head_size_v") or given.get("v_head_dim") or self.head_size
    self.layer_name = self.prefix = given.get("prefix", "")
    for name in ("kv_b_proj", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank"):
        if name in given:
            setattr(self, name, given[name])


def _mixer_init(original: Callable[..., None]) -> Callable[..., None]:
    """A mixer's constructor: vLLM's own where it builds on this platform, else a module without parameters
    (a gated delta net asks the platform for its GPU device): nothing of it is run (:func:`_zero_mixer`)."""
    import torch

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            original(self, *args, **kwargs)
        except (TypeError, RuntimeError):
            torch.nn.Module.__init__(self)
            self.prefix = kwargs.get("prefix", "")
    return init


def _zero_mixer(signature: inspect.Signature) -> Callable[..., Any]:
    """The forward of a state-space or linear-attention mixer (Mamba, gated delta net ...) as zeros: its kernels
    need a GPU or vLLM's compiled extension, and vLLM hands it an uninitialized ``output`` to fill, so left alone it
    would pass memory garbage to the next layer. Zeros, written into ``output`` where it takes one, else returned,
    leave the mixer's share of the residual stream out (positions reach a layer through its attention, which is
    what is compared)."""
    import torch

    def zeros(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        output = bound.arguments.get("output")
        if isinstance(output, torch.Tensor):
            output.zero_()
            return None
        return torch.zeros_like(bound.arguments["hidden_states"])
    return zeros


def _subclasses(cls: type) -> list[type]:
    """Every subclass of ``cls`` defined so far, at any depth."""
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return list(dict.fromkeys(found))


def _heads(x: Any, heads: int, width: int = 0) -> np.ndarray:
    """``(T, H·d)`` or ``(T, H, d)`` as ``(1, H, T, d)``: heads of ``width`` channels where the row holds a whole
    number of them (a layer may hand its attention fewer key heads than it was built with), else ``heads`` heads."""
    per_row = x[0].numel()
    t = x.reshape(x.shape[0], -1, width) if width and per_row % width == 0 else x.reshape(x.shape[0], heads, -1)
    return _np(t.permute(1, 0, 2))[None]


#: the argument of vLLM's attention that switches its kernels' ALiBi to the square root of the distance (Step1's)
ALIBI_SQRT = "use_alibi_sqrt"


def _alibi(slopes: np.ndarray, t: int, sqrt: bool) -> dict[str, np.ndarray]:
    r"""The bias vLLM's kernels add to the logits of ``t`` tokens of one sequence (none cached), ``(1, H, T, T)``.

    Linear: :math:`m_h\,j` for key slot :math:`j` (``slope · (key slot − context length)``); with ``use_alibi_sqrt``
    (``triton_attention_helpers.apply_alibi_to_score``): :math:`-m_h \sqrt{i - j}` for key :math:`j \le i` of query
    :math:`i`, 0 past it (masked). Named by its form, so that a comparison reads which one it was handed.
    """
    i = np.arange(t, dtype=np.float64)[:, None]
    j = np.arange(t, dtype=np.float64)[None, :]
    if sqrt:
        offset = np.where(j <= i, -np.sqrt(np.maximum(i - j, 0.0)), 0.0)
        return {"alibi sqrt (−slope × √(query slot − key slot))": (slopes[:, None, None] * offset[None])[None]}
    return {"alibi (slope × key slot)": (slopes[:, None, None] * j[None] * np.ones((1, t, 1)))[None]}


@contextlib.contextmanager
def record_attention(record: Callable[[Any, Call], None]) -> Iterator[None]:
    """Every vLLM attention layer built and called in the block is a stand-in that hands ``record`` its module
    and a :class:`survey.probe.Call` (layer unset), and returns zeros (see the module docstring)."""
    import torch
    from vllm.model_executor.layers.attention import Attention
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    keys: dict[str, Any] = {}  # each layer's last key, for the layers that read its cache (KV sharing)

    def plain_forward(self: Any, query: Any, key: Any, value: Any, output_shape: Any = None, **_: Any) -> Any:
        given = self.given
        scale = given.get("scale")
        rows = query.shape[0]
        width = output_shape[-1] if output_shape is not None else self.num_heads * self.head_size_v
        if key is None:  # the layer attends over keys another call wrote: the layer it shares (SHARED_KEYS), else
            # its own cache, which its earlier call wrote (IQuest LoopCoder's later passes attend over the first's)
            key = keys.get(given.get(SHARED_KEYS) or "")
            key = keys.get(self.prefix) if key is None else key
            if key is None:
                raise ValueError(f"an attention call ({self.prefix or 'unnamed'}) is handed no key and shares no "
                                 "other layer's, nor did an earlier call of its own write one: a cross-attention "
                                 "whose encoder the probe does not run (its input ids alone)")
        keys[self.prefix] = key
        slopes = given.get("alibi_slopes")
        tensors = {}
        if slopes is not None:
            tensors.update(_alibi(np.asarray(slopes, dtype=np.float64), query.shape[0], bool(given.get(ALIBI_SQRT))))
        record(self, Call(self.prefix, None, _heads(query, self.num_heads, self.head_size),
                          _heads(key, self.num_kv_heads, self.head_size),
                          None, tensors, float(scale) if isinstance(scale, (int, float)) else None))
        return torch.zeros(rows, width, dtype=query.dtype)

    def latent_forward(self: Any, q: Any, kv_c_normed: Any, k_pe: Any, output_shape: Any = None, **_: Any) -> Any:
        rows = q.shape[0]
        kv = self.kv_b_proj(kv_c_normed)[0].view(rows, self.num_heads, self.qk_nope_head_dim + self.v_head_dim)
        k_nope = kv[..., : self.qk_nope_head_dim]
        k_rot = k_pe.reshape(rows, 1, -1).expand(rows, self.num_heads, k_pe.shape[-1])
        key = torch.cat([k_nope, k_rot], dim=-1)
        scale = self.given.get("scale")
        record(self, Call(self.prefix, None, _heads(q, self.num_heads), _heads(key, self.num_heads), None, {},
                          float(scale) if isinstance(scale, (int, float)) else None))
        width = output_shape[-1] if output_shape is not None else self.num_heads * self.v_head_dim
        return torch.zeros(rows, width, dtype=q.dtype)

    def keeping(signature: inspect.Signature) -> Callable[..., None]:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            _keep(self, signature, args, kwargs)
        return init

    # the two classes and every subclass of theirs loaded that builds or calls otherwise (chunked local, encoder-only,
    # cross attention ...): each constructor's own arguments kept, every call recorded
    stand_ins = []
    for base, forward in ((Attention, plain_forward), (MLAAttention, latent_forward)):
        for cls in (base, *_subclasses(base)):
            if "__init__" in cls.__dict__:
                stand_ins.append((cls, "__init__", keeping(inspect.signature(cls.__init__))))
            if "forward" in cls.__dict__:
                stand_ins.append((cls, "forward", forward))
    from vllm.model_executor.layers.mamba.abstract import MambaBase

    for cls in _subclasses(MambaBase):
        if "__init__" in cls.__dict__:
            stand_ins.append((cls, "__init__", _mixer_init(cls.__dict__["__init__"])))
        if "forward" in cls.__dict__:
            stand_ins.append((cls, "forward", _zero_mixer(inspect.signature(cls.__dict__["forward"]))))
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in stand_ins]
    try:
        for cls, name, value in stand_ins:
            setattr(cls, name, value)
        yield
    finally:
        for cls, name, value in saved:
            setattr(cls, name, value)
