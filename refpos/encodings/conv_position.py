r"""Convolutional positional embeddings of speech encoders (wav2vec 2.0, HuBERT, SEW, WavLM, Data2Vec-audio …).

A speech encoder has no position table: a wide grouped convolution over time reads each frame's
neighbourhood and its output, added to the frames, tells every frame where it sits among its neighbours.
Frames are ``x`` ``(B, T, C)`` (channels last, as transformers' encoders hold them); the embedding is

.. math:: e = \operatorname{act}\big(\operatorname{trim}(\operatorname{conv}_{K,G}(x) + b)\big), \qquad
          x' = x + e

* ``conv`` is a 1-D convolution with ``C`` output channels, kernel ``K``, ``G`` groups (output channel ``o``
  reads the ``C/G`` input channels of its group ``⌊o/(C/G)⌋`` only), zero padding ``⌊K/2⌋`` on each side, and
  stride ``s`` (1, or SEW's ``squeeze_factor``);
* ``trim`` removes the last output frame when ``K`` is even (the padding then makes one frame too many:
  transformers' ``SamePadLayer``), so frame ``t`` reads input frames ``t − ⌊K/2⌋ … t − ⌊K/2⌋ + K − 1``;
* the weight is usually weight-normalised (:func:`weight_norm`, ``dim=2``: one norm per kernel tap).

Data2Vec-audio stacks several such convolutions without weight norm, each followed by a layer norm without
parameters (:func:`stacked_conv_position_embedding`). See docs/conv-position.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from refpos.backend import Array, array_namespace
from refpos.core.activations import activation as activation_function
from refpos.validation import check_float, check_int, floating_array


def weight_norm(v: Array, g: Array, *, dim: int) -> Array:
    r"""The weight-normalised kernel :math:`w = g\,v/\lVert v\rVert`, the norm over every axis of ``v`` but ``dim``.

    Parameters
    ----------
    v : float array, shape ``(C_out, C_in/G, K)``
        The direction (torch's ``weight_v`` or ``parametrizations.weight.original1``).
    g : float array
        The magnitudes, one per index of axis ``dim`` of ``v``: shape ``(v.shape[dim],)`` or torch's kept-dims
        shape (``(1, 1, K)`` for ``dim=2``; ``weight_g`` / ``original0``).
    dim : int
        The axis that keeps one norm per index: 2 in every speech encoder (one norm per kernel tap, over all
        output and input channels), 0 in torch's default.

    Notes
    -----
    .. math:: w_{oik} = g_k\,\frac{v_{oik}}{\sqrt{\sum_{o', i'} v_{o'i'k}^2}} \qquad (\text{dim} = 2)

    References
    ----------
    Salimans and Kingma 2016, "Weight Normalization"; PyTorch, torch/nn/utils/parametrizations.py,
    ``weight_norm`` (``torch._weight_norm``).
    """
    v = floating_array(v, name="v")
    g = floating_array(g, name="g")
    xp = array_namespace(v)
    dim = check_int("dim", dim, minimum=0, maximum=v.ndim - 1)
    n = v.shape[dim]
    if g.ndim == 1 and g.shape[0] == n:
        g = xp.reshape(g, tuple(n if axis == dim else 1 for axis in range(v.ndim)))
    elif tuple(g.shape) != tuple(n if axis == dim else 1 for axis in range(v.ndim)):
        raise ValueError(f"g must hold one magnitude per index of axis {dim} of v: shape ({n},) or "
                         f"{tuple(n if axis == dim else 1 for axis in range(v.ndim))}, got {tuple(g.shape)}")
    others = tuple(axis for axis in range(v.ndim) if axis != dim)
    norm = xp.sqrt(xp.sum(v * v, axis=others, keepdims=True))
    return g * (v / norm)


def grouped_conv1d(x: Array, weight: Array, bias: Array | None, *, groups: int, stride: int, padding: int) -> Array:
    r"""A grouped 1-D convolution over time of channels-last frames, ``(B, T, C_in) → (B, T_out, C_out)``.

    Notes
    -----
    With zero padding ``p`` on both sides and ``T_out = ⌊(T + 2p − K)/s⌋ + 1``:

    .. math:: y_{b,t,o} = b_o + \sum_{k=0}^{K-1} \sum_{i=0}^{C_{in}/G - 1}
              w_{o,i,k}\; x_{b,\; s t + k - p,\; g(o)\,C_{in}/G + i}, \qquad g(o) = \lfloor o/(C_{out}/G) \rfloor

    (frames outside ``[0, T)`` are 0). ``weight`` is ``(C_out, C_in/G, K)``, torch's ``Conv1d.weight``. The
    readable form: one matrix product per kernel tap and group.

    See Also
    --------
    conv_position_embedding : the convolution with the trim and the activation.

    References
    ----------
    PyTorch, torch/nn/modules/conv.py, ``Conv1d`` (``groups``, ``stride``, ``padding``).
    """
    x = floating_array(x, name="x")
    weight = floating_array(weight, name="weight")
    xp = array_namespace(x)
    groups = check_int("groups", groups, minimum=1)
    stride = check_int("stride", stride, minimum=1)
    padding = check_int("padding", padding, minimum=0)
    if x.ndim != 3:
        raise ValueError(f"x must be frames (B, T, C), got shape {tuple(x.shape)}")
    batch, frames, c_in = x.shape
    if weight.ndim != 3 or c_in % groups or weight.shape[0] % groups or weight.shape[1] != c_in // groups:
        raise ValueError(f"weight must have shape (C_out, C_in/groups, K) = (C_out, {c_in}/{groups}, K) with C_out "
                         f"divisible by groups, got {tuple(weight.shape)}")
    c_out, per_group, kernel = weight.shape
    t_out = (frames + 2 * padding - kernel) // stride + 1
    if t_out < 1:
        raise ValueError(f"x has {frames} frames, too few for kernel {kernel} with padding {padding}")
    zeros = xp.zeros((batch, padding, c_in), dtype=x.dtype)
    padded = xp.concat([zeros, x, zeros], axis=1)  # (B, T + 2p, C_in)
    w = xp.reshape(weight, (groups, c_out // groups, per_group, kernel))  # (G, C_out/G, C_in/G, K)
    y = xp.zeros((groups, batch * t_out, c_out // groups), dtype=x.dtype)
    for k in range(kernel):
        frames_k = padded[:, k: k + stride * (t_out - 1) + 1: stride, :]  # (B, T_out, C_in): frame s·t + k − p
        frames_k = xp.reshape(frames_k, (batch * t_out, groups, per_group))
        y = y + xp.matmul(xp.permute_dims(frames_k, (1, 0, 2)), xp.permute_dims(w[:, :, :, k], (0, 2, 1)))
    y = xp.reshape(xp.permute_dims(y, (1, 0, 2)), (batch, t_out, c_out))  # group-major output channels
    if bias is not None:
        bias = floating_array(bias, name="bias")
        if tuple(bias.shape) != (c_out,):
            raise ValueError(f"bias must have shape ({c_out},), got {tuple(bias.shape)}")
        y = y + bias
    return y


def same_pad_trim(y: Array, kernel_size: int) -> Array:
    """``y`` ``(B, T, C)`` without its last frame when ``kernel_size`` is even.

    References
    ----------
    transformers, models/wav2vec2/modeling_wav2vec2.py, ``Wav2Vec2SamePadLayer``.
    """
    kernel_size = check_int("kernel_size", kernel_size, minimum=1)
    return y[:, :-1, :] if kernel_size % 2 == 0 else y


def conv_position_embedding(x: Array, weight: Array, bias: Array | None, *, groups: int, activation: str,
                            stride: int = 1) -> Array:
    r"""The convolutional positional embedding of frames ``x`` ``(B, T, C)``: ``(B, T_out, C)``.

    Parameters
    ----------
    x : float array, shape ``(B, T, C)``
        The frames (after the feature projection; padded frames already set to 0, as the encoders do).
    weight : float array, shape ``(C, C/G, K)``
        The kernel as the convolution uses it (:func:`weight_norm` of ``v`` and ``g`` where the model
        normalises it).
    bias : float array ``(C,)`` or None
    groups : int
        ``num_conv_pos_embedding_groups``.
    activation : str
        transformers' activation name (``feat_extract_activation``; OmniASR's ``hidden_act``):
        ``"gelu"``, ``"gelu_new"``, ``"relu"``, ``"swish"`` … (:data:`refpos.core.activations.ACTIVATIONS`).
    stride : int
        1, or SEW's ``squeeze_factor``.

    Notes
    -----
    .. math:: e = \operatorname{act}\big(\operatorname{trim}_K(\operatorname{conv}(x;\ w, b,\ G,\ s,\
              \text{padding } \lfloor K/2 \rfloor))\big)

    With stride 1, ``T_out = T``.

    See Also
    --------
    weight_norm, grouped_conv1d, same_pad_trim, add_conv_positions, stacked_conv_position_embedding

    References
    ----------
    Baevski et al. 2020, "wav2vec 2.0", §2 (relative positional embedding by convolution, after Mohamed et al.
    2019); transformers, models/wav2vec2/modeling_wav2vec2.py, ``Wav2Vec2PositionalConvEmbedding`` and
    ``Wav2Vec2SamePadLayer``; models/sew/modeling_sew.py, ``SEWPositionalConvEmbedding``.
    """
    act = activation_function(activation)
    weight = floating_array(weight, name="weight")
    if weight.ndim != 3:
        raise ValueError(f"weight must have shape (C, C/groups, K), got {tuple(weight.shape)}")
    kernel = weight.shape[2]
    y = grouped_conv1d(x, weight, bias, groups=groups, stride=stride, padding=kernel // 2)
    return act(same_pad_trim(y, kernel))


def add_conv_positions(x: Array, embedding: Array, *, stride: int) -> Array:
    r"""The frames the encoder layers receive: ``x + e`` (stride 1), or SEW's ``avgpool_s(x) + e``.

    Notes
    -----
    With stride ``s > 1`` the frames are averaged over non-overlapping windows of ``s``
    (:math:`\bar x_t = \frac1s \sum_{j<s} x_{st + j}`, a partial last window dropped) and the two are cut to
    the shorter length.

    See Also
    --------
    conv_position_embedding : the embedding ``e``.

    References
    ----------
    transformers, models/wav2vec2/modeling_wav2vec2.py, ``Wav2Vec2Encoder.forward``; models/sew/modeling_sew.py,
    ``SEWEncoder.forward`` (``AvgPool1d`` and the shorter length).
    """
    x = floating_array(x, name="x")
    embedding = floating_array(embedding, name="embedding")
    xp = array_namespace(x)
    stride = check_int("stride", stride, minimum=1)
    if x.ndim != 3 or embedding.ndim != 3 or x.shape[0] != embedding.shape[0] or x.shape[2] != embedding.shape[2]:
        raise ValueError(f"x and embedding must be frames (B, T, C) of the same B and C, got {tuple(x.shape)} and "
                         f"{tuple(embedding.shape)}")
    if stride > 1:
        windows = x.shape[1] // stride
        x = xp.mean(xp.reshape(x[:, : windows * stride, :], (x.shape[0], windows, stride, x.shape[2])), axis=2)
    length = min(x.shape[1], embedding.shape[1])
    if stride == 1 and x.shape[1] != embedding.shape[1]:
        raise ValueError(f"embedding has {embedding.shape[1]} frames but x has {x.shape[1]} (stride 1 keeps them)")
    return x[:, :length, :] + embedding[:, :length, :]


def batch_norm(x: Array, running_mean: Array, running_var: Array, weight: Array, bias: Array, *, eps: float) -> Array:
    r"""Inference batch norm of frames ``(B, T, C)`` per channel: :math:`(x - \mu)/\sqrt{\sigma^2 + \epsilon}\,\gamma
    + \beta` with the running statistics (HuBERT's ``conv_pos_batch_norm``, applied before its plain convolution).

    References
    ----------
    transformers, models/hubert/modeling_hubert.py, ``HubertPositionalConvEmbedding``.
    """
    x = floating_array(x, name="x")
    xp = array_namespace(x)
    eps = check_float("eps", eps, positive=True)
    arrays = {}
    for name, a in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        arrays[name] = floating_array(a, name=name)
        if tuple(arrays[name].shape) != (x.shape[-1],):
            raise ValueError(f"{name} must have shape ({x.shape[-1]},), got {tuple(arrays[name].shape)}")
    scale = arrays["weight"] / xp.sqrt(arrays["running_var"] + eps)
    return (x - arrays["running_mean"]) * scale + arrays["bias"]


def layer_norm(x: Array, *, eps: float) -> Array:
    r"""Layer norm over the channels without parameters: :math:`(x - \mu)/\sqrt{\sigma^2 + \epsilon}`."""
    xp = array_namespace(x)
    mean = xp.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    return centred / xp.sqrt(xp.mean(centred * centred, axis=-1, keepdims=True) + eps)


def stacked_conv_position_embedding(x: Array, weights: Sequence[Array], biases: Sequence[Array | None], *,
                                    groups: int, activation: str, eps: float) -> Array:
    r"""Data2Vec-audio's positional embedding: ``L`` convolutions, each trimmed, layer-normed and activated.

    Notes
    -----
    .. math:: h_0 = x, \qquad h_{l+1} = \operatorname{act}\Big(\operatorname{LN}_\epsilon\big(
              \operatorname{trim}_K(\operatorname{conv}(h_l;\ w_l, b_l,\ G,\ 1,\ \lfloor K/2\rfloor))\big)\Big),
              \qquad e = h_L

    with no weight norm and ``LN`` without parameters (transformers' ``nn.LayerNorm(elementwise_affine=False)``,
    ``eps`` 1e-5 whatever the config's ``layer_norm_eps``). ``weights[l]`` is ``(C, C/G, K)``
    (``conv_pos_kernel_size``), ``L`` = ``num_conv_pos_embeddings``.

    References
    ----------
    Baevski et al. 2022, "data2vec", §3; transformers, models/data2vec/modeling_data2vec_audio.py,
    ``Data2VecAudioPositionalConvLayer``.
    """
    act = activation_function(activation)
    eps = check_float("eps", eps, positive=True)
    if len(weights) != len(biases) or not weights:
        raise ValueError(f"weights and biases must be two lists of one entry per layer (at least one), got "
                         f"{len(weights)} and {len(biases)}")
    h = x
    for weight, bias in zip(weights, biases, strict=True):
        weight = floating_array(weight, name="weights")
        if weight.ndim != 3:
            raise ValueError(f"weights must hold kernels (C, C/groups, K), got shape {tuple(weight.shape)}")
        kernel = weight.shape[2]
        y = same_pad_trim(grouped_conv1d(h, weight, bias, groups=groups, stride=1, padding=kernel // 2), kernel)
        h = act(layer_norm(y, eps=eps))
    return h
