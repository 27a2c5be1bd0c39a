"""The figure of a speech encoder's clipped frame distances (docs/relative.md#shaw-key-term), registered by
:mod:`refpos.tools.plots`.

``shaw-key``: the table row each (query, key) pair of 24 frames reads, ``clip(s(j − i), −L, R) + o``: wav2vec2-BERT's
key minus query clipped to [−8, 3], and Granite Speech's query minus key clipped to ±8 inside blocks of 8 frames (the
clip at the block size never binds; the pairs of two blocks attend not at all).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.tools.figures import heat_panels

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
SHAW_KEY_PLOT = (
    "shaw-key", "the row each (query, key) pair of 24 frames reads: wav2vec2-BERT's [-8, 3] and Granite Speech's ±8 in "
    "blocks of 8", "Away from the diagonal wav2vec2-BERT's clip binds and every pair reads its first or last row; "
    "Granite Speech's clip at its block size never binds, and its pairs of two blocks (blank) attend not at all.",
    (9.0, 3.8))


def plot_shaw_key(fig: Any) -> None:
    from refpos.encodings.shaw_key import attended, shaw_key_rows

    w2v = shaw_key_rows(24, left=8, right=3, offset=8, sign="key_minus_query").astype(float)
    granite = shaw_key_rows(24, left=8, right=8, offset=8, sign="query_minus_key").astype(float)
    granite[~attended(24, 8)] = np.nan
    panels = [(w2v, "wav2vec2-BERT: key − query in [−8, 3]"), (granite, "Granite Speech: query − key, ±8, blocks of 8")]
    heat_panels(fig, panels, xlabel="key frame", ylabel="query frame", cmap="viridis", symmetric=False,
                label="table row")


#: the plots this module draws, as :mod:`refpos.tools.plots` registers them
DRAWN = ((SHAW_KEY_PLOT, plot_shaw_key),)
