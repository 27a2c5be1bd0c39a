"""What a ``refpos check`` target is handed: one :class:`Request`, the candidate and the inputs its flags name.

The command line (:mod:`refpos.cli.check`) reads the candidate (block by block where the target streams it), the
dtype it computed in, and, with ``--config``, the model's layer the target checks; everything else stays in
``options`` (flag name → value, as ``argparse`` spells it: ``q_len`` for ``--q-len``) until the target asks for
it. A target asks with :meth:`Request.need` (a value it cannot do without: :class:`~refpos.check.shared.arrays.
Unusable` naming the flag when absent) and :meth:`Request.array` (a ``.npy`` file the flag names, read by the
strict reader, or opened for block reads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from refpos.check.shared.arrays import Unusable
from refpos.golden.files.npy import read_npy
from refpos.golden.files.npy_file import open_npy

#: ``progress(done, total)`` after each block a comparison reads, or ``None``
Progress = Callable[[int, int], None] | None


@dataclass
class Request:
    """One ``refpos check`` run of a target: ``candidate`` (a NumPy array, or a file opened for block reads),
    ``dtype`` (what it computed in), ``options`` (flag name → value), ``layer`` (the model's layer with
    ``--config``, else ``None``) and ``progress``."""

    target: str
    candidate: Any
    dtype: str
    options: Mapping[str, Any] = field(default_factory=dict)
    layer: Any = None
    progress: Progress = None

    def option(self, name: str, default: Any = None) -> Any:
        """The value of flag ``name`` (``None`` or ``default`` when not given)."""
        value = self.options.get(name)
        return default if value is None else value

    def need(self, name: str, flag: str) -> Any:
        """The value of flag ``name``; :class:`Unusable` saying the target needs ``flag`` when it was not given."""
        value = self.options.get(name)
        if value is None:
            raise Unusable(f"refpos check {self.target} needs {flag}")
        return value

    def array(self, name: str, flag: str, *, blocks: bool = False) -> Any:
        """The ``.npy`` file flag ``name`` names, read whole by the strict reader; ``blocks``: its header checked
        and the data left in the file, read block by block by the check with explicit reads
        (:func:`refpos.golden.files.npy_file.open_npy`: a file truncated meanwhile is an error line, where a
        memory map would die by SIGBUS)."""
        path = self.need(name, flag)
        return open_npy(path) if blocks else read_npy(path)

    def where(self) -> dict[str, Any]:
        """The chosen layer as the result reports it (empty without ``--config``)."""
        if self.layer is None:
            return {}
        layer = self.layer
        return {"layer": {"stack": layer.stack, "index": layer.index, "kind": layer.kind,
                          "reads": {use: list(source) for use, source in layer.reads}, **layer.params()}}


__all__ = ["Progress", "Request"]
