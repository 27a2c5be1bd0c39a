"""What the anchors of the vision and audio family rows read from a transformers model (anchors env).

A row is anchored by building the model of its type from a small config of its class and reading the modules:
its attention modules (outermost, in order) and their head counts, its position tables (parameters and buffers
whose name says they hold positions), and the calls it makes to torch's resampling when given an input of
another size. Nothing here knows a model type by name; a test passes the row.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import transformers

#: the small geometry every anchor builds (each key set only where the config class has it)
SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 37,
         "image_size": 32, "patch_size": 8, "d_model": 32, "encoder_layers": 2, "decoder_layers": 1,
         "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 37, "decoder_ffn_dim": 37,
         "num_channels": 3, "mlp_dim": 37}
#: attribute names of an attention module's head count
HEAD_ATTRIBUTES = ("num_attention_heads", "num_heads", "n_heads", "attention_heads", "n_head")
#: what a parameter or buffer holding positions is called
POSITION_NAMES = ("position_embedding", "pos_embed", "position_embeddings", "positional_embedding")


def small_config(model_type: str, **override: Any) -> Any:
    """A config of ``model_type``'s class with :data:`SMALL` where the class has each key, then ``override``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        defaults = transformers.AutoConfig.for_model(model_type).to_dict()
    values = {key: value for key, value in SMALL.items() if key in defaults}
    if isinstance(defaults.get("image_size"), (list, tuple)):
        values["image_size"] = [32, 32]
    values.update(override)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoConfig.for_model(model_type, **values)


def model_class(config: Any) -> type:
    """The class transformers builds for ``config``: AutoModel's, else the base model of the config's own modeling
    file (a tower's ``…VisionModel``, which AutoModel does not map)."""
    try:
        return transformers.AutoModel._model_mapping[type(config)]
    except KeyError:
        pass
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    found = [cls for cls in vars(module).values() if isinstance(cls, type)
             and issubclass(cls, transformers.PreTrainedModel) and getattr(cls, "config_class", None) is type(config)
             and not cls.__name__.endswith("PreTrainedModel")]
    if not found:
        raise LookupError(f"no model class of {type(config).__name__} in {module.__name__}")
    return min(found, key=lambda cls: (not cls.__name__.endswith("Model"), len(cls.__name__)))


def build(config: Any) -> Any:
    """The model of ``config`` (:func:`model_class`), in float64 and eval mode."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = model_class(config)(config)
    return model.double().eval()


def heads_of(module: Any) -> int | None:
    """The head count an attention module (or a module inside it) holds, or its query projection's width over
    its head size (modules that keep only ``head_dim``)."""
    for inner in module.modules():
        for name in HEAD_ATTRIBUTES:
            value = getattr(inner, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    for inner in module.modules():
        head_dim, query = getattr(inner, "head_dim", None), getattr(inner, "q_proj", None)
        if isinstance(head_dim, int) and isinstance(query, torch.nn.Linear):
            return query.out_features // head_dim
    return None


def attention_modules(model: Any, *, within: str = "", outside: tuple[str, ...] = ("head",)) -> list[tuple[str, Any]]:
    """The outermost modules whose class is an attention (holding weights), in the model's order;
    ``within``: only those whose dotted name contains it; ``outside``: none whose name has one of these parts
    (a pooling head's attention over the outputs is not a layer of the stack)."""
    found: list[tuple[str, Any]] = []
    for name, module in model.named_modules():
        if "Attention" not in type(module).__name__ or within not in name \
                or any(part in outside for part in name.split(".")):
            continue
        if any(name.startswith(outer + ".") for outer, _ in found):
            continue
        if any(True for _ in module.parameters()):
            found.append((name, module))
    return found


def position_tables(model: Any) -> dict[str, tuple[int, ...]]:
    """Name → shape of every parameter and buffer named for positions."""
    tensors = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    return {name: tuple(t.shape) for name, t in tensors.items() if any(key in name for key in POSITION_NAMES)}


@contextlib.contextmanager
def interpolate_calls() -> Iterator[list[dict[str, Any]]]:
    """Every call to ``torch.nn.functional.interpolate`` inside the block: its input shape and its keywords."""
    calls: list[dict[str, Any]] = []
    real = torch.nn.functional.interpolate

    def spy(x: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest", align_corners: Any = None,
            recompute_scale_factor: Any = None, antialias: bool = False) -> Any:
        calls.append({"shape": tuple(x.shape), "dtype": str(x.dtype).removeprefix("torch."), "size": size,
                      "scale_factor": scale_factor, "mode": mode, "align_corners": bool(align_corners),
                      "antialias": antialias})
        return real(x, size=size, scale_factor=scale_factor, mode=mode, align_corners=align_corners,
                    recompute_scale_factor=recompute_scale_factor, antialias=antialias)

    torch.nn.functional.interpolate = spy
    try:
        yield calls
    finally:
        torch.nn.functional.interpolate = real


__all__ = ["HEAD_ATTRIBUTES", "POSITION_NAMES", "SMALL", "attention_modules", "build", "heads_of",
           "interpolate_calls", "model_class", "position_tables", "small_config"]
