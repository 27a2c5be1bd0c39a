"""The registry: every encoding kind refpos models, by name (:data:`KINDS`), and what is derived from it.

To add a kind, write its formula module (``refpos/encodings/<kind>.py``), then its
:class:`~refpos.models.kinds.record.EncodingKind` record in a module of this package (its facts, layer record and
builder beside it) and list the record in :data:`KINDS`. The family table accepts its facts sub-table and its
name as a row's ``encoding`` (:mod:`refpos.models.facts`), :func:`refpos.model_positions` builds its layers,
``refpos positions`` prints them, the docs table (docs/families.md#encoding-kinds) follows from it, and its
``check`` and ``golden`` name its target in the check registry (:mod:`refpos.check.targets`) and its family in the
golden registry (:mod:`refpos.golden.registry`); the meta-test (``refpos/tests/test_kinds_registry.py``) asks the
new record for every piece.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from refpos.models.kinds.absolute import LEARNED, SINUSOIDAL
from refpos.models.kinds.alibi import ALIBI
from refpos.models.kinds.axis_tables import AXIS_TABLES
from refpos.models.kinds.bias_table import BIAS_TABLE
from refpos.models.kinds.box_tables import BOX_TABLES
from refpos.models.kinds.conv_position import CONV_POSITION
from refpos.models.kinds.deberta import DEBERTA
from refpos.models.kinds.decomposed import DECOMPOSED
from refpos.models.kinds.fourier import FOURIER
from refpos.models.kinds.grid import GRID
from refpos.models.kinds.layout_bias import LAYOUT_BIAS
from refpos.models.kinds.none import NO_ATTENTION, NONE
from refpos.models.kinds.record import EncodingKind
from refpos.models.kinds.rope import MROPE, ROPE
from refpos.models.kinds.rope_2d import ROPE_2D
from refpos.models.kinds.shaw_key import SHAW_KEY
from refpos.models.kinds.sincos2d import SINCOS2D
from refpos.models.kinds.sinusoid1d import SINUSOID1D
from refpos.models.kinds.t5 import T5_KIND
from refpos.models.kinds.tiled_grid import TILED_GRID
from refpos.models.kinds.vision_rope import VISION_ROPE
from refpos.validation import check_choice


def _registry(*kinds: EncodingKind) -> Mapping[str, EncodingKind]:
    names = [kind.name for kind in kinds]
    if len(set(names)) != len(names):
        raise ValueError(f"kind names must be unique, got {names}")
    for kind in kinds:
        if kind.in_table and kind.build is None:
            raise ValueError(f"kind {kind.name!r}: a kind a family row may name needs a builder")
    return MappingProxyType({kind.name: kind for kind in kinds})


#: kind name -> its record, in the order the docs list them
KINDS: Mapping[str, EncodingKind] = _registry(ROPE, MROPE, ROPE_2D, ALIBI, T5_KIND, LEARNED, SINUSOIDAL, DEBERTA,
                                              NONE, NO_ATTENTION, VISION_ROPE, BIAS_TABLE, CONV_POSITION, GRID,
                                              SINCOS2D, DECOMPOSED, FOURIER, SINUSOID1D, AXIS_TABLES,
                                              TILED_GRID, SHAW_KEY, BOX_TABLES, LAYOUT_BIAS)
#: the kinds a family row may name as its ``encoding``
TABLE_KINDS: tuple[str, ...] = tuple(name for name, kind in KINDS.items() if kind.in_table)
#: the kinds with facts, whose sub-table a family row may hold (named as the kind)
FACT_KINDS: tuple[str, ...] = tuple(name for name, kind in KINDS.items() if kind.facts is not None)


def kind_of(name: object) -> EncodingKind:
    """The record of kind ``name``: a ``TypeError``/``ValueError`` naming ``encoding`` and the known kinds."""
    return KINDS[check_choice("encoding", name, tuple(KINDS))]


def docs_table() -> str:
    """The Markdown table of docs/families.md#encoding-kinds: one row per kind, from its record."""
    rows = ["| kind | what it does | acts at | reads | `refpos check` | goldens | docs |",
            "|---|---|---|---|---|---|---|"]
    for kind in KINDS.values():
        page, anchor = kind.doc.removeprefix("docs/").split("#")
        rows.append(f"| `{kind.name}` | {kind.summary} | {kind.hook} | {', '.join(kind.reads) or '—'} | "
                    f"{'`' + kind.check + '`' if kind.check else '—'} | "
                    f"{'`' + kind.golden + '/…`' if kind.golden else '—'} | "
                    f"[{page.removesuffix('.md')}]({page}#{anchor}) |")
    return "\n".join(rows)


__all__ = ["FACT_KINDS", "KINDS", "TABLE_KINDS", "docs_table", "kind_of"]
