"""How a config class fills an absent ``layer_types``: the ``layer_pattern`` column of the family table.

A family row's ``layer_pattern`` (:mod:`refpos.models.families`) says which layer is which when a config does not
list its layer types; :mod:`refpos.models.schedule` evaluates it. Its forms are documented on :class:`LayerPattern`
and in the family table's header.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerPattern:
    """How a config class fills an absent ``layer_types`` (see the module docstring)."""

    every: int | None = None
    key: str | None = None
    indices: str | None = None
    other: str = "sliding_attention"
    #: with ``indices``: the type of every layer when the config lacks that key
    absent: str | None = None
    #: with ``indices``: the type of the listed layers (Mllama lists its cross-attention layers); with ``every``: the
    #: type of every ``n``-th layer (Qwen4-Exp's config class names its attention layers ``indexed_attention``)
    listed: str = "full_attention"
    #: with ``every``: layer ``i`` is ``full_attention`` when ``i % every == offset`` (default ``every - 1``)
    offset: int | None = None
    #: with ``every``: the config key holding ``offset`` (Jamba: ``attn_layer_offset``)
    offset_key: str | None = None
    #: with ``every``: the layers below it are ``other``
    start: int = 0
    #: with ``indices``: the list counts layers from 1
    one_based: bool = False
    #: with ``key``: one character per layer, mapped to its type
    chars: tuple[tuple[str, str], ...] = ()
    #: with ``key`` and ``chars``: the key lists block names repeated over the layers, each mapped to its type by
    #: ``chars``, and this is the config class's list when the key is absent (RecurrentGemma's ``block_types``)
    cycle: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.cycle, (str, bytes)) or not all(isinstance(name, str) for name in self.cycle):
            raise TypeError(f"layer_pattern: cycle must be a list of block names, got {self.cycle!r}")
        object.__setattr__(self, "cycle", tuple(self.cycle))
        if self.cycle and (not self.chars or any(name not in dict(self.chars) for name in self.cycle)):
            raise ValueError(f"layer_pattern: cycle {list(self.cycle)} needs chars naming the type of each of its "
                             "blocks")
        forms = (self.every is not None) + (self.indices is not None) + bool(self.chars)
        if forms != 1 or (self.every is not None and self.every < 1) \
                or (self.indices is not None and self.key is not None) or (self.absent and self.indices is None) \
                or (self.chars and self.key is None) or (self.offset is not None and self.every is None) \
                or (self.offset is not None and self.offset < 0) or self.start < 0 \
                or (self.one_based and self.indices is None) or (self.offset_key and self.every is None) \
                or (self.listed != "full_attention" and self.indices is None and self.every is None):
            raise ValueError(f"layer_pattern: give every = n >= 1 (with an optional key, offset, start), indices = "
                             f"key (with an optional absent, listed, one_based) or chars with key (and an optional "
                             f"cycle), got {self}")


__all__ = ["LayerPattern"]
