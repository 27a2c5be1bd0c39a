r"""How each encoding kind of a vision, audio or feature model is judged against what its run recorded
(:mod:`survey.pixels`): one :class:`KindComparison` record per kind in :data:`COMPARISONS`.

A record takes refpos's layer record, the run and the position sites not yet accounted for, and returns an
:class:`Outcome`: the sites it accounts for, the largest error, and the verdict. Every comparison is made with the
kind's own ``refpos check`` target (:data:`refpos.check.kinds.BY_KIND`): its inputs built from the recorded weights
and inputs, its reference and its bound (a float32 port's), and its catalogued mistakes as the wrong answers each
observation must tell apart (a mistake whose output is within the bound of the observation *survives*, and the row
is then not exact: the survey cannot tell there). Every bound is taken at the unit roundoff ``u`` of the dtype the
model ran in (:data:`UNIT`: float64 where its code runs in it, ``2⁻⁵³``; float32 ``2⁻²⁴``), the kind's own
float32 steps (a grid resampled in float32) at float32's.

What an observation is, per kind:

``grid``
    the embedding module's output minus its output with the table zeroed: the resampled table, exactly what is
    added (the addition is linear in the table). Bound: the kind's plus the subtraction's, ``2u·max|output|``
    (``u = 2⁻²⁴``: the output and the zeroed output are float32 values, the sum rounded once).
``conv_position``
    the position module's input ``x`` (the frames) and output ``e``; compared as ``x + e`` with the reference of
    ``x + e`` from the module's weights (the weight-norm direction and magnitudes, or the kernel), within the
    kind's per-entry bound plus ``u·|x + e|`` (the sum).
``bias_table``
    the relative-position-bias module's output ``(H, N, N)`` for each layer, from that layer's table, or, where the
    attention gathers the bias in its own forward (Swin, Swin v2), the first window's logits its softmax is fed
    with the key projection zero (:mod:`survey.pixel_logits`: they are the bias): within the kind's per-entry
    bound.
``decomposed``
    the logits each attention's softmax is fed with the key projection zero and every query one seeded vector
    ``c``: the terms ``c·R_h + c·R_w`` of the layer's tables, within the terms' bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from survey.pixel_kinds.base import Outcome
from survey.pixel_kinds.bias_table import compare_bias_table
from survey.pixel_kinds.conv_position import compare_conv_position
from survey.pixel_kinds.decomposed import compare_decomposed
from survey.pixel_kinds.grid import compare_grid
from survey.pixel_kinds.tables import compare_learned, compare_sinusoid1d
from survey.pixels import PixelRun, Site

__all__ = ["COMPARISONS", "KindComparison", "Outcome", "compare_bias_table", "compare_conv_position",
           "compare_decomposed", "compare_grid", "compare_learned", "compare_sinusoid1d"]


@dataclass(frozen=True)
class KindComparison:
    """How the survey judges one refpos kind on a vision, audio or feature run (module docstring)."""

    kind: str
    compare: Callable[[Any, PixelRun, list[Site]], Outcome]
    observed: str

    def judge(self, record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
        """:attr:`compare`, a claim whose formula refuses the recorded weights (a kernel of another group count, a
        table of another size) graded wrong."""
        try:
            return self.compare(record, run, sites)
        except (ValueError, TypeError) as exc:
            return Outcome("wrong", f"{record.stack} layer {record.index}: refpos's {self.kind} does not take what "
                           f"transformers' model holds: {' '.join(str(exc).split())[:200]}")


#: one record per kind the survey compares on pixel, audio and feature runs
COMPARISONS: dict[str, KindComparison] = {c.kind: c for c in (
    KindComparison("grid", compare_grid, "the embedding's output minus its output with the table zeroed"),
    KindComparison("conv_position", compare_conv_position, "the position module's input and output"),
    KindComparison("bias_table", compare_bias_table, "each layer's relative position bias module's output, or "
                   "the logits its attention's softmax is fed with the key projection zero"),
    KindComparison("decomposed", compare_decomposed, "the logits each attention's softmax is fed with the key "
                   "projection zero and every query one seeded vector"),
    KindComparison("learned", compare_learned, "the embedding's output minus its output with the table zeroed"),
    KindComparison("sinusoid1d", compare_sinusoid1d, "the table the model's code builds, and the rows the "
                   "embedding's output gains"),
)}
