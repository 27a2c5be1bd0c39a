"""The encoding kinds: one record per way a layer learns positions (:data:`KINDS`), each with every piece that varies
from one kind to the next — its facts, builder, layer record, check target, goldens, contract, docs
(:mod:`refpos.models.kinds.record`).
"""

from refpos.models.kinds.record import EncodingKind, Stack
from refpos.models.kinds.registry import KINDS, TABLE_KINDS, kind_of

__all__ = ["KINDS", "TABLE_KINDS", "EncodingKind", "Stack", "kind_of"]
