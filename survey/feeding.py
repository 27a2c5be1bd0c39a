"""Model types whose forward reads the probe's tokens in another shape, or only beside inputs it cannot go without.

The probe (:mod:`survey.probe`) feeds one row of token ids, ``(batch, T)``. A few decoders read their ids as
channels of a frame, or need an input their composite computes, and so fail on that row alone at every
geometry. :data:`FEEDINGS` states, per model type of the surveyed row, what its model is fed instead, each with
its reason; :func:`wrap` wraps the model so that the probe (and every case of :mod:`survey.cases`) still hands it
one row of ids:

* ``ids``: the ids the forward reads, made from the row (Dia's decoder: ``(batch, T, channels)``, one channel; a
  speech-to-text decoder's text channel beside its audio channels, each audio token its padding row, so that
  every token's audio part is one and the same vector);
* ``beside``: inputs fed beside them, seeded (:mod:`survey.seeded`), at the call's length (Moshi's depth decoder
  adds to each token a projection of the main decoder's last hidden state);
* ``withheld``: forward parameters the model is not handed, and which the probe does not see it take (CLVP's
  encoders index a table of ``T`` rotations with the position ids: the probe's ids past ``T`` would index past
  it; left to itself the encoder reads ``0 … T-1``);
* ``composite``: what a composite computes for the model from the probe's mask, position ids and cache (BLT's
  local encoder and decoder: the causal mask, the byte patches and their cross-attention masks, as
  ``BltModel.forward`` makes them without a patcher).

An entry applies where the row's model type is its key and the model built is of its ``builds`` model type (the
row's own, or the language model a composite is run as: :func:`survey.run.build_language_model`); no other row's
inputs change.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from survey.seeded import seeded_normal


@dataclass(frozen=True)
class Feeding:
    """What one model type's forward is fed in place of (or beside) the probe's row of ids."""

    why: str
    #: the model type of the config the model is built from (the row's, or its language model's)
    builds: str
    #: ``(config, ids) -> ids``: the ids the forward reads, from the probe's ``(batch, T)`` ids
    ids: Callable[[Any, Any], Any] | None = None
    #: ``(config, ids) -> keyword arguments`` fed beside the ids, at the call's length
    beside: Callable[[Any, Any], dict[str, Any]] | None = None
    #: forward parameters not handed to the model (the probe sees a forward without them)
    withheld: tuple[str, ...] = ()
    #: ``(model, config, ids, given) -> keyword arguments`` replacing or joining those ``given`` (the mask,
    #: position ids and cache the probe passed), where the forward reads them as its composite computes them
    composite: Callable[[Any, Any, Any, dict[str, Any]], dict[str, Any]] | None = None


def _text_and_audio_pads(config: Any, ids: Any) -> Any:
    """Kyutai's speech-to-text decoder: each frame is a text token and ``num_codebooks`` audio tokens, whose
    embeddings are summed (``KyutaiSpeechToTextEmbeddings.forward``); the audio tokens are the padding id, which
    the embedding leaves unshifted, so every frame adds the same audio vector and the text token is the row's."""
    import torch

    pads = torch.full((*ids.shape, config.num_codebooks), config.audio_pad_token_id, dtype=ids.dtype)
    return torch.cat([ids[..., None], pads], dim=-1)


def _one_channel(config: Any, ids: Any) -> Any:
    """Dia's decoder reads ``(batch, T, num_channels)`` ids (``DiaDecoder.forward``); at one channel (as the Dia
    composite's decoder is surveyed, :mod:`survey.tiny_repairs`) the row is that channel."""
    return ids[..., None]


def _main_decoder_state(config: Any, ids: Any) -> dict[str, Any]:
    """Moshi's depth decoder adds to each token a projection of the main decoder's last hidden state
    (``input_projections(last_hidden_state, codebook_idx)``), which the forward cannot go without: seeded, one
    ``input_size`` vector per token."""
    return {"last_hidden_state": seeded_normal(7, *ids.shape, config.input_size)}


def _encoder_states(config: Any, ids: Any) -> dict[str, Any]:
    """Dia's decoder cross-attends to the encoder's output in every layer: seeded, ``cross_hidden_size`` wide, as
    many frames as tokens."""
    return {"encoder_hidden_states": seeded_normal(1, *ids.shape, config.cross_hidden_size)}


#: the image-encoder states fed to IDEFICS beside its text: one image of this many patch states
IDEFICS_PATCHES = 4


def _image_states(config: Any, ids: Any) -> dict[str, Any]:
    """IDEFICS's decoder cross-attends to one image's encoder states (its forward takes exactly one of pixel values,
    image-encoder states or perceiver states): seeded states of one image, ``vision_config.embed_dim`` wide, and the
    image attention mask that lets every token see that image (``(batch, T, images)``)."""
    import torch

    width = config.vision_config.embed_dim
    return {"image_encoder_embeddings": seeded_normal(8, ids.shape[0], 1, IDEFICS_PATCHES, width),
            "image_attention_mask": torch.ones((*ids.shape, 1), dtype=torch.long)}


def _video(config: Any, ids: Any) -> dict[str, Any]:
    """TVP's encoder reads its text and a video's frames together (``TvpModel.forward`` runs its visual prompter and
    backbone on the frames whatever the text): one seeded frame at the prompter's size, ``max_img_size`` a side."""
    size = config.max_img_size
    return {"pixel_values": seeded_normal(6, ids.shape[0], 1, 3, size, size)}


def _byte_patches(model: Any, config: Any, ids: Any, given: dict[str, Any]) -> dict[str, Any]:
    """BLT's local encoder as its composite runs it without a patcher (``BltModel.forward``): one patch per byte
    (``T + 1`` patches of length 1, as ``process_patch_lengths`` of ones leaves them), each byte's patch id its
    slot, the patches' cross-attention mask from ``_prepare_patch_cross_attention_mask`` (patches as queries), and
    the self-attention mask made causal by ``create_causal_mask`` from the probe's mask, position ids and cache:
    the composite hands the encoder that 4-D mask, and the encoder hands its own argument to its layers as it is."""
    import torch
    from transformers.masking_utils import create_causal_mask
    from transformers.models.blt import modeling_blt

    batch, length = ids.shape
    lengths = torch.ones((batch, length + 1), dtype=ids.dtype)
    patch_ids = modeling_blt.BltModel._patch_ids_from_lengths(None, lengths, length)
    embeds = model.embed_tokens(ids)
    causal = create_causal_mask(config=config, inputs_embeds=embeds, attention_mask=given.get("attention_mask"),
                                cache=given.get("cache"), position_ids=given.get("position_ids"))
    cross = modeling_blt._prepare_patch_cross_attention_mask(
        patch_ids=patch_ids, num_patches=lengths.shape[1], sequence_length=length, patches_as_queries=True,
        cross_attn_k=config.cross_attn_k, dtype=embeds.dtype)
    return {"attention_mask": causal, "patch_ids": patch_ids, "num_patches": lengths.shape[1],
            "encoder_attention_mask": cross}


def _byte_states(model: Any, config: Any, ids: Any, given: dict[str, Any]) -> dict[str, Any]:
    """BLT's local decoder as its composite runs it without a patcher: it reads no ids but the local encoder's
    states (here a seeded row per byte id, ``hidden_size`` wide, so that the bytes still tell the tokens apart),
    the global model's patch states (seeded, ``T + 1`` patches ``hidden_size_global`` wide), the cross-attention
    mask of the patches as keys (each byte's patch id from the lengths past the first, as ``BltModel.forward``
    cuts them) and the causal mask made as :func:`_byte_patches` makes it."""
    import torch
    from transformers.masking_utils import create_causal_mask
    from transformers.models.blt import modeling_blt

    batch, length = ids.shape
    lengths = torch.ones((batch, length + 1), dtype=ids.dtype)
    patch_ids = modeling_blt.BltModel._patch_ids_from_lengths(None, lengths[:, 1:], length)
    embeds = seeded_normal(9, config.vocab_size, config.hidden_size)[ids]
    causal = create_causal_mask(config=config, inputs_embeds=embeds, attention_mask=given.get("attention_mask"),
                                cache=given.get("cache"), position_ids=given.get("position_ids"))
    cross = modeling_blt._prepare_patch_cross_attention_mask(
        patch_ids=patch_ids, num_patches=lengths.shape[1], sequence_length=length, patches_as_queries=False,
        cross_attn_k=config.cross_attn_k, dtype=embeds.dtype)
    return {"inputs_embeds": embeds, "attention_mask": causal, "encoder_attention_mask": cross,
            "patch_embeds": seeded_normal(10, batch, lengths.shape[1], config.hidden_size_global)}


def _every_position_kept(model: Any, config: Any, ids: Any, given: dict[str, Any]) -> dict[str, Any]:
    """Gemma 4's text model, run as the assistant's language model (every layer past the first reads a shared
    cache), slices its inputs to ``logits_to_keep`` before the shared layers; at the default, the int 0 (keep every
    position), transformers 5.24 slices the per-layer inputs as well, which the assistant has none of (None), and
    fails. Stated as the indices of every position, which keep the same positions and which that slicing leaves
    alone (it slices only for an int)."""
    import inspect

    import torch

    if "logits_to_keep" not in inspect.signature(model.forward).parameters:
        return {}
    return {"logits_to_keep": torch.arange(ids.shape[-1])}


#: per model type of the surveyed row: what its model's forward is fed (see the module docstring)
FEEDINGS: dict[str, Feeding] = {
    "kyutai_speech_to_text": Feeding("its decoder reads frames of a text token and audio tokens",
                                     "kyutai_speech_to_text", ids=_text_and_audio_pads),
    "dia_decoder": Feeding("its decoder reads ids as (batch, T, channels) and cross-attends to the encoder",
                           "dia_decoder", ids=_one_channel, beside=_encoder_states),
    "moshi_depth": Feeding("its forward adds the main decoder's last hidden state to every token",
                           "moshi_depth", beside=_main_decoder_state),
    "idefics": Feeding("its decoder cross-attends to an image, which its forward cannot go without", "idefics",
                       beside=_image_states),
    "tvp": Feeding("its encoder reads the text beside a video's frames, which its forward cannot go without", "tvp",
                   beside=_video),
    "blt_local_encoder": Feeding("its forward pools bytes into the patches its composite cuts, and reads the causal "
                                 "mask its composite makes", "blt_local_encoder", composite=_byte_patches),
    "blt_local_decoder": Feeding("its forward reads its composite's byte and patch states, not ids, and the causal "
                                 "mask its composite makes", "blt_local_decoder", composite=_byte_states),
    "gemma4_assistant": Feeding("its language model's default keeps every position by an int that transformers 5.24 "
                                "slices the absent per-layer inputs with", "gemma4_text",
                                composite=_every_position_kept),
    "clvp": Feeding("its text encoder reads its rotations from a table of T rows at the position ids",
                    "clvp_encoder", withheld=("position_ids",)),
}


def feeding(row: str, config: Any) -> Feeding | None:
    """The :data:`FEEDINGS` entry of the row of model type ``row`` whose model is built from ``config``, or None."""
    found = FEEDINGS.get(row)
    return found if found is not None and getattr(config, "model_type", None) == found.builds else None


def wrap(model: Any, config: Any, how: Feeding) -> Any:
    """``model`` wrapped so that a row of ids ``(batch, T)`` reaches its forward as ``how`` states. The mask,
    position ids, cache and cache switch pass as they are, those the model takes and ``how`` does not withhold
    (the wrapper's signature names no others). The wrapper holds the model as ``model``: the path names no stack,
    so its layers keep theirs."""
    import torch

    takes = [name for name in inspect.signature(model.forward).parameters if name not in how.withheld]

    class Fed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any = None, position_ids: Any = None,
                    use_cache: Any = None, cache: Any = None, past_key_values: Any = None) -> Any:
            given = {"attention_mask": attention_mask, "position_ids": position_ids, "use_cache": use_cache,
                     "cache": cache, "past_key_values": past_key_values}
            given = {k: v for k, v in given.items() if v is not None and k in takes}
            if how.beside is not None:
                given.update(how.beside(config, input_ids))
            if how.composite is not None:
                given.update(how.composite(model, config, input_ids, given))
            return self.model(input_ids=input_ids if how.ids is None else how.ids(config, input_ids), **given)

    signature = inspect.signature(Fed.forward)
    Fed.forward.__signature__ = signature.replace(parameters=[
        p for name, p in signature.parameters.items() if name in ("self", "input_ids") or name in takes])
    return Fed()
