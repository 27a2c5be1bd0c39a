"""transformers' side of the models whose forward takes pixel values, audio or features instead of token ids.

A vision or audio model type is built at the survey's tiny geometry (:mod:`survey.tiny`, the first strength that
builds; its base model, or the task class :data:`survey.catalogue.PIXEL_TASKS` names where only that holds the
attention), its parameters seeded, and run on seeded random inputs twice: at its native size and at a size that forces
its position encoding to be resampled (``interpolate_pos_encoding=True`` where its forward takes it, or passes it on
to a module that does), each fed what its forward needs beside the main input (:mod:`survey.pixel_beside`). What is
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
  patches) and doubled (whether it adds linearly: a table added before a normalisation in the same forward does
  not, :func:`survey.pixel_kinds.base.after_normalisation`), and, where the site is a module, its first input
  and its output (a convolutional position module as a function of its input);
* where a site is a bare tensor held by a module that holds nothing else (SAM's ``SamPositionalEmbedding``, its
  matrix ``G``; every module holding it, a tied copy too), every call of that module: its input and output
  (:attr:`Capture.calls`), and the prompts fed (:attr:`PixelRun.prompts`);
* the rotary modules (class names ``…RotaryEmbedding``): at each size, the position ids of their first call and
  the cos and sin tables it returned;
* the attention modules (class names with ``Attention``) and the input each size was fed;
* at each size, the first calls of the modeling module's rotary apply functions (:data:`APPLY`: a vision tower's
  RoPE), their query and key before and after (:func:`rotations`);
* at each size, each attention module's states and the inputs of its ``q_proj``, ``k_proj`` and ``v_proj`` at its
  first call (:func:`survey.pixel_query_key.capture_query_key`: what a position added inside attention gains them).

A vision tower fed flattened patches (its forward takes ``hidden_states`` or ``pixel_values`` beside a grid,
:data:`~survey.pixel_records.GRID_INPUTS`: Qwen2-VL's and the towers written after it) is given the patch rows and
the grid of :func:`survey.pixel_inputs.patch_grid` (two frames at the resampled size where its position ids carry
the frame index, :func:`survey.pixel_inputs.clip_frames`; the grid kept in :attr:`PixelRun.grids`; the merge size too
where the forward takes one, VideoLLaMA 3's). A model declaring an image input (``main_input_name``) whose forward
names it ``hidden_states`` (Florence-2's DaViT, PaddleOCR's detectors) is fed images under that name after every
shape of embeddings fails.

A model type the generic feeding cannot run (SpeechT5's base model, fed hidden states) is fed and recorded its own
way, keyed by its model type (:mod:`survey.keyed_runs`).

A position module the forward never calls, whose zeroing leaves its owner's tensors exactly as they were, is no
position of the model: it is left out of the sites and the row's note names it.

Nothing here asks refpos; :mod:`survey.pixel_compare` judges the record against refpos's answer.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

from survey.building import passed_on
from survey.keyed_runs import keyed
from survey.pixel_capture import (
    capture,
    capture_rotary,
    first_layer,
    named_tensors,
    one_head,
    rebuild_zeros,
    rotary_sites,
    rotations,
    seed_sites,
    sites_of,
)
from survey.pixel_query_key import capture_query_key
from survey.pixel_records import (
    APPLY,
    EMBEDDING_INPUTS,
    GENERIC_INPUTS,
    IMAGE_INPUTS,
    INPUTS,
    KEPT,
    NO_TOKEN_IDS,
    POSITION,
    PROMPTS,
    RUN_NOTE,
    STACK,
    Capture,
    NotRun,
    PixelRun,
    PositionCall,
    Site,
    additive,
    grid_input,
    observed_labels,
    patch_ids_input,
    unread,
)
from survey.pixel_stages import watch_cores

__all__ = ["APPLY", "INPUTS", "NO_TOKEN_IDS", "POSITION", "PROMPTS", "RUN_NOTE", "STACK", "Capture", "NotRun",
           "PixelRun", "PositionCall", "Site", "additive", "build_pixels", "capture", "capture_rotary", "first_layer",
           "input_name", "named_tensors", "observe_pixels", "observe_row", "observed_labels", "one_head",
           "rebuild_zeros", "rotary_sites", "rotations", "seed_sites", "sites_of", "unread"]

#: the errors of a size's first shapes kept in the record (the first shape's is the most telling: an image's)
SHOWN_ERRORS = 3
def input_name(model: Any) -> str:
    """The model's main input (or its encoder's, where the model's is a generic ``inputs``) where it is one of
    :data:`INPUTS`, else the first of them its forward takes; :class:`NotRun` naming its parameters otherwise."""
    params = inspect.signature(model.forward).parameters
    main = (getattr(model, "main_input_name", None), getattr(getattr(model, "encoder", None), "main_input_name", None))
    main = sorted(main, key=lambda name: name in GENERIC_INPUTS)  # an encoder's named input before a generic one
    for name in (*main, *INPUTS):
        if name in INPUTS and name in params:
            return name
    raise NotRun(f"its forward takes none of {', '.join(INPUTS)} ({', '.join(list(params)[:3])}, ...)")


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
    own = keyed(config)  # a model type the generic feeding cannot run (survey.keyed_runs)
    record.sites = sites_of(model) + ([] if own is None else own.sites(model))
    record.rotary = rotary_sites(model)
    rebuild_zeros(model, record.sites)
    record.merge = merge_size(config)
    seed_sites(model, record.sites)  # float32 values: the same in a float64 run
    params = inspect.signature(model.forward).parameters
    # the resampling switch, where the forward names it, or passes it on to a module that does (an encoder-decoder
    # of images hands its encoder every argument not meant for the decoder)
    switch = "interpolate_pos_encoding" in params or "interpolate_pos_encoding" in passed_on(model)
    for dtype in (torch.float64, torch.float32):
        record.dtype = str(dtype).removeprefix("torch.")
        cast(model, dtype)
        with watch_cores(model) as cores:  # the attention cores in their call order (survey.pixel_stages)
            _run_sizes(model, config, record, params, dtype, switch)
        if "native" in record.shapes:
            record.unread = [site.path for site in record.sites if unread(site)]
            record.sites = [site for site in record.sites if site.path not in record.unread]
            record.cores = cores.found()
            return record
    raise NotRun(f"no {name} shape ran ({record.skipped['native']})")


def cast(model: Any, dtype: Any) -> None:
    """``model``'s floating-point tensors cast to ``dtype`` and its complex ones to the complex type of that
    precision: ``Module.to(dtype)`` casts a complex buffer to the real ``dtype``, keeping its real part only (Llama
    4's vision tower keeps its rotation as a complex buffer ``freqs_ci``: cast that way, it turns each pair by
    ``cos φ`` alone, a scaling)."""
    import torch

    complex_of = {torch.float64: torch.complex128, torch.float32: torch.complex64}
    kept = {name: buffer for name, buffer in model.named_buffers() if buffer.is_complex()}
    model.to(dtype)
    for name, buffer in kept.items():
        owner, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(owner), attribute, buffer.to(complex_of[dtype]))


def _run_sizes(model: Any, config: Any, record: PixelRun, params: Any, dtype: Any, switch: bool = False) -> None:
    """Capture every site at each size of :func:`survey.pixel_inputs.candidates` (the first shape that runs); the
    resampled size fed the resampling ``switch`` where the forward takes it, and where only a module it passes its
    arguments on to takes it, its shapes tried again without it (:attr:`PixelRun.resample_flag`: whether the size
    that ran was fed it)."""
    import torch

    from survey.pixel_beside import Try, beside
    from survey.pixel_inputs import candidates, clip_frames, id_grid, number_patches, patch_grid
    from survey.pixel_shapes import shape_grid, shaped_candidates, shapes_input

    record.shapes, record.skipped, record.applied, errors = {}, {}, {}, []
    grid = grid_input(params)
    ids = patch_ids_input(params) is not None
    # patches fed with their image's (h, w) (survey.pixel_shapes)
    shaped = record.input_name == "pixel_values" and shapes_input(params) is not None
    frames = clip_frames(model) if grid is not None else 1  # a clip where the position ids read the frame axis
    sizes = shaped_candidates(config) if shaped else candidates(record.input_name, config, flat=grid is not None,
                                                                 ids=ids, frames=frames)
    declared = getattr(model, "main_input_name", None)
    if not shaped and grid is None and not ids and declared in IMAGE_INPUTS and (
            record.input_name in EMBEDDING_INPUTS):  # images under another name: tried after the embeddings
        images = candidates(declared, config)
        sizes = {size: [*shapes, *images[size]] for size, shapes in sizes.items()}
    own = keyed(config)  # a model type the generic feeding cannot run (survey.keyed_runs)
    sizes = own.shapes(config) if own is not None else sizes
    for size, tries in sizes.items():
        attempts = [(shape, switch) for shape in tries]
        if size == "resampled" and switch and "interpolate_pos_encoding" not in params:
            attempts += [(shape, False) for shape in tries]
        for shape, fed_switch in attempts:
            generator = torch.Generator().manual_seed(0)
            inputs = {record.input_name: torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)}
            if record.input_name == "flattened_patches":
                inputs[record.input_name] = number_patches(inputs[record.input_name])
            if grid is not None:  # flattened patches: their grid (fed beside them, survey.pixel_beside)
                record.grids[size] = list(patch_grid(config, size, frames))
            if ids:  # patches fed with their (x, y) ids: the grid of the real ones (the rest are padding)
                record.grids[size] = [1, *id_grid(config, size)[:2]]
            if shaped:  # patches fed with their image's (h, w): the grid of the real ones (the rest are padding)
                record.grids[size] = [1, *shape_grid(config, size)[:2]]
            inputs |= beside(Try(params, config, record.input_name, tuple(shape), size, dtype, record.merge,
                                 tuple(record.grids[size]) if grid is not None or shaped else None, fed_switch))
            inputs |= own.beside(config, dtype) if own is not None else {}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    captured = capture(model, inputs, record.sites)
                    if own is not None:
                        own.record(model, inputs, record.sites, captured)
                    record.applied[size] = rotations(model, inputs)
                    record.query_key[size] = capture_query_key(model, inputs)
            except Exception as exc:  # transformers' own error for this shape: the next one
                errors.append(f"{list(shape)}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
                continue
            record.shapes[size] = list(shape)
            record.prompts[size] = {name: inputs[name].detach().double().numpy() for name in KEPT if name in inputs}
            record.resample_flag = record.resample_flag or (size == "resampled" and fed_switch)
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
            record.skipped[size] = "; ".join(errors[:SHOWN_ERRORS]) or "no input shape to try"
        if size == "native" and size not in record.shapes:
            return


def build_pixels(config0: Any, max_parameters: int) -> tuple[Any, Any, PixelRun, str]:
    """``(config, model, record, strength)`` of the first strength of :data:`survey.tiny.STRENGTHS` that builds and
    runs on pixel, audio or feature inputs (:func:`observe_pixels`), each strength's configs in the order of
    :func:`_configs`; :class:`NotRun` with every try's reason otherwise."""
    import torch

    from survey import catalogue, tiny

    reasons = []
    for strength in tiny.STRENGTHS:
        try:
            configs = _configs(config0, strength)
        except Exception as exc:  # the class's validators refuse this strength: the next one
            reasons.append(f"{strength}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
            continue
        for label, config in configs:
            try:
                cls = catalogue.pixel_class(config)
                if cls is None:
                    raise NotRun("transformers has no model class for it")
                with torch.device("meta"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    size = sum(p.numel() for p in cls._from_config(config, attn_implementation="eager").parameters())
                if size > max_parameters:
                    raise RuntimeError(f"{size / 1e6:.0f}M parameters")
                torch.manual_seed(0)
                model = encoding(cls._from_config(config, attn_implementation="eager"))
                return config, model, observe_pixels(model, config), strength
            except NotRun as exc:
                if str(exc).startswith("its forward takes none"):
                    raise
                reasons.append(f"{label}: {exc}")
            except Exception as exc:  # transformers' own errors for a geometry: the next try
                reasons.append(f"{label}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    raise NotRun("no geometry built and ran on its inputs (" + "; ".join(reasons) + ")")


def encoding(model: Any) -> Any:
    """``model``, with its ``encode`` run as its forward where its class defines none (``torch.nn.Module``'s
    placeholder) but an ``encode`` (an image tokenizer's VQ-VAE: Chameleon's, Emu3's, whose encoder holds the
    attention blocks; the decoder is not run)."""
    import torch

    if type(model).forward is torch.nn.Module.forward and callable(getattr(model, "encode", None)):
        model.forward = model.encode
    return model


def _configs(config0: Any, strength: str) -> list[tuple[str, Any]]:
    """``(label, config)`` to try at ``strength``: with one output stage (:func:`_one_output`), then, where that
    differs, with the output stages its class states (a depth model's neck reads one hidden state per stage); as it
    is alone where the class's validators refuse one output stage; each with its model type's pixel-side repairs
    (:func:`survey.pixel_repairs.repair`)."""
    from survey import tiny
    from survey.pixel_repairs import repair

    own = repair(tiny.shrink(config0, strength))
    try:
        one = repair(tiny.shrink(_one_output(config0), strength))
    except Exception:  # a class whose validators insist on output stages: as it is
        return [(strength, own)]
    if one.to_dict() == own.to_dict():
        return [(strength, one)]
    return [(strength, one), (f"{strength} with its output stages", own)]


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
            cause = f"transformers not run: {exc}"  # in its notes too: a refusal replaces the row's cause
            row.notes = [cause if note == row.cause else note for note in row.notes]
            row.cause = cause
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
