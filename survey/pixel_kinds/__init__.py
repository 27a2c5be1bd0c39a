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
    the position module's input ``x`` (the frames) and output ``e``; compared as ``x + e`` (SEW: the mean of each
    ``s`` frames plus ``e``) with the reference from the module's weights (the weight-norm direction and
    magnitudes, the kernel, or Data2Vec-audio's stacked kernels), within the kind's per-entry bound plus
    ``u·|x + e|`` (the sum).
``sinusoid1d`` at ``relative``
    the position module's output (the table of distances ``T − 1 … −(T − 1)``) and each layer's projection's
    input, within the kind's float32 bound (:mod:`survey.pixel_kinds.relative_sinusoid`).
``sinusoidal``
    a text-style sinusoid record of an audio stack: the table built and the rows read
    (:mod:`survey.pixel_kinds.absolute`).
``rope``
    each rotary module's cos and sin tables at the position ids it was fed, against refpos's rotation read per
    channel as the text survey reads it, within the float32 bound of the angles (:mod:`survey.pixel_kinds.rope`).
``mrope``
    as ``rope``, where the rotary modules were fed the same position on every axis row (a talker run on its
    ``inputs_embeds``): each pair then reads that one position (:func:`survey.pixel_kinds.rope.compare_mrope`).
``bias_table``
    the relative-position-bias module's output ``(H, N, N)`` for each layer, from that layer's table, or, where the
    attention gathers the bias in its own forward (Swin, Swin v2), the first window's logits its softmax is fed
    with the key projection zero (:mod:`survey.pixel_logits`: they are the bias): within the kind's per-entry
    bound.
``decomposed``
    the logits each attention's softmax is fed with the key projection zero and every query one seeded vector
    ``c``: the terms ``c·R_h + c·R_w`` of the layer's tables, within the terms' bound.
``sincos2d``
    the fixed table the model's code builds, against the variant's within the kind's bound, and the rows the
    embedding's output gains at each size (:mod:`survey.pixel_kinds.sincos2d`: the table, or its resampling,
    within the subtraction's and the resampling's bounds).
``fourier``
    every call of the module that computes SAM's Fourier features (a module holding nothing but the matrix
    ``G``): the calls fed the prompts (points and a box, seeded) against refpos's features of the pixel points fed,
    the call fed the image grid against refpos's features of the grid's centres, within the float angle's bound
    (:mod:`survey.pixel_kinds.fourier`).
``vision_rope``
    the query and key before and after the first call of the model's rotary apply function at each size, against
    refpos's rotation at the positions its form gives the grid fed
    (:mod:`survey.pixel_kinds.vision_rope`: the 1-D RoPE
    bound per channel at the coordinate the channel reads).
``axis_tables``
    the embedding's output minus its output with each table zeroed, summed over the row and the column table:
    what the patches gain, against refpos's rows at the indices the survey fed
    (:mod:`survey.pixel_kinds.axis_tables`: the kind's bound plus the subtractions').
``tiled_grid``
    each of a tiled tower's three position modules' output minus its input, at the aspect-ratio id the survey fed:
    the gated grid, the pre-tile rows on the patches, their sum, and the post-tile rows on every row of a tile
    (:mod:`survey.pixel_kinds.tiled_grid`: the kind's bound plus the modules' sums and the subtraction).
``shaw_key``
    the logits each attention's softmax is fed with the key projection zero and every query one seeded vector
    ``c`` (a blocked layer's ``attn_mask``, its blocks laid on the diagonal): the masked pairs those refpos does not
    attend, the terms ``σ c_h·E[clip(s(j − i), −L, R) + o]`` within their bound (:mod:`survey.pixel_kinds.shaw_key`);
    a table one module gathers for every layer (SpeechT5), the logits of each attention fed it; a bias per head
    (Phi-4's audio encoder), the additive mask each attention is fed, bias plus streaming window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from survey.pixel_kinds.absolute import compare_sinusoidal
from survey.pixel_kinds.axis_tables import compare_axis_tables
from survey.pixel_kinds.base import Outcome
from survey.pixel_kinds.bias_table import compare_bias_table
from survey.pixel_kinds.conv_position import compare_conv_position
from survey.pixel_kinds.decomposed import compare_decomposed
from survey.pixel_kinds.fourier import compare_fourier
from survey.pixel_kinds.grid import compare_grid
from survey.pixel_kinds.rope import compare_mrope, compare_rope
from survey.pixel_kinds.shaw_key import compare_shaw_key
from survey.pixel_kinds.sincos2d import compare_sincos2d
from survey.pixel_kinds.tables import compare_learned, compare_sinusoid1d
from survey.pixel_kinds.tiled_grid import compare_tiled_grid
from survey.pixel_kinds.vision_rope import compare_vision_rope
from survey.pixels import PixelRun, Site

__all__ = ["COMPARISONS", "KindComparison", "Outcome", "compare_axis_tables", "compare_bias_table",
           "compare_conv_position", "compare_decomposed", "compare_fourier", "compare_grid", "compare_learned",
           "compare_mrope", "compare_rope", "compare_shaw_key", "compare_sincos2d", "compare_sinusoid1d",
           "compare_sinusoidal", "compare_tiled_grid", "compare_vision_rope"]


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
    KindComparison("sinusoidal", compare_sinusoidal, "the table the model's code builds, and the rows the frames "
                   "read"),
    KindComparison("rope", compare_rope, "each rotary module's cos and sin tables at the position ids it was fed, "
                   "and the rotary apply function's output against refpos's rotation of its input"),
    KindComparison("mrope", compare_mrope, "each rotary module's cos and sin tables at the position ids it was fed, "
                   "the same on every axis row, and the rotary apply function's output against refpos's rotation "
                   "of its input"),
    KindComparison("sinusoid1d", compare_sinusoid1d, "the table the model's code builds, and the rows the "
                   "embedding's output gains; a relative table: the position module's output and each layer's "
                   "projection's input"),
    KindComparison("sincos2d", compare_sincos2d, "the table the model's code builds, and the rows the embedding's "
                   "output gains at each size"),
    KindComparison("fourier", compare_fourier, "every call of the module computing SAM's Fourier features: the "
                   "prompts fed and the image grid, its input and output"),
    KindComparison("vision_rope", compare_vision_rope, "the query and key before and after the first call of the "
                   "model's rotary apply function, at each size"),
    KindComparison("axis_tables", compare_axis_tables, "the embedding's output minus its output with each of the "
                   "row and column tables zeroed, at each size"),
    KindComparison("tiled_grid", compare_tiled_grid, "each of the three position modules' output minus its input, "
                   "at the aspect-ratio id fed"),
    KindComparison("shaw_key", compare_shaw_key, "the logits each attention's softmax is fed with the key projection "
                   "zero and every query one seeded vector, laid block by block"),
)}
