"""How the survey builds a model type's model: which class, from which config, fed how.

:func:`model_class` finds the class (the auto classes', else the one base model of the type's package whose
config class is the type's: BLIP's text model lives in ``modeling_blip_text.py``); :func:`held_config` the config
it is built from (a composite type's class may be one of its networks: MusicGen's is its decoder);
:func:`language_path` a composite's language model (its ``text_config``, or its thinker's); and
:func:`fed` wraps a model whose forward refuses input ids while it takes their embeddings, or needs inputs beside
them (:data:`COMPANIONS`: an encoder's output, retrieved documents, a time conditioning).
:func:`survey.run.build` tries the tiny geometry's strengths with these.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from survey import catalogue, tiny
from survey.seeded import seeded_normal, seeded_uniform

#: the sub-config holding a composite model's language model (the one refpos resolves for the composite)
LANGUAGE = "text_config"


def parameter_count(cls: Any, config: Any) -> int:
    import torch

    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls._from_config(config, attn_implementation="eager")
    return sum(p.numel() for p in model.parameters())


def model_class(config: Any) -> Any | None:
    """The model class of ``config`` (:func:`survey.catalogue.model_class`), else the one base model of another
    modeling module of its package whose config class is ``config``'s (BLIP's text model lives in
    ``modeling_blip_text.py`` beside ``modeling_blip.py``), or None."""
    import importlib
    import pkgutil

    from transformers import PreTrainedModel

    found = catalogue.model_class(config)
    package = type(config).__module__.rsplit(".", 1)[0]
    if found is not None or not package.startswith("transformers.models."):
        return found
    heads = ("For", "LMHead", "WithHead", "PreTrainedModel")
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if not info.name.startswith("modeling_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        candidates = sorted((cls for cls in vars(module).values() if isinstance(cls, type)
                             and issubclass(cls, PreTrainedModel) and cls.__module__ == module.__name__
                             and getattr(cls, "config_class", None) is type(config)
                             and not any(h in cls.__name__ for h in heads)), key=lambda cls: len(cls.__name__))
        if candidates:
            return candidates[0]
    return None


def held_config(cls: Any, config: Any) -> Any:
    """The config model class ``cls`` is built from: ``config``, or the sub-config of the class ``cls`` takes,
    where a composite type's model class is one of its networks (MusicGen's base model is its decoder:
    ``MusicgenModel`` takes the ``MusicgenDecoderConfig`` of ``MusicgenConfig.decoder``). refpos is still asked
    about the composite, whose stack of that name the run is compared with."""
    wanted = getattr(cls, "config_class", None)
    if not isinstance(wanted, type) or isinstance(config, wanted):
        return config
    return next((c for c in tiny.configs_of(config) if isinstance(c, wanted)), config)


class NoModelClass(Exception):
    """A config transformers has no model class for (:func:`model_class` found none)."""


def tiny_model(config0: Any, strength: str, max_parameters: int) -> tuple[Any, Any, Any, Any]:
    """``(config, cls, held, model)``: ``config0`` shrunk to ``strength`` (:func:`survey.tiny.shrink`), its model
    class (:func:`model_class`), the config that class is built from (:func:`held_config`), and the model built
    from it eagerly at seed 0. :class:`NoModelClass` when the config has none, a ``RuntimeError`` naming the
    size when the model would hold more than ``max_parameters``."""
    import torch

    config = tiny.shrink(config0, strength)
    cls = model_class(config)
    if cls is None:
        raise NoModelClass(f"no model class for {type(config).__name__}")
    held = held_config(cls, config)
    size = parameter_count(cls, held)
    if size > max_parameters:
        raise RuntimeError(f"{size / 1e6:.0f}M parameters")
    torch.manual_seed(0)
    return config, cls, held, cls._from_config(held, attn_implementation="eager")


def token_embedding(model: Any) -> Any:
    """The token embedding of ``model`` (the first of a list: one per codebook), or None."""
    import torch

    table = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if isinstance(table, torch.nn.ModuleList) and len(table):
        table = table[0]
    return table if isinstance(table, torch.nn.Embedding) else None


def _width(config: Any) -> int:
    """The model width of ``config`` (its ``hidden_size``, else its language model's)."""
    return getattr(config, "hidden_size", None) or language_config(config).hidden_size


def _retrieved(config: Any, ids: Any, mask: Any) -> dict[str, Any]:
    """RAG without a retriever: the question's ids as its one retrieved document, their mask, a score."""
    import torch

    return {"context_input_ids": ids, "context_attention_mask": torch.ones_like(ids) if mask is None else mask,
            "doc_scores": torch.zeros((ids.shape[0], 1)), "n_docs": 1}


def _boxes(config: Any, ids: Any, mask: Any) -> dict[str, Any]:
    """A document model's boxes, one per token: seeded corners ``(x0, y0, x1, y1)`` in [0, 1), each ordered."""
    import torch

    corners = seeded_uniform(3, *ids.shape, 2, 2)
    low, high = corners.min(dim=-2).values, corners.max(dim=-2).values
    return {"bbox": torch.cat([low, high], dim=-1)}


def _regions(config: Any, ids: Any, mask: Any) -> dict[str, Any]:
    """LXMERT's image side: four seeded region features of ``visual_feat_dim`` and their boxes."""
    regions = 4
    return {"visual_feats": seeded_normal(4, ids.shape[0], regions, config.visual_feat_dim),
            "visual_pos": seeded_uniform(5, ids.shape[0], regions, config.visual_pos_dim)}


def _image(config: Any, ids: Any, mask: Any) -> dict[str, Any]:
    """One seeded image at the config's (or its vision config's) ``image_size``: ViLT's text and patches share
    one encoder, which refuses text alone."""
    vision = getattr(config, "vision_config", None) or config
    size = vision.image_size if isinstance(vision.image_size, int) else vision.image_size[0]
    return {"pixel_values": seeded_normal(6, ids.shape[0], getattr(vision, "num_channels", 3), size, size)}


def _one_tower(config: Any) -> bool:
    """Whether a model reads text and image in one network: its config holds no vision tower's (a composite of
    towers that refuses text alone is run as its language model alone: :func:`survey.run.build_language_model`)."""
    return getattr(config, "vision_config", None) is None


@dataclass(frozen=True)
class Companion:
    """An input a forward needs beside the ids: why, and the keyword arguments fed, as a function of the config
    and the call's ids and mask (so each case of :mod:`survey.cases` gets them at its length). ``when_named``:
    fed only where the forward's error on ids alone names the input (an input many forwards take and leave
    optional, such as an image, is fed only to the one that asked for it)."""

    why: str
    make: Any
    when_named: bool = False
    #: whether a model may be fed it (None: any model whose forward takes it)
    fits: Any = None


#: inputs a forward needs beside the ids (the forward fails without them), each fed seeded: the forward parameter
#: that names it -> its :class:`Companion`
COMPANIONS: dict[str, Companion] = {
    "encoder_hidden_states": Companion("a decoder whose layers attend to an encoder's output (T5Gemma2's decoder)",
                                       lambda config, ids, mask: {"encoder_hidden_states": seeded_normal(
                                           1, *ids.shape, _width(config))}),
    "t_cond": Companion("a decoder whose norms are scaled by a time conditioning its composite computes (Voxtral "
                        "Realtime's text model)",
                        lambda config, ids, mask: {"t_cond": seeded_normal(2, 1, _width(config))}),
    "context_input_ids": Companion("a retrieval model's generator that reads retrieved documents (RAG, no "
                                   "retriever)", _retrieved),
    "bbox": Companion("a document model that reads a box beside each token (Bros, UDOP)", _boxes, when_named=True),
    "visual_feats": Companion("a cross-modal encoder that reads image regions beside the text (LXMERT)", _regions,
                              when_named=True),
    "pixel_values": Companion("an encoder of text and image patches together that refuses text alone (ViLT)",
                              _image, when_named=True, fits=lambda model: _one_tower(getattr(model, "config", None))),
}


def companions(model: Any, error: str = "") -> list[str]:
    """The :data:`COMPANIONS` that ``model``'s forward names (those fed ``when_named`` only where ``error``, the
    forward's error on ids alone, names them too, and the forward names ``input_ids``); where it names none and
    passes its other keyword arguments on (``**kwargs``), those a forward of its modules names (Voxtral Realtime's
    text model hands ``t_cond`` to its layers through them)."""
    import inspect

    params = inspect.signature(model.forward).parameters

    def wanted(name: str) -> bool:  # one fed when named: only to a forward of token ids that named it
        companion = COMPANIONS[name]
        if companion.fits is not None and not companion.fits(model):
            return False
        return not companion.when_named or ("input_ids" in params and name.lower() in error.lower())

    named = [name for name in COMPANIONS if name in params and wanted(name)]
    if named:
        return named
    inner = passed_on(model)
    return [name for name in COMPANIONS if name in inner and wanted(name)]


def passed_on(model: Any) -> set[str]:
    """The parameter names a forward of ``model``'s modules takes, where ``model``'s own forward passes its other
    keyword arguments on (``**kwargs``: a composite handing them to its encoder or layers); empty where it takes
    none it does not name."""
    import inspect

    params = inspect.signature(model.forward).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return set()
    return {name for module in model.modules() if module is not model
            for name in inspect.signature(module.forward).parameters}


def fed(model: Any, config: Any, embeddings: bool = False, error: str = "") -> Any:
    """``model`` wrapped so that the probe's ids reach a forward that needs more than them.

    ``embeddings``: a forward that refuses input ids while it takes ``inputs_embeds`` (Qwen3-Omni's code
    predictor, which the talker feeds embeddings) gets the ids looked up in its own embedding table
    (:func:`token_embedding`). Every :data:`COMPANIONS` entry the forward takes (:func:`companions`: those fed when
    named, where ``error`` names them) is fed beside them, computed from
    ``config`` and the call's ids and mask. The mask, position ids, decoder ids and cache switch pass as they are,
    those the model takes (the wrapper's signature names no others).
    The wrapper holds the model as ``model``: the path names no stack, so its layers keep theirs."""
    import inspect

    import torch

    takes = inspect.signature(model.forward).parameters
    beside = companions(model, error)

    class Fed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any = None, position_ids: Any = None,
                    decoder_input_ids: Any = None, decoder_attention_mask: Any = None, use_cache: Any = None) -> Any:
            given = {"attention_mask": attention_mask, "position_ids": position_ids, "use_cache": use_cache,
                     "decoder_input_ids": decoder_input_ids, "decoder_attention_mask": decoder_attention_mask}
            given = {k: v for k, v in given.items() if v is not None and k in takes}
            for name in beside:  # what the forward needs beside the ids, at this call's length
                given.update(COMPANIONS[name].make(config, input_ids, attention_mask))
            if embeddings:
                return self.model(inputs_embeds=token_embedding(self.model)(input_ids), **given)
            return self.model(input_ids=input_ids, **given)

    # the probe reads which inputs a forward takes from its signature: those the model takes, no more
    signature = inspect.signature(Fed.forward)
    Fed.forward.__signature__ = signature.replace(parameters=[
        p for name, p in signature.parameters.items() if name in ("self", "input_ids") or name in takes])
    return Fed()


def language_path(config0: Any) -> tuple[str, ...] | None:
    """The fields leading to a composite's language model: its ``text_config``, else the ``text_config`` of a
    sub-config (Qwen2.5-Omni's ``thinker_config.text_config``: the thinker reads the text), else None."""
    for path in [(LANGUAGE,), *((name, LANGUAGE) for name in tiny.sub_config_names(config0))]:
        owner = config0
        for name in path:
            owner = getattr(owner, name, None)
        if owner is not None and hasattr(owner, "to_dict"):
            return path
    return None


def language_config(config0: Any) -> Any:
    """The language model's config of a composite (:func:`language_path`), or None."""
    text = config0
    for name in language_path(config0) or [LANGUAGE]:
        text = getattr(text, name, None)
    return text
