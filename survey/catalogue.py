"""The model types of the installed transformers, each with its config class, model class and modeling file.

The survey's list of families is transformers' own ``CONFIG_MAPPING_NAMES``: nothing here names a family.
A model type's model class is the base model the auto classes map it to (``AutoModel``, else the first
other auto mapping that lists it), else the one class of its modeling package whose ``config_class`` is the
model type's config class (sub-configs such as ``qwen2_5_vl_text`` have no auto entry but a model class
of their own).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

#: auto mappings tried after AutoModel, in order (their names in transformers.models.auto.modeling_auto)
_MAPPINGS = ("MODEL_MAPPING_NAMES", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
             "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
             "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "MODEL_FOR_CTC_MAPPING_NAMES",
             "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES",
             "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_BACKBONE_MAPPING_NAMES")


@dataclass(frozen=True)
class ModelType:
    """One entry of ``CONFIG_MAPPING_NAMES``, or a variant of one: its defaults with ``overrides`` (a switch
    key set to another value, :func:`variants`), named ``<type>[<key>=<value>]``."""

    name: str
    config_class: str
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def base(self) -> str:
        """The model type of ``CONFIG_MAPPING_NAMES`` (the name without its variant)."""
        return self.name.split("[", 1)[0]

    def config(self) -> Any:
        """The config class's defaults (``AutoConfig.for_model``, or the arguments that make a class refusing its
        defaults build: :func:`survey.class_defaults.for_model`), with the variant's overrides."""
        from survey.class_defaults import for_model

        config = for_model(self.base)
        for key, value in self.overrides:
            *path, last = key.split(".")
            owner = config
            for part in path:
                owner = owner[part] if isinstance(owner, dict) else getattr(owner, part)
            if isinstance(owner, dict):
                owner[last] = value
            else:
                setattr(owner, last, value)
        return config


def model_types(with_variants: bool = True) -> list[ModelType]:
    """Every model type of the installed transformers, in its mapping's order, each followed by its variants
    (``with_variants``)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    found = variants() if with_variants else {}
    return [t for name, cls in CONFIG_MAPPING_NAMES.items()
            for t in (ModelType(name, cls), *(ModelType(v, cls, o) for v, o in found.get(name, ())))]


def find(name: str) -> ModelType:
    """The model type (or variant) of the installed transformers called ``name``."""
    for model_type in model_types():
        if model_type.name == name:
            return model_type
    raise ValueError(f"name: {name!r} is not a model type (nor a variant) of the installed transformers")


def variants() -> dict[str, list[tuple[str, tuple[tuple[str, Any], ...]]]]:
    """Model type -> its variants ``(name, overrides)``: where refpos's family table says a config key switches
    the encoding (Falcon's ``alibi``, MPT's ``attn_config.alibi`` …), each value of the key that the class
    default does not take, so that the survey measures every encoding a family can have and not only its
    class's default. A value the table writes as JSON is that value; ``null`` and ``*`` (any other value)
    are left out: the default, or no one value to set."""
    import json

    from refpos.models.families import FAMILIES

    out: dict[str, list[tuple[str, tuple[tuple[str, Any], ...]]]] = {}
    for model_type, row in FAMILIES.items():
        switch = getattr(row, "switch", None)
        if switch is None:
            continue
        for text, _ in switch.values:
            if text in (switch.absent, "*", "null"):
                continue
            try:
                value = json.loads(text)
            except ValueError:
                value = text
            out.setdefault(model_type, []).append((f"{model_type}[{switch.key}={text}]", ((switch.key, value),)))
    return out


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def _class_from_auto(model_type: str) -> Any | None:
    import transformers
    from transformers.models.auto import modeling_auto

    for mapping in _MAPPINGS:
        names = getattr(modeling_auto, mapping, {}).get(model_type)
        if names:
            name = names[0] if isinstance(names, (list, tuple)) else names
            found = getattr(transformers, name, None)
            if found is not None:
                return found
    return None


def model_class(config: Any) -> Any | None:
    """The base model class of ``config``'s model type, or ``None`` when transformers has none."""
    found = _class_from_auto(config.model_type)
    if found is not None:
        return found
    from transformers import PreTrainedModel

    module_name = type(config).__module__.replace(".configuration_", ".modeling_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    candidates = [cls for _, cls in inspect.getmembers(module, inspect.isclass)
                  if issubclass(cls, PreTrainedModel) and cls.__module__ == module.__name__
                  and getattr(cls, "config_class", None) is type(config)
                  and not cls.__name__.endswith("PreTrainedModel")]
    # the base model first: no task head in its name
    heads = ("For", "LMHead", "WithHead")
    candidates.sort(key=lambda cls: (any(h in cls.__name__ for h in heads), len(cls.__name__)))
    return candidates[0] if candidates else None


#: task mappings whose class the survey runs on pixel inputs instead of the base model, each with why: the network
#: holding the config's attention is built only there
PIXEL_TASKS = {"MODEL_FOR_TEXT_RECOGNITION_MAPPING_NAMES": "a text recogniser (PP-OCR's) builds its SVTR neck, its "
               "only attention, inside its recognition head; its base model is the convolutional backbone alone"}


def pixel_class(config: Any) -> Any | None:
    """The class the survey runs on pixel, audio or feature inputs: the class of a :data:`PIXEL_TASKS` mapping
    where ``config``'s model type has one, else :func:`model_class`'s."""
    import transformers
    from transformers.models.auto import modeling_auto

    for mapping in PIXEL_TASKS:
        name = getattr(modeling_auto, mapping, {}).get(config.model_type)
        found = getattr(transformers, name, None) if isinstance(name, str) else None
        if found is not None:
            return found
    return model_class(config)


def modeling_file(cls: Any) -> str:
    """``<dir>/modeling_<name>.py`` of a model class (relative to ``transformers/models/``)."""
    parts = cls.__module__.split(".")
    return "/".join(parts[2:]) + ".py" if parts[:2] == ["transformers", "models"] else cls.__module__
