"""The family table: what a model's code fixes about positions that its config.json does not state.

A config.json says ``rope_theta`` and ``rope_scaling``; it does not say whether the model rotates
half-split or interleaved pairs, which layers rotate at all, or whether the query is scaled by position.
Those are fixed by the model's code. This module holds them as data, one row per transformers
``model_type`` whose modeling code has a text RoPE module, each row citing the file (under
``transformers/models/``, transformers 5.24) and the function it was read from:

``layout``
    ``"half"`` (``rotate_half`` with ``x[..., :d/2]``, ``cat(freqs, freqs)``), ``"interleaved"`` (``rotate_half``
    on ``x[..., ::2]`` with ``repeat_interleave`` tables, ``rotate_every_two``, or complex pairs
    ``view_as_complex`` as in Llama 4 and DeepSeek-V2), ``"deinterleaved"`` (``apply_rotary_pos_emb_interleave``:
    interleaved input regrouped half-split), or ``"rope_interleave"`` (the config key ``rope_interleave``,
    default true, chooses between the last two, as DeepSeek-V3's attention does).
``rope_layers``
    Which layers rotate: ``"all"``; ``"no_rope_layers"`` (a 0/1 list, 1 = rotate; absent: every layer but each
    ``no_rope_layer_interval``-th, default 4); ``"sliding"`` (only ``sliding_attention`` layers, and only
    when ``sliding_window`` is set); ``"sliding_or_no_window"`` (sliding layers, or every layer when
    ``sliding_window`` is null). :mod:`refpos.rope.layers` evaluates them.
``layer_pattern``
    How the model's config class fills an absent ``layer_types``: ``(key, n)`` means layer ``i`` is
    ``full_attention`` when ``(i + 1) % n == 0`` and ``sliding_attention`` otherwise, ``n`` read from
    ``key`` (default ``n``; ``key`` None: always ``n``).
``query_scale``
    A position-dependent multiplier of the query: ``"llama4_temperature"`` (Llama 4's NoPE layers) or
    ``"llama_4_scaling_beta"`` (every layer, Ministral-3); see :mod:`refpos.rope.layers`.
``placement``
    Where the code puts the rotated channels when the config does not say (otherwise: first, or last for
    ``qk_rope_head_dim`` MLA configs).
``rope_dict``
    Rope-dict keys the model's own rotary module reads beyond transformers' shared rules:
    ``"ntk_alpha"`` (``"dynamic"`` with ``alpha`` is a fixed NTK base), ``"longrope_mscale"``
    (``short_mscale`` / ``long_mscale``).
``multi_axis``
    The text RoPE takes several position axes (M-RoPE); refpos resolves it only as a 1-D RoPE and reports
    its multi-axis keys as not modelled.
``unmodelled``
    Something the code does with positions that refpos does not model; reported as not modelled.

The layouts were read from each file's rotate / apply functions; the other columns from the attention
``forward`` of the families that differ. A ``model_type`` missing from the table resolves with the
layout ``"half"`` and RoPE on every layer *assumed*, and the resolution says so (not modelled).

Examples
--------
>>> family_of("cohere").layout, family_of("kimi_k2").model_type
('interleaved', 'deepseek_v3')
"""

from __future__ import annotations

from dataclasses import dataclass

LAYOUT_RULES = ("half", "interleaved", "deinterleaved", "rope_interleave")
LAYER_RULES = ("all", "no_rope_layers", "sliding", "sliding_or_no_window")
QUERY_SCALES = ("llama4_temperature", "llama_4_scaling_beta")
ROPE_DICT_RULES = ("ntk_alpha", "longrope_mscale")


@dataclass(frozen=True)
class Family:
    """One row of the family table (see the module docstring for the columns)."""

    model_type: str
    layout: str
    source: str
    rope_layers: str = "all"
    layer_pattern: tuple[str | None, int] | None = None
    query_scale: str | None = None
    placement: str | None = None
    rope_dict: frozenset[str] = frozenset()
    multi_axis: bool = False
    unmodelled: str | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUT_RULES or self.rope_layers not in LAYER_RULES \
                or self.query_scale not in (None, *QUERY_SCALES) or not self.rope_dict <= set(ROPE_DICT_RULES):
            raise ValueError(f"family {self.model_type!r}: a column holds a value outside its rule set")

    @property
    def is_default(self) -> bool:
        """True when the row says nothing beyond refpos's defaults (half layout, RoPE on every layer)."""
        return self == Family(self.model_type, "half", self.source)


#: one row per model_type (transformers 5.24, files under transformers/models/)
FAMILY_ROWS: tuple[Family, ...] = (
    Family("afmoe", "half", "afmoe/modeling_afmoe.py: rotate_half, AfmoeAttention.forward", rope_layers="sliding",
           layer_pattern=("global_attn_every_n_layers", 4)),
    Family("apertus", "half", "apertus/modeling_apertus.py: rotate_half"),
    Family("apertus1p5_text", "half", "apertus1p5/modeling_apertus1p5.py: rotate_half"),
    Family("arcee", "half", "arcee/modeling_arcee.py: rotate_half"),
    Family("aria_text", "half", "aria/modeling_aria.py: rotate_half"),
    Family("axk1", "rope_interleave", "axk1/modeling_axk1.py: apply_rotary_pos_emb_interleave"),
    Family("axk2", "deinterleaved", "axk2/modeling_axk2.py: apply_rotary_pos_emb_interleave"),
    Family("bailing_hybrid", "deinterleaved",
           "bailing_hybrid/modeling_bailing_hybrid.py: apply_rotary_pos_emb_interleave"),
    Family("bamba", "half", "bamba/modeling_bamba.py: rotate_half",
           unmodelled="mamba layers have no positions"),
    Family("beam", "half", "beam/modeling_beam.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings (a config switch)"),
    Family("bitnet", "half", "bitnet/modeling_bitnet.py: rotate_half"),
    Family("blt", "interleaved", "blt/modeling_blt.py: rotate_half"),
    Family("chameleon", "half", "chameleon/modeling_chameleon.py: rotate_half"),
    Family("codegen", "interleaved", "codegen/modeling_codegen.py: rotate_every_two"),
    Family("cohere", "interleaved", "cohere/modeling_cohere.py: rotate_half"),
    Family("cohere2", "interleaved", "cohere2/modeling_cohere2.py: rotate_half, Cohere2Attention.forward",
           rope_layers="sliding", layer_pattern=("sliding_window_pattern", 4)),
    Family("cohere2_moe", "interleaved", "cohere2_moe/modeling_cohere2_moe.py: rotate_half, Cohere2MoeAttention",
           rope_layers="sliding", unmodelled="dense layers with prefix_dense_sliding_window_pattern == 1 rotate too"),
    Family("cohere_compass_text", "half", "cohere_compass/modeling_cohere_compass.py: rotate_half", multi_axis=True),
    Family("cosmos3_edge_text", "half", "cosmos3_edge/modeling_cosmos3_edge.py: rotate_half", multi_axis=True),
    Family("csm", "half", "csm/modeling_csm.py: rotate_half"),
    Family("cwm", "half", "cwm/modeling_cwm.py: rotate_half"),
    Family("dbrx", "half", "dbrx/modeling_dbrx.py: rotate_half"),
    Family("deepseek_ocr2_text", "half", "deepseek_ocr2/modeling_deepseek_ocr2.py: rotate_half"),
    Family("deepseek_v2", "interleaved", "deepseek_v2/modeling_deepseek_v2.py: apply_rotary_emb"),
    Family("deepseek_v3", "rope_interleave", "deepseek_v3/modeling_deepseek_v3.py: apply_rotary_pos_emb_interleave"),
    Family("deepseek_v32", "deinterleaved", "deepseek_v32/modeling_deepseek_v32.py: apply_rotary_pos_emb_interleave"),
    Family("deepseek_v4", "interleaved", "deepseek_v4/modeling_deepseek_v4.py: rotate_half, apply_rotary_pos_emb",
           placement="last", unmodelled="the attention output is rotated back by the negative angle"),
    Family("dia", "half", "dia/modeling_dia.py: rotate_half"),
    Family("diffllama", "half", "diffllama/modeling_diffllama.py: rotate_half"),
    Family("diffusion_gemma_text", "half", "diffusion_gemma/modeling_diffusion_gemma.py: rotate_half"),
    Family("doge", "half", "doge/modeling_doge.py: rotate_half"),
    Family("dory", "half", "dory/modeling_dory.py: rotate_half"),
    Family("dots1", "half", "dots1/modeling_dots1.py: rotate_half"),
    Family("dots3_note_text", "deinterleaved", "dots3_note/modeling_dots3_note.py: apply_rotary_pos_emb_interleave"),
    Family("efficientloftr", "interleaved", "efficientloftr/modeling_efficientloftr.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings (a config switch)"),
    Family("embedding_gemma2_text", "half", "embedding_gemma2/modeling_embedding_gemma2.py: rotate_half"),
    Family("emu3", "half", "emu3/modeling_emu3.py: rotate_half"),
    Family("eomt_dinov3", "half", "eomt_dinov3/modeling_eomt_dinov3.py: rotate_half"),
    Family("ernie4_5", "interleaved", "ernie4_5/modeling_ernie4_5.py: rotate_half"),
    Family("ernie4_5_moe", "interleaved", "ernie4_5_moe/modeling_ernie4_5_moe.py: rotate_half"),
    Family("ernie4_5_vl_moe_text", "half", "ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py: rotate_half", multi_axis=True),
    Family("esm", "half",
           "esm/modeling_esm.py: rotate_half", unmodelled="RoPE only with position_embedding_type='rotary'"),
    Family("esmc", "half", "esmc/modeling_esmc.py: rotate_half"),
    Family("eurobert", "half", "eurobert/modeling_eurobert.py: rotate_half"),
    Family("evolla", "half", "evolla/modeling_evolla.py: rotate_half"),
    Family("exaone4", "half", "exaone4/modeling_exaone4.py: rotate_half, Exaone4Attention.forward",
           rope_layers="sliding_or_no_window", layer_pattern=("sliding_window_pattern", 4)),
    Family("exaone_moe", "half", "exaone_moe/modeling_exaone_moe.py: rotate_half, ExaoneMoeAttention.forward",
           rope_layers="sliding_or_no_window", layer_pattern=("sliding_window_pattern", 4)),
    Family("falcon", "half", "falcon/modeling_falcon.py: rotate_half", unmodelled="alibi=true replaces RoPE"),
    Family("falcon_h1", "half", "falcon_h1/modeling_falcon_h1.py: rotate_half",
           unmodelled="mamba layers have no positions"),
    Family("flex_olmo", "half", "flex_olmo/modeling_flex_olmo.py: rotate_half"),
    Family("flint", "half", "flint/modeling_flint.py: rotate_half, FlintAttention.forward", rope_layers="sliding"),
    Family("gemma", "half", "gemma/modeling_gemma.py: rotate_half"),
    Family("gemma2", "half", "gemma2/modeling_gemma2.py: rotate_half"),
    Family("gemma3_text", "half",
           "gemma3/modeling_gemma3.py: rotate_half", layer_pattern=("sliding_window_pattern", 6)),
    Family("gemma3n_text", "half", "gemma3n/modeling_gemma3n.py: rotate_half"),
    Family("gemma4_text", "half", "gemma4/modeling_gemma4.py: rotate_half"),
    Family("gemma4_unified_text", "half", "gemma4_unified/modeling_gemma4_unified.py: rotate_half"),
    Family("glm", "interleaved", "glm/modeling_glm.py: rotate_half"),
    Family("glm4", "interleaved", "glm4/modeling_glm4.py: rotate_half"),
    Family("glm4_moe", "half", "glm4_moe/modeling_glm4_moe.py: rotate_half"),
    Family("glm4_moe_lite", "rope_interleave",
           "glm4_moe_lite/modeling_glm4_moe_lite.py: apply_rotary_pos_emb_interleave"),
    Family("glm4v_moe_text", "half", "glm4v_moe/modeling_glm4v_moe.py: rotate_half", multi_axis=True),
    Family("glm4v_text", "interleaved", "glm4v/modeling_glm4v.py: rotate_half_llm", multi_axis=True),
    Family("glm_moe_dsa", "deinterleaved", "glm_moe_dsa/modeling_glm_moe_dsa.py: apply_rotary_pos_emb_interleave"),
    Family("glm_ocr_text", "half", "glm_ocr/modeling_glm_ocr.py: rotate_half", multi_axis=True),
    Family("glmasr", "half", "glmasr/modeling_glmasr.py: rotate_half"),
    Family("gpt_neox", "half", "gpt_neox/modeling_gpt_neox.py: rotate_half"),
    Family("gpt_neox_japanese", "half", "gpt_neox_japanese/modeling_gpt_neox_japanese.py: rotate_half"),
    Family("gpt_oss", "half", "gpt_oss/modeling_gpt_oss.py: apply_rotary_pos_emb"),
    Family("gptj", "interleaved", "gptj/modeling_gptj.py: rotate_every_two"),
    Family("gradium_phonon_tts", "half", "gradium_phonon_tts/modeling_gradium_phonon_tts.py: rotate_half"),
    Family("granite", "half", "granite/modeling_granite.py: rotate_half"),
    Family("granite_docling_text", "half", "granite_docling/modeling_granite_docling.py: rotate_half"),
    Family("granite_swa", "half", "granite_swa/modeling_granite_swa.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings (a config switch)"),
    Family("granitemoe", "half", "granitemoe/modeling_granitemoe.py: rotate_half"),
    Family("granitemoe_swa", "half", "granitemoe_swa/modeling_granitemoe_swa.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings (a config switch)"),
    Family("granitemoehybrid", "half", "granitemoehybrid/modeling_granitemoehybrid.py: rotate_half",
           unmodelled="position_embedding_type other than 'rope' turns RoPE off; mamba layers have no positions"),
    Family("granitemoeshared", "half", "granitemoeshared/modeling_granitemoeshared.py: rotate_half"),
    Family("gte", "half", "gte/modeling_gte.py: rotate_half"),
    Family("helium", "interleaved", "helium/modeling_helium.py: rotate_half"),
    Family("hrm_text", "half", "hrm_text/modeling_hrm_text.py: rotate_half"),
    Family("hunyuan_v1_dense", "half", "hunyuan_v1_dense/modeling_hunyuan_v1_dense.py: "
           "HunYuanDenseV1RotaryEmbedding.compute_ntk_alpha_rope_parameters", rope_dict=frozenset({"ntk_alpha"})),
    Family("hunyuan_v1_moe", "half", "hunyuan_v1_moe/modeling_hunyuan_v1_moe.py: "
           "HunYuanMoEV1RotaryEmbedding.compute_ntk_alpha_rope_parameters", rope_dict=frozenset({"ntk_alpha"})),
    Family("hunyuan_vl_text", "half", "hunyuan_vl/modeling_hunyuan_vl.py: rotate_half", multi_axis=True),
    Family("hy_v3", "half", "hy_v3/modeling_hy_v3.py: rotate_half"),
    Family("hy_v4", "half", "hy_v4/modeling_hy_v4.py: rotate_half"),
    Family("hy_v4_vl_text", "interleaved", "hy_v4_vl/modeling_hy_v4_vl.py: rotate_half", multi_axis=True),
    Family("hyperclovax", "half", "hyperclovax/modeling_hyperclovax.py: rotate_half"),
    Family("idefics", "half", "idefics/modeling_idefics.py: rotate_half",
           unmodelled="cross-attention layers have no RoPE"),
    Family("jais2", "half", "jais2/modeling_jais2.py: rotate_half"),
    Family("jetmoe", "half", "jetmoe/modeling_jetmoe.py: rotate_half"),
    Family("jina_embeddings_v3", "half", "jina_embeddings_v3/modeling_jina_embeddings_v3.py: rotate_half"),
    Family("kolibri1", "half", "kolibri1/modeling_kolibri1.py: rotate_half, Kolibri1Attention.forward",
           rope_layers="sliding_or_no_window", layer_pattern=(None, 5)),
    Family("kyutai_speech_to_text", "half", "kyutai_speech_to_text/modeling_kyutai_speech_to_text.py: rotate_half",
           unmodelled="RoPE only when the config builds the rotary embedding"),
    Family("laguna", "half", "laguna/modeling_laguna.py: rotate_half"),
    Family("lara_mini", "half", "lara_mini/modeling_lara_mini.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings (a config switch)"),
    Family("lfm2", "half", "lfm2/modeling_lfm2.py: rotate_half",
           unmodelled="convolution layers have no positions"),
    Family("lfm2_moe", "half", "lfm2_moe/modeling_lfm2_moe.py: rotate_half",
           unmodelled="convolution layers have no positions"),
    Family("lfm3", "half", "lfm3/modeling_lfm3.py: rotate_half"),
    Family("llama", "half", "llama/modeling_llama.py: rotate_half"),
    Family("llama4_text", "interleaved", "llama4/modeling_llama4.py: apply_rotary_emb, Llama4TextAttention.forward",
           rope_layers="no_rope_layers", query_scale="llama4_temperature"),
    Family("longcat_flash", "deinterleaved",
           "longcat_flash/modeling_longcat_flash.py: apply_rotary_pos_emb_interleave"),
    Family("mellum", "half", "mellum/modeling_mellum.py: rotate_half"),
    Family("mimi", "half", "mimi/modeling_mimi.py: rotate_half"),
    Family("mimo_v2_flash", "half", "mimo_v2_flash/modeling_mimo_v2_flash.py: rotate_half"),
    Family("minicpm3", "half", "minicpm3/modeling_minicpm3.py: rotate_half"),
    Family("minimax", "half", "minimax/modeling_minimax.py: rotate_half",
           unmodelled="lightning-attention layers have no positions"),
    Family("minimax_m2", "half", "minimax_m2/modeling_minimax_m2.py: rotate_half"),
    Family("minimax_m3_vl", "half", "minimax_m3_vl/modeling_minimax_m3_vl.py: rotate_half"),
    Family("ministral", "half", "ministral/modeling_ministral.py: rotate_half"),
    Family("ministral3", "half", "ministral3/modeling_ministral3.py: rotate_half, get_llama_4_attn_scale",
           query_scale="llama_4_scaling_beta"),
    Family("mistral", "half", "mistral/modeling_mistral.py: rotate_half"),
    Family("mistral4", "rope_interleave", "mistral4/modeling_mistral4.py: apply_rotary_pos_emb_interleave, "
           "get_llama_4_attn_scale", query_scale="llama_4_scaling_beta"),
    Family("mistral_large4_text", "deinterleaved",
           "mistral_large4/modeling_mistral_large4.py: apply_rotary_pos_emb_interleave, MistralLarge4TextAttention",
           rope_layers="no_rope_layers", unmodelled="KV-shared layers reuse another layer's rotated keys"),
    Family("mixtral", "half", "mixtral/modeling_mixtral.py: rotate_half"),
    Family("mllama_text_model", "half", "mllama/modeling_mllama.py: rotate_half"),
    Family("modernbert", "half", "modernbert/modeling_modernbert.py: rotate_half"),
    Family("modernbert-decoder", "half", "modernbert_decoder/modeling_modernbert_decoder.py: rotate_half"),
    Family("molmo2_text", "half", "molmo2/modeling_molmo2.py: rotate_half"),
    Family("moonshine", "interleaved", "moonshine/modeling_moonshine.py: rotate_half",
           unmodelled="cross-attention layers have no RoPE"),
    Family("moonshine_streaming", "interleaved", "moonshine_streaming/modeling_moonshine_streaming.py: rotate_half",
           unmodelled="cross-attention layers have no RoPE"),
    Family("moshi", "half", "moshi/modeling_moshi.py: rotate_half",
           unmodelled="RoPE only when the config builds the rotary embedding"),
    Family("muse_glimmer", "half", "muse_glimmer/modeling_muse_glimmer.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings (a config switch)"),
    Family("muse_glimmer_assistant", "half", "muse_glimmer_assistant/modeling_muse_glimmer_assistant.py: rotate_half"),
    Family("muse_spark", "half", "muse_spark/modeling_muse_spark.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings (a config switch)"),
    Family("musicflamingo", "interleaved", "musicflamingo/modeling_musicflamingo.py: rotate_half"),
    Family("nanochat", "half", "nanochat/modeling_nanochat.py: rotate_half",
           unmodelled="rotate_half with flipped signs: every pair turns by the negative angle"),
    Family("nemotron", "half", "nemotron/modeling_nemotron.py: rotate_half"),
    Family("nemotron3_5_transcribe_asr_audio", "half",
           "nemotron3_5_transcribe/modeling_nemotron3_5_transcribe.py: rotate_half"),
    Family("nemotron3_diarization", "half", "nemotron3_diarization/modeling_nemotron3_diarization.py: rotate_half"),
    Family("neomme", "half", "neomme/modeling_neomme.py: rotate_half", multi_axis=True),
    Family("neucodec", "half", "neucodec/modeling_neucodec.py: rotate_half"),
    Family("nomic_bert", "half", "nomic_bert/modeling_nomic_bert.py: rotate_half"),
    Family("olmo", "half", "olmo/modeling_olmo.py: rotate_half"),
    Family("olmo2", "half", "olmo2/modeling_olmo2.py: rotate_half"),
    Family("olmo3", "half", "olmo3/modeling_olmo3.py: rotate_half"),
    Family("olmo_hybrid", "half", "olmo_hybrid/modeling_olmo_hybrid.py: rotate_half",
           unmodelled="RoPE skipped when the model passes no position embeddings; linear-attention layers have none"),
    Family("olmoe", "half", "olmoe/modeling_olmoe.py: rotate_half"),
    Family("openai_privacy_filter", "half",
           "openai_privacy_filter/modeling_openai_privacy_filter.py: apply_rotary_pos_emb"),
    Family("paddleocr_vl", "half", "paddleocr_vl/modeling_paddleocr_vl.py: rotate_half", multi_axis=True),
    Family("persimmon", "half", "persimmon/modeling_persimmon.py: rotate_half"),
    Family("phi", "half", "phi/modeling_phi.py: rotate_half"),
    Family("phi3", "half", "phi3/modeling_phi3.py: rotate_half"),
    Family("phi4_multimodal", "half", "phi4_multimodal/modeling_phi4_multimodal.py: rotate_half"),
    Family("phimoe", "half", "phimoe/modeling_phimoe.py: PhimoeRotaryEmbedding.forward",
           rope_dict=frozenset({"longrope_mscale"})),
    Family("pocket_tts", "half", "pocket_tts/modeling_pocket_tts.py: rotate_half"),
    Family("qwen2", "half", "qwen2/modeling_qwen2.py: rotate_half"),
    Family("qwen2_5_omni", "half", "qwen2_5_omni/modeling_qwen2_5_omni.py: rotate_half", multi_axis=True),
    Family("qwen2_5_omni_dit", "half", "qwen2_5_omni/modeling_qwen2_5_omni.py: rotate_half", multi_axis=True),
    Family("qwen2_5_vl", "half", "qwen2_5_vl/modeling_qwen2_5_vl.py: rotate_half", multi_axis=True),
    Family("qwen2_moe", "half", "qwen2_moe/modeling_qwen2_moe.py: rotate_half"),
    Family("qwen2_vl", "half", "qwen2_vl/modeling_qwen2_vl.py: rotate_half", multi_axis=True),
    Family("qwen3", "half", "qwen3/modeling_qwen3.py: rotate_half"),
    Family("qwen3_5_moe_text", "half", "qwen3_5_moe/modeling_qwen3_5_moe.py: rotate_half", multi_axis=True),
    Family("qwen3_5_text", "half", "qwen3_5/modeling_qwen3_5.py: rotate_half", multi_axis=True),
    Family("qwen3_moe", "half", "qwen3_moe/modeling_qwen3_moe.py: rotate_half"),
    Family("qwen3_next", "half", "qwen3_next/modeling_qwen3_next.py: rotate_half",
           unmodelled="linear-attention (Gated DeltaNet) layers have no positions"),
    Family("qwen3_omni_moe", "half", "qwen3_omni_moe/modeling_qwen3_omni_moe.py: rotate_half", multi_axis=True),
    Family("qwen3_omni_moe_text", "half", "qwen3_omni_moe/modeling_qwen3_omni_moe.py: rotate_half", multi_axis=True),
    Family("qwen3_vl_moe_text", "half", "qwen3_vl_moe/modeling_qwen3_vl_moe.py: rotate_half", multi_axis=True),
    Family("qwen3_vl_text", "half", "qwen3_vl/modeling_qwen3_vl.py: rotate_half", multi_axis=True),
    Family("qwen4_exp_text", "half", "qwen4_exp/modeling_qwen4_exp.py: rotate_half", multi_axis=True),
    Family("recurrent_gemma", "half", "recurrent_gemma/modeling_recurrent_gemma.py: rotate_half"),
    Family("seed_oss", "half", "seed_oss/modeling_seed_oss.py: rotate_half"),
    Family("smollm3", "half", "smollm3/modeling_smollm3.py: rotate_half, SmolLM3Attention.forward",
           rope_layers="no_rope_layers"),
    Family("solar_open", "half", "solar_open/modeling_solar_open.py: rotate_half"),
    Family("stablelm", "half", "stablelm/modeling_stablelm.py: rotate_half"),
    Family("starcoder2", "half", "starcoder2/modeling_starcoder2.py: rotate_half"),
    Family("step3p7", "half", "step3p7/modeling_step3p7.py: rotate_half"),
    Family("t5gemma", "half", "t5gemma/modeling_t5gemma.py: rotate_half"),
    Family("t5gemma2_text", "half", "t5gemma2/modeling_t5gemma2.py: rotate_half"),
    Family("timesfm2_5", "half", "timesfm2_5/modeling_timesfm2_5.py: rotate_half"),
    Family("ultrabert", "half", "ultrabert/modeling_ultrabert.py: rotate_half"),
    Family("unlimited_ocr_text", "half", "unlimited_ocr/modeling_unlimited_ocr.py: rotate_half"),
    Family("vaultgemma", "half", "vaultgemma/modeling_vaultgemma.py: rotate_half"),
    Family("voxtral_realtime", "half", "voxtral_realtime/modeling_voxtral_realtime.py: rotate_half"),
    Family("xcodec2", "half", "xcodec2/modeling_xcodec2.py: rotate_half"),
    Family("youtu", "rope_interleave", "youtu/modeling_youtu.py: apply_rotary_pos_emb_interleave"),
    Family("zamba2", "half", "zamba2/modeling_zamba2.py: rotate_half", unmodelled="RoPE only with use_mem_rope"),
    Family("zaya", "half", "zaya/modeling_zaya.py: rotate_half"),
)

#: model_types that are a known family under another name (the hub config's ``architectures`` names the
#: transformers class): Kimi-K2 ships ``model_type: kimi_k2`` with ``DeepseekV3ForCausalLM``
ALIASES: dict[str, str] = {"kimi_k2": "deepseek_v3"}

FAMILIES: dict[str, Family] = {row.model_type: row for row in FAMILY_ROWS}
if len(FAMILIES) != len(FAMILY_ROWS):  # pragma: no cover - a duplicated row is a table error
    raise RuntimeError("family table: duplicated model_type")


def family_of(model_type: str | None) -> Family | None:
    """The row of ``model_type`` (aliases followed), or ``None`` when the table does not know it."""
    if model_type is None:
        return None
    if not isinstance(model_type, str):
        raise TypeError(f"model_type must be a str, got {type(model_type).__name__}")
    return FAMILIES.get(ALIASES.get(model_type, model_type))


def table_summary() -> dict[str, int]:
    """Counts of the table: model types, aliases, rows that differ from the default."""
    return {"model_types": len(FAMILY_ROWS), "aliases": len(ALIASES),
            "differ_from_default": sum(not row.is_default for row in FAMILY_ROWS)}
