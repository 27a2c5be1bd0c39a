r"""The audio runs of model types whose base model the generic feeding cannot run (:mod:`survey.pixels`), each keyed
by its model type in :data:`KEYED`: the shapes it is fed, what it is fed beside them, and what is recorded beyond
the generic captures.

``speecht5``: ``SpeechT5Model`` holds no prenet: its encoder (``SpeechT5EncoderWithoutPrenet``) takes the hidden
states ``(1, T, hidden_size)`` as its ``input_values`` (no waveform), its decoder (``SpeechT5DecoderWithoutPrenet``)
the hidden states ``decoder_input_values`` ``(1, 4, hidden_size)`` (seeded; without them its forward fails). The
frames are ``T = M + 8`` and ``M + 24`` (``M = encoder_max_relative_position``): every distance beyond the table's
clip ``−M … M − 1`` then occurs on both sides, so a clip read one frame off shows. The encoder computes the rows
its layers read once (``SpeechT5RelativePositionalEncoding``, outside attention) and hands them to every layer's
attention; no attention module holds the table, so the generic logits (:mod:`survey.pixel_logits`, recorded for
the attention modules that hold a site) are not recorded. Here they are: for each module site whose output an
attention module is fed (found by identity of the tensor handed on), the logits each such module's softmax is fed
with the key projection zero and every query one seeded vector ``c`` (:func:`survey.pixel_logits.position_logits`),
kept on the site's capture as one :class:`~survey.pixel_records.PositionCall` per attention module: its path, ``c``
and its logits ``(matrices, T, T)`` (every query row: the heads of one input fit
:data:`survey.pixel_logits.ELEMENTS`; a module whose rows were thinned is left out).

``phi4_multimodal_audio``: its encoder subsamples the frames by ``time_reduction`` (8) before the layers, so the
generic 16 and 24 feature frames are 2 and 3 frames there; it is fed ``time_reduction · 40`` and ``· 60`` frames of
``input_size`` features (40 and 60 frames in the layers). Its one table, ``relative_attention_bias_layer`` (a name
:data:`survey.pixel_records.POSITION` does not match), is made a site of its own (and so seeded, captured and
accounted for). The encoder adds the table's bias to the boolean streaming mask and hands the sum to every layer's
attention as its ``attention_mask``: the additive term itself, recorded as it is fed to each attention module
(:func:`record_fed_masks`), one :class:`~survey.pixel_records.PositionCall` per module (its path, no input, the
mask ``(1, H, T, T)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from survey.pixel_records import Capture, PositionCall, Site
from survey.seeded import seeded_normal

#: the decoder steps fed beside an encoder's frames
DECODER_STEPS = 4
#: the frames past the table's clip fed at the native and the resampled size
PAST_CLIP = (8, 24)


@dataclass(frozen=True)
class Keyed:
    """A model type's own feeding: ``shapes(config)`` (size -> the shapes tried), ``beside(config, dtype)`` (the
    inputs fed beside the main one), ``record(model, inputs, sites, captured)`` (what is recorded beyond the
    generic captures, into ``captured``) and ``sites(model)`` (its position sites the generic names miss)."""

    shapes: Callable[[Any], dict[str, list[tuple[int, ...]]]]
    beside: Callable[[Any, Any], dict[str, Any]]
    record: Callable[[Any, dict[str, Any], list[Site], dict[str, Capture]], None]
    sites: Callable[[Any], list[Site]] = lambda model: []


def _speecht5_shapes(config: Any) -> dict[str, list[tuple[int, ...]]]:
    clip = int(config.encoder_max_relative_position)
    return {size: [(1, clip + past, int(config.hidden_size))]
            for size, past in zip(("native", "resampled"), PAST_CLIP, strict=True)}


def _speecht5_beside(config: Any, dtype: Any) -> dict[str, Any]:
    return {"decoder_input_values": seeded_normal(7, 1, DECODER_STEPS, int(config.hidden_size)).to(dtype)}


def fed_attention(model: Any, inputs: dict[str, Any], sites: list[Site]) -> dict[str, list[str]]:
    """Module site path -> the attention modules (class names with ``Attention``) fed its output, in call order, in
    one forward."""
    import torch

    from survey.probe import removed

    modules = dict(model.named_modules())
    outputs: dict[str, Any] = {}
    fed: dict[str, list[str]] = {}

    def produced(path: str, out: Any) -> None:
        if isinstance(out, torch.Tensor):
            outputs[path] = out

    def entered(path: str, args: tuple, kwargs: dict) -> None:
        handed = [*args, *kwargs.values()]
        for site, out in outputs.items():
            if any(value is out for value in handed) and path not in fed.setdefault(site, []):
                fed[site].append(path)

    handles = [modules[s.path].register_forward_hook(lambda m, a, out, p=s.path: produced(p, out))
               for s in sites if s.is_module and s.path in modules]
    handles += [module.register_forward_pre_hook(lambda m, a, k, p=path: entered(p, a, k), with_kwargs=True)
                for path, module in modules.items() if "Attention" in type(module).__name__]
    with removed(handles), torch.no_grad():
        model(**inputs)
    return {site: paths for site, paths in fed.items() if paths}


def record_fed_logits(model: Any, inputs: dict[str, Any], sites: list[Site], captured: dict[str, Capture]) -> None:
    """Each module site's capture gains the logits of every attention module fed its output (module docstring)."""
    from survey.pixel_logits import position_logits

    for site, paths in fed_attention(model, inputs, sites).items():
        logits, _ = position_logits(model, inputs, paths)
        calls = []
        for path in paths:
            if path not in logits:
                continue
            kept, rows, query = logits[path]
            if len(rows) == kept.shape[-2]:  # every query row kept
                calls.append(PositionCall(path, np.asarray(query), kept))
        captured[site].calls = calls


#: Phi-4's subsampled frames in the layers at the native and the resampled size
PHI4_FRAMES = (40, 60)


def _phi4_shapes(config: Any) -> dict[str, list[tuple[int, ...]]]:
    reduction, width = int(config.time_reduction), int(config.input_size)
    return {size: [(1, reduction * frames, width)] for size, frames in zip(("native", "resampled"), PHI4_FRAMES,
                                                                          strict=True)}


def _phi4_sites(model: Any) -> list[Site]:
    """The module holding Phi-4's table, as a site (its parameters float32, as :func:`sites_of` keeps them)."""
    import torch

    path = "relative_attention_bias_layer"
    module = dict(model.named_modules()).get(path)
    if module is None:
        return []
    return [Site(path, "", True, {f"{path}.{name}": p.detach().to(torch.float32).numpy().copy()
                                  for name, p in module.named_parameters()})]


def record_fed_masks(model: Any, inputs: dict[str, Any], sites: list[Site], captured: dict[str, Capture]) -> None:
    """Each module site's capture gains the floating ``attention_mask`` every attention module is fed, in call
    order (module docstring); the modules of :func:`fed_attention`'s kind: class names with ``Attention``."""
    import torch

    from survey.probe import removed

    fed: list[PositionCall] = []

    def entered(path: str, module: Any, args: tuple, kwargs: dict) -> None:
        import inspect

        mask = inspect.signature(module.forward).bind(*args, **kwargs).arguments.get("attention_mask")
        if isinstance(mask, torch.Tensor) and mask.is_floating_point():
            fed.append(PositionCall(path, np.zeros(0), mask.detach().to(torch.float64).numpy().copy()))

    handles = [module.register_forward_pre_hook(lambda m, a, k, p=path: entered(p, m, a, k), with_kwargs=True)
               for path, module in model.named_modules() if "Attention" in type(module).__name__]
    with removed(handles), torch.no_grad():
        model(**inputs)
    for site in sites:
        if site.is_module:
            captured[site.path].calls = list(fed)


#: model type -> its own feeding
KEYED: dict[str, Keyed] = {"speecht5": Keyed(_speecht5_shapes, _speecht5_beside, record_fed_logits),
                           "phi4_multimodal_audio": Keyed(_phi4_shapes, lambda config, dtype: {}, record_fed_masks,
                                                          _phi4_sites)}


def keyed(config: Any) -> Keyed | None:
    """The own feeding of ``config``'s model type, ``None`` for the generic one."""
    return KEYED.get(getattr(config, "model_type", None))


__all__ = ["DECODER_STEPS", "KEYED", "PAST_CLIP", "PHI4_FRAMES", "Keyed", "fed_attention", "keyed", "record_fed_logits",
           "record_fed_masks"]
