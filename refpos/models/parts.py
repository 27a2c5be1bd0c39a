r"""The parts of a model: its language model, and every other network its config describes — vision towers, audio
encoders, a talker, an action expert — so that none is left unsaid.

A composite config nests one config per network: ``text_config`` and ``vision_config`` (LLaVA, Gemma 3, …),
``thinker_config.audio_config`` (Qwen2.5-Omni), ``vlm_config`` and ``dit_config`` (π0.5), ``prompt_encoder_config``
(SAM). The language model is found by following the wrappers (:func:`refpos.models.hf_files.language_view`); every
other section is a *part* when it describes a network — it states a layer count, or a ``model_type`` and no
sub-network of its own — and a *wrapper* when it only holds parts (``token2wav_config`` holds ``dit_config`` and
``bigvgan_config``). Settings that happen to be mappings (``attn_config``, ``rope_scaling``, ``quantization_config``)
state neither and are not parts.

A part's ``model_type`` is the one the config class around it builds there: the family row of the nearest section
around it that says so (``parts = {vision_config = "qwen3_vl_vision"}``: a fixed class, whatever the section
says — Qwen3-VL's hub config writes ``model_type: qwen3_vl`` in its vision section; ``part_defaults =
{vision_config = "pixtral"}``: the section's own, that one when it states none), else the section's own, else
unknown. Its stacks are named for where it sits (``vision`` for ``vision_config``, ``audio`` for
``thinker_config.audio_config``, ``talker`` for ``talker_config``, ``token2wav.dit`` for
``token2wav_config.dit_config``).

Examples
--------
>>> from refpos.models.view import ConfigView
>>> llava = ConfigView({"model_type": "llava", "text_config": {"model_type": "llama", "num_hidden_layers": 2},
...                     "vision_config": {"model_type": "clip_vision_model", "num_hidden_layers": 2}})
>>> [(p.name, p.model_type, p.view.path) for p in parts_of(llava)]
[('vision', 'clip_vision_model', 'vision_config.')]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from refpos.models.families import family_of
from refpos.models.hf_files import WRAPPERS, language_view
from refpos.models.kinds.record import GEOMETRY_KEYS
from refpos.models.view import ConfigView

#: keys whose presence says a section is a network of layers (any role's layer count)
LAYER_KEYS = tuple(dict.fromkeys(key for role in GEOMETRY_KEYS.values() for key in role["layers"]))
#: how deep parts are looked for (a composite nests them at most a few levels)
MAX_DEPTH = 4


@dataclass(frozen=True)
class Part:
    """One network of a composite other than its language model: its stack name, its section and model type."""

    name: str
    view: ConfigView
    model_type: str | None

    @property
    def key(self) -> str:
        """The section's dotted path without the trailing dot (``thinker_config.audio_config``)."""
        return self.view.path.rstrip(".")


def _network(section: Mapping[str, object]) -> bool:
    return any(section.get(key) is not None for key in LAYER_KEYS)


def _sections(view: ConfigView) -> list[str]:
    """The keys of ``view`` that hold a config section (a mapping with a ``model_type``, one naming ``_config``, or
    one the row of ``view``'s model type names among its ``parts``: T5Gemma's ``encoder`` and ``decoder``)."""
    model_type = view.raw.get("model_type")
    row = family_of(model_type) if isinstance(model_type, str) else None
    named = {path for path, _ in row.parts} if row is not None else set()
    return [key for key, value in view.raw.items() if isinstance(value, Mapping)
            and ("model_type" in value or key.endswith("_config") or key in named)]


def _holds_parts(view: ConfigView, depth: int) -> bool:
    return depth < MAX_DEPTH and any(_network(view.raw[key]) or _holds_parts(view.section(key), depth + 1)
                                     for key in _sections(view))


def _name(path: str, language_path: str) -> str:
    """``thinker_config.audio_config.`` → ``audio``: the path's keys without ``_config``, the wrappers of the
    language model left out."""
    wrappers = set(language_path.rstrip(".").split(".")) & set(WRAPPERS)
    keys = [key for key in path.rstrip(".").split(".") if key not in wrappers]
    return ".".join(key.removesuffix("_config") for key in keys)


def _named_by_a_row(section: ConfigView) -> tuple[str | None, bool]:
    """The model type the family row of a section around ``section`` builds there, and whether it is fixed
    (``parts``) or a default (``part_defaults``); ``(None, False)`` when no row names the section."""
    outer = section.parent
    while outer is not None:
        model_type = outer.raw.get("model_type")
        row = family_of(model_type) if isinstance(model_type, str) else None
        relative = section.path[len(outer.path):].rstrip(".")
        if row is not None and relative in dict(row.parts):
            return dict(row.parts)[relative], True
        if row is not None and relative in dict(row.part_defaults):
            return dict(row.part_defaults)[relative], False
        outer = outer.parent
    return None, False


def part_reads(part: Part) -> dict[str, tuple[str, ...]]:
    """What the composite's row around ``part`` says its positions are read from (its ``part_reads``: π0.5's
    action expert turns by the running count of the prefix's mask, continued over the actions), as use → source;
    empty when no row says."""
    outer = part.view.parent
    while outer is not None:
        model_type = outer.raw.get("model_type")
        row = family_of(model_type) if isinstance(model_type, str) else None
        relative = part.view.path[len(outer.path):].rstrip(".")
        if row is not None and relative in dict(row.part_reads):
            return {"rotation": dict(row.part_reads)[relative]}
        outer = outer.parent
    return {}


def language_reads(lm: ConfigView) -> dict[str, tuple[str, ...]]:
    """What the rows around the language model's section say its positions are read from (a ``part_reads`` entry
    naming the section), as use → source; the outermost row that says wins: its forward is the one called, and
    decides what reaches the language model (ColPali passes no position ids to its PaliGemma, which then turns each
    token by its slot plus one). Empty when no row says."""
    around = []
    outer = lm.parent
    while outer is not None:
        around.append(outer)
        outer = outer.parent
    for outer in reversed(around):
        model_type = outer.raw.get("model_type")
        row = family_of(model_type) if isinstance(model_type, str) else None
        relative = lm.path[len(outer.path):].rstrip(".")
        if row is not None and relative in dict(row.part_reads):
            return {"rotation": dict(row.part_reads)[relative]}
    return {}


def part_model_type(section: ConfigView) -> str | None:
    """The model type transformers builds for ``section`` (module docstring: the rows around it, then its own)."""
    stated = section.raw.get("model_type")
    stated = stated if isinstance(stated, str) and stated else None
    named, fixed = _named_by_a_row(section)
    return named if fixed or (named is not None and stated is None) else stated


def parts_of(top: ConfigView) -> tuple[Part, ...]:
    """Every part of the config ``top`` other than its language model (module docstring), in the config's order."""
    language = language_view(top)
    found: list[Part] = []

    def visit(view: ConfigView, depth: int) -> None:
        for key in _sections(view):
            section = view.section(key)
            if section.path == language.path:
                visit(section, depth + 1)
                continue
            network = _network(section.raw)
            stated = section.raw.get("model_type")
            named = _named_by_a_row(section)[0] is not None
            if network or named or (isinstance(stated, str) and stated and not _holds_parts(section, depth + 1)):
                found.append(Part(_name(section.path, language.path), section, part_model_type(section)))
            if depth + 1 < MAX_DEPTH:
                visit(section, depth + 1)

    visit(top, 0)
    return tuple(found)


def is_network(view: ConfigView) -> bool:
    """True when the section states a layer count of its own."""
    return _network(view.raw)


def stage_unmodelled(top: ConfigView) -> dict[str, str]:
    """What the top-level row says a composite's own stage does that refpos does not model (X-CLIP's multi-frame
    transformer), under ``model_type``, whichever network the config holds; ``{}`` for any other row."""
    model_type = top.raw.get("model_type")
    row = family_of(model_type) if isinstance(model_type, str) else None
    if row is None or not row.stage_unmodelled:
        return {}
    return {"model_type": f"{row.model_type}: {row.stage_unmodelled}"}


__all__ = ["LAYER_KEYS", "Part", "is_network", "language_reads", "part_model_type", "part_reads", "parts_of",
           "stage_unmodelled"]
