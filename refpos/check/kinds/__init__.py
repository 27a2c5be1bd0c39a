"""``refpos check`` of the vision and audio kinds: one target per kind, each a :class:`~refpos.check.kinds.target.
KindCheck` record over the kind's formula module (its contract functions, its reference and bound, its identifier
of mistakes), a candidate read with the call that made it (:mod:`refpos.check.kinds.call`).

To give a kind its target, write its module here (a function per contract function returning the kind's inputs,
and the record) and list the record in :data:`KIND_CHECKS`; the check registry (:mod:`refpos.check.targets`) makes
the ``refpos check <kind>`` target of it, and its mistakes go in ``refpos/data/mistakes.toml`` as
``<kind>_<name>``.
"""

from collections.abc import Mapping
from typing import Any

from refpos.check.kinds.axis_tables import AXIS_TABLES_CHECK
from refpos.check.kinds.bias_table import BIAS_TABLE_CHECK
from refpos.check.kinds.box_tables import BOX_TABLES_CHECK
from refpos.check.kinds.conv_position import CONV_POSITION_CHECK
from refpos.check.kinds.decomposed import DECOMPOSED_CHECK
from refpos.check.kinds.fourier import FOURIER_CHECK
from refpos.check.kinds.grid import GRID_CHECK
from refpos.check.kinds.layout_bias import LAYOUT_BIAS_CHECK
from refpos.check.kinds.shaw_key import SHAW_KEY_CHECK
from refpos.check.kinds.sincos2d import SINCOS2D_CHECK
from refpos.check.kinds.sinusoid1d import SINUSOID1D_CHECK
from refpos.check.kinds.target import KindCheck, catalogue_id, check_call
from refpos.check.kinds.tiled_grid import TILED_GRID_CHECK
from refpos.check.kinds.vision_rope import VISION_ROPE_CHECK

#: every kind's check, in the order of the kinds' registry
KIND_CHECKS: tuple[KindCheck, ...] = (BIAS_TABLE_CHECK, CONV_POSITION_CHECK, GRID_CHECK, DECOMPOSED_CHECK,
                                      SINCOS2D_CHECK, FOURIER_CHECK, SINUSOID1D_CHECK, VISION_ROPE_CHECK,
                                      AXIS_TABLES_CHECK, TILED_GRID_CHECK, SHAW_KEY_CHECK, BOX_TABLES_CHECK,
                                      LAYOUT_BIAS_CHECK)

#: kind -> its check
BY_KIND: Mapping[str, KindCheck] = {check.kind: check for check in KIND_CHECKS}


def check_kind(kind: str, function: str, arguments: Mapping[str, Any], candidate: Any, *,
               dtype: str | None = None) -> dict[str, Any]:
    """Compare ``candidate`` with the reference of the contract function ``function(**arguments)`` of ``kind``
    (``"bias_table"``, ``"conv_position"``, ``"grid"``, ``"decomposed"``, ``"sincos2d"``, ``"fourier"``,
    ``"sinusoid1d"``, ``"vision_rope"``, ``"axis_tables"``, ``"tiled_grid"``, ``"box_tables"``, ``"layout_bias"``)
    within the kind's bound, and name the catalogued mistake when it is outside.

    Returns ``{"ok", "max_abs_error", "max_ratio", "worst_index", "n_outside", "diagnosis": [{"id", "evidence",
    …}], …}`` as ``refpos check <kind> --call CALL.json --json`` prints it. Arguments that do not fit the
    function, or a ``dtype`` the kind's bound does not hold for (float16, bfloat16), raise
    :class:`~refpos.check.shared.arrays.Unusable` (a ``ValueError``).

    See Also
    --------
    refpos.check.kinds.target.check_call : the comparison, given the kind's record.
    refpos.check.kinds.call.read_call : a call file's function and arguments.

    Examples
    --------
    >>> import numpy as np
    >>> from refpos.check import check_kind
    >>> from refpos.encodings.sincos2d import sincos_2d_grid
    >>> table = np.asarray(sincos_2d_grid(2, 3, 8))
    >>> check_kind("sincos2d", "sincos_2d_grid", {"height": 2, "width": 3, "dim": 8}, table)["ok"]
    True
    >>> swapped = np.concatenate([table[:, 4:], table[:, :4]], axis=1)  # the x block before the y block
    >>> [d["id"] for d in check_kind("sincos2d", "sincos_2d_grid", {"height": 2, "width": 3, "dim": 8},
    ...                               swapped)["diagnosis"]]
    ['sincos2d_axes_swapped']
    """
    from refpos.check.shared.arrays import Unusable

    if kind not in BY_KIND:
        raise Unusable(f"kind must be one of {tuple(BY_KIND)}, got {kind!r}")
    return check_call(BY_KIND[kind], function, arguments, candidate, dtype=dtype)


def catalogue_table(kind: str) -> str:
    """The Markdown table of docs/diagnosis.md#the-catalogue-vision-and-audio-kinds for ``kind``: one row per
    mistake, its anchor, what the port did and the catalogue's example (``refpos/data/mistakes.toml``)."""
    from refpos.check.shared.catalogue import BY_ID

    rows = ["| id | what the port did | example |", "|---|---|---|"]
    for name in BY_KIND[kind].mistakes:
        entry = BY_ID[catalogue_id(kind, name)]
        cells = (entry.description.replace("|", "\\|"), entry.example.replace("|", "\\|"))
        rows.append(f'| <a id="{entry.id}"></a>`{entry.id}` | {cells[0]} | {cells[1]} |')
    return "\n".join(rows)


__all__ = ["BY_KIND", "KIND_CHECKS", "KindCheck", "catalogue_id", "catalogue_table", "check_kind"]
