"""transformers' side of the models whose forward takes pixel values, audio or features instead of token ids.

A vision or audio model type is built at the survey's tiny geometry (:mod:`survey.tiny`, the first strength that
builds), its parameters seeded, and run on seeded random inputs twice: at its native size and at a size that forces
its position encoding to be resampled (``interpolate_pos_encoding=True`` where its forward takes it). What is
recorded is found generically, by name, never by model type:

* every *position site*: a parameter, floating-point buffer or tensor attribute on a path with a component that
  names positions (:data:`POSITION`: ``position_embeddings``, ``embed_positions``, ``pos_embed``,
  ``relative_position_bias_table``, ``rel_pos_h``, ``pos_conv_embed`` …). A site is that component (a module or a
  bare tensor) and its owner, the module holding it. Its parameters are redrawn from a seeded normal (an
  initialiser's zeros would let any answer pass) and stored: they are the weights refpos's formula takes; the
  values the model's code built them with are kept too (a fixed sin–cos table), a table still all zeros after
  the build built again by the model's own initialiser (:func:`rebuild_zeros`);
* the model is run in float64 where its code runs in it (else in float32: the record says which), torch's
  generator seeded before each forward (a random patch masking, ViT-MAE's, draws the same patches in every run);
* at each size, for each site, the owner's output tensors run as the model is and again with the site's
  parameters zeroed (their difference is what the site adds, where it adds linearly: a grid added to the
  patches), and, where the site is a module, its first input and its output (a convolutional position module as
  a function of its input);
* the rotary modules (class names ``…RotaryEmbedding``): at each size, the position ids of their first call and
  the cos and sin tables it returned;
* the attention modules (class names with ``Attention``) and the input each size was fed;
* at each size, the first calls of the modeling module's rotary apply functions (:data:`APPLY`: a vision tower's
  RoPE), their query and key before and after (:func:`rotations`).

A vision tower fed flattened patches (its forward takes ``hidden_states`` and ``grid_thw``: Qwen2-VL's) is given
the patch rows and the grid of :func:`survey.pixel_inputs.patch_grid` (the grid kept in :attr:`PixelRun.grids`).

A position module the forward never calls, whose zeroing leaves its owner's tensors exactly as they were, is no
position of the model: it is left out of the sites and the row's note names it.

Nothing here asks refpos; :mod:`survey.pixel_compare` judges the record against refpos's answer.
"""

from __future__ import annotations

import inspect
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from survey.pixel_logits import position_logits
from survey.probe import Applied, removed

#: a path component that names positions (a module or parameter); ``position_ids`` and other integer buffers are
#: indices, not weights, and are left out by their dtype
POSITION = re.compile(r"(^|_)(pos|position|positional|rel_pos|relative_position)s?(_|$|\d)|pos_embed|position_bias"
                      r"|relative_position|cpb_mlp|continuous_position")
#: the inputs a forward may take instead of token ids, in the order tried
INPUTS = ("pixel_values", "input_features", "input_values", "spectrogram", "audio_values", "past_values", "latents")
#: the key of an observation's ``stacks`` holding its :class:`PixelRun`
STACK = "pixels"
#: how the reason begins of a model type the token-id probe cannot run (:func:`survey.probe.probe`)
NO_TOKEN_IDS = "its forward takes no input_ids"
#: the masks of a feature or audio input that a forward may need (all ones: every frame is real)
MASKS = ("input_features_mask", "feature_attention_mask")
#: the other inputs a forward may need, fed where it takes them: an encoder-decoder's first decoder ids (ids 2 … 5:
#: none fairseq's padding id 1), a time series' padding (none: zeros) and frequency class (0), and the frame count
#: of a single clip fed as ``(mel bins, frames)``
COMPANIONS = {"decoder_input_ids": lambda shape, dtype: _ids((1, 4), 2) + _ids((1, 4), 0).new_tensor([0, 1, 2, 3]),
              "past_values_padding": lambda shape, dtype: _ids(shape[:2], 0).to(dtype),
              "freq": lambda shape, dtype: _ids((shape[0], 1), 0),
              "feature_lens": lambda shape, dtype: _ids((1,), shape[-1])}
#: how the note begins of a row run on pixel, audio or feature inputs
RUN_NOTE = "run on its "
#: the largest tensor a capture keeps (elements): a larger one is left out, the capture saying so
MAX_ELEMENTS = 2_000_000
#: the std of the seeded draw that replaces a site's parameters
SITE_STD = 0.5
#: a module class that computes RoPE's cos and sin tables from position ids (transformers' ``…RotaryEmbedding``)
ROTARY = re.compile(r"Rotary(Positional)?Embedding")
#: the inputs of a vision tower fed flattened patches and their ``(t, h, w)`` grid
FLAT_PATCHES = ("hidden_states", "grid_thw")
#: module-level functions that rotate a query and key (a vision tower's ``apply_rotary_pos_emb_vision``, Llama 4's
#: ``vision_apply_rotary_emb``)
APPLY = re.compile(r"\w*apply_rotary\w*|\w*apply_rope\w*")
#: the rotary apply calls kept per size: the first layer's (every layer of a tower rotates alike)
KEPT_CALLS = 1


class NotRun(Exception):
    """The model cannot be run generically on pixel, audio or feature inputs (the message says why)."""


@dataclass
class Capture:
    """One site at one input size: the owner's output tensors as run and with the site zeroed, and the site
    module's first input and output, as run and zeroed (empty where it is a bare parameter)."""

    owner_out: list[np.ndarray] = field(default_factory=list)
    owner_zeroed: list[np.ndarray] = field(default_factory=list)
    module_in: np.ndarray | None = None
    module_out: np.ndarray | None = None
    module_zeroed: np.ndarray | None = None
    #: the first site of an attention module: the logits its softmax is fed with the key projection zero and every
    #: query ``query``, at query rows ``logit_rows`` (:mod:`survey.pixel_logits`)
    logits: np.ndarray | None = None
    logit_rows: np.ndarray | None = None
    query: np.ndarray | None = None


@dataclass
class Site:
    """A position site: its path, its owner's path, whether it is a module, its parameters (stored, float32) and
    one capture per input size (``native``, ``resampled``)."""

    path: str
    owner: str
    is_module: bool
    params: dict[str, np.ndarray] = field(default_factory=dict)
    #: the parameters as the model's code initialised them, before the seeded draw (a sinusoid table's values)
    initial: dict[str, np.ndarray] = field(default_factory=dict)
    captures: dict[str, Capture] = field(default_factory=dict)
    #: where the owner's tensors were taken when not at its output (a bare table added in the owner's forward)
    at: str = ""


@dataclass
class PixelRun:
    """One vision, audio or feature model run: the input it takes, the shape fed at each size, its position sites,
    its attention modules' class names, and why a size was not run (``skipped``)."""

    model_class: str
    input_name: str
    shapes: dict[str, list[int]] = field(default_factory=dict)
    sites: list[Site] = field(default_factory=list)
    attention: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    resample_flag: bool = False
    #: the dtype the model ran in (``float64`` where its code runs in it)
    dtype: str = "float32"
    #: position modules the forward never reads (:func:`unread`), left out of :attr:`sites`
    unread: list[str] = field(default_factory=list)
    #: the rotary modules (:data:`ROTARY`), each a :class:`Site` whose capture at a size holds the position ids of
    #: its first call (``module_in``, as float64) and its cos and sin tables stacked (``module_out``, ``(2, …)``)
    rotary: list[Site] = field(default_factory=list)
    #: per size, the first calls of the model's rotary apply functions (:func:`rotations`)
    applied: dict[str, list[Applied]] = field(default_factory=dict)
    #: per size, the ``(t, h, w)`` grid a flattened-patch tower was fed with its ``hidden_states``
    grids: dict[str, list[int]] = field(default_factory=dict)
    #: the ``k × k`` blocks the model's config merges patches in (``spatial_merge_size``, 1 where unstated)
    merge: int = 1


def _ids(shape: tuple[int, ...], value: int) -> Any:
    import torch

    return torch.full(shape, value, dtype=torch.long)


def input_name(model: Any) -> str:
    """The model's main input (or its encoder's, where the model's is a generic ``inputs``) where it is one of
    :data:`INPUTS`, else the first of them its forward takes; :class:`NotRun` naming its parameters otherwise."""
    params = inspect.signature(model.forward).parameters
    main = (getattr(model, "main_input_name", None), getattr(getattr(model, "encoder", None), "main_input_name", None))
    for name in (*main, *INPUTS):
        if name in INPUTS and name in params:
            return name
    if all(name in params for name in FLAT_PATCHES):
        return FLAT_PATCHES[0]
    raise NotRun(f"its forward takes none of {', '.join(INPUTS)} ({', '.join(list(params)[:3])}, ...)")


def named_tensors(model: Any) -> dict[str, Any]:
    """Every parameter, buffer and plain tensor attribute of the model's modules (VideoMAE keeps its sinusoid table
    as an attribute), by its dotted path."""
    import torch

    found = dict(model.named_parameters()) | dict(model.named_buffers())
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not attr.startswith("_"):
                found.setdefault(f"{path}.{attr}" if path else attr, value)
    return found


def sites_of(model: Any) -> list[Site]:
    """The position sites of a model (module docstring), in the order of its parameters."""
    import torch

    found: dict[str, Site] = {}
    modules = dict(model.named_modules())
    for name, tensor in named_tensors(model).items():
        if not tensor.is_floating_point():
            continue
        parts = name.split(".")
        hit = next((i for i, part in enumerate(parts) if POSITION.search(part)), None)
        if hit is None:
            continue
        path = ".".join(parts[:hit + 1])
        site = found.get(path)
        if site is None:
            site = found[path] = Site(path, ".".join(parts[:hit]), path in modules)
        site.params[name] = tensor.detach().to(torch.float32).numpy().copy()
    return list(found.values())


def rebuild_zeros(model: Any, sites: list[Site]) -> None:
    """Build again, with the model's own ``_init_weights`` on the site's owner (its and its tensors' initialised
    flags cleared), a fixed table (a buffer or a parameter that is not trained) that is all zeros after the
    build: a model built from its config may mark a module initialised before the owner that fills its table
    runs (ViT-MAE's sin–cos table stays zeros), where a checkpoint holds what the owner's initialiser computes.
    An initialiser that fails leaves the table as it was."""
    import torch

    init = getattr(model, "_init_weights", None)
    modules = dict(model.named_modules())
    tensors = named_tensors(model)
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    for site in sites:
        if (init is None or site.owner not in modules or any(name in trained for name in site.params)
                or any(np.any(v) for v in site.params.values())):
            continue
        owner = modules[site.owner]
        for item in (*owner.modules(), *owner.parameters(), *owner.buffers()):
            if getattr(item, "_is_hf_initialized", False):
                item._is_hf_initialized = False
        torch.manual_seed(0)
        try:
            with torch.no_grad():
                init(owner)
        except Exception:  # transformers' initialiser of another module's layout: the table as built
            continue
        for name in site.params:
            site.params[name] = tensors[name].detach().to(torch.float32).numpy().copy()


def seed_sites(model: Any, sites: list[Site]) -> None:
    """Redraw every site's parameters (its trained weights; a buffer, a constant the code computes, is kept) from a
    seeded normal (std :data:`SITE_STD`), keeping the initial values, and store the drawn ones."""
    import torch

    generator = torch.Generator().manual_seed(37)
    tensors = dict(model.named_parameters())
    with torch.no_grad():
        for site in sites:
            for name in site.params:
                if name not in tensors:
                    continue
                tensor = tensors[name]
                site.initial[name] = site.params[name]
                tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=torch.float64).to(tensor.dtype)
                             * SITE_STD)
                site.params[name] = tensor.detach().to(torch.float32).numpy().copy()


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict) or hasattr(value, "to_tuple"):
        value = tuple(value.values()) if isinstance(value, dict) else value.to_tuple()
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _numpy(tensor: Any) -> np.ndarray | None:
    import torch

    if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or tensor.numel() > MAX_ELEMENTS:
        return None
    return tensor.detach().to(torch.float64 if tensor.dtype == torch.float64 else torch.float32).numpy().copy()


def _run(model: Any, inputs: dict[str, Any], sites: list[Site]) -> tuple[dict[str, list], dict[str, tuple]]:
    """One forward with every site's owner and module hooked: owner path -> its output tensors, site path ->
    ``(first input, output)``."""
    import torch

    modules = dict(model.named_modules())
    owners: dict[str, list] = {}
    io: dict[str, tuple] = {}
    handles = []
    for site in sites:
        if site.owner in modules and site.owner not in owners:
            owners[site.owner] = []
            first = first_layer(modules[site.owner]) if additive(site) else None
            if first is not None:  # a table the owner adds in its own forward: its first layer's input
                site.at = f"{site.owner}: the first layer's input"
                handles.append(first.register_forward_pre_hook(
                    lambda m, a, key=site.owner: owners[key].append(_tensors(a)[:1])))
            else:
                handles.append(modules[site.owner].register_forward_hook(
                    lambda m, a, out, key=site.owner: owners[key].append(_tensors(out))))
        if site.is_module:
            handles.append(modules[site.path].register_forward_hook(
                lambda m, a, out, key=site.path: None if key in io else io.update({key: (_tensors(a)[:1],
                                                                                        _tensors(out)[:1])})))
    with removed(handles), torch.no_grad():
        torch.manual_seed(0)  # a random masking draws the same patches in every run
        model(**inputs)
    return {k: v[0] if v else [] for k, v in owners.items()}, io


def rotations(model: Any, inputs: dict[str, Any]) -> list[Applied]:
    """One more forward with every rotary apply function (:data:`APPLY`) of transformers' modeling modules wrapped:
    the first :data:`KEPT_CALLS` calls' query and key before and after (the function's first two tensor arguments
    and its outputs), each as ``(tokens, head size)``: its first head of its first image (:func:`one_head`)."""
    import torch

    from survey.recorder import _modeling_modules, _np, _patched

    calls: list[Applied] = []

    def wrapped(name: str, original: Any) -> Any:
        def rotate(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            if len(calls) < KEPT_CALLS:
                before = [a for a in args if isinstance(a, torch.Tensor)][:2]
                after = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                         if isinstance(o, torch.Tensor)][:len(before)]
                calls.append(Applied(name, [one_head(_np(x)) for x in before], [one_head(_np(x)) for x in after],
                                     None))
            return out
        return rotate

    targets = [(module, name, wrapped(f"{module.__name__}.{name}", value)) for module in _modeling_modules()
               for name, value in list(vars(module).items())
               if APPLY.fullmatch(name) and callable(value) and not isinstance(value, type)]
    with _patched(targets), torch.no_grad():
        torch.manual_seed(0)
        model(**inputs)
    return calls


def one_head(x: np.ndarray) -> np.ndarray:
    """A query or key ``(B, H, N, D)``, ``(N, H, D)`` … as ``(N, D)``: the head size kept (last axis), the token
    axis (the longest of the others) kept, index 0 taken on every other axis (a batch of one, the first head)."""
    if x.ndim < 2:
        return x
    tokens = int(np.argmax(x.shape[:-1]))
    index = tuple(slice(None) if axis == tokens else 0 for axis in range(x.ndim - 1))
    return np.ascontiguousarray(x[index])


def first_layer(owner: Any) -> Any | None:
    """The first element of the first non-empty layer list among ``owner``'s children, where ``owner`` is not an
    embedding module (whose own output is what its table adds to); ``None`` otherwise."""
    import torch

    if "embed" in type(owner).__name__.lower():
        return None
    return next((child[0] for child in owner.children() if isinstance(child, torch.nn.ModuleList) and len(child)),
                None)


def additive(site: Site) -> bool:
    """Whether a site's owner output is captured (as run and with the site zeroed): a site outside attention,
    whose owner is an embedding rather than an attention module (a bias inside attention is not added to the
    owner's output)."""
    return not any(word in part.lower() for part in site.owner.split(".") for word in ("attn", "attention"))


def unread(site: Site) -> bool:
    """Whether a position module is no part of the forward: never called at any size, and the owner's tensors
    exactly the same with its weights zeroed (wav2vec2-Conformer's ``pos_conv_embed``, built and never called)."""
    def same(c: Capture) -> bool:
        return (c.module_in is None and c.module_out is None and bool(c.owner_out)
                and len(c.owner_out) == len(c.owner_zeroed)
                and all(np.array_equal(a, b) for a, b in zip(c.owner_out, c.owner_zeroed, strict=True)))
    return site.is_module and additive(site) and bool(site.captures) and all(map(same, site.captures.values()))


def capture(model: Any, inputs: dict[str, Any], sites: list[Site]) -> dict[str, Capture]:
    """Each site's :class:`Capture` at ``inputs``: one run as the model is, one more per site with it zeroed."""
    import torch

    owners, io = _run(model, inputs, [site for site in sites if additive(site) or site.is_module])
    logits = position_logits(model, inputs, [site.owner for site in sites if not additive(site)])
    tensors = named_tensors(model)
    out = {}
    for site in sites:
        if not additive(site):
            out[site.path] = Capture(module_in=_numpy(io[site.path][0][0]) if io.get(site.path, ([],))[0] else None,
                                     module_out=_numpy(io[site.path][1][0]) if io.get(site.path, ([], []))[1] else None)
            out[site.path].logits, out[site.path].logit_rows, out[site.path].query = logits.pop(site.owner,
                                                                                                (None,) * 3)
            continue
        saved = {name: tensors[name].detach().clone() for name in site.params}
        with torch.no_grad():
            for name in site.params:
                tensors[name].zero_()
        try:
            zeroed, io_zeroed = _run(model, inputs, [site])
        finally:
            with torch.no_grad():
                for name, value in saved.items():
                    tensors[name].copy_(value)
        pair, at_zero = io.get(site.path, ([], [])), io_zeroed.get(site.path, ([], []))[1]
        out[site.path] = Capture([a for a in map(_numpy, owners.get(site.owner, [])) if a is not None],
                                 [a for a in map(_numpy, zeroed.get(site.owner, [])) if a is not None],
                                 _numpy(pair[0][0]) if pair[0] else None, _numpy(pair[1][0]) if pair[1] else None,
                                 _numpy(at_zero[0]) if at_zero else None)
    return out


def rotary_sites(model: Any) -> list[Site]:
    """A :class:`Site` per rotary module of the model (:data:`ROTARY`), by its path."""
    return [Site(path, path.rpartition(".")[0], True) for path, module in model.named_modules()
            if ROTARY.search(type(module).__name__)]


def capture_rotary(model: Any, inputs: dict[str, Any], sites: list[Site]) -> dict[str, Capture]:
    """One forward with each rotary module hooked: its first call's integer input (the position ids) and its two
    floating outputs (cos and sin) stacked, by path; a module not called is absent."""
    import torch

    modules = dict(model.named_modules())
    seen: dict[str, Capture] = {}

    def hook(module: Any, args: tuple, kwargs: dict, out: Any, key: str) -> None:
        ids = next((t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)
                    and not t.is_floating_point()), None)
        tables = [a for a in map(_numpy, _tensors(out)) if a is not None][:2]
        if key not in seen and ids is not None and len(tables) == 2 and tables[0].shape == tables[1].shape:
            seen[key] = Capture(module_in=ids.detach().to(torch.float64).numpy().copy(), module_out=np.stack(tables))

    handles = [modules[site.path].register_forward_hook(
        lambda m, a, k, out, key=site.path: hook(m, a, k, out, key), with_kwargs=True) for site in sites]
    with removed(handles), torch.no_grad():
        model(**inputs)
    return seen


def observe_pixels(model: Any, config: Any) -> PixelRun:
    """Run ``model`` (built from ``config``) on seeded inputs at its native size and at a resampling size
    (:mod:`survey.pixel_inputs`) and record it (module docstring), in float64 where the model's code runs in it
    (each kind's bound is then float64's; float32 otherwise); :class:`NotRun` when no input runs."""
    import torch

    from survey.pixel_inputs import merge_size

    model.eval()
    name = input_name(model)
    record = PixelRun(type(model).__name__, name, attention=sorted(
        {type(m).__name__ for m in model.modules() if "Attention" in type(m).__name__}))
    record.sites = sites_of(model)
    record.rotary = rotary_sites(model)
    rebuild_zeros(model, record.sites)
    record.merge = merge_size(config)
    seed_sites(model, record.sites)  # float32 values: the same in a float64 run
    params = inspect.signature(model.forward).parameters
    record.resample_flag = "interpolate_pos_encoding" in params
    for dtype in (torch.float64, torch.float32):
        record.dtype = str(dtype).removeprefix("torch.")
        model.to(dtype)
        _run_sizes(model, config, record, params, dtype)
        if "native" in record.shapes:
            record.unread = [site.path for site in record.sites if unread(site)]
            record.sites = [site for site in record.sites if site.path not in record.unread]
            return record
    raise NotRun(f"no {name} shape ran ({record.skipped['native']})")


def _run_sizes(model: Any, config: Any, record: PixelRun, params: Any, dtype: Any) -> None:
    """Capture every site at each size of :func:`survey.pixel_inputs.candidates` (the first shape that runs)."""
    import torch

    from survey.pixel_inputs import candidates, image_grid_inputs, patch_grid

    record.shapes, record.skipped, record.applied, errors = {}, {}, {}, []
    for size, tries in candidates(record.input_name, config).items():
        for shape in tries:
            generator = torch.Generator().manual_seed(0)
            inputs = {record.input_name: torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)}
            if record.input_name == FLAT_PATCHES[0]:
                record.grids[size] = list(patch_grid(config, size))
                inputs[FLAT_PATCHES[1]] = torch.tensor([record.grids[size]], dtype=torch.long)
            for mask in MASKS:  # every frame (or pixel) is real: a mask of ones where the forward takes one
                if mask in params:
                    inputs[mask] = torch.ones(shape[:1] + shape[-1:], dtype=torch.long)
            inputs |= {name: make(shape, dtype) for name, make in COMPANIONS.items() if name in params}
            inputs.update(image_grid_inputs(params, config, shape))
            if size == "resampled" and record.resample_flag:
                inputs["interpolate_pos_encoding"] = True
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    captured = capture(model, inputs, record.sites)
                    record.applied[size] = rotations(model, inputs)
            except Exception as exc:  # transformers' own error for this shape: the next one
                errors.append(f"{list(shape)}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
                continue
            record.shapes[size] = list(shape)
            for site in record.sites:
                site.captures[size] = captured[site.path]
            if record.rotary:  # the rotary modules' tables, in one more forward
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tables = capture_rotary(model, inputs, record.rotary)
                for site in record.rotary:
                    if site.path in tables:
                        site.captures[size] = tables[site.path]
            break
        else:
            record.skipped[size] = "; ".join(errors[-2:]) or "no input shape to try"
        if size == "native" and size not in record.shapes:
            return


def build_pixels(config0: Any, max_parameters: int) -> tuple[Any, Any, PixelRun, str]:
    """``(config, model, record, strength)`` of the first strength of :data:`survey.tiny.STRENGTHS` that builds and
    runs on pixel, audio or feature inputs (:func:`observe_pixels`); :class:`NotRun` with every strength's reason
    otherwise."""
    import torch

    from survey import catalogue, tiny

    reasons = []
    for strength in tiny.STRENGTHS:
        try:
            try:
                config = tiny.shrink(_one_output(config0), strength)
            except Exception:  # a class whose validators insist on output stages: as it is
                config = tiny.shrink(config0, strength)
            cls = catalogue.model_class(config)
            if cls is None:
                raise NotRun("transformers has no model class for it")
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                size = sum(p.numel() for p in cls._from_config(config, attn_implementation="eager").parameters())
            if size > max_parameters:
                raise RuntimeError(f"{size / 1e6:.0f}M parameters")
            torch.manual_seed(0)
            model = cls._from_config(config, attn_implementation="eager")
            return config, model, observe_pixels(model, config), strength
        except NotRun as exc:
            if str(exc).startswith("its forward takes none"):
                raise
            reasons.append(f"{strength}: {exc}")
        except Exception as exc:  # transformers' own errors for a geometry: the next strength
            reasons.append(f"{strength}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    raise NotRun("no geometry built and ran on its inputs (" + "; ".join(reasons) + ")")


def _one_output(config0: Any) -> Any:
    """A backbone's config (or a model's backbone sub-config) with its output stages left to their default (the
    last): the tiny geometry cuts the stages that ``out_features`` names."""
    import copy

    config = copy.deepcopy(config0)
    for section in (config, *(v for v in vars(config).values() if hasattr(v, "to_dict") and hasattr(v, "model_type"))):
        for key in ("_out_features", "_out_indices", "out_features", "out_indices"):
            if vars(section).get(key) is not None:
                vars(section)[key] = None
    return config


def observed_labels(record: PixelRun) -> list[str]:
    """What the run showed, for the table's encoding column: the kinds of sites it found (a table added to the
    stack's input, a position module, a table inside attention), ``none`` (attention, no site) or ``no attention``."""
    labels = []
    for site in record.sites:
        fed = any(c.module_in is not None for c in site.captures.values())
        label = ("table at the input" if additive(site) and not fed else
                 "position module" if additive(site) else "position table in attention")
        if label not in labels:
            labels.append(label)
    return labels or (["none"] if record.attention else ["no attention"])


def observe_row(config0: Any, row: Any, max_parameters: int) -> tuple[dict[str, Any], PixelRun] | None:
    """The pixel, audio or feature side of a model type whose forward takes no token ids: ``(its tiny config
    dict, its record)``, the row's columns filled; ``None`` (the row's cause says why) when it cannot be run."""
    from survey import catalogue

    try:
        config, model, record, row.strength = build_pixels(config0, max_parameters)
    except NotRun as exc:
        if str(exc).startswith("its forward takes none"):  # no input the survey feeds: the row's reason stands
            return None
        if row.cause.startswith(f"transformers not run: {NO_TOKEN_IDS}"):  # the pixel run's reason is the row's
            row.cause = f"transformers not run: {exc}"
        else:
            row.notes.append(f"not run on pixel, audio or feature inputs either: {exc}")
        return None
    row.file = catalogue.modeling_file(type(model))
    row.observed = observed_labels(record)
    row.cause = ""
    row.notes = [f"{RUN_NOTE}{record.input_name} ({type(model).__name__}): "
                 + "; ".join(f"{size} {shape}" for size, shape in record.shapes.items())
                 + "".join(f"; {size} not run: {why}" for size, why in record.skipped.items())
                 + ("; position modules the forward never calls (left out): " + ", ".join(record.unread)
                    if record.unread else "")]
    return config.to_dict(), record
