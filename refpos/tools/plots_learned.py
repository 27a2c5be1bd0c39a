"""The figure of where a learned table is read in a left-padded sequence (docs/learned.md), registered by
:mod:`refpos.tools.plots`.

``learned-reads``: the table row each of the 7 real tokens of 10 reads (the first 3 padding), for the three inputs
transformers' learned tables are read at (:mod:`refpos.models.sources`): the position ids built as slots (GPT-2
given no ids), the attention mask's running count plus OPT's offset 2, and the count of non-padding ids plus
RoBERTa's padding index 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
LEARNED_PLOT = (
    "learned-reads", "the table row each token of a left-padded sequence reads: slots (GPT-2), the mask's count + 2 "
    "(OPT), the non-padding count + 1 (RoBERTa)", "With three padding tokens first, the slot puts the first real "
    "token at row 3, while OPT's and RoBERTa's counts start it at the row the first token of an unpadded sequence "
    "reads (2 and 2): the same text reads other rows when it is padded, unless the model counts.", (6.4, 3.6))


def plot_learned_reads(fig: Any) -> None:
    from refpos.models.sources import Given

    mask = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1])
    ids = np.where(mask == 1, 7, 1)  # padding id 1 (RoBERTa's)
    given = Given.of(attention_mask=mask, input_ids=ids, length=mask.size)
    reads = [(given.read(("cache_position",), "query"), "slot (GPT-2 given no ids)", "o-"),
             (given.read(("mask_count",), "query") + 2, "mask's count + 2 (OPT)", "s-"),
             (given.read(("input_ids_cumsum",), "query", padding_idx=1) + 1 + 1, "non-padding count + 1 (RoBERTa)",
              "^-")]
    ax = fig.add_subplot(1, 1, 1)
    for rows, label, style in reads:  # the real tokens' rows (a padding token's output is masked out)
        ax.plot(np.arange(mask.size)[mask == 1], np.asarray(rows)[mask == 1], style, label=label)
    ax.axvspan(-0.5, 2.5, color="0.9", label="padding")
    ax.set_xlabel("token slot")
    ax.set_ylabel("table row read")
    ax.legend(fontsize=9)


#: the plots this module draws, as :mod:`refpos.tools.plots` registers them
DRAWN = ((LEARNED_PLOT, plot_learned_reads),)
