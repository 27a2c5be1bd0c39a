"""How a vision, audio or feature run is recorded (:mod:`survey.pixels`): its position sites found by name and
seeded (:func:`sites_of`, :func:`seed_sites`, :func:`rebuild_zeros`), and the hooks that record, at one size,
what each site's owner computes with and without the site, and with it doubled (:func:`capture`, with every
call of a module that computes with a site's bare tensors alone: :func:`position_modules`), the rotary modules' tables
(:func:`capture_rotary`) and the rotary apply calls (:func:`rotations`).

Every hook is removed however the forward ends (:func:`survey.probe.removed`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from survey.pixel_logits import position_logits
from survey.pixel_records import (
    APPLY,
    KEPT_CALLS,
    MAX_ELEMENTS,
    POSITION,
    POSITION_CALLS,
    ROTARY,
    SITE_STD,
    Capture,
    PositionCall,
    Site,
    additive,
)
from survey.probe import Applied, removed


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


def position_modules(model: Any, site: Site) -> list[str]:
    """The paths of the modules that hold one of a bare site's tensors and nothing else: no child module, every
    parameter and buffer of their own the site's (SAM's ``shared_image_embedding`` and the prompt encoder's
    ``shared_embedding``, which hold one tied ``positional_embedding``). Such a module is a function of its input
    computed with the site's weights: its calls are what the site computes (:attr:`Capture.calls`)."""
    if site.is_module:
        return []
    tensors = named_tensors(model)
    mine = {id(tensors[name]) for name in site.params if name in tensors}
    found = []
    for path, module in model.named_modules():
        own = [t for t in (*module._parameters.values(), *module._buffers.values()) if t is not None]
        if own and not any(True for _ in module.children()) and all(id(t) in mine for t in own):
            found.append(path)
    return found


def _run(model: Any, inputs: dict[str, Any], sites: list[Site], calls: dict[str, str] | None = None
         ) -> tuple[dict[str, list], dict[str, tuple]]:
    """One forward with every site's owner and module hooked: owner path -> its output tensors, site path ->
    ``(first input, output)``; each module of ``calls`` (module path -> site path) hooked too, its calls (the
    first :data:`POSITION_CALLS` of the site's modules) appended to the site's list under ``io[("calls", site
    path)]``."""
    import torch

    modules = dict(model.named_modules())
    owners: dict[str, list] = {}
    io: dict[Any, Any] = {}
    handles = []
    for module, path in (calls or {}).items():
        kept = io.setdefault(("calls", path), [])
        handles.append(modules[module].register_forward_hook(
            lambda m, a, out, key=module, kept=kept: kept.append(_call(key, a, out))
            if len(kept) < POSITION_CALLS else None))
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


def _call(module: str, args: tuple, out: Any) -> PositionCall | None:
    """A :class:`PositionCall` of the module's first floating input and its output (``None`` without either)."""
    first = next((a for a in map(_numpy, _tensors(args)) if a is not None), None)
    output = next((a for a in map(_numpy, _tensors(out)) if a is not None), None)
    return None if first is None or output is None else PositionCall(module, first, output)


#: the rotary functions that turn one block of a query or key at one axis's positions, given as an integer tensor
#: (V-JEPA 2's ``rotate_queries_or_keys(x, pos=…)``, called once per axis), wrapped beside :data:`APPLY`
BLOCK_APPLY = re.compile(r"rotate_queries\w*")
#: the calls kept per function and shape, each at other positions: one per axis of a 3-D rotation
AXES = 3


def rotations(model: Any, inputs: dict[str, Any]) -> list[Applied]:
    """One more forward with every rotary apply function (:data:`APPLY`, :data:`BLOCK_APPLY`) of transformers'
    modeling modules wrapped: the query and key before and after (the function's first two tensor arguments and its
    outputs), each as ``(tokens, head size)``: its first head of its first image (:func:`one_head`), of the first
    call of each function, query shape and integer tensor arguments (positions: V-JEPA 2 turns a layer's three axis
    blocks, of one shape, at the frame's, the row's and the column's; their digests kept as the call's ``tables``),
    for at most :data:`KEPT_CALLS` functions and shapes, :data:`AXES` calls each (a call given no tensor by position
    not kept)."""
    import torch

    from survey.recorder import _modeling_modules, _np, _patched, digest, squeezed

    calls: list[Applied] = []
    seen: set[tuple[str, tuple[int, ...], tuple[str, ...]]] = set()
    shapes: dict[tuple[str, tuple[int, ...]], int] = {}  # calls kept per function and shape

    def wrapped(name: str, original: Any) -> Any:
        def rotate(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            before = [a for a in args if isinstance(a, torch.Tensor)][:2]
            if not before:
                return out
            shape = (name, tuple(before[0].shape))
            count = table_tokens([a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)][2:])
            at = tuple(digest(squeezed(_np(a))) for a in (*args, *kwargs.values())
                       if isinstance(a, torch.Tensor) and not a.is_floating_point() and not a.is_complex())
            room = shapes.get(shape, 0) < AXES and (shape in shapes or len(shapes) < KEPT_CALLS)
            if (*shape, at) not in seen and room:
                seen.add((*shape, at))
                shapes[shape] = shapes.get(shape, 0) + 1
                after = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                         if isinstance(o, torch.Tensor)][:len(before)]
                heads_first = "vision" not in name.rsplit(".", 1)[-1]  # one_head: transformers' two conventions
                calls.append(Applied(name, [one_head(_np(x), count, heads_first) for x in before],
                                     [one_head(_np(x), count, heads_first) for x in after], None, tables=list(at)))
            return out
        return rotate

    targets = [(module, name, wrapped(f"{module.__name__}.{name}", value)) for module in _modeling_modules()
               for name, value in list(vars(module).items())
               if (APPLY.fullmatch(name) or BLOCK_APPLY.fullmatch(name)) and callable(value)
               and not isinstance(value, type)]
    with _patched(targets), torch.no_grad():
        torch.manual_seed(0)
        model(**inputs)
    return calls


def table_tokens(others: list[Any]) -> int | None:
    """The token count of a rotary apply function's tables (its floating tensor arguments after the query and
    key: ``cos`` ``(B, N, D)``, ``(N, D)``, a complex ``(N, D/2)`` …): the longest axis but the last, the largest
    over the tables; None where the call was handed none (positions as integers: V-JEPA 2's)."""
    counts = [max(t.shape[:-1]) for t in others if (t.is_floating_point() or t.is_complex()) and t.ndim >= 2]
    return max(counts) if counts else None


def one_head(x: np.ndarray, tokens: int | None = None, heads_first: bool = True) -> np.ndarray:
    """A query or key ``(B, H, N, D)``, ``(B, N, H, D)``, ``(N, H, D)`` … as ``(N, D)``: the head size kept (last
    axis), the token axis kept, index 0 taken on every other axis (a batch of one, the first head).

    The token axis is the one of length ``tokens`` (the call's tables' token count, :func:`table_tokens`). Where
    several axes have that length (as many heads as tokens) the shapes cannot tell: transformers' text apply
    functions take ``(B, H, N, D)`` (their tables unsqueezed at the heads' axis 1: ``heads_first``, the last of
    them), its vision ones ``(B, N, H, D)`` and ``(N, H, D)`` (unsqueezed at −2: the first). Where no axis has it,
    or ``tokens`` is None (a call handed no tables), the longest axis."""
    if x.ndim < 2:
        return x
    lengths = x.shape[:-1]
    matching = [axis for axis, n in enumerate(lengths) if tokens is not None and n == tokens]
    if matching:
        tokens = matching[-1] if heads_first else matching[0]
    else:
        tokens = int(np.argmax(lengths))
    index = tuple(slice(None) if axis == tokens else 0 for axis in range(x.ndim - 1))
    return np.ascontiguousarray(x[index])


#: the names of the layer list a tower's forward runs its patches through, taken before any other list (Qwen3-Omni's
#: vision encoder holds its deep-stack mergers in a list registered before its blocks)
LAYER_LISTS = ("layers", "blocks", "layer", "block")


def first_layer(owner: Any) -> Any | None:
    """The first element of ``owner``'s layer list (a non-empty child list named in :data:`LAYER_LISTS`, else the
    first non-empty child list), where ``owner`` is not an embedding module (whose own output is what its table
    adds to); ``None`` otherwise."""
    import torch

    if "embed" in type(owner).__name__.lower():
        return None
    lists = {name: child for name, child in owner.named_children() if isinstance(child, torch.nn.ModuleList)
             and len(child)}
    chosen = next((lists[name] for name in LAYER_LISTS if name in lists), next(iter(lists.values()), None))
    return None if chosen is None else chosen[0]


def _scaled(model: Any, inputs: dict[str, Any], site: Site, tensors: dict[str, Any], factor: float
            ) -> tuple[dict[str, list], dict[str, tuple]]:
    """:func:`_run` of ``site`` alone with its parameters times ``factor`` (zeroed, or doubled), restored after."""
    import torch

    saved = {name: tensors[name].detach().clone() for name in site.params}
    with torch.no_grad():
        for name in site.params:
            tensors[name].mul_(factor) if factor else tensors[name].zero_()
    try:
        return _run(model, inputs, [site])
    finally:
        with torch.no_grad():
            for name, value in saved.items():
                tensors[name].copy_(value)


def capture(model: Any, inputs: dict[str, Any], sites: list[Site]) -> dict[str, Capture]:
    """Each site's :class:`Capture` at ``inputs``: one run as the model is, two more per additive site, with its
    parameters zeroed and doubled (whether what the owner records is linear in them)."""
    calls = {module: site.path for site in sites for module in position_modules(model, site)}
    owners, io = _run(model, inputs, [site for site in sites if additive(site) or site.is_module], calls)
    logits, raised = position_logits(model, inputs, [site.owner for site in sites if not additive(site)])
    tensors = named_tensors(model)
    out = {}
    for site in sites:
        if not additive(site):
            out[site.path] = Capture(module_in=_numpy(io[site.path][0][0]) if io.get(site.path, ([],))[0] else None,
                                     module_out=_numpy(io[site.path][1][0]) if io.get(site.path, ([], []))[1] else None)
            out[site.path].logits, out[site.path].logit_rows, out[site.path].query = logits.pop(site.owner,
                                                                                                (None,) * 3)
            out[site.path].logits_raised = raised
            continue
        zeroed, io_zeroed = _scaled(model, inputs, site, tensors, 0.0)
        doubled, _ = _scaled(model, inputs, site, tensors, 2.0)  # the linearity probe
        pair, at_zero = io.get(site.path, ([], [])), io_zeroed.get(site.path, ([], []))[1]
        out[site.path] = Capture([a for a in map(_numpy, owners.get(site.owner, [])) if a is not None],
                                 [a for a in map(_numpy, zeroed.get(site.owner, [])) if a is not None],
                                 _numpy(pair[0][0]) if pair[0] else None, _numpy(pair[1][0]) if pair[1] else None,
                                 _numpy(at_zero[0]) if at_zero else None,
                                 owner_doubled=[a for a in map(_numpy, doubled.get(site.owner, [])) if a is not None
                                                ][:1])
    for site in sites:
        out[site.path].calls = [call for call in io.get(("calls", site.path), []) if call is not None]
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
