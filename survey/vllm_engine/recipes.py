"""Config recipes: the keys vLLM's model code reads for an architecture whose config class only its authors ship.

vLLM implements families whose ``config.json`` is read through the authors' own config class (remote code): no
transformers model type names them, the installed vLLM ships no config class for them, and no published
``config.json`` of theirs is stored (:mod:`survey.vllm_engine.configs`, rules 1-5). A recipe of
``survey/vllm_engine/recipes.toml`` states such an architecture's config as the keys vLLM's model code reads, each at
the value a cited public file states (:func:`recipe`), so that the survey builds a plain ``PretrainedConfig`` of them
and shrinks it to its tiny geometry as any other. A recipe key must appear in vLLM's own code for the architecture
(:func:`vllm_words`: its model file, the model files that one imports, vLLM's config normalisation), else the recipe is
refused by name: a recipe never states a convention neither the authors' config nor vLLM's code uses.

The other form, ``alias_of``, names the registry architecture whose config a checkpoint of this one carries (vLLM
serving both from one family's config class); its source says where vLLM says so.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

#: the recipes, one table per architecture
RECIPES = Path(__file__).resolve().parent / "recipes.toml"
#: the keys a recipe's source names
SOURCE_KEYS = ("repo", "path", "commit")
#: vLLM's modules every config passes through before a model reads it (the RoPE keys' normalisation, the derived
#: length), relative to the ``vllm`` package
CONFIG_CODE = ("transformers_utils/config.py", "config/model.py")
#: the keys a recipe table may hold
TABLE_KEYS = {"model_type", "source", "config", "from", "alias_of", "derive", "inputs"}


def _plamo3_windows(config: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """PLaMo3's per-layer windows as its config class computes them in ``__init__``: layer :math:`i` is a full
    attention layer where :math:`(i + 1) \\bmod p = 0` (``p = sliding_window_pattern``), window None, else it attends
    within ``window_size``; ``layer_types`` names each ("full_attention" / "sliding_attention")."""
    pattern, window = int(config["sliding_window_pattern"]), int(inputs["window_size"])
    full = [(i + 1) % pattern == 0 for i in range(int(config["num_hidden_layers"]))]
    return {"interleaved_sliding_window": [None if f else window for f in full],
            "layer_types": ["full_attention" if f else "sliding_attention" for f in full]}


#: derivation name -> (what the config class computes, the keys it needs from ``inputs``, the rule): keys a config
#: class derives in its constructor, which vLLM reads and a TOML table cannot state (a list holding None)
DERIVATIONS = {
    "plamo3_windows": ("interleaved_sliding_window and layer_types, derived by the config class from window_size and "
                       "sliding_window_pattern", ("window_size",), _plamo3_windows),
}


@dataclass(frozen=True)
class Recipe:
    """One architecture's recipe: ``config`` (key -> value, with ``model_type`` and ``architectures``) or
    ``alias_of`` (another architecture of the registry), the ``source`` it is read from and, per key, where its value
    comes from (``origins``: the source's own words, unless ``from`` says otherwise)."""

    name: str
    source: dict[str, str]
    config: dict[str, Any] = field(default_factory=dict)
    alias_of: str = ""
    origins: dict[str, str] = field(default_factory=dict)


def _checked_source(name: str, source: Any) -> dict[str, str]:
    if not isinstance(source, dict) or any(not isinstance(source.get(k), str) or not source[k] for k in SOURCE_KEYS):
        raise ValueError(f"recipe {name}: its source must name {', '.join(SOURCE_KEYS)}")
    if not re.fullmatch(r"[0-9a-f]{40}", source["commit"]):
        raise ValueError(f"recipe {name}: source commit {source['commit']!r} is not 40 hex digits")
    return {str(k): str(v) for k, v in source.items()}


def parse(name: str, table: Any) -> Recipe:
    """The recipe of architecture ``name`` from its TOML table, its pieces checked (module docstring); a missing or
    stray piece raises a ``ValueError`` naming the architecture."""
    if not isinstance(table, dict):
        raise ValueError(f"recipe {name}: not a table")
    stray = sorted(set(table) - TABLE_KEYS)
    if stray:
        raise ValueError(f"recipe {name}: unknown field(s) {', '.join(stray)} (a recipe holds {sorted(TABLE_KEYS)})")
    source = _checked_source(name, table.get("source"))
    if "alias_of" in table:
        if set(table) - {"alias_of", "source"} or not isinstance(table["alias_of"], str) or not table["alias_of"]:
            raise ValueError(f"recipe {name}: an alias names another architecture and its source, nothing else")
        return Recipe(name, source, alias_of=table["alias_of"])
    model_type, config, origins = table.get("model_type"), table.get("config"), table.get("from", {})
    if not isinstance(model_type, str) or not model_type:
        raise ValueError(f"recipe {name}: its model_type must be a non-empty string")
    if not isinstance(config, dict) or not config:
        raise ValueError(f"recipe {name}: its config must be a table of the keys vLLM reads")
    reserved = sorted({"model_type", "architectures"} & set(config))
    if reserved:
        raise ValueError(f"recipe {name}: config states {', '.join(reserved)}, which the recipe itself names")
    if not isinstance(origins, dict) or set(origins) - set(config):
        raise ValueError(f"recipe {name}: 'from' names keys its config does not state: "
                         f"{sorted(set(origins) - set(config)) if isinstance(origins, dict) else origins!r}")
    values = {**config, "model_type": model_type, "architectures": [name]}
    words = {key: str(origins.get(key, "the source states it")) for key in config}
    derive, inputs = table.get("derive"), table.get("inputs", {})
    if derive is not None or inputs:
        if derive not in DERIVATIONS:
            raise ValueError(f"recipe {name}: derive {derive!r} is none of {sorted(DERIVATIONS)}")
        what, needed, rule = DERIVATIONS[derive]
        if not isinstance(inputs, dict) or set(inputs) != set(needed):
            raise ValueError(f"recipe {name}: derive {derive!r} takes inputs {list(needed)}, got {inputs!r}")
        derived = rule(values, inputs)
        clash = sorted(set(derived) & set(config))
        if clash:
            raise ValueError(f"recipe {name}: {', '.join(clash)} both stated and derived")
        values.update(derived)
        stated = ", ".join(f"{k} = {v!r}" for k, v in inputs.items())
        words.update(dict.fromkeys(derived, f"{what} ({stated}, as the source states)"))
    return Recipe(name, source, values, origins=words)


@cache
def recipes(path: Path = RECIPES) -> dict[str, Recipe]:
    """Architecture -> its :class:`Recipe`, every table of ``path`` parsed (none where the file is absent)."""
    if not path.is_file():
        return {}
    with path.open("rb") as handle:
        tables = tomllib.load(handle)
    return {name: parse(name, table) for name, table in tables.items()}


def vllm_files(architecture: Any) -> list[Path]:
    """vLLM's source files whose code reads ``architecture``'s config: its model file, the model files it imports
    (``from .llama import ...``: TeleFLM's class is Llama's) and :data:`CONFIG_CODE`."""
    import vllm

    root = Path(vllm.__file__).resolve().parent
    model = root / architecture.file
    files = [model]
    text = model.read_text(encoding="utf-8") if model.is_file() else ""
    for module in re.findall(r"^from (?:\.|vllm\.model_executor\.models\.)([A-Za-z0-9_]+) import", text,
                             flags=re.MULTILINE):
        sibling = model.parent / f"{module}.py"
        if sibling.is_file() and sibling not in files:
            files.append(sibling)
    files.extend(root / relative for relative in CONFIG_CODE)
    return [f for f in files if f.is_file()]


def vllm_words(files: list[Path]) -> set[str]:
    """Every identifier or quoted word of ``files``: a config key vLLM's code reads appears among them
    (``config.rope_theta``, ``getattr(config, "num_attention_groups", ...)``)."""
    words: set[str] = set()
    for path in files:
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", path.read_text(encoding="utf-8")))
    return words


def check_keys(recipe: Recipe, files: list[Path]) -> None:
    """Refuse ``recipe`` where its config states a key none of ``files`` (vLLM's code for it) names: a
    ``ValueError`` naming the keys and the files asked."""
    words = vllm_words(files)
    unknown = sorted(k for k in recipe.config if k not in {"model_type", "architectures"} and k not in words)
    if unknown:
        raise ValueError(f"recipe {recipe.name}: {', '.join(unknown)} read by none of vLLM's code for it "
                         f"({', '.join(p.name for p in files)}): a recipe states only keys vLLM's code uses")


def recipe(architecture: Any, path: Path = RECIPES) -> Recipe | None:
    """The checked recipe of ``architecture`` (a :class:`survey.vllm_engine.configs.Architecture`), or None where
    ``path`` has none; a recipe with a key vLLM's code for it does not name is refused (:func:`check_keys`).

    See Also
    --------
    survey.vllm_engine.configs.config_for : asks it after rules 1-4.
    """
    found = recipes(path).get(architecture.name)
    if found is not None and not found.alias_of:
        check_keys(found, vllm_files(architecture))
    return found


def describe(found: Recipe) -> str:
    """The recipe's origin in one line, as a row's ``config:`` note says it."""
    source = found.source
    line = f"github:{source['repo']}/{source['path']} (commit {source['commit'][:12]})"
    if found.alias_of:
        return f"recipe: {found.alias_of}'s config ({line}: {source.get('note', '')})"
    grouped: dict[str, list[str]] = {}
    for key, words in found.origins.items():
        if words != "the source states it":
            grouped.setdefault(words, []).append(key)
    stated = "; ".join(f"{', '.join(keys)}: {words}" for words, keys in grouped.items())
    keys = ", ".join(k for k in found.config if k not in {"model_type", "architectures"})
    note = f": {source['note']}" if source.get("note") else ""
    return f"recipe of the keys vLLM reads ({keys}) from {line}{note}" + (f"; {stated}" if stated else "")


__all__ = ["RECIPES", "Recipe", "check_keys", "describe", "parse", "recipe", "recipes", "vllm_files", "vllm_words"]
