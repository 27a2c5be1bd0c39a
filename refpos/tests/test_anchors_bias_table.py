r"""refpos.encodings.bias_table against transformers 5.25 and timm (torch CPU), every variant a model type uses.

* **Swin v1** (swin; and the copies in donut-swin, maskformer-swin and clap's audio encoder): the index of
  ``_create_relative_position_index`` / ``create_relative_position_index`` and timm's
  ``get_relative_position_index``, equal; the bias of ``SwinRelativePositionBias.forward`` and timm's
  ``WindowAttention._get_rel_pos_bias``, equal in float32 and float64 (a gather copies the table's numbers);
  the copies through their attention probabilities (below).
* **BEiT / Data2Vec-vision**: the index of ``generate_relative_position_index`` and timm's
  ``gen_relative_position_index``, equal; the bias of ``BeitRelativePositionBias.forward(window)`` (and
  Data2Vec-vision's), at the table's window, larger and smaller square ones and non-square ones: equal at the
  table's window, within :func:`~refpos.encodings.bias_table_mistakes.bias_table_bound` (the resampling's
  rounding, ``u`` of the module's dtype) elsewhere — torch's kernel fuses multiply-adds, so even float64 is not
  bit-equal.
* **Swin v2 / Swin2SR**: the log-spaced coordinates of ``create_coords_table_and_index`` (and timm's
  ``_make_pair_wise_relative_positions``), which both compute in float32 whatever the module's dtype, within
  their float32 bound ``(2/(3 ln 2) + 3|c|)·2⁻²⁴``; the index, equal; the bias through the attention
  probabilities.

**Probabilities.** With the query and key projections set to zero, ``q·kᵀ`` is 0 (Swin v2's normalised q and k
as well), so the module's attention probabilities are ``softmax(B)`` of its own bias: the transformers modules
that do not return their bias are compared this way. A bias within ``δ`` of refpos's moves a probability by at
most ``p·(e^{2δ} − 1)`` (``δ`` the row's largest bound); the softmax's own evaluation in precision ``u`` adds
``p·(r + N + 3)·u`` (``r`` the row's range of logits: the rounded ``z − max z`` in the exponential; the sum of
``N`` terms; the division).
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.backend import to_numpy
from refpos.encodings.bias_table import beit_bias, swin_bias, swinv2_log_coords
from refpos.encodings.bias_table_index import beit_relative_index, swin_relative_index
from refpos.encodings.bias_table_mistakes import BiasTableInputs, bias_table_bound

torch = pytest.importorskip("torch", reason="bias table anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="bias table anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

UNIT = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}
WINDOWS = [(1, 1), (2, 2), (7, 7), (12, 12), (3, 5), (6, 4)]
HEADS = 3


def _np(t) -> np.ndarray:
    return t.detach().double().numpy()


def _randomised(module, dtype, seed: int = 0):
    """``module`` in ``dtype`` with every parameter drawn (N(0, 1), the MLP's second layer N(0, 0.05²))."""
    torch.manual_seed(seed)
    module = module.to(dtype).eval()
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            parameter.normal_(0.0, 0.05 if name.endswith("mlp.2.weight") else 1.0)
    return module


def _probability_bound(bias: np.ndarray, delta: np.ndarray, unit: float) -> np.ndarray:
    """The module docstring's bound on softmax(bias) of a port whose bias is within ``delta``."""
    z = bias - bias.max(axis=-1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    row_delta = delta.max(axis=-1, keepdims=True)
    spread = -z.min(axis=-1, keepdims=True)
    return p * (np.expm1(2 * row_delta) + (spread + bias.shape[-1] + 3) * unit), p


def _probabilities(attention, tokens: int, dim: int, dtype) -> np.ndarray:
    """The attention probabilities ``(H, N, N)`` of a module whose query and key projections are zero."""
    with torch.no_grad():
        for name in ("query", "key"):
            getattr(attention, name).weight.zero_()
            if getattr(attention, name).bias is not None:
                getattr(attention, name).bias.zero_()
        hidden = torch.randn(1, tokens, dim, generator=torch.Generator().manual_seed(1)).to(dtype)
        return _np(attention(hidden, output_attentions=True)[1][0])


# ------------------------------------------------------------------------------------------------- Swin v1
def _swin_copies():
    from transformers import ClapAudioConfig, DonutSwinConfig, MaskFormerSwinConfig
    from transformers.models.clap.modeling_clap import ClapAudioSelfAttention
    from transformers.models.donut.modeling_donut_swin import DonutSwinSelfAttention
    from transformers.models.maskformer.modeling_maskformer_swin import MaskFormerSwinSelfAttention

    return {"donut-swin": (DonutSwinSelfAttention, DonutSwinConfig),
            "maskformer-swin": (MaskFormerSwinSelfAttention, MaskFormerSwinConfig),
            "clap (audio encoder)": (ClapAudioSelfAttention, ClapAudioConfig)}


@pytest.mark.parametrize("window", WINDOWS)
def test_swin_index_equals_transformers_and_timm(window):
    from transformers.models.swin.modeling_swin import SwinRelativePositionBias

    ours = np.asarray(to_numpy(swin_relative_index(window)))
    theirs = {"swin": SwinRelativePositionBias(HEADS, window)._create_relative_position_index().numpy()}
    for name, (cls, config) in _swin_copies().items():
        theirs[name] = cls(config(), 12, HEADS, window).create_relative_position_index().numpy()
    timm_swin = pytest.importorskip("timm.models.swin_transformer", reason="timm is not installed")
    theirs["timm"] = timm_swin.get_relative_position_index(*window).numpy()
    for name, index in theirs.items():
        np.testing.assert_array_equal(ours, index, err_msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("window", WINDOWS)
def test_swin_bias_equals_transformers_and_timm(window, dtype):
    from transformers.models.swin.modeling_swin import SwinRelativePositionBias

    module = _randomised(SwinRelativePositionBias(HEADS, window), dtype)
    table = _np(module.relative_position_bias_table)
    np.testing.assert_array_equal(to_numpy(swin_bias(table, window)), _np(module()[0]))
    timm_swin = pytest.importorskip("timm.models.swin_transformer", reason="timm is not installed")
    attention = timm_swin.WindowAttention(HEADS * 4, HEADS, head_dim=4, window_size=window).to(dtype)
    with torch.no_grad():
        attention.relative_position_bias_table.copy_(module.relative_position_bias_table)
    np.testing.assert_array_equal(to_numpy(swin_bias(table, window)), _np(attention._get_rel_pos_bias()[0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("model_type", ["donut-swin", "maskformer-swin", "clap (audio encoder)"])
def test_swin_copies_attend_with_the_bias(model_type, dtype):
    cls, config = _swin_copies()[model_type]
    window = (7, 7)
    attention = _randomised(cls(config(), HEADS * 4, HEADS, window), dtype)
    ours = np.asarray(to_numpy(swin_bias(_np(attention.relative_position_bias_table), window)))
    bound, expected = _probability_bound(ours, np.zeros_like(ours), UNIT[dtype])
    got = _probabilities(attention, 49, HEADS * 4, dtype)
    assert np.all(np.abs(got - expected) <= bound), np.abs(got - expected).max()


# ---------------------------------------------------------------------------------------------------- BEiT
@pytest.mark.parametrize("window", WINDOWS)
def test_beit_index_equals_transformers_and_timm(window):
    from transformers.models.beit.modeling_beit import BeitRelativePositionBias

    ours = np.asarray(to_numpy(beit_relative_index(window)))
    np.testing.assert_array_equal(ours, BeitRelativePositionBias.generate_relative_position_index(window).numpy())
    timm_beit = pytest.importorskip("timm.models.beit", reason="timm is not installed")
    np.testing.assert_array_equal(ours, timm_beit.gen_relative_position_index(window).numpy())


def _beit_module(model_type: str, image_size: int):
    if model_type == "beit":
        from transformers import BeitConfig
        from transformers.models.beit.modeling_beit import BeitRelativePositionBias

        return BeitRelativePositionBias(BeitConfig(image_size=image_size, patch_size=16, num_attention_heads=HEADS))
    from transformers import Data2VecVisionConfig
    from transformers.models.data2vec.modeling_data2vec_vision import Data2VecVisionRelativePositionBias

    config = Data2VecVisionConfig(image_size=image_size, patch_size=16, num_attention_heads=HEADS)
    return Data2VecVisionRelativePositionBias(config, (image_size // 16, image_size // 16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("window", [(14, 14), (24, 24), (10, 10), (14, 20), (7, 3), (1, 1)])
@pytest.mark.parametrize("model_type", ["beit", "data2vec-vision"])
def test_beit_bias_equals_transformers(model_type, window, dtype):
    """The table of a 224-pixel model (a 14 × 14 window) at the input's window, against the module's forward."""
    module = _randomised(_beit_module(model_type, 224), dtype)
    inputs = BiasTableInputs("beit", window, table=_np(module.relative_position_bias_table), table_window=(14, 14))
    ours = np.asarray(to_numpy(beit_bias(inputs.table, window, table_window=(14, 14))))
    theirs = _np(module(window)[0])
    bound = bias_table_bound(inputs, unit=UNIT[dtype]) if window != (14, 14) else 0.0
    assert ours.shape == theirs.shape
    assert np.all(np.abs(ours - theirs) <= bound), np.abs(ours - theirs).max()


def test_beit_bias_equals_timm():
    timm_beit = pytest.importorskip("timm.models.beit", reason="timm is not installed")
    attention = _randomised(timm_beit.Attention(HEADS * 4, HEADS, window_size=(5, 6)), torch.float64)
    table = _np(attention.relative_position_bias_table)
    np.testing.assert_array_equal(to_numpy(beit_bias(table, (5, 6), table_window=(5, 6))),
                                  _np(attention._get_rel_pos_bias()[0]))


# ------------------------------------------------------------------------------------------------- Swin v2
def _swinv2_attention(model_type: str, window: int, pretrained: int, dtype):
    if model_type == "swinv2":
        from transformers import Swinv2Config
        from transformers.models.swinv2.modeling_swinv2 import Swinv2SelfAttention as cls

        config = Swinv2Config()
    else:
        from transformers import Swin2SRConfig
        from transformers.models.swin2sr.modeling_swin2sr import Swin2SRSelfAttention as cls

        config = Swin2SRConfig()
    return _randomised(cls(config, HEADS * 4, HEADS, window, pretrained_window_size=[pretrained, pretrained]), dtype)


SWINV2_WINDOWS = [(8, 0), (1, 0), (12, 8), (16, 12), (8, 12), (24, 16)]


@pytest.mark.parametrize(("window", "pretrained"), SWINV2_WINDOWS)
def test_swinv2_coordinates_and_index_equal_transformers_and_timm(window, pretrained):
    attention = _swinv2_attention("swinv2", window, pretrained, torch.float64)
    coords, index = attention.create_coords_table_and_index()
    ours = np.asarray(to_numpy(swinv2_log_coords(window, pretrained_window=pretrained or None)))
    bound = (2 / (3 * np.log(2)) + 3 * np.abs(ours)) * 2.0**-24  # computed in float32 whatever the dtype
    assert np.all(np.abs(_np(coords[0]) - ours) <= bound)
    np.testing.assert_array_equal(index.numpy(), to_numpy(swin_relative_index(window)))
    timm_v2 = pytest.importorskip("timm.models.swin_transformer_v2", reason="timm is not installed")
    timm_attention = timm_v2.WindowAttention(HEADS * 4, (window, window), HEADS,
                                             pretrained_window_size=(pretrained, pretrained))
    coords, index = timm_attention._make_pair_wise_relative_positions()
    assert np.all(np.abs(_np(coords[0]) - ours) <= bound)
    np.testing.assert_array_equal(index.numpy(), to_numpy(swin_relative_index(window)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("window", "pretrained"), SWINV2_WINDOWS)
@pytest.mark.parametrize("model_type", ["swinv2", "swin2sr"])
def test_swinv2_attends_with_the_bias(model_type, window, pretrained, dtype):
    """The probabilities of transformers' module against softmax of refpos's bias from the same MLP; the bound
    counts the module's float32 coordinates (``coord_unit`` 2⁻²⁴) and its MLP in its own dtype."""
    attention = _swinv2_attention(model_type, window, pretrained, dtype)
    mlp = attention.continuous_position_bias_mlp
    inputs = BiasTableInputs("swinv2", (window, window), mlp=(_np(mlp[0].weight).T, _np(mlp[0].bias),
                                                              _np(mlp[2].weight).T),
                             pretrained_window=(pretrained, pretrained) if pretrained else None)
    delta = bias_table_bound(inputs, unit=UNIT[dtype], coord_unit=2.0**-24)
    bound, expected = _probability_bound(inputs.reference(), delta, UNIT[dtype])
    got = _probabilities(attention, window * window, HEADS * 4, dtype)
    assert np.all(np.abs(got - expected) <= bound), np.abs(got - expected).max()
