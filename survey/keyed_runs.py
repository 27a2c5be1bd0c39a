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
    inputs fed beside the main one) and ``record(model, inputs, sites, captured)`` (what is recorded beyond the
    generic captures, into ``captured``)."""

    shapes: Callable[[Any], dict[str, list[tuple[int, ...]]]]
    beside: Callable[[Any, Any], dict[str, Any]]
    record: Callable[[Any, dict[str, Any], list[Site], dict[str, Capture]], None]


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


#: model type -> its own feeding
KEYED: dict[str, Keyed] = {"speecht5": Keyed(_speecht5_shapes, _speecht5_beside, record_fed_logits)}


def keyed(config: Any) -> Keyed | None:
    """The own feeding of ``config``'s model type, ``None`` for the generic one."""
    return KEYED.get(getattr(config, "model_type", None))


__all__ = ["DECODER_STEPS", "KEYED", "PAST_CLIP", "Keyed", "fed_attention", "keyed", "record_fed_logits"]
