"""Where vLLM and transformers compute different positions for the same config, and which one the authors' code does.

Two engines disagree on a model type (:func:`find`) when both ran it and refpos's answer is exact against one and
wrong against the other: refpos's answer cannot equal both computations. The evidence is the wrong row's own (its
largest difference, where it first exceeds the float32 bound, and the single change of refpos's answer under which
that engine's run is exact: :mod:`survey.vllm_engine.explain`), and the two sources are the files the rows ran.

Which engine is right is decided by the model authors' code: the modeling file the checkpoint ships, or the
original repository. Each decision is one :class:`Authors` record of :data:`AUTHORS`, naming that code by project,
file and function and saying what it computes; refpos follows it. A disagreement without a record is listed as
undecided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ENGINES = ("transformers", "vllm", "both")


@dataclass(frozen=True)
class Authors:
    """The model authors' code on one disagreement: ``agrees`` is the engine whose positions it computes
    (``both`` where the two differ only in a way attention cannot see), ``source`` the code (project, file,
    function), ``finding`` what it computes."""

    agrees: str
    source: str
    finding: str
    #: where refpos raised on the config vLLM ran: the words of that error this record explains (empty: none)
    error: str = ""

    def __post_init__(self) -> None:
        if self.agrees not in ENGINES:
            raise ValueError(f"agrees must be one of {ENGINES}, got {self.agrees!r}")


#: the finding shared by the MLA families whose checkpoints store the rotated channels as adjacent pairs
_PAIRS_IN_PLACE = ("rotates each adjacent channel pair (x0, x1), (x2, x3), ... in place, as vLLM's rotary module "
                   "with is_neox_style=False does; transformers' apply_rotary_pos_emb_interleave first regroups the "
                   "same pairs into two halves and rotates those: its query and key carry one and the same "
                   "permutation of channels, so every attention score q . k is the same in the two engines")

#: Llama 4's text model, alone (llama4_text) or as the language model of the multimodal Llama 4 (llama4: vLLM's
#: Llama4ForConditionalGeneration builds it as Llama4ForCausalLM, whose load_weights permutes q and k the same way)
_LLAMA4 = Authors(
    "transformers", "meta-llama/llama-models, models/llama4/model.py, Attention.forward (the NoPE layers' "
    "attn_scales from torch.arange(start_pos, start_pos + seqlen)) and apply_rotary_emb (a complex product over "
    "view_as_complex of adjacent pairs)",
    "scales the NoPE layers' query by log(floor((s + 1) / floor_scale) + 1) · attn_scale + 1 of the token's slot "
    "s in the cache, as transformers does (arange(T) + past_seen_tokens) and refpos's record says; vLLM's "
    "Llama4Attention reads the positions it is handed, which its own scheduler makes the slots, so the two differ "
    "only where a position is not its slot. The rotation: vLLM rotates halves (is_neox_style) after "
    "Llama4ForCausalLM.permute_qk_weight_for_rotary has regrouped each head's query and key weights from "
    "adjacent pairs into halves at load time, one permutation of query and key: every attention score q . k is "
    "the same as the authors' adjacent-pair rotation")

#: GLM-OCR's text model where its config states no partial_rotary_factor (the config class's defaults): vLLM runs it
#: as GLM-4's (Glm4vForConditionalGeneration builds its language model as Glm4ForCausalLM)
_GLM_OCR = Authors(
    "transformers", "zai-org/GLM-OCR, config.json (text_config.rope_parameters: partial_rotary_factor 1.0, "
    "mrope_section [16, 24, 24] for head_dim 128), as transformers' models/glm_ocr/modeling_glm_ocr.py, "
    "GlmOcrTextRotaryEmbedding.compute_default_rope_parameters reads it (partial_rotary_factor 1.0 where unstated)",
    "rotates every channel of each head: the checkpoint states partial_rotary_factor 1.0, and its sections sum to "
    "half the head width. vLLM's Glm4Attention (models/glm4.py) sets rope_parameters['partial_rotary_factor'] to "
    "0.5, GLM-4's value, where a config states none, and rotates the first half of each head; transformers "
    "rotates the whole head. The two read a stated factor alike: they differ only on a config that states none")

#: GLM-4.1V's text model where its config states no partial_rotary_factor (the config class's defaults): refpos
#: raises on it, as transformers' rotary module does; vLLM runs it with GLM-4's factor
_GLM4V = Authors(
    "transformers", "zai-org/GLM-4.1V-9B-Thinking, config.json (text_config: partial_rotary_factor 0.5, "
    "mrope_section [8, 12, 12] for head_dim 128), as transformers' models/glm4v/modeling_glm4v.py, "
    "Glm4vTextRotaryEmbedding.compute_default_rope_parameters reads it (partial_rotary_factor 1.0 where unstated) "
    "and recomposition_frequencies splits the frequencies by the sections",
    "rotates the first half of each head, the factor the checkpoint states, which both engines read alike. Where "
    "a config states none, transformers reads 1.0: the sections [8, 12, 12] then cover 32 of the 64 frequency "
    "pairs, and its rotary module's split raises (split_with_sizes expects the sizes to sum to 64); refpos raises a "
    "ValueError naming mrope_section. vLLM's Glm4Attention (models/glm4.py) sets partial_rotary_factor 0.5, "
    "GLM-4's value, where a config states none, and runs it. refpos reads a stated factor and assumes none",
    error="ValueError: mrope_section")

#: Ministral 3's text model from an HF-format config.json
_MINISTRAL3 = Authors(
    "transformers", "mistralai's Ministral 3 checkpoints: config.json text_config.rope_parameters "
    "(llama_4_scaling_beta 0.1, original_max_position_embeddings 16384) and params.json llama_4_scaling "
    "(beta, original_max_position_embeddings); vLLM reads the latter by its own Mistral-format path "
    "(transformers_utils/configs/mistral.py, then MistralAttention._get_llama_4_attn_scale in models/mistral.py)",
    "scales every layer's query by 1 + beta · ln(1 + floor(p / original_max_position_embeddings)), as "
    "transformers' Ministral3Attention.forward (get_llama_4_attn_scale) does and as vLLM does from a params.json. "
    "From an HF-format config.json vLLM's MistralAttention finds no llama_4_scaling attribute (the scale is in "
    "rope_parameters there) and scales no query: the two differ from position original_max_position_embeddings "
    "on. vLLM reads a mistralai repository's params.json first where it has one; no modeling code of the "
    "authors' is published")

#: model type -> the authors' code on the two engines' disagreement
AUTHORS: dict[str, Authors] = {
    "deepseek_v3": Authors("both", "deepseek-ai/DeepSeek-V3, inference/model.py, apply_rotary_emb (a complex "
                           "product over view_as_complex of adjacent pairs)", _PAIRS_IN_PLACE),
    "axk1": Authors("both", "transformers, models/axk1/modeling_axk1.py, apply_rotary_pos_emb_interleave (whose "
                    "docstring states the layout the checkpoint stores: interleaved pairs)", _PAIRS_IN_PLACE),
    "sarvam_mla": Authors("both", "transformers, models/sarvam_mla/modular_sarvam_mla.py, SarvamMLAConfig (by "
                          "Sarvam AI and Hugging Face: rope_interleave defaults to True, the layout the "
                          "sarvamai/sarvam-105b checkpoint stores), run by DeepseekV3ForCausalLM's "
                          "apply_rotary_pos_emb_interleave", _PAIRS_IN_PLACE),
    "glm4_moe_lite": Authors("both", "transformers, models/glm4_moe_lite/modeling_glm4_moe_lite.py, "
                             "apply_rotary_pos_emb_interleave, chosen by Glm4MoeLiteConfig.rope_interleave (default "
                             "True: the checkpoint stores the rotated channels as interleaved pairs)", _PAIRS_IN_PLACE),
    "llama4_text": _LLAMA4,
    "llama4": _LLAMA4,
    "glm_ocr": _GLM_OCR,
    "glm4v": _GLM4V,
    "ministral3": _MINISTRAL3,
}


@dataclass(frozen=True)
class Disagreement:
    """One model type on which refpos's answer is exact against one engine and wrong against the other."""

    model_type: str
    architecture: str
    vllm_status: str
    transformers_status: str
    evidence: str
    vllm_file: str
    transformers_file: str
    authors: Authors | None


def find(vllm_rows: list[dict[str, Any]], transformers_rows: list[dict[str, Any]]) -> list[Disagreement]:
    """Every disagreement of the two tables' rows (module docstring), by model type; and every row where refpos
    raised on the config vLLM ran (an error) while transformers' row is exact, where a record of the authors' code
    explains that error (:attr:`Authors.error`): vLLM runs a config that transformers' reading of it rejects
    (GLM-4.1V's unstated rotary factor)."""
    by_type = {r["model_type"]: r for r in transformers_rows}
    found = []
    for row in vllm_rows:
        other = by_type.get(row["model_type"])
        statuses = None if other is None else {row["status"], other["status"]}
        explained = AUTHORS.get(row["model_type"])
        if statuses != {"exact", "wrong"} and not (
                statuses == {"exact", "error"} and row["status"] == "error" and explained is not None
                and explained.error and explained.error in row["cause"]):
            continue
        wrong = row if row["status"] in ("wrong", "error") else other
        notes = [n for n in wrong["notes"] if "exact against refpos's answer changed" in n]
        evidence = "; ".join([f"{'vLLM' if wrong is row else 'transformers'}: {wrong['cause']}", *notes])
        found.append(Disagreement(row["model_type"], row["architecture"], row["status"], other["status"], evidence,
                                  row["file"], other["file"], AUTHORS.get(row["model_type"])))
    return found
