"""A model type's repairs: fields its config class leaves unset (or does not define) that its modules read.

Where a class's defaults cannot build at any strength for a reason of that class alone (a field its modules
read that the class does not define or leaves None, a forward that needs a field set), or build a geometry
whose observation cannot tell a catalogued mistake from the right answer (PatchTST's width), :data:`OVERRIDES`
states the field for that model type, each entry with its reason. :func:`repaired` applies them to a config
dict the rules of :mod:`survey.tiny_rules` shrank.
"""

from __future__ import annotations

from typing import Any

from survey.tiny_rules import VOCAB, WIDTH, scaled_sections


def _dbrx_attention(values: dict[str, Any]) -> dict[str, Any]:
    """DBRX's attention module keeps ``attn_config.rope_theta``, a field its attention config class no longer
    defines (the rotary module reads ``rope_parameters``; released configs still state it): stated, the same
    base. Its default ``clip_qkv`` of None reaches ``clamp`` as both bounds, which torch refuses: stated as the
    released configs state it, 8 (a bound the probe's activations stay far below)."""
    attention = values["attn_config"]
    return {"attn_config": {**attention, "rope_theta": values["rope_parameters"]["rope_theta"],
                            "clip_qkv": attention.get("clip_qkv") or 8}}


def _dense_then_sparse(values: dict[str, Any]) -> dict[str, Any]:
    """DeepSeek-OCR-2's text decoder indexes ``mlp_layer_types`` by layer, and its class leaves it None: stated
    as its docstring's example, a dense first layer, then sparse ones."""
    if values.get("mlp_layer_types") is not None:
        return {}
    return {"mlp_layer_types": ["dense"] + ["sparse"] * (values["num_hidden_layers"] - 1)}


def _rope_per_layer_type(values: dict[str, Any]) -> dict[str, Any]:
    """Cohere Compass's rotary module reads ``rope_parameters[layer_type]`` for each of its layer types, while its
    class leaves ``rope_parameters`` None (an empty dict once standardized): stated per layer type as the class's
    own defaults, its ``default_rope_type`` and ``default_theta``."""
    if values.get("rope_parameters"):
        return {}
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[values["model_type"]]
    rope = {"rope_type": cls.default_rope_type, "rope_theta": cls.default_theta}
    return {"rope_parameters": {kind: dict(rope) for kind in dict.fromkeys(values["layer_types"])}}


def _hunyuan_axes(values: dict[str, Any]) -> dict[str, Any]:
    """HunYuan-VL's rotary module expands the positions to ``len(mrope_section)`` axes and splits the frequencies
    by the sections, whatever the config says; its class states none (its docstring: the sections partition half of
    each head across the axes, four of them ``(position, width, height, image_index)``): stated as four equal
    parts of the half head."""
    rope = values.get("rope_parameters") or {}
    if rope.get("mrope_section") is not None:
        return {}
    head = values.get("head_dim") or values["hidden_size"] // values["num_attention_heads"]
    return {"rope_parameters": {**rope, "mrope_section": scaled_sections([1, 1, 1, 1], head // 2)}}


def _qsa_indexer(values: dict[str, Any]) -> dict[str, Any]:
    """Qwen4-Exp's attention builds a QSA token indexer on every indexed layer, reading the indexer's fields, which
    its class leaves None (documented as QSA off): stated as its validator asks, one key head, the model's query
    heads and head width, blocks of 4 keys and a budget of 64 tokens (more than the survey feeds: every token is
    selected)."""
    if values.get("indexer_budget") is not None:
        return {}
    head = values.get("head_dim") or values["hidden_size"] // values["num_attention_heads"]
    return {"indexer_n_heads": values["num_attention_heads"], "indexer_kv_heads": 1, "indexer_head_dim": head,
            "indexer_budget": 64, "indexer_compress_ratio": 4}


#: the image size SAM's model is shrunk to (16 × 16 patches of 16 pixels)
SAM_IMAGE = 256


def _sam_size(values: dict[str, Any]) -> dict[str, Any]:
    """SAM's (and SAM-HQ's) image size, stated as :data:`SAM_IMAGE` in the vision config and restated in the prompt
    encoder's, with the embedding's grid of patches it implies."""
    vision, prompt = values["vision_config"], values["prompt_encoder_config"]
    grid = SAM_IMAGE // vision["patch_size"]
    return {"vision_config": {**vision, "image_size": SAM_IMAGE},
            "prompt_encoder_config": {**prompt, "image_size": SAM_IMAGE, "image_embedding_size": grid}}


def _sam2_size(values: dict[str, Any]) -> dict[str, Any]:
    """SAM 2's image size, stated as :data:`SAM_IMAGE` in its Hiera backbone, with the feature maps it gives at
    strides 4, 8 and 16 (``backbone_feature_sizes``, which the model reshapes them to), and restated in the prompt
    encoder's (its mask decoder reads the prompt encoder's grid of ``image_size / patch_size`` patches)."""
    vision, prompt = values["vision_config"], values["prompt_encoder_config"]
    return {"vision_config": {**vision, "backbone_config": {**vision["backbone_config"],
                                                            "image_size": [SAM_IMAGE, SAM_IMAGE]},
                              "backbone_feature_sizes": [[SAM_IMAGE // stride] * 2 for stride in (4, 8, 16)]},
            "prompt_encoder_config": {**prompt, "image_size": SAM_IMAGE}}


def _edgetam_backbone(backbone: dict[str, Any]) -> dict[str, Any]:
    """EdgeTAM's vision config names its timm backbone, RepViT-M1, under a misspelled key (``archirecture``), so
    the wrapper builds its own default, ResNet-50, whose feature maps (64 to 1024 channels) the neck, made for
    ``backbone_channel_list`` (RepViT's 48 to 384), refuses: stated under ``architecture``, the name the class
    meant (no weights are loaded)."""
    meant = backbone.get("archirecture")
    return backbone if meant is None or backbone.get("architecture") == meant else {**backbone, "architecture": meant}


def _edgetam_vision(values: dict[str, Any]) -> dict[str, Any]:
    """EdgeTAM's vision tower alone: its backbone named as :func:`_edgetam_backbone` states."""
    return {"backbone_config": _edgetam_backbone(values["backbone_config"])}


#: EdgeTAM's image size when shrunk: RepViT-M1's own input in timm (the size the survey feeds a timm tower at)
EDGETAM_IMAGE = 224


def _edgetam_size(values: dict[str, Any]) -> dict[str, Any]:
    """EdgeTAM's model: its backbone named (:func:`_edgetam_backbone`), its image size stated as
    :data:`EDGETAM_IMAGE` in the prompt encoder (the mask decoder reads its grid of ``image_size / patch_size``
    patches: 14 × 14), with the feature maps RepViT gives at strides 4, 8 and 16 (``backbone_feature_sizes``, which
    the model reshapes them to)."""
    vision, prompt = values["vision_config"], values["prompt_encoder_config"]
    return {"vision_config": {**vision, "backbone_config": _edgetam_backbone(vision["backbone_config"]),
                              "backbone_feature_sizes": [[EDGETAM_IMAGE // stride] * 2 for stride in (4, 8, 16)]},
            "prompt_encoder_config": {**prompt, "image_size": EDGETAM_IMAGE}}


def _sam3_tracker_width(values: dict[str, Any]) -> dict[str, Any]:
    """SAM 3 tracker's ViT narrowed to 4 heads of its 64 channels (256 wide), its image size kept (1008: the 72 × 72
    patch map its table is tiled over and its mask decoder's grid): the patch map's captures then fit the survey's
    bound on a kept tensor, and the heads' rotation is the same."""
    vision = values["vision_config"]
    backbone = vision["backbone_config"]
    head = backbone["hidden_size"] // backbone["num_attention_heads"]
    return {"vision_config": {**vision, "backbone_config": {**backbone, "hidden_size": 4 * head,
                                                            "num_attention_heads": 4,
                                                            "intermediate_size": 8 * head}}}


#: PatchTST's table width when shrunk: 32 patches of 16 channels (see :func:`_standardized_table`)
PATCHTST_WIDTH = 16


def _standardized_table(values: dict[str, Any]) -> dict[str, Any]:
    """PatchTST standardises its sinusoid table over all ``N`` entries (patches times ``d_model``) with torch's
    unbiased deviation; the deviation with ``1/N`` (a catalogued mistake) scales each entry by ``√(N/(N − 1))``,
    ``|P'|/(2N)`` apart, while the float32 bound of the standardised table grows as ``|P'|·N·u`` (``u = 2⁻²⁴``,
    :mod:`refpos.encodings.sinusoid1d_mistakes`): at the defaults' 32 patches of 128 channels (``N = 4096``) the
    mistake lies within the bound (3.0e-5 against 2.5e-4). At 16 channels (``N = 512``) it is 2.3e-4 against a
    bound of 6.2e-5: told apart. The table's positions (32 patches) are kept; attention reads no positions."""
    return {"d_model": min(values["d_model"], PATCHTST_WIDTH)}


#: the frames per block of Granite Speech's conformer at the survey's size: the 16 frames it is fed then fill two
#: blocks and part of a third (its default 200, or 128, hold them in one partial block, where a block one frame
#: shorter or longer, or none, looks right)
GRANITE_BLOCK = 6
#: wav2vec2-BERT's clip below at the survey's size: its default 64 is beyond the 64 frames it is fed (no distance
#: reaches it, so a clip one frame short looks right on that side)
W2V_BERT_LEFT = 16


def _granite_blocks(values: dict[str, Any]) -> dict[str, Any]:
    """Granite Speech's encoder (or a composite's ``encoder_config``) at :data:`GRANITE_BLOCK` frames per block."""
    if "encoder_config" in values:
        return {"encoder_config": {**values["encoder_config"], **_granite_blocks(values["encoder_config"])}}
    return {"context_size": min(values["context_size"], GRANITE_BLOCK)}


def _w2v_bert_left(values: dict[str, Any]) -> dict[str, Any]:
    """wav2vec2-BERT (or a codec's ``semantic_model_config``) with its clip below at :data:`W2V_BERT_LEFT`."""
    if "semantic_model_config" in values:
        return {"semantic_model_config": {**values["semantic_model_config"],
                                          **_w2v_bert_left(values["semantic_model_config"])}}
    return {"left_max_position_embeddings": min(values["left_max_position_embeddings"], W2V_BERT_LEFT)}


def _class_default(values: dict[str, Any], key: str) -> Any:
    """The default of field ``key`` in the config class of ``values``' model type."""
    from transformers import CONFIG_MAPPING

    return getattr(CONFIG_MAPPING[values["model_type"]](), key)


def _slot_codebooks(values: dict[str, Any]) -> dict[str, Any]:
    """A depth decoder that reads the codebook of each token from its slot (Moshi's: one embedding and one
    projection weight per slot; CSM's: an id offset of ``slot · vocab_size``), so that the probe's row must fit its
    codebooks: their count kept as the class's (8 for Moshi, the probe's 8 tokens; 32 for CSM), where the rule of
    :mod:`survey.tiny_rules` that reads ids as rows of codebooks (MusicGen's) would leave one."""
    return {"num_codebooks": _class_default(values, "num_codebooks")}


def _audio_padding(values: dict[str, Any]) -> dict[str, Any]:
    """Kyutai's speech-to-text embedding has ``vocab_size + num_codebooks · codebook_vocab_size + 1`` rows, the
    last the audio padding (its default ``audio_pad_token_id``, 69569, is that row of the defaults): restated as
    the last row of the shrunk table."""
    return {"audio_pad_token_id": values["vocab_size"] + values["num_codebooks"] * values["codebook_vocab_size"]}


#: per model type, fields its class leaves unset (or does not define) that its modules read, so that no
#: geometry builds from the class defaults: (why, the fields stated, from the shrunk values)
OVERRIDES: dict[str, tuple[str, Any]] = {
    "hunyuan_vl_text": ("its rotary module reads rope_parameters['mrope_section'], None by default", _hunyuan_axes),
    "qwen4_exp_text": ("its indexed layers build a QSA indexer from fields None by default", _qsa_indexer),
    "patchtst": ("its standardised table at the default width leaves 1/N and 1/(N - 1) within the float32 bound",
                 _standardized_table),
    "dbrx": ("attention reads attn_config.rope_theta and clamps to clip_qkv", _dbrx_attention),
    "cohere_compass_text": ("its rotary module reads rope_parameters per layer type, None by default",
                            _rope_per_layer_type),
    "deepseek_ocr2_text": ("mlp_layer_types indexed by layer, None by default", _dense_then_sparse),
    # the talker's MoE block builds a shared expert of this width; the class does not define it
    "qwen3_omni_moe_talker_text": ("its MoE block reads shared_expert_intermediate_size",
                                   lambda values: {"shared_expert_intermediate_size": values["intermediate_size"]}),
    # the talker (speech out) reads fields its config class does not define (spatial_merge_size): not built;
    # the thinker, which reads the text, is built as before
    "qwen3_omni_moe": ("its talker reads fields its class does not define",
                       lambda values: {"enable_audio_output": False}),
    # Dia's encoder reads bytes (256 ids; the probe's ids reach 999) and its decoder reads its ids as rows of
    # num_channels codebooks, as MusicGen's (see num_codebooks)
    "dia": ("a byte vocabulary below the probe's ids, and ids read as rows of codebooks",
            lambda values: {"encoder_config": {**values["encoder_config"],
                                               "vocab_size": max(values["encoder_config"]["vocab_size"], VOCAB)},
                            "decoder_config": {**values["decoder_config"], "num_channels": 1},
                            "delay_pattern": values["delay_pattern"][:1]}),
    # the speech model's phoneme vocabulary (78 ids) lies in model_config, where the probe does not look for
    # the ids it feeds (below 1000): widened, the positions do not depend on it
    "fastspeech2_conformer_with_hifigan": (
        "a phoneme vocabulary below the probe's ids",
        lambda values: {"model_config": {**values["model_config"],
                                         "vocab_size": max(values["model_config"]["vocab_size"], VOCAB)}}),
    # the forward refuses ids without a language; the config lists the languages, the first is stated
    "xmod": ("its forward needs default_language", lambda values: {"default_language": values["languages"][0]}),
    # xLSTM's mLSTM heads are 512 wide by default (its width over its heads) and read no positions: at that head
    # width, the fewest heads leave 400M parameters; the width of a model without attention, as RWKV's
    "xlstm": ("its blocks read no positions; its width per head makes it too large",
              lambda values: {"hidden_size": min(values["hidden_size"], WIDTH),
                              "embedding_dim": min(values["embedding_dim"], WIDTH)}),
    # the model maps image tokens through vocabulary_map, None by default: a map naming the image token only
    "chameleon": ("its model reads vocabulary_map['<image>']",
                  lambda values: {"vocabulary_map": values.get("vocabulary_map") or {"<image>": VOCAB - 1}}),
    # LFM2-MoE's model indexes layer_types, which its class leaves None (LFM2's own class fills them: every layer
    # full attention where no index is stated): stated as LFM2's default
    "lfm2_moe": ("its class leaves layer_types None, and its model indexes them",
                 lambda values: {"layer_types": values.get("layer_types") or
                                 ["full_attention"] * values["num_hidden_layers"]}),
    # the diarization head projects the audio tower's frames, and its validator ties its audio_hidden_size to the
    # tower's width: the tower shrunk, the head states the shrunk width
    "nemotron3_diarization": ("its head config restates the audio tower's width, which the validator checks",
                              lambda values: {"head_config": {**values["head_config"], "audio_hidden_size":
                                                              values["audio_config"]["hidden_size"]}}),
    # the lagged forecasters' classes leave the horizon None and refuse to build without one: stated as a monthly
    # series' two years, 24 steps (their context length defaults to it)
    **{name: ("its class leaves prediction_length None, and its model refuses to build without it",
              lambda values: {"prediction_length": values.get("prediction_length") or 24})
       for name in ("autoformer", "informer", "time_series_transformer")},
    # SAM's model refuses any image but its vision config's size (1024: 4096 patches, whose captures exceed the
    # survey's bound on a kept tensor); its prompt encoder restates that size and the embedding's grid
    "sam": ("its model refuses any image size but the configured one", _sam_size),
    "sam_hq": ("its model refuses any image size but the configured one", _sam_size),
    "sam2": ("its mask decoder reads the prompt encoder's grid of the configured image size", _sam2_size),
    "edgetam": ("its vision config names its timm backbone under a misspelled key, and its mask decoder reads the "
                "prompt encoder's grid of the configured image size", _edgetam_size),
    "edgetam_vision_model": ("its config names its timm backbone under a misspelled key: the wrapper's default "
                             "backbone does not fit its neck", _edgetam_vision),
    "sam2_hiera_det_model": ("its 1024 image gives a 256 × 256 map whose captures exceed the survey's bound on a kept "
                             "tensor", lambda values: {"image_size": [SAM_IMAGE, SAM_IMAGE]}),
    "sam3_tracker": ("its ViT keeps its full width (1024) at the tiny geometry: 72 × 72 patches of it exceed the "
                     "survey's bound on a kept tensor", _sam3_tracker_width),
    # YOLOS's 512 × 864 image gives 1829 rows a table, and its seven tables between the layers, resampled, exceed the
    # survey's bound on a kept tensor: a quarter of the area (16 × 27 patches), its aspect kept
    "yolos": ("its tables between the layers, resampled at its 512 × 864 image, exceed the survey's bound on a kept "
              "tensor", lambda values: {"image_size": [values["image_size"][0] // 2, values["image_size"][1] // 2]}),
    # Step 3.5's text model (Step3p7's too) builds the sliding-window mask whatever its layer types, and its
    # class leaves the window None: stated as the position limit, wider than any two positions' distance, so
    # the mask masks nothing and no layer of the defaults (all full attention) reads it
    "step3p5": ("its model builds a sliding-window mask, and sliding_window is None by default",
                lambda values: {"sliding_window": values.get("sliding_window") or values["max_position_embeddings"]}),
    # V-JEPA 2's attention splits each token's index along crop_size / patch_size patches a side (16 by default):
    # the 64-pixel clip the survey feeds (4 × 4 patches of one tubelet of its 2 frames) would hold every frame and row
    # index at 0, where a rotation of the wrong axis looks right; stated as 4 patches a side and 2 tubelets
    "vjepa2": ("its clip's frame and row indices are all 0 at the survey's size, hiding an axis swapped",
               lambda values: {"crop_size": 4 * values["patch_size"], "frames_per_clip": 2 * values["tubelet_size"]}),
    # Llama 4's vision tower pixel-shuffles its patches (ratio r: r² as many rows, 1/r² as wide) into an MLP whose
    # input width is intermediate_size (its released config: 1408 / 0.5² = 5632, the same field its layers' MLP
    # reads): the tiny width states the same tie, and the projector's widths (4096) shrink to the width
    "llama4_vision_model": ("its pixel-shuffle MLP reads hidden_size / pixel_shuffle_ratio² as intermediate_size",
                            lambda values: {"intermediate_size": round(values["hidden_size"]
                                                                       / values["pixel_shuffle_ratio"] ** 2),
                                            "projector_input_dim": values["hidden_size"],
                                            "projector_output_dim": values["hidden_size"]}),
    # timm's backbone wrapper names the architecture it builds in `backbone`, which its class leaves None: named as
    # timm's ResNet-18 (no weights are loaded; the row is refused by name whatever the architecture)
    **{name: ("its blocks of context_size frames hold the survey's 16 frames in one partial block, hiding the block "
              "size", _granite_blocks)
       for name in ("granite_speech", "granite_speech_encoder", "granite_speech_plus", "granite_speech_plus_encoder",
                    "granite_speech5_ctc", "granite_speech5_encoder")},
    **{name: ("its clip below (64 frames) is beyond the survey's 64 frames, hiding that side of the clip",
              _w2v_bert_left) for name in ("wav2vec2-bert", "xcodec2", "neucodec")},
    "moshi_depth": ("its tokens' codebooks are their slots", _slot_codebooks),
    "csm_depth_decoder_model": ("its tokens' codebooks are their slots", _slot_codebooks),
    "kyutai_speech_to_text": ("its audio padding id is the last row of its embedding", _audio_padding),
    # Dia's decoder alone at one channel, as the Dia composite's decoder is surveyed (above)
    "dia_decoder": ("its ids are read as rows of num_channels codebooks", lambda values: {"num_channels": 1}),
    # the decoder's attention reads num_key_value_heads, a field its class does not define (its encoder's class
    # does, as many as the heads): stated as the heads
    "moonshine_streaming": ("its decoder reads num_key_value_heads, which its class does not define",
                            lambda values: {"num_key_value_heads": values["num_attention_heads"]}),
    # LW-DETR's class defaults to no projector scale (no feature level: the encoder gets no feature map, at any
    # geometry); stated as one level at the backbone's own resolution (scale 1.0), RF-DETR's default of one level,
    # with the counts its __post_init__ derives from the scales (the shrunk dict states the defaults' zero)
    "lw_detr": ("its class defaults to no feature level",
                lambda values: {"projector_scale_factors": [1.0], "num_feature_levels": 1,
                                "projector_in_channels": [values["d_model"]]}),
    # TVP's visual prompter pads each frame to max_img_size (448) a side, which its backbone then reads: the survey
    # feeds it frames of that size (survey.feeding), 448 a side too slow for its many runs; stated as 128 a side,
    # the prompt's border 32 (its default's ratio, 96 of 448, rounded to a quarter), a 4 × 4 grid of features
    "tvp": ("its frames are max_img_size a side, too large for the survey's runs",
            lambda values: {"max_img_size": 128, "visual_prompt_size": 32}),
    "timm_backbone": ("its class names no timm architecture, and the wrapper builds none without one",
                      lambda values: {"backbone": values.get("backbone") or "resnet18"}),
}


def repaired(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the fields :data:`OVERRIDES` states for its model type."""
    override = OVERRIDES.get(values.get("model_type", ""))
    return values if override is None else {**values, **override[1](values)}
