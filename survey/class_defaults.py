"""Config classes that do not build from their own defaults, and the arguments that make them build.

The survey starts every model type from its config class's defaults (``AutoConfig.for_model``). A few classes
refuse their own defaults: a validator that asks of a sub-config what that sub-config's class does not default to
(Gemma 4's assistant). :data:`ARGUMENTS` states, per model type, the arguments its class is built with instead,
each with its reason; :func:`for_model` uses them only where the defaults fail, so that no other model type's
config changes.
"""

from __future__ import annotations

from typing import Any

#: per model type whose config class refuses its own defaults: (why, the keyword arguments it is built with)
ARGUMENTS: dict[str, tuple[str, dict[str, Any]]] = {
    # the assistant's validator asks its text config for no per-layer inputs (Gemma4AssistantConfig.
    # validate_architecture), which Gemma 4's text class defaults to (256 wide, 262144 ids): stated as none, as the
    # released assistants state them
    "gemma4_assistant": ("its validator asks a text config without per-layer inputs, which the text class defaults "
                         "to", {"text_config": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}}),
}


def for_model(model_type: str) -> Any:
    """The config of ``model_type`` from its class's defaults (``AutoConfig.for_model``), or, where those do not
    build and :data:`ARGUMENTS` names the model type, from the arguments it states."""
    from transformers import AutoConfig

    try:
        return AutoConfig.for_model(model_type)
    except Exception:
        if model_type not in ARGUMENTS:
            raise
    return AutoConfig.for_model(model_type, **ARGUMENTS[model_type][1])
