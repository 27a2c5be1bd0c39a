r"""The base a config that states none resolves to, against transformers' config classes (torch CPU).

transformers' config class of a model type carries ``default_theta``: the base θ its ``rope_parameters`` get
when the config states none (``Qwen2_5OmniTextConfig``: 10⁶; per layer type for Gemma 3n, ModernBERT, NeoMME,
T5Gemma 2: ``{"global"|"full_attention": θ_full, "local"|"sliding_attention": θ_sliding}``). For every model type
of ``CONFIG_MAPPING`` with a RoPE family row, the class's default config is written out, the bases of the section
refpos reads deleted (the top level's or the sub-config's it notes ``read from``: ``rope_theta`` and the legacy
per-layer keys, every ``rope_theta`` of its ``rope_parameters`` / ``rope_scaling``, per layer type too), and
refpos's resolution must give every RoPE layer the base transformers' class gives that config (the class built
from it: ``rope_parameters``, per layer type too; its ``default_theta`` or a field default), or refuse the config
naming the base. Configs refpos refuses whole, or transformers refuses without a base, are skipped by name.
"""

from __future__ import annotations

from typing import Any

import pytest

from refpos.models import model_positions
from refpos.models.families import family_of

pytest.importorskip("torch", reason="default-base anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="default-base anchors need transformers "
                                                          "(pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

#: the keys a legacy config states a base under (top level)
BASE_KEYS = ("rope_theta", "rope_local_base_freq", "local_rope_theta", "global_rope_theta")
#: model types whose base without one stated refpos answers wrong, and why (each fails if it is ever right)
KNOWN_WRONG = {
    "voxtral_realtime": "the composite's text_config defaults (VoxtralRealtimeConfig.sub_configs init_kwargs: "
                        "rope_theta 10⁶) differ from its text model type's class default (10⁴), which refpos reads",
}
#: the names a per-layer-type default_theta gives the full- and the sliding-attention layers
FULL, SLIDING = ("global", "full_attention"), ("local", "sliding_attention")


def _cases() -> list[tuple[str, Any]]:
    cases = []
    for model_type, cls in transformers.CONFIG_MAPPING.items():
        family = family_of(model_type)
        default = getattr(cls, "default_theta", None)
        if default is not None and family is not None and family.has_rope:
            cases.append((model_type, cls))
    return cases


def _strip_bases(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with every base it states deleted (top level and its rope dicts, per layer type too)."""
    for key in BASE_KEYS:
        cfg.pop(key, None)
    for key in ("rope_parameters", "rope_scaling"):
        rope = cfg.get(key)
        if isinstance(rope, dict):
            rope.pop("rope_theta", None)
            for value in rope.values():
                if isinstance(value, dict):
                    value.pop("rope_theta", None)
    return cfg


def _section(result: Any) -> str | None:
    """The sub-config refpos read the layers from (its note ``read from <key>``), ``None``: the top level."""
    for note in result.notes:
        if isinstance(note, str) and note.startswith("read from "):
            return note.removeprefix("read from ").split()[0]
    return None


def _class_base(rope: Any, layer_type: str | None) -> float | None:
    """The base transformers' class gave ``layer_type``'s layers (its ``rope_parameters``, per layer type too)."""
    if not isinstance(rope, dict):
        return None
    if isinstance(rope.get(layer_type), dict):
        rope = rope[layer_type]
    value = rope.get("rope_theta")
    return None if value is None else float(value)


def check(model_type: str, cls: Any) -> str | None:
    """What is wrong with refpos's base for ``model_type``'s default config without a base (``None``: right)."""
    cfg = cls().to_dict()
    cfg["model_type"] = model_type
    try:
        section = _section(model_positions(cfg, transformers_version=transformers.__version__))
    except ValueError as error:
        pytest.skip(f"refpos does not resolve the class's default config: {error}")
    if section is not None and not isinstance(cfg.get(section), dict):
        pytest.skip(f"the section {section} refpos reads is not a sub-config")
    _strip_bases(cfg if section is None else cfg[section])
    result = model_positions(cfg, transformers_version=transformers.__version__)
    if "model_type" in result.not_modelled:
        pytest.skip(f"refpos refuses the model type: {result.not_modelled['model_type']}")
    if any("theta" in key for key in result.not_modelled):
        return None  # refused, naming the base
    try:
        built = cls.from_dict(cfg)
    except (KeyError, ValueError) as error:
        pytest.skip(f"transformers refuses the config without a base: {error}")
    built = built if section is None else getattr(built, section)
    rope = getattr(built, "rope_parameters", None)
    layers = [layer for layer in result.layers if getattr(layer, "rope", None) is not None
              and getattr(layer, "stack", "") in ("", "decoder", "encoder", "text", "layers")]
    if not layers:
        pytest.skip(f"no RoPE layer resolved: {dict(result.not_modelled)}")
    wrong = set()
    for layer in layers:
        layer_type = getattr(layer, "layer_type", None)
        expected = _class_base(rope, layer_type)
        if expected is not None and layer.rope.theta != expected:
            wrong.add((layer_type, expected, layer.rope.theta))
    return f"(layer type, transformers, refpos) {sorted(wrong, key=str)}" if wrong else None


@pytest.mark.parametrize(("model_type", "cls"), _cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_config_without_a_base_resolves_to_the_class_default(model_type, cls):
    problem = check(model_type, cls)
    if model_type in KNOWN_WRONG:
        assert problem is not None, f"{model_type} is right now: take it out of KNOWN_WRONG"
        pytest.xfail(KNOWN_WRONG[model_type])
    assert problem is None, f"{model_type}: {problem}"
