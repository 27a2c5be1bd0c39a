"""vLLM's model registry, each architecture with the config it is built from.

vLLM serves a checkpoint by the ``architectures`` its ``config.json`` names: its registry
(``vllm.model_executor.models.registry``) maps each architecture to a model class of its own, in groups (text
generation, multimodal, embedding, speculative decoding, vLLM's Transformers backend ...). The survey takes every
architecture of it (:func:`architectures`) and finds the config a checkpoint of it carries
(:func:`config_for`), in this order:

1. the transformers config class of the model type whose auto classes name the architecture (exactly, else
   case-insensitively: vLLM spells ``PhiMoEForCausalLM`` where transformers spells ``PhimoeForCausalLM``);
2. a transformers model type named as vLLM's module for it, else as the architecture (``Qwen2ForRewardModel``:
   ``qwen2``; ``SarvamMoEForCausalLM``: ``sarvam_moe``);
3. vLLM's own config class for a model type named so (``vllm.transformers_utils.config``: ChatGLM, Step ...),
   else the one whose defaults name the architecture (:func:`_vllm_config_classes`: DeepSeek-VL2's);
4. a public ``config.json`` of a family that ships its own code (``refpos/data/remote_configs.json``, each entry
   with its source), read through a config class registered for its model type in this process;
5. a published ``config.json`` of the architecture itself, stored as ``survey/vllm_engine/published/<name>.json``
   (:func:`published_config`: the config as its authors ship it and where it was read, repository, path and
   commit), read the same way: a model type transformers does not know is a plain ``PretrainedConfig`` of the
   dict's keys. A stored record is asked before rules 1-4: a config class's defaults may lack keys every
   published checkpoint states and vLLM's model code reads (GLM-4.5's ``head_dim``, MiniMax-M2's ``rotary_dim``),
   which the published config carries, read by the same class;
5b. a recipe of ``survey/vllm_engine/recipes.toml`` (:mod:`survey.vllm_engine.recipes`): the keys vLLM's model code
   reads, at the values a cited public file states (each key checked against vLLM's code), or the config of the
   architecture a checkpoint of this one is of (``alias_of``);
6. for a speculative head vLLM builds from its target's checkpoint (DeepSeek's, GLM's ... multi-token prediction
   layers), the target's config as vLLM rewrites it for the head (:func:`speculative_heads`);
7. for an EAGLE or DFlash draft ``Eagle<A>`` / ``Eagle3<A>`` / ``DFlash<A>``, the config rules 1-5 find for
   architecture ``<A>``: vLLM's ``EAGLEConfig`` serves a draft whose config names ``<A>`` under that name
   (:func:`eagle_target`).

The config's defaults are shrunk by :func:`survey.tiny.shrink_dict` (what positions depend on kept) at the first
strength that builds and runs. An architecture none of these names a config for is *not reached*, by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REMOTE_CONFIGS = ROOT / "refpos" / "data" / "remote_configs.json"
#: one published config.json per architecture, each with its source (:func:`published_config`)
PUBLISHED = Path(__file__).resolve().parent / "published"
#: the keys a published record's source names
SOURCE_KEYS = ("repo", "path", "commit")

#: the registry's groups, as vLLM names its tables, and how the survey names each
GROUPS = {"_TEXT_GENERATION_MODELS": "text", "_MULTIMODAL_MODELS": "multimodal", "_EMBEDDING_MODELS": "embedding",
          "_LATE_INTERACTION_MODELS": "late interaction", "_REWARD_MODELS": "reward",
          "_SEQUENCE_CLASSIFICATION_MODELS": "classification", "_TOKEN_CLASSIFICATION_MODELS": "classification",
          "_SPECULATIVE_DECODING_MODELS": "speculative", "_TRANSFORMERS_BACKEND_MODELS": "transformers backend",
          "_TRANSFORMERS_SUPPORTED_MODELS": "transformers backend"}


@dataclass(frozen=True)
class Architecture:
    """One entry of vLLM's model registry: the architecture name, vLLM's module and class, its group."""

    name: str
    module: str
    cls: str
    group: str

    @property
    def file(self) -> str:
        """vLLM's source file of the model class, relative to ``vllm/``."""
        relative = self.module.removeprefix("vllm.")
        return (relative if self.module.startswith("vllm.") else f"model_executor/models/{self.module}") \
            .replace(".", "/") + ".py"


def missing_import(architecture: Architecture) -> str | None:
    """The error importing vLLM's module of ``architecture`` raises in this process (a distribution it imports
    that is not installed: torchvision, timm ...), or None where it imports. vLLM itself inspects each class in a
    subprocess and says only that the inspection failed."""
    import importlib

    name = architecture.module if architecture.module.startswith("vllm.") else \
        f"vllm.model_executor.models.{architecture.module}"
    try:
        importlib.import_module(name)
    except Exception as exc:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    return None


def architectures() -> list[Architecture]:
    """Every architecture of the installed vLLM's registry, in its tables' order."""
    from vllm.model_executor.models import registry

    found: dict[str, Architecture] = {}
    for table, group in GROUPS.items():
        for name, (module, cls) in getattr(registry, table, {}).items():
            found.setdefault(name, Architecture(name, module, cls, group))
    for name, (module, cls) in registry._VLLM_MODELS.items():
        found.setdefault(name, Architecture(name, module, cls, "other"))
    return list(found.values())


@cache
def _transformers_classes() -> dict[str, list[str]]:
    """transformers' auto class names, lower case -> the model types whose auto classes name it."""
    from transformers.models.auto import modeling_auto

    names: dict[str, list[str]] = {}
    for mapping in sorted(m for m in dir(modeling_auto) if m.endswith("_MAPPING_NAMES")):
        for model_type, classes in getattr(modeling_auto, mapping).items():
            for cls in classes if isinstance(classes, (list, tuple)) else [classes]:
                if model_type not in names.setdefault(cls.lower(), []):
                    names[cls.lower()].append(model_type)
    return names


def _stem(name: str) -> str:
    """A class name without its head or config suffix: ``LlamaForCausalLM`` and ``LlamaConfig`` -> ``llama``."""
    for cut in ("For", "LMHead", "Config", "Model"):
        name = name.split(cut, 1)[0] if cut in name[1:] else name
    return name.lower()


def _model_type_of(architecture: Architecture) -> str | None:
    """The model type whose auto classes name ``architecture``: where several do (``LlamaForCausalLM`` is also
    EXAONE's), for a causal LM the text model type of vLLM's module (``llama4_text``), else the one named as
    vLLM's module, else the one whose config class has the architecture's stem."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    candidates = _transformers_classes().get(architecture.name.lower(), [])
    module = architecture.module.rsplit(".", 1)[-1]
    if f"{module}_text" in candidates and architecture.name.endswith("ForCausalLM"):
        return f"{module}_text"  # a composite's causal LM alone: its checkpoint carries the text config (Llama 4)
    if module in candidates:
        return module
    stem = _stem(architecture.name)
    same = [t for t in candidates if _stem(CONFIG_MAPPING_NAMES.get(t, "")) == stem]
    return (same or candidates or [None])[0]


def remote_configs() -> dict[str, dict[str, Any]]:
    """Architecture -> the first public ``config.json`` of ``refpos/data/remote_configs.json`` naming it, with its
    source (``{"config": ..., "source": ...}``); empty where the file is absent."""
    if not REMOTE_CONFIGS.is_file():
        return {}
    entries = json.loads(REMOTE_CONFIGS.read_text(encoding="utf-8"))
    out: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        for architecture in entry["config"].get("architectures") or []:
            out.setdefault(architecture, {"config": entry["config"], "source": f"{name}: {entry['source']}"})
    return out


@dataclass
class Found:
    """Where an architecture's config comes from: ``config`` (its config class's defaults, or a public
    config.json read by a class registered for it), ``model_type``, ``origin`` (which rule of the module
    docstring found it) and, for a speculative head built from its target's config (rule 6), ``head_of``: the
    target."""

    config: Any
    model_type: str
    origin: str
    head_of: str = ""


def config_for(architecture: Architecture, heads: bool = True) -> Found | None:
    """The config a checkpoint of ``architecture`` carries (module docstring; rule 6 only where ``heads``), or
    None."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    published = published_config(architecture.name)
    if published is not None:  # rule 5, asked first: what a checkpoint states over a class's defaults
        values, source = published
        model_type = str(values["model_type"])
        return Found(register_remote(model_type).from_dict(values), model_type,
                     "published config.json (" + describe(source) + ")")
    model_type = _model_type_of(architecture)
    origin = "transformers' auto class " + architecture.name
    module = architecture.module.rsplit(".", 1)[-1]
    if model_type is None and module in CONFIG_MAPPING_NAMES:
        model_type, origin = module, f"transformers model type {module!r} (vLLM's module)"
    stem = _stem(architecture.name)
    named = [t for t in CONFIG_MAPPING_NAMES if t.replace("_", "").replace("-", "") == stem]
    if model_type is None and named:
        model_type, origin = named[0], f"transformers model type {named[0]!r} (the architecture's name)"
    if model_type is not None:
        return Found(AutoConfig.for_model(model_type), model_type, origin)
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    if module in _CONFIG_REGISTRY:
        cls = _CONFIG_REGISTRY[module]
        return Found(cls(), module, f"vLLM's config class {cls.__name__}")
    if architecture.name in _vllm_config_classes():
        model_type = _vllm_config_classes()[architecture.name]
        cls = _CONFIG_REGISTRY[model_type]
        return Found(cls(), model_type, f"vLLM's config class {cls.__name__}, whose defaults name the architecture")
    remote = remote_configs().get(architecture.name)
    if remote is not None:
        values = {k: v for k, v in remote["config"].items() if not k.startswith("_")}
        model_type = str(values["model_type"])
        return Found(register_remote(model_type).from_dict(values), model_type,
                     "public config.json (" + remote["source"] + ")")
    recipe = _recipe_config(architecture)
    if recipe is not None:
        return recipe
    target = eagle_target(architecture.name) if heads else None
    found = config_for(target, heads=False) if target is not None else None
    if found is not None:
        method = "DFlash" if architecture.name.startswith("DFlash") else "EAGLE"
        return Found(found.config, found.model_type, f"the {method} draft of {target.name}: vLLM's EAGLEConfig names "
                     f"a draft whose config names {target.name} so; that config: {found.origin}")
    head = speculative_heads().get(architecture.name) if heads else None
    if head is not None:
        target, found = head
        register_remote(found.model_type)
        return Found(found.config, found.model_type, f"{target}'s config ({found.origin}) as vLLM's "
                     "SpeculativeConfig.hf_config_override rewrites it for the speculative head", head_of=target)
    return None


def _recipe_config(architecture: Architecture) -> Found | None:
    """Rule 5b: the config a recipe of ``survey/vllm_engine/recipes.toml`` states (:mod:`survey.vllm_engine.recipes`),
    a plain config of its keys, or the aliased architecture's config (rules 1-5) under this name; None without one."""
    from survey.vllm_engine import recipes

    found = recipes.recipe(architecture)
    if found is None:
        return None
    if found.alias_of:
        every = {a.name: a for a in architectures()}
        if found.alias_of not in every:
            raise ValueError(f"recipe {architecture.name}: alias_of {found.alias_of!r} is not in vLLM's registry")
        aliased = config_for(every[found.alias_of], heads=False)
        if aliased is None:
            raise ValueError(f"recipe {architecture.name}: {found.alias_of} has no config either")
        return Found(aliased.config, aliased.model_type, f"{recipes.describe(found)}; that config: {aliased.origin}")
    model_type = str(found.config["model_type"])
    return Found(register_remote(model_type).from_dict(dict(found.config)), model_type, recipes.describe(found))


def eagle_target(name: str) -> Architecture | None:
    """The architecture ``<A>`` of the registry an EAGLE or DFlash draft ``Eagle<A>``, ``Eagle3<A>`` or
    ``DFlash<A>`` is named after (vLLM's ``EAGLEConfig`` prefixes the architecture its draft's config names), or
    None."""
    every = {a.name: a for a in architectures()}
    for prefix in ("Eagle3", "Eagle", "DFlash"):
        if name.startswith(prefix) and name[len(prefix):] in every:
            target = every[name[len(prefix):]]
            return target if target.group != "transformers backend" else None
    return None


@cache
def speculative_heads() -> dict[str, tuple[str, Found]]:
    """Speculative head -> ``(target architecture, the target's config rewritten for it)``: every architecture of
    the registry whose config rules 1-5 find, passed through vLLM's ``SpeculativeConfig.hf_config_override`` (the
    rewrite vLLM applies when a checkpoint's own multi-token prediction layers serve as its draft), where that names
    another architecture of the registry (the first target found for each)."""
    import copy

    from vllm.config.speculative import SpeculativeConfig

    every = architectures()
    names = {a.name for a in every}
    heads: dict[str, tuple[str, Found]] = {}
    for target in every:
        if target.group in ("speculative", "transformers backend"):
            continue
        try:
            found = _config_for_target(target)
            if found is None:
                continue
            config = copy.deepcopy(found.config)
            config.architectures = [target.name]
            rewritten = SpeculativeConfig.hf_config_override(config)
        except Exception:  # a config the rewrite cannot read names no head
            continue
        head = (getattr(rewritten, "architectures", None) or [target.name])[0]
        if head != target.name and head in names and head not in heads:
            heads[head] = (target.name, Found(rewritten, str(rewritten.model_type), found.origin))
    return heads


def _config_for_target(target: Architecture) -> Found | None:
    """Rules 1-5 of the module docstring for a target of :func:`speculative_heads` (rule 6 is not asked again)."""
    return config_for(target, heads=False)


@cache
def _vllm_config_classes() -> dict[str, str]:
    """Architecture -> the model type of vLLM's own config class whose defaults name it (the first such)."""
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    named: dict[str, str] = {}
    for model_type in _CONFIG_REGISTRY:
        try:
            defaults = _CONFIG_REGISTRY[model_type]()
        except Exception:  # a class that needs arguments names no architecture by default
            continue
        for name in getattr(defaults, "architectures", None) or []:
            named.setdefault(name, model_type)
    return named


def describe(source: dict[str, str]) -> str:
    """A published record's source in one line: ``github:owner/name/path (commit 0123456789ab)``, its note after."""
    line = f"github:{source['repo']}/{source['path']} (commit {source['commit'][:12]})"
    return f"{line}: {source['note']}" if source.get("note") else line


def published_config(name: str, directory: Path | None = None) -> tuple[dict[str, Any], dict[str, str]] | None:
    """The published ``config.json`` stored for architecture ``name`` and its source, or None where none is stored.

    A record is ``{"source": {"repo", "path", "commit", "note"?}, "config": {...}, "alias_of"?: ...}`` in
    ``<directory>/<name>.json`` (default :data:`PUBLISHED`), read as JSON and nothing else; its config must carry a
    ``model_type`` and name ``name`` among its ``architectures``, or the architecture ``alias_of`` names where a
    checkpoint of another name is served by the same vLLM class (the source's note says why). A record that is a
    link, is not JSON or lacks a piece raises a ``ValueError`` naming the file.
    """
    path = (PUBLISHED if directory is None else directory) / f"{name}.json"
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"published config {path}: not a plain file (links are not followed)")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"published config {path}: not JSON ({exc})") from None
    source = record.get("source") if isinstance(record, dict) else None
    config = record.get("config") if isinstance(record, dict) else None
    if not isinstance(source, dict) or any(not isinstance(source.get(k), str) or not source[k] for k in SOURCE_KEYS):
        raise ValueError(f"published config {path}: its source must name {', '.join(SOURCE_KEYS)}")
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise ValueError(f"published config {path}: its config must be a dict with a model_type")
    named = {name, record.get("alias_of")} & set(config.get("architectures") or [])
    if not named:
        raise ValueError(f"published config {path}: its config names {config.get('architectures')}, not {name}")
    if "alias_of" in record:
        source = {**source, "note": f"{record['alias_of']}'s config, {source.get('note') or 'an alias'}"}
    return {k: v for k, v in config.items() if not k.startswith("_")}, source


def register_remote(model_type: str) -> Any:
    """A config class for ``model_type`` (a family that ships its own code), so that transformers' AutoConfig, which
    vLLM reads a config.json with, takes its keys as they are."""
    from transformers import AutoConfig, PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type in CONFIG_MAPPING:
        return CONFIG_MAPPING[model_type]
    cls = type(f"Remote{model_type.title().replace('_', '').replace('-', '')}Config", (PretrainedConfig,),
               {"model_type": model_type})
    AutoConfig.register(model_type, cls)
    return cls
