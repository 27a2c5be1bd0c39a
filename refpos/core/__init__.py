"""The attention core: softmax and masks, scaled dot-product attention, its chunked (online-softmax) form,
and the head bookkeeping of grouped-query attention.

Modules: :mod:`refpos.core.softmax`, :mod:`refpos.core.attention`, :mod:`refpos.core.chunked`,
:mod:`refpos.core.heads`. Nothing is re-exported here, so a module name never hides behind a function
of the same name; the front door :mod:`refpos` exports the public functions.
"""
