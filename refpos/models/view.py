r"""A config.json read once: :class:`ConfigView`, the one object a resolution passes around.

A resolution (:func:`refpos.model_positions`) loads the config once and walks it one way: the whole model, then
each part (the language model inside ``text_config``, a vision tower in ``vision_config``, …), then each stack of
a part, then each layer. Every step receives a :class:`ConfigView` of the section it reads; nothing goes back to
the file or to the raw dict of another section. A view

* reads keys and remembers each key read, by its full path (``text_config.rope_theta``), in a record shared by
  every view of the same config — so what no step read is known at the end (:meth:`ConfigView.unread`), and what
  is positional among it is reported as not modelled. A view is a read-only mapping: ``view[key]`` and
  ``view.get(key, default)`` behave as a dict's and record the key; :meth:`ConfigView.value` reads dotted keys
  (``attn_config.alibi``) and gives ``default`` for a null as for an absent key;
* converts on the way: :meth:`ConfigView.int`, :meth:`ConfigView.float`, :meth:`ConfigView.bool` refuse a
  value of the wrong type with a ``ValueError``/``TypeError`` naming the key by its full path;
* opens sections: :meth:`ConfigView.section` is the view of a nested mapping (``vision_config``), sharing the
  record of reads.

Examples
--------
>>> view = ConfigView.load({"model_type": "llava", "text_config": {"model_type": "llama", "rope_theta": 1e4}})
>>> text = view.section("text_config")
>>> text.path, text.model_type, text.float("rope_theta")
('text_config.', 'llama', 10000.0)
>>> sorted(view.read)
['text_config', 'text_config.model_type', 'text_config.rope_theta']
>>> view.unread()
['model_type']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from refpos.inputs import InputError, load_json
from refpos.validation import check_bool, check_float, check_int

#: the value :meth:`ConfigView.get` returns for a key that is absent (distinct from a key holding ``null``)
MISSING: Any = object()

#: keys that hold the language model's config inside a wrapper config, tried in this order at every level:
#: Qwen2.5-Omni / Qwen3-Omni ``thinker_config`` (whose ``text_config`` is the language model), ColPali's
#: ``vlm_config``, the ``text_config`` of transformers' multimodal configs, and the ``llm_config`` /
#: ``language_config`` of remote-code configs (InternVL, DeepSeek-VL2)
WRAPPERS = ("thinker_config", "vlm_config", "text_config", "llm_config", "language_config")


#: keys whose value is a config of its own (a wrapper's language model, a vision or audio tower)
SUB_CONFIGS = (*WRAPPERS, "vision_config", "audio_config")


def check_sub_configs(cfg: Mapping[str, Any], prefix: str = "") -> None:
    """``TypeError`` naming the key when a :data:`SUB_CONFIGS` key, at any depth, holds something other than a
    JSON object or null: a ``text_config`` that is a list is a malformed config, not a model without one."""
    for key in SUB_CONFIGS:
        value = cfg.get(key)
        if isinstance(value, Mapping):
            check_sub_configs(value, f"{prefix}{key}.")
        elif value is not None:
            raise TypeError(f"{prefix}{key} must be a JSON object (a config of its own) or null, got "
                            f"{type(value).__name__} {repr(value)[:40]}")


def load_config(config_or_path: Any) -> dict[str, Any]:
    """A config.json as a dict: a mapping is copied; a path (or a directory holding config.json) is read.

    The file is read through :mod:`refpos.inputs`: a regular file only (a FIFO or a device is refused
    before reading), at most :data:`~refpos.inputs.MAX_JSON_BYTES`, UTF-8, nesting at most
    :data:`~refpos.inputs.MAX_JSON_DEPTH`, no duplicate keys. Each refusal and invalid JSON is a
    ``ValueError``, a non-object JSON or a wrong type a ``TypeError``, each naming the path.
    """
    if isinstance(config_or_path, ConfigView):
        return dict(config_or_path.raw)
    if isinstance(config_or_path, Mapping):
        check_sub_configs(config_or_path)
        return dict(config_or_path)
    if not isinstance(config_or_path, (str, os.PathLike)):
        raise TypeError("config_or_path must be a config mapping or a path to config.json, got "
                        f"{type(config_or_path).__name__}")
    path = os.fspath(config_or_path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        data = load_json(path, what="config.json")
    except InputError as exc:
        raise ValueError(f"config_or_path: {exc}") from None
    if not isinstance(data, dict):
        raise TypeError(f"config_or_path: {path!r} must hold a JSON object, got {type(data).__name__}")
    check_sub_configs(data)
    return data


class ConfigView(Mapping[str, Any]):
    """One section of a config (the whole config at ``path == ""``), and the shared record of keys read.

    Parameters
    ----------
    data : mapping
        The section's keys and values (held read-only).
    path : str
        The section's dotted path inside the config, ending in ``"."`` (``"text_config."``; empty at the top).
    read : set of str, optional
        The record of keys read, shared with the views of the same config (a new one when omitted).
    """

    def __init__(self, data: Mapping[str, Any], path: str = "", read: set[str] | None = None,
                 parent: ConfigView | None = None) -> None:
        if not isinstance(data, Mapping):
            raise TypeError(f"{path.rstrip('.') or 'config'} must be a mapping, got {type(data).__name__}")
        self._data = MappingProxyType(dict(data))
        self.path = path
        self._read: set[str] = set() if read is None else read
        #: the view of the section holding this one (``None`` at the top)
        self.parent = parent

    @classmethod
    def load(cls, config_or_path: Any) -> ConfigView:
        """The view of a whole config: a mapping, a path to config.json, its directory, or a view (returned as is)."""
        if isinstance(config_or_path, ConfigView):
            return config_or_path
        return cls(load_config(config_or_path))

    # ------------------------------------------------------------------------------------------ reading
    @property
    def raw(self) -> Mapping[str, Any]:
        """The section's keys and values, read-only, without marking anything read (for reports and copies)."""
        return self._data

    @property
    def read(self) -> frozenset[str]:
        """Every key read so far through any view of this config, by full dotted path."""
        return frozenset(self._read)

    def mark(self, key: str) -> None:
        """Record ``key`` (relative to this section) as read without reading its value."""
        self._read.add(self.path + key)

    def mark_paths(self, paths: Iterable[str]) -> None:
        """Record keys read elsewhere, by their full dotted paths (a resolver that keeps its own record)."""
        self._read.update(paths)

    def _lookup(self, key: str) -> Any:
        value: Any = self._data
        for part in key.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return MISSING
            value = value[part]
        return value

    def __getitem__(self, key: str) -> Any:
        """The value at ``key``, as a dict gives it (a ``KeyError`` when absent); the key counts as read."""
        self.mark(key)
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        """The section's top-level keys (iterating reads nothing)."""
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str, default: Any = None) -> Any:
        """The value at ``key`` as a dict gives it (``default`` only when absent); the key counts as read."""
        self.mark(key)
        return self._data.get(key, default)

    def value(self, key: str, default: Any = None) -> Any:
        """The value at a dotted ``key`` (absent and ``null`` give ``default``); the key counts as read."""
        self.mark(key)
        found = self._lookup(key)
        return default if found is MISSING or found is None else found

    def has(self, key: str) -> bool:
        """True when ``key`` is present and not ``null``; asking does not count as reading."""
        value = self._lookup(key)
        return value is not MISSING and value is not None

    def __contains__(self, key: object) -> bool:
        """True when ``key`` is present, even as ``null``; asking does not count as reading."""
        return isinstance(key, str) and self._lookup(key) is not MISSING

    def first(self, keys: tuple[str, ...]) -> tuple[str, Any] | None:
        """``(key, value)`` of the first of ``keys`` present and not null; every key tried counts as read."""
        for key in keys:
            found = self.value(key)
            if found is not None:
                return key, found
        return None

    # --------------------------------------------------------------------------------------- conversions
    def name(self, key: str) -> str:
        """``key``'s full dotted path, as messages name it."""
        return self.path + key

    def int(self, key: str, default: Any = None, *, minimum: int | None = None) -> int:
        """An integer at ``key`` (``default`` when absent); a ``ValueError``/``TypeError`` naming its path."""
        return check_int(self.name(key), self.value(key, default), minimum=minimum)

    def float(self, key: str, default: Any = None) -> float:
        """A finite number at ``key`` (``default`` when absent), as float."""
        return float(check_float(self.name(key), self.value(key, default)))

    def bool(self, key: str, default: Any = None) -> bool:
        """A bool at ``key`` (``default`` when absent)."""
        return check_bool(self.name(key), self.value(key, default))

    def count(self, keys: tuple[str, ...], what: str, *, minimum: int = 1) -> int:
        """A positive integer from the first present of ``keys``; a ``ValueError`` naming them when none is."""
        found = self.first(keys)
        if found is None:
            raise ValueError(f"{self.name(keys[0])}: the config gives no {what} (none of {list(keys)})")
        return check_int(self.name(found[0]), found[1], minimum=minimum)

    # ------------------------------------------------------------------------------------------ sections
    @property
    def model_type(self) -> str | None:
        """The section's ``model_type`` (read), ``None`` when it has none; a ``TypeError`` for a non-string."""
        value = self.value("model_type")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{self.name('model_type')} must be a string, a transformers model type such as "
                            f"'llama', got {type(value).__name__} {value!r}")
        return value

    def section(self, key: str) -> ConfigView:
        """The view of the mapping at ``key`` (read), sharing this config's record of reads."""
        value = self.value(key)
        if not isinstance(value, Mapping):
            raise TypeError(f"{self.name(key)} must be a mapping (a config section), got {type(value).__name__}")
        return ConfigView(value, f"{self.path}{key}.", self._read, parent=self)

    @property
    def wrapper_model_type(self) -> str | None:
        """The ``model_type`` of the nearest section around this one that states one (``None`` at the top)."""
        outer = self.parent
        while outer is not None:
            value = outer.raw.get("model_type")
            if isinstance(value, str):
                return value
            outer = outer.parent
        return None

    def unread(self) -> list[str]:
        """The section's top-level keys no view has read, by full path, sorted."""
        return sorted(self.path + key for key in self._data if self.path + key not in self._read)

    def __repr__(self) -> str:
        return f"ConfigView({self.path.rstrip('.') or '<top>'}, model_type={self._data.get('model_type')!r})"


__all__ = ["MISSING", "SUB_CONFIGS", "WRAPPERS", "ConfigView", "check_sub_configs", "load_config"]
