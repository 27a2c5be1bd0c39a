"""Fields vLLM's model classes read that transformers' config classes no longer define: each stated at the value
transformers' own code computes, one record per model type with its reason.

vLLM's model code reads a config's fields by the names the released checkpoints' ``config.json`` use
(``head_dim``, ``first_k_dense_replace``, ``block_dim``, ``score_func``); transformers' config classes of the
same model types derive them or keep them under other names, so a config built from a class's defaults lacks them
and vLLM's constructor stops on an ``AttributeError``. :data:`REPAIRS` states each such field, for its model type,
at the value transformers' modeling code computes from the fields the class does keep, so that both engines build
the same geometry and refpos, asked about the same dict, reads the same value either way. :func:`repaired`
applies them to a shrunk config dict (and to its sub-configs: a composite's ``text_config``) before vLLM reads it.
A record never states a value that changes what transformers' code computes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Repair = tuple[str, Callable[[Mapping[str, Any]], dict[str, Any]]]


def _head_dim(values: Mapping[str, Any]) -> dict[str, Any]:
    """``head_dim = hidden_size // num_attention_heads``, the width transformers' attention takes without one."""
    return {} if values.get("head_dim") else {"head_dim": values["hidden_size"] // values["num_attention_heads"]}


def _dense_prefix(values: Mapping[str, Any]) -> dict[str, Any]:
    """``first_k_dense_replace``: the count of leading ``"dense"`` entries of ``mlp_layer_types`` (vLLM's layers
    are dense before it, sparse from it on), stated only where every later entry is ``"sparse"``."""
    if values.get("first_k_dense_replace") is not None:
        return {}
    types = list(values["mlp_layer_types"])
    k = next((i for i, t in enumerate(types) if t != "dense"), len(types))
    if any(t != "sparse" for t in types[k:]):
        raise ValueError(f"mlp_layer_types {types} is not a dense prefix then sparse layers")
    return {"first_k_dense_replace": k}


def _block_dim(values: Mapping[str, Any]) -> dict[str, Any]:
    """``block_dim = hidden_size``: transformers' LFM2 feed-forward maps ``hidden_size`` channels."""
    return {} if values.get("block_dim") else {"block_dim": values["hidden_size"]}


def _sections(values: Mapping[str, Any], default: list[int]) -> dict[str, Any]:
    """``rope_parameters`` with the M-RoPE sections ``default`` scaled to the rotation's frequency pairs
    (``int(head_dim · partial_rotary_factor) / 2``; :func:`survey.tiny_rules.scaled_sections`), where it names
    none."""
    from survey.tiny_rules import scaled_sections

    rope = dict(values.get("rope_parameters") or {})
    if rope.get("mrope_section") is not None:
        return {}
    head = values.get("head_dim") or values["hidden_size"] // values["num_attention_heads"]
    pairs = int(head * float(rope.get("partial_rotary_factor") or values.get("partial_rotary_factor") or 1.0)) // 2
    return {"rope_parameters": {**rope, "mrope_section": scaled_sections(list(default), pairs)}}


def _untied(values: Mapping[str, Any]) -> dict[str, Any]:
    """``tie_word_embeddings = False`` (an output head of its own) where the dict has none."""
    return {} if "tie_word_embeddings" in values else {"tie_word_embeddings": False}


#: model type -> (why vLLM needs it, the fields stated)
REPAIRS: dict[str, Repair] = {
    # vllm/model_executor/models/glm4_moe.py reads config.head_dim; transformers' Glm4MoeAttention takes
    # getattr(config, "head_dim", hidden_size // num_attention_heads) and the 5.25 class defines no head_dim
    "glm4_moe": ("vLLM's Glm4MoeAttention reads head_dim, which Glm4MoeConfig does not define", _head_dim),
    # vLLM builds a dense MLP below first_k_dense_replace, the MoE from it on; transformers' classes keep the same
    # choice per layer in mlp_layer_types
    "glm4_moe_lite": ("vLLM reads first_k_dense_replace, which Glm4MoeLiteConfig keeps as mlp_layer_types",
                      _dense_prefix),
    # vllm/model_executor/models/glm4_1v.py builds the text stack of glm4_moe.py, whose attention reads
    # config.head_dim and config.use_qk_norm; transformers' Glm4vMoeTextAttention takes getattr(config, "head_dim",
    # None) or hidden_size // num_attention_heads and normalises neither query nor key. Its rotary module takes
    # rope_parameters.get("mrope_section", [8, 12, 12]), vLLM's get_rope an M-RoPE only where the dict names one:
    # the default sections, scaled to the tiny rotation's pairs as the transformers survey states them
    # (survey.tiny.fit_sections), so that both engines and refpos read the same sections
    "glm4v_moe_text": ("vLLM's Glm4MoeAttention reads head_dim and use_qk_norm, which Glm4vMoeTextConfig does not "
                       "define (Glm4vMoeTextAttention normalises neither query nor key: use_qk_norm False), and "
                       "builds an M-RoPE only where rope_parameters names mrope_section (Glm4vMoeTextRotaryEmbedding's "
                       "default [8, 12, 12], scaled to the tiny rotation's frequency pairs)",
                       lambda values: {**_head_dim(values),
                                       **({} if "use_qk_norm" in values else {"use_qk_norm": False}),
                                       **_sections(values, [8, 12, 12])}),
    # vLLM's Kimi-VL text stack is its DeepSeek-V2 model, whose router requires an expert group count; vLLM's
    # KimiVLConfig leaves the text config's n_group and topk_group unset (None). One group, as run.ROUTER states
    # for a DeepSeek-V2 config at the top level; the experts' output is zeros here (engine.start)
    "kimi_vl": ("vLLM's DeepSeek-V2 router requires text_config.n_group and topk_group, which KimiVLConfig leaves "
                "unset: one expert group (the experts' output is zeros here; no position depends on it)",
                lambda values: {f"text_config.{k}": 1 for k in ("n_group", "topk_group")
                                if values["text_config"].get(k) is None}),
    # vllm/model_executor/models/lfm2.py builds Lfm2MLP(dim=config.block_dim, ...)
    "lfm2": ("vLLM's Lfm2MLP reads block_dim, which Lfm2Config does not define", _block_dim),
    # vllm/model_executor/models/afmoe.py reads config.score_func and config.route_norm; transformers'
    # AfmoeTokenChoiceRouter scores the experts by a sigmoid, the only scoring it has ("matching the released
    # checkpoints"), divides the chosen scores by their sum and chooses among all experts (one group)
    "afmoe": ("vLLM's router reads score_func, route_norm, n_group and topk_group, which AfmoeConfig does not define "
              "(its router is a sigmoid over one group of experts whose chosen scores are normalised)",
              lambda values: {"score_func": "sigmoid", "route_norm": True, "n_group": 1, "topk_group": 1}),
    # public config.json read through a plain config class (survey/vllm_engine/configs.py, rule 4): a key the
    # checkpoint's own config code defaults is absent, and vLLM reads it. Neither key reaches a layer's query or key
    # (the rotation compared is applied to them): tie_word_embeddings chooses whether the output head shares the
    # input embedding's weights, hidden_act is the MLP's, after attention
    "minicpm": ("vLLM reads tie_word_embeddings, absent from the public config.json: stated False (an output head "
                "of its own); no position depends on it", _untied),
    "orion": ("vLLM reads tie_word_embeddings and hidden_act, absent from the public config.json: stated False and "
              "silu (the Llama MLP's); no position depends on them",
              lambda values: {**({} if values.get("hidden_act") else {"hidden_act": "silu"}), **_untied(values)}),
    # vllm/model_executor/models/bert_with_rope.py (SnowflakeGteNewModel, vLLM's GteModel) refuses an embedding whose
    # position_embedding_type is not "rope"; transformers' GteModel rotates every layer's query and key
    # (GteRotaryEmbedding) and adds no position table, and GteConfig does not define the key
    "gte": ("vLLM's BertWithRopeEmbedding reads position_embedding_type, which GteConfig does not define (its model "
            "rotates every layer's query and key and adds no position table: stated rope)",
            lambda values: {} if values.get("position_embedding_type") else {"position_embedding_type": "rope"}),
    # vllm/model_executor/models/cohere_compass.py's CohereCompassForCausalLM builds no output head of its own and
    # asserts the composite's tie_word_embeddings, which CohereCompassConfig defaults to False (its text config to
    # True); the output head is after every layer: no position depends on it
    "cohere_compass": ("vLLM's CohereCompassForCausalLM requires tie_word_embeddings (it builds no output head of its "
                       "own), which CohereCompassConfig defaults to False: stated True, as its text config states; "
                       "no position depends on it",
                       lambda values: {} if values.get("tie_word_embeddings") else {"tie_word_embeddings": True}),
    # vllm/model_executor/models/lightonocr.py is Mistral 3's model (mistral3.py): it builds the vision tower up to
    # config.vision_feature_layer and the projector from projector_hidden_act and multimodal_projector_bias, and
    # reads image_token_index. transformers' LightOnOcrModel takes the tower's last_hidden_state (the last layer),
    # its LightOnOcrMultiModalProjector is nn.GELU between Linear layers without bias, and LightOnOcrConfig keeps the
    # image token as image_token_id; none of them reaches a layer's query or key
    "lighton_ocr": ("vLLM's Mistral 3 model reads vision_feature_layer, projector_hidden_act, "
                    "multimodal_projector_bias and image_token_index, which LightOnOcrConfig does not define (its "
                    "model takes the vision tower's last hidden state, a GELU projector without bias, and keeps "
                    "image_token_id): stated as it computes them; no position depends on them",
                    lambda values: {k: v for k, v in {
                        "vision_feature_layer": -1, "projector_hidden_act": "gelu",
                        "multimodal_projector_bias": False, "image_token_index": values.get("image_token_id")}.items()
                        if k not in values}),
    # vllm/model_executor/models/config.py (JinaRobertaModelConfig) reads position_embedding_type; transformers'
    # XLMRobertaEmbeddings always adds its learned absolute table, and the class no longer defines the key
    "xlm-roberta": ("vLLM reads position_embedding_type, which XLMRobertaConfig no longer defines (its embeddings "
                    "always add the learned absolute table)", lambda values: {"position_embedding_type": "absolute"}),
    # vllm/model_executor/models/qwen3_omni_moe_thinker.py's audio encoder (Qwen3-ASR's) reads conv_chunksize: how
    # many mel chunks its convolution front end runs at once ("chunk if needed to avoid OOM"), the same outputs at
    # any value; transformers' Qwen3ASREncoderConfig has no such bound
    "qwen3_asr_encoder": ("vLLM's audio encoder reads conv_chunksize, a memory bound of its convolution front end "
                          "that no output depends on, which Qwen3ASREncoderConfig does not define",
                          lambda values: {} if values.get("conv_chunksize") else {"conv_chunksize": 500}),
    # vllm/model_executor/models/muse_glimmer.py checks the composite's out_hidden_size = the vision config's
    # hidden_size · merge_size² (the width of merge_size² pixel-shuffled patches); the tiny width shrinks the
    # tower, and the tie is stated as the class's defaults state it (1536 · 2² = 6144)
    "muse_glimmer": ("vLLM's vision tower checks out_hidden_size = vision hidden_size · merge_size² (the pixel "
                     "shuffle's width), the class defaults' tie, which the tiny width keeps",
                     lambda values: {"out_hidden_size": values["vision_config"]["hidden_size"]
                                     * values["vision_config"]["merge_size"] ** 2}),
}
#: architecture -> (why vLLM needs it, the fields stated): where vLLM asks a key of one architecture of a model type
ARCHITECTURES: dict[str, Repair] = {
    # vllm/model_executor/models/config.py (LlamaBidirectionalConfig) refuses a config without "pooling", the
    # embedding's pooling over tokens after the last layer: no layer's query or key depends on it
    **dict.fromkeys(("LlamaBidirectionalModel", "LlamaBidirectionalForSequenceClassification"), (
        "vLLM's bidirectional Llama requires pooling (how the last layer's tokens are pooled, after every position "
        "is applied): stated avg", lambda values: {} if values.get("pooling") else {"pooling": "avg"})),
}


def _state(section: dict[str, Any], stated: Mapping[str, Any]) -> None:
    """Set each stated field on ``section`` in place; a dotted name (``text_config.n_group``) names a field of the
    sub-config dict its first part names, copied before it is changed."""
    for name, value in stated.items():
        head, dot, field = name.partition(".")
        if dot:
            section[head] = {**section[head], field: value}
        else:
            section[name] = value


def repaired(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` with :data:`REPAIRS` applied to it and to each sub-config dict of it whose ``model_type`` has a
    record, then :data:`ARCHITECTURES` for the architectures it names, and a note for each field stated
    (``"<path><field>=<value> stated: <reason>"``); a record may state a field of a sub-config by a dotted name
    (``text_config.n_group``).

    See Also
    --------
    survey.vllm_engine.run.observe : states them before vLLM reads the config.
    """
    notes: list[str] = []

    def visit(section: dict[str, Any], path: str) -> dict[str, Any]:
        out = dict(section)
        for key, value in section.items():
            if isinstance(value, dict) and isinstance(value.get("model_type"), str):
                out[key] = visit(value, f"{path}{key}.")
        record = REPAIRS.get(str(section.get("model_type")))
        if record is not None:
            why, rule = record
            stated = rule(out)
            _state(out, stated)
            notes.extend(f"{path}{name}={value!r} stated: {why}" for name, value in stated.items())
        return out

    out = visit(values, "")
    for architecture in out.get("architectures") or []:
        if architecture in ARCHITECTURES:
            why, rule = ARCHITECTURES[architecture]
            stated = rule(out)
            out.update(stated)
            notes.extend(f"{name}={value!r} stated: {why}" for name, value in stated.items())
    return out, notes


__all__ = ["ARCHITECTURES", "REPAIRS", "repaired"]
