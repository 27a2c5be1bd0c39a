"""The attention core: softmax and masks, scaled dot-product attention, its chunked (online-softmax) form,
and the head bookkeeping of grouped-query attention.

Modules: :mod:`refpos.core.softmax`, :mod:`refpos.core.attention`, :mod:`refpos.core.chunked`,
:mod:`refpos.core.heads`. ``__all__`` is this package's public API. A module name never hides behind a
function of the same name, so two functions stay in their modules: ``refpos.core.softmax.softmax`` and
``refpos.core.attention.attention`` (the front door's :func:`refpos.attention`).
"""

from refpos.core.chunked import chunked_attention
from refpos.core.heads import merge_heads, repeat_kv, split_heads
from refpos.core.softmax import causal_mask, chunked_causal_mask, sliding_window_mask

__all__ = [
    "causal_mask",
    "chunked_attention",
    "chunked_causal_mask",
    "merge_heads",
    "repeat_kv",
    "sliding_window_mask",
    "split_heads",
]
