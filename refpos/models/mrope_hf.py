"""M-RoPE and vision RoPE from transformers configs (the multi-axis part of :func:`refpos.models.from_hf_config`).

Text M-RoPE, as transformers 5.24 resolves it (``models/*/configuration_*.py`` and the text rotary
modules of each family):

1. ``"type": "mrope"`` / ``"rope_type": "mrope"`` (v4 Qwen2-VL and Qwen2.5-VL configs) is read as
   ``"default"`` with the dict's ``mrope_section``: transformers rewrites it so; any other rope type may
   carry ``mrope_section`` beside its own keys (e.g. yarn).
2. ``mrope_section`` comes from the rope dict (v4 ``rope_scaling`` or v5 ``rope_parameters``, at the top
   level or in ``text_config``); absent, a known family's module default applies (table below).
3. The assignment is the model class's, not the key's: Qwen3-VL's module interleaves whatever
   ``mrope_interleaved`` says, Qwen2-VL's never does. ERNIE-4.5-VL's config lists its sections in the order
   (h, w, t) and its module alternates h and w (``hw_alternating``); refpos's sections are (t, h, w). A
   family not in the table (HunYuan-VL, NeoMME, …) is not modelled: its M-RoPE keys stay unused and
   the resolution reports them as not modelled. HunYuan-VL is not modelled: its
   ``recomposition_frequencies`` splits the doubled table (both halves of every pair) into bands of
   ``2·s`` channels, so the two channels of one pair can read different axes.
4. Layout: from the family table (:mod:`refpos.models.families`): GLM-4.1V, GLM-OCR and ERNIE-4.5-VL rotate
   adjacent channel pairs (``interleaved``), the others half-split.

=================  =====================  ===============  ===========  ===============================
model_type         default sections       assignment       layout       config order of mrope_section
=================  =====================  ===============  ===========  ===============================
qwen2_vl           (16, 24, 24)           contiguous       half         t, h, w
qwen2_5_vl         (16, 24, 24)           contiguous       half         t, h, w
qwen2_5_omni       (16, 24, 24)           contiguous       half         t, h, w
qwen3_vl(_moe)     (24, 20, 20)           interleaved      half         t, h, w
qwen3_omni_moe     (24, 20, 20)           interleaved      half         t, h, w
qwen3_omni_moe_t…  (24, 20, 20)           interleaved      half         t, h, w (the talker's text model)
qwen3_5(_moe)      (11, 11, 10)           interleaved      half         t, h, w
qwen4_exp          (11, 11, 10)           interleaved      half         t, h, w
glm4v              (8, 12, 12)            contiguous       interleaved  t, h, w
glm4v_moe          (8, 12, 12)            contiguous       half         t, h, w
glm_image          (8, 12, 12)            contiguous       half         t, h, w
ernie4_5_vl_moe    (20, 22, 22)           hw_alternating   interleaved  h, w, t ([22, 22, 20])
cosmos3_edge       (24, 20, 20)           interleaved      half         t, h, w
hy_v4_vl           (12, 10, 10) (config)  interleaved      deinterleav. t, h, w
cohere_compass     (24, 20, 20)           interleaved      half         t, h, w (each layer type's dict)
neomme             (0, m/2, m/2)          hw_alternating   half         not read (row, col = h, w)
=================  =====================  ===============  ===========  ===============================

(``*_text`` model types are the same families.) An interleaved module's slices stop at its last pair and never
read ``s_t``: sections that do not fit the rotated pairs (a module default on another head size) resolve to the
pairs it places (:func:`round_robin_reach`). Vision towers:
:func:`refpos.models.vision_towers.vision_rope_from_hf_config`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refpos.models import families
from refpos.validation import check_bool


@dataclass(frozen=True)
class MropeFamily:
    """The text rotary module of one M-RoPE family: its default sections (refpos's order t, h, w; ``None``: the
    module reads none and splits the ``m`` pairs of the rotated width evenly between h and w, ``(0, m/2, m/2)``),
    its assignment (:data:`refpos.rope.mrope.ASSIGNMENTS`), the order its config lists ``mrope_section`` in, and
    the rope types the module accepts (``None``: every one)."""

    sections: tuple[int, int, int] | None
    assignment: str
    source: str
    config_order: str = "thw"
    rope_types: tuple[str, ...] | None = None
    #: rope-dict keys the family's configs carry that its module does not read (transformers' config class
    #: lists them in ignore_keys_at_rope_validation): read with a note, never reported as parameters
    inert_keys: tuple[str, ...] = ()

    def from_config(self, sections: Any) -> tuple[int, ...]:
        """The config's ``mrope_section`` in refpos's order (t, h, w)."""
        if isinstance(sections, (str, bytes)) or not isinstance(sections, (list, tuple)) or len(sections) != 3:
            raise ValueError(f"mrope_section must be a list of 3 ints ({', '.join(self.config_order)}), got "
                             f"{sections!r}")
        by_axis = dict(zip(self.config_order, sections, strict=True))
        return tuple(by_axis[axis] for axis in "thw")


#: model_type -> its text rotary module (the layout is the family table's, refpos.models.families, the one
#: home of which pairs a model's code rotates)
MROPE_FAMILIES: dict[str, MropeFamily] = {
    "qwen2_vl": MropeFamily((16, 24, 24), "contiguous", "qwen2_vl/modeling_qwen2_vl.py: Qwen2VLRotaryEmbedding"),
    "qwen2_5_vl": MropeFamily((16, 24, 24), "contiguous",
                              "qwen2_5_vl/modeling_qwen2_5_vl.py: Qwen2_5_VLRotaryEmbedding"),
    "qwen2_5_omni": MropeFamily((16, 24, 24), "contiguous",
                                "qwen2_5_omni/modeling_qwen2_5_omni.py: Qwen2_5OmniRotaryEmbedding"),
    "qwen3_vl": MropeFamily((24, 20, 20), "interleaved", "qwen3_vl/modeling_qwen3_vl.py: Qwen3VLTextRotaryEmbedding"),
    "qwen3_vl_moe": MropeFamily((24, 20, 20), "interleaved",
                                "qwen3_vl_moe/modeling_qwen3_vl_moe.py: Qwen3VLMoeTextRotaryEmbedding"),
    "qwen3_omni_moe": MropeFamily((24, 20, 20), "interleaved", "qwen3_omni_moe/modeling_qwen3_omni_moe.py: "
                                  "Qwen3OmniMoeThinkerTextRotaryEmbedding", inert_keys=("interleaved",)),
    # the talker's module subclasses the thinker's unchanged (Qwen3OmniMoeTalkerRotaryEmbedding)
    "qwen3_omni_moe_talker": MropeFamily((24, 20, 20), "interleaved", "qwen3_omni_moe/modeling_qwen3_omni_moe.py: "
                                         "Qwen3OmniMoeTalkerRotaryEmbedding", inert_keys=("interleaved",)),
    "qwen3_5": MropeFamily((11, 11, 10), "interleaved", "qwen3_5/modeling_qwen3_5.py: Qwen3_5TextRotaryEmbedding"),
    "qwen3_5_moe": MropeFamily((11, 11, 10), "interleaved",
                               "qwen3_5_moe/modeling_qwen3_5_moe.py: Qwen3_5MoeTextRotaryEmbedding"),
    "qwen4_exp": MropeFamily((11, 11, 10), "interleaved", "qwen4_exp/modeling_qwen4_exp.py: "
                             "Qwen4ExpTextRotaryEmbedding.recomposition_frequencies"),
    "glm4v": MropeFamily((8, 12, 12), "contiguous", "glm4v/modeling_glm4v.py: Glm4vTextRotaryEmbedding"),
    "glm4v_moe": MropeFamily((8, 12, 12), "contiguous", "glm4v_moe/modeling_glm4v_moe.py: Glm4vMoeTextRotaryEmbedding"),
    "glm_ocr": MropeFamily((8, 12, 12), "contiguous", "glm_ocr/modeling_glm_ocr.py: GlmOcrTextRotaryEmbedding"),
    "glm_image": MropeFamily((8, 12, 12), "contiguous",
                             "glm_image/modeling_glm_image.py: GlmImageTextRotaryEmbedding"),
    "paddleocr_vl": MropeFamily((16, 24, 24), "contiguous",
                                "paddleocr_vl/modeling_paddleocr_vl.py: PaddleOCRRotaryEmbedding"),
    "ernie4_5_vl_moe": MropeFamily((20, 22, 22), "hw_alternating", "ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py: "
                                   "Ernie4_5_VLMoeTextRotaryEmbedding", config_order="hwt", rope_types=("default",)),
    "cosmos3_edge": MropeFamily((24, 20, 20), "interleaved", "cosmos3_edge/modeling_cosmos3_edge.py: "
                                "Cosmos3EdgeTextRotaryEmbedding.recomposition_frequencies"),
    # the module's default [24, 20, 20] is never reached: the config class sets [12, 10, 10]
    "hy_v4_vl": MropeFamily((12, 10, 10), "interleaved", "hy_v4_vl/modeling_hy_v4_vl.py: "
                            "HYV4VLRotaryEmbedding.recomposition_frequencies"),
    "cohere_compass": MropeFamily((24, 20, 20), "interleaved", "cohere_compass/modeling_cohere_compass.py: "
                                  "CohereCompassRotaryEmbedding.recomposition_frequencies"),
    "neomme": MropeFamily(None, "hw_alternating", "neomme/modeling_neomme.py: "
                          "NeoMMERotaryEmbedding.recomposition_frequencies"),
}


def _rotary_width(fields: dict[str, Any]) -> int:
    r"""The rotated width :math:`\lfloor D \cdot \mathrm{prf} \rfloor` (``rotary_dim`` where stated), as the
    modules' compute_default_rope_parameters size ``inv_freq``."""
    rotary = fields.get("rotary_dim")
    if rotary is None:
        rotary = int(fields["head_dim"] * fields.get("partial_rotary_factor", 1.0))
    return rotary


def _row_column_sections(fields: dict[str, Any]) -> tuple[int, int, int]:
    r"""NeoMME's split of a layer's :math:`m` pairs: none for t, :math:`m/2` each for h (its row) and w (its
    column), with :math:`m = \lfloor D \cdot \mathrm{prf} \rfloor / 2` as its compute_default_rope_parameters."""
    rotary = _rotary_width(fields)
    half = rotary // 4
    return (0, half, rotary // 2 - half)


def round_robin_reach(sections: tuple[int, ...], n_pairs: int) -> tuple[int, int, int]:
    r"""The pairs per axis a round-robin module gives over its ``n_pairs`` frequencies, whatever its sections sum to.

    Qwen3-VL's ``recomposition_frequencies`` (and the modules written after it) starts from the t row and
    overwrites the pairs of the slices ``[1 : 3 s_h : 3]`` with h and ``[2 : 3 s_w : 3]`` with w; a slice stops at
    the last pair, and :math:`s_t` is never read. So

    .. math:: s_h' = |\{j < \min(m, 3 s_h) : j \equiv 1 \pmod 3\}|, \quad
              s_w' = |\{j < \min(m, 3 s_w) : j \equiv 2 \pmod 3\}|, \quad s_t' = m - s_h' - s_w' ,

    the sections of refpos's interleaved assignment that place every pair where the module does (they equal
    the stated ones whenever those sum to :math:`m` and fit it).
    """
    s_h = len(range(1, min(n_pairs, 3 * sections[1]), 3))
    s_w = len(range(2, min(n_pairs, 3 * sections[2]), 3))
    return (n_pairs - s_h - s_w, s_h, s_w)


def _family_layout(family: str) -> str:
    """The text model's layout from the family table (rows are named ``<family>_text`` or ``<family>``)."""
    row = families.family_of(f"{family}_text") or families.family_of(family)
    if row is None:  # pragma: no cover - every M-RoPE family has a row; test_mrope_hf checks it
        raise KeyError(f"the family table has no row for {family!r}")
    return row.layout


def family_of(model_type: Any) -> str | None:
    """The M-RoPE family of a ``model_type`` (``qwen2_vl_text`` → ``qwen2_vl``), or ``None``."""
    if not isinstance(model_type, str):
        return None
    for suffix in ("_text", "_vision"):
        if model_type.endswith(suffix):
            model_type = model_type[: -len(suffix)]
    return model_type if model_type in MROPE_FAMILIES else None


def mrope_rope_type(value: str, notes: list[str]) -> str:
    """``"mrope"`` is read as ``"default"`` (transformers' rewrite); other rope types pass unchanged."""
    if value == "mrope":
        notes.append("rope type 'mrope' read as 'default' with mrope_section (transformers rewrites it so)")
        return "default"
    return value


def mrope_family(model_type: Any, parent_model_type: Any = None) -> str | None:
    """The M-RoPE family whose text rotary module a config runs: of its ``model_type``, else of the top-level
    ``parent_model_type`` (a ``text_config``); ``None`` for every other family."""
    return family_of(model_type) or family_of(parent_model_type)


def resolve_mrope(resolver: Any) -> None:
    """Set ``mrope_section``, ``mrope_interleaved`` and the family's layout on a resolver of refpos.models.hf.

    ``resolver`` is ``refpos.models.hf_resolver.Resolver`` after its other steps (its ``mrope_family`` from
    :func:`mrope_family`).
    """
    family = resolver.mrope_family
    if family is None:  # not modelled: the mrope keys stay unused and are reported so (refpos.models.position_keys)
        return
    rope = resolver.rope
    module = MROPE_FAMILIES[family]
    rope_type = resolver.fields.get("rope_type")
    if module.rope_types is not None and rope_type not in module.rope_types:
        raise ValueError(f"rope type {rope_type!r}: {module.source} accepts {list(module.rope_types)} only "
                         f"(transformers raises on any other)")
    layout = _family_layout(family)
    if module.sections is None:  # the module reads no sections: an even h/w split of this layer's pairs
        resolver.set("mrope_section", _row_column_sections(resolver.fields), "derived")
        resolver.notes.append(f"{family}: two axes (row, col) alternate over every pair: mrope_section "
                              f"{list(resolver.fields['mrope_section'])} (t, h, w)")
    elif rope.get("mrope_section") is not None:
        resolver.set("mrope_section", module.from_config(resolver.from_rope("mrope_section")), "config")
        if module.config_order != "thw":
            ordered = list(resolver.fields["mrope_section"])
            resolver.notes.append(f"mrope_section {list(rope['mrope_section'])} is ({', '.join(module.config_order)}) "
                                  f"in {family}'s config: refpos's order (t, h, w) is {ordered}")
    else:
        resolver.set("mrope_section", module.sections, "default")
        resolver.notes.append(f"mrope_section absent: {family}'s default {list(module.sections)} (t, h, w)")
    if module.assignment == "interleaved" and len(resolver.fields["mrope_section"]) == 3:
        stated = tuple(resolver.fields["mrope_section"])
        reach = round_robin_reach(stated, _rotary_width(resolver.fields) // 2)
        if reach != stated:  # the module's slices stop at its last pair; s_t is never read
            resolver.set("mrope_section", reach, "derived")
            resolver.notes.append(f"mrope_section {list(stated)} over {sum(reach)} pairs: {family}'s round-robin "
                                  f"places t, h, w on {list(reach)} of them (its slices stop at the last pair, "
                                  "s_t is not read)")
    key = resolver.from_rope("mrope_interleaved") if rope.get("mrope_interleaved") is not None else None
    if key is not None:
        check_bool("mrope_interleaved", key)
    family_interleaved = module.assignment == "interleaved"
    if key is not None and key != family_interleaved:
        resolver.notes.append(f"mrope_interleaved={key} ignored: transformers' {family} module always uses the "
                              f"{module.assignment} assignment")
    resolver.set("mrope_interleaved", family_interleaved, "config" if key == family_interleaved else "default")
    if not family_interleaved and module.assignment != "contiguous":
        resolver.set("mrope_assignment", module.assignment, "default")
    for key in module.inert_keys:
        if key in rope:
            resolver.notes.append(f"{key}={resolver.from_rope(key)!r}: not read by {module.source} (its assignment "
                                  f"is {module.assignment})")
    if resolver.provenance.get("layout") != "config":
        resolver.set("layout", layout, "default")
