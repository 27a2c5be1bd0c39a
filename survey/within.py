"""A part without a model class of its own, run inside the composite that holds it.

Some model types of transformers' config mapping are parts of a composite — SAM's prompt encoder and mask
decoder, a T5Gemma module, SAPIENS-2's head — whose config class has no model class: transformers builds
their modules only inside the composite's model. Such a part cannot be run alone, but its code runs whenever
its composite's does. :func:`observe_within` runs the composite (each model type whose config class lists the
part's among its ``sub_configs``, in the catalogue's order) with a forward hook on every module, and finds the
part's module among those that ran: the composite model's child named for the part's config field
(``prompt_encoder_config`` → ``prompt_encoder``), else its shallowest module whose name begins with the field's
stem. Where one ran, the part's row says so — ``run within <composite>``, with the module's class and the
composite's input — and its positions are those of the composite's row, compared there; a part whose
composite was not run, or whose module did not run in it, stays not run, with that reason.

A part that runs on pixel inputs inside its composite (SAM's prompt encoder and mask decoder) is first built there
from its own config and judged on its own sites (:mod:`survey.within_parts`); this label is a part's that is not
(a T5Gemma module, its composite run on token ids).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from survey import catalogue

#: how the reason begins of a model type transformers builds no model for (:func:`survey.run.build`)
NO_MODEL_CLASS = "transformers has no model class for it"
#: the largest modules that ran (by their count of modules) taken as the composite model the part is sought in
ROOTS = 4
#: the observed label of a part run inside its composite (:func:`observe_within`): its encoding column
WITHIN = "run within "


def holders(config_class: type) -> list[catalogue.ModelType]:
    """The model types (no variants) whose config class lists ``config_class`` among its ``sub_configs``."""
    from transformers import CONFIG_MAPPING

    found = []
    for model_type in catalogue.model_types(with_variants=False):
        try:
            holder = CONFIG_MAPPING[model_type.name]
        except Exception:  # a config class that does not import: holds nothing the survey can run
            continue
        if holder is not config_class and config_class in (getattr(holder, "sub_configs", None) or {}).values():
            found.append(model_type)
    return found


def field_of(holder: Any, config_class: type) -> str:
    """The name of ``holder``'s sub-config field of ``config_class``."""
    return next(name for name, cls in holder.sub_configs.items() if cls is config_class)


def part_module(root: Any, field: str) -> tuple[str, Any] | None:
    """``(name, module)`` of the composite model ``root`` built from its config's ``field``: the child named
    ``field`` without ``_config``, else the shallowest module whose last name begins with the field's stem
    (``vision_config`` → ``vision_tower``); None where none is."""
    stem = field.removesuffix("_config")
    named = dict(root.named_modules())
    if stem in named:
        return stem, named[stem]
    first = stem.split("_")[0]
    found = sorted((name for name in named if name and name.rsplit(".", 1)[-1].startswith(first)),
                   key=lambda name: name.count("."))
    return (found[0], named[found[0]]) if found else None


def observe_within(config0: Any, row: Any, observe: Callable[[catalogue.ModelType], Any]) -> bool:
    """Run each composite holding ``config0``'s class with ``observe`` (:func:`survey.run.observe_type`) and a
    forward hook on every module; where the part's module ran, set ``row``'s observed label and cause (see the
    module docstring) and return True. Otherwise add why to ``row``'s notes and return False."""
    import torch

    reasons = []
    for holder in holders(type(config0)):
        field = field_of(type(holder.config()), type(config0))
        ran: list[Any] = []  # strong references: a module's id stays its own while the list holds it
        handle = torch.nn.modules.module.register_module_forward_hook(
            lambda module, args, out, ran=ran: ran.append(module))
        try:
            seen = observe(holder)
        finally:
            handle.remove()
        unique = list({id(module): module for module in ran}.values())
        if not seen.row.observed or not unique:
            reasons.append(f"{holder.name} was not run")
            continue
        ids = {id(module) for module in unique}
        roots = sorted(unique, key=lambda module: -sum(1 for _ in module.modules()))[:ROOTS]
        found = [(root, part) for root in roots
                 if (part := part_module(root, field)) is not None and id(part[1]) in ids]
        if not found:
            reasons.append(f"{holder.name} ran, its {field.removesuffix('_config')} did not")
            continue
        root, (name, module) = found[0]
        input_note = next((n for n in seen.row.notes if n.startswith("run on its ")), "run on its token ids")
        row.observed = [WITHIN + holder.name]
        row.cause = (f"{WITHIN}{holder.name}: its {name} ({type(module).__name__}) ran in {type(root).__name__}'s "
                     f"forward, {input_note.split(':')[0]}; its positions are compared in {holder.name}'s row")
        row.notes.append(row.cause)
        return True
    row.notes.append("not run within a composite either: " + ("; ".join(reasons) or "no model type holds its config"))
    return False
