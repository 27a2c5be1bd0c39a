r"""refpos.encodings.box_tables against transformers 5.25's LayoutLM embeddings (``LayoutLMEmbeddings``): what each
token gains from its box, ``X[x0] + Y[y0] + X[x1] + Y[y1] + H[y1 − y0] + W[x1 − x0]``.

The module is built from a small config (64 rows of each box table, width 8) with seeded tables; its word,
1-D position and token-type tables are zeroed and its layer norm replaced by the identity, so that its output is
the float32 sum of the six box rows (the zero rows add exactly). Fed boxes whose corners, heights and widths all
differ, and a page-wide box reaching the last rows. Tolerance: the bound of
refpos/encodings/box_tables_mistakes.py (module docstring), a float32 port's; every wrong variant of its catalogue
lies outside it. The same module refuses a box past its tables (an ``IndexError``) where refpos raises a
``ValueError`` naming ``bbox``.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.box_tables import box_positions
from refpos.encodings.box_tables_mistakes import MISTAKE_READS, box_inputs
from refpos.tests.kind_checks import transformers_object as _import

torch = pytest.importorskip("torch", reason="LayoutLM anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="LayoutLM anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

ROWS, D = 64, 8
BOXES = np.array([[[1, 3, 9, 20], [4, 2, 30, 6], [7, 11, 12, 37], [0, 5, 21, 8], [15, 16, 33, 28], [2, 9, 6, 30],
                   [0, 0, ROWS - 1, ROWS - 1], [ROWS - 1, ROWS - 1, ROWS - 1, ROWS - 1]]])


def _module():
    config = _import("layoutlm.configuration_layoutlm:LayoutLMConfig")(
        vocab_size=16, hidden_size=D, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
        max_position_embeddings=16, max_2d_position_embeddings=ROWS)
    module = _import("layoutlm.modeling_layoutlm:LayoutLMEmbeddings")(config).eval()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name in ("x", "y", "h", "w"):
            table = getattr(module, f"{name}_position_embeddings").weight
            table.copy_(torch.randn(table.shape, generator=generator))
        for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            getattr(module, name).weight.zero_()
    module.LayerNorm = torch.nn.Identity()
    return module


def _observed(module, boxes: np.ndarray) -> np.ndarray:
    ids = torch.zeros(boxes.shape[:2], dtype=torch.long)
    with torch.no_grad():
        return module(input_ids=ids, bbox=torch.as_tensor(boxes)).double().numpy()


def _tables(module) -> dict[str, np.ndarray]:
    return {f"{n}_table": getattr(module, f"{n}_position_embeddings").weight.detach().double().numpy() for n in "xyhw"}


def test_layoutlm_s_box_rows_within_the_float32_bound():
    module = _module()
    inputs = box_inputs(**_tables(module), bbox=BOXES)
    reference, bound = inputs.reference()
    observed = _observed(module, BOXES)
    assert observed.shape == reference.shape
    worst = float(np.max(np.abs(observed - reference) / bound))
    assert worst <= 1.0, worst
    assert float(np.abs(observed - reference).max()) > 0.0 or worst == 0.0  # a float32 sum, compared as it is


#: boxes with ``x0 ≤ y0`` and ``x1 ≤ y1``, where a port reading ``(x0, x1, y0, y1)`` still lands inside the tables
ORDERED = np.array([[[1, 3, 9, 20], [2, 9, 6, 30], [0, 5, 21, 28], [3, 4, 10, 12]]])


def test_every_wrong_variant_lies_outside_the_bound():
    module = _module()
    tried: set[str] = set()
    for boxes in (BOXES[:, :6], ORDERED):
        inputs = box_inputs(**_tables(module), bbox=boxes)
        observed = _observed(module, boxes)
        _, bound = inputs.reference()
        for name, wrong in inputs.wrong_outputs.items():
            if wrong is not None:
                tried.add(name)
                margin = float(np.max(np.abs(observed - wrong[0]) / (bound + wrong[1])))
                assert margin > 1e3, (name, margin)
    assert tried == set(MISTAKE_READS)


def test_a_box_past_the_tables_is_refused_by_both():
    module = _module()
    past = np.array([[[1, 2, ROWS, 5]]])
    with pytest.raises(IndexError):
        _observed(module, past)
    with pytest.raises(ValueError, match="bbox"):
        box_positions(**_tables(module), bbox=past)
