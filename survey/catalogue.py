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
    """One entry of ``CONFIG_MAPPING_NAMES``."""

    name: str
    config_class: str

    def config(self) -> Any:
        """The config class's defaults (``AutoConfig.for_model``)."""
        from transformers import AutoConfig

        return AutoConfig.for_model(self.name)


def model_types() -> list[ModelType]:
    """Every model type of the installed transformers, in its mapping's order."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return [ModelType(name, cls) for name, cls in CONFIG_MAPPING_NAMES.items()]


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


def modeling_file(cls: Any) -> str:
    """``<dir>/modeling_<name>.py`` of a model class (relative to ``transformers/models/``)."""
    parts = cls.__module__.split(".")
    return "/".join(parts[2:]) + ".py" if parts[:2] == ["transformers", "models"] else cls.__module__
