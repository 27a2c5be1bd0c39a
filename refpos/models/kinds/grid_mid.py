r"""Tables of the grid kind added between a stack's layers (YOLOS's mid position embeddings).

Besides the table at its input, YOLOS holds one more table for each of its first ``L − 1`` layers
(``use_mid_position_embeddings``, a weight ``(L − 1, 1, N, d)``, each table laid out as the input's: the CLS row,
the ``M_h × M_w`` grid, the detection rows). Table ``l`` is resampled the way the input's is and added to the
output of layer ``l``, the input of layer ``l + 1``:

.. math::
    h^{(l+1)}_{\text{in}} = h^{(l)}_{\text{out}} + P'^{(l)}, \qquad
    P'^{(l)} = \big[P^{(l)}_{\text{cls}};\ \mathrm{vec}\big(\mathcal{R}(\mathrm{grid}(P^{(l)}_{\text{patches}}))\big);\
    P^{(l)}_{\text{det}}\big], \qquad l = 0 \ldots L - 2

(:mod:`refpos.encodings.grid`; docs/grid.md#tables-between-the-layers-yolos).
"""

from __future__ import annotations

from typing import Any

from refpos.backend import Array, array_namespace
from refpos.models.kinds.record import layer_count
from refpos.models.view import ConfigView


def mid_count(view: ConfigView, facts: Any, role: str) -> int:
    """The number of tables between the layers: ``L − 1`` where the config's ``facts.mid`` key (its class default
    ``facts.mid_default``) is true, else 0."""
    if facts.mid is None or not view.bool(facts.mid, facts.mid_default):
        return 0
    return max(0, layer_count(view, role) - 1)


def mid_rows(layer: Any, tables: Array, grid: tuple[int, int]) -> Array:
    r"""The tables added after layers ``0 … L − 2`` at the patch grid ``grid``: ``(L − 1, N', d)``, table ``l`` read
    as :meth:`refpos.models.kinds.grid.GridLayer.reference` reads the input's (module docstring):
    :math:`P'^{(l)} = [P^{(l)}_{\text{cls}};\ \mathrm{vec}(\mathcal{R}(\mathrm{grid}(P^{(l)}_{\text{patches}})));\
    P^{(l)}_{\text{det}}]`."""
    if not layer.mid:
        raise ValueError(f"tables: the {layer.stack} grid adds no tables between its layers")
    shape = tuple(getattr(tables, "shape", ()))
    if len(shape) != 3 or shape[:2] != (layer.mid, layer.table_rows):
        raise ValueError(f"tables must have shape ({layer.mid}, {layer.table_rows}, dim) for the {layer.stack} "
                         f"stack's tables between its layers, got {shape}")
    resampled = [layer.reference(tables[index, :, :], grid) for index in range(layer.mid)]  # P'^(l), l = 0 … L − 2
    return array_namespace(resampled[0]).stack(resampled, axis=0)
