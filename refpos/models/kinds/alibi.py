r"""The ALiBi kind: what a family's code fixes (:class:`AlibiFacts`), its slopes as that code computes them, the
layer record (:class:`AlibiLayer`) and the builder from a config.

The formula is :mod:`refpos.encodings.alibi` (docs/alibi.md#the-math); this module is what a model adds to it:
how its code computes the slopes (in float32, rounded to its dtype), which bias form it adds, and where.

Examples
--------
>>> from refpos.models import model_positions
>>> layer = model_positions({"model_type": "bloom", "n_layer": 1, "n_head": 2, "hidden_size": 8}).layers[0]
>>> layer.kind, layer.slopes, layer.form, layer.reads
('alibi', (0.0625, 0.00390625), 'key_index', (('key', ('mask_cumsum',)),))
>>> layer.bias(attention_mask=[0, 1, 1])[0].tolist()  # left padding: the keys count the mask's ones
[[0.0, 0.0, 0.0625], [0.0, 0.0, 0.0625], [0.0, 0.0, 0.0625]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.backend import Array, array_namespace, to_numpy
from refpos.encoding import Encoding
from refpos.encodings.alibi import FORMS as ALIBI_FORMS
from refpos.encodings.alibi import alibi_slopes
from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord, round_to
from refpos.models.sources import Given

#: how a family computes its slopes: the official recurrence, or MPT's powers over the next power of two
ALIBI_SLOPES = ("recurrence", "mpt")
#: what a family rounds its ALiBi slopes and products to (float64: not rounded)
ALIBI_DTYPES = ("float64", "float32", "bfloat16")
#: the bias forms a family's code adds (the formula's, and MPT's end-anchored key index)
FAMILY_FORMS = (*ALIBI_FORMS, "key_index_end")
#: what a family's code multiplies a key's slope by: the running count of the attention mask's ones (BLOOM's and
#: Falcon's ``build_alibi_tensor``: ``(attention_mask.cumsum(-1) - 1) * attention_mask``), or the key's index
#: (MPT's ``build_mpt_alibi_tensor``: ``arange(1 - S, 1)``, whatever the mask or the position ids say)
ALIBI_READS = ("mask_cumsum", "key_index")


@dataclass(frozen=True)
class AlibiFacts:
    r"""How a family's code builds its ALiBi bias.

    ``form`` (``key_index``: :math:`+m_h j`, BLOOM and Falcon; ``key_index_end``: :math:`m_h (j - j_{last})`,
    MPT), ``slopes`` (``recurrence``: the official recurrence; ``mpt``: :math:`2^{-b h / n'}` over the next power
    of two :math:`n'`, odd entries first, ``b`` = ``attn_config.alibi_bias_max``), ``before_scale`` (Falcon adds
    the bias inside the :math:`1/\sqrt{d}` scale), ``dtype``: what the code rounds the slopes and the products
    slope × position to (BLOOM and MPT float32, Falcon bfloat16), and ``reads`` (:data:`ALIBI_READS`): what a
    key's slope multiplies — the attention mask's running count (BLOOM, Falcon: position ids are not read) or
    the key's index (MPT).
    """

    form: str = "key_index"
    slopes: str = "recurrence"
    before_scale: bool = False
    dtype: str = "float32"
    reads: str = "mask_cumsum"

    def check(self, where: str) -> None:
        check_fact(where, self.form in FAMILY_FORMS, "alibi.form", self.form)
        check_fact(where, self.reads in ALIBI_READS, "alibi.reads", self.reads)
        check_fact(where, self.slopes in ALIBI_SLOPES, "alibi.slopes", self.slopes)
        check_fact(where, isinstance(self.before_scale, bool), "alibi.before_scale", self.before_scale)
        check_fact(where, self.dtype in ALIBI_DTYPES, "alibi.dtype", self.dtype)


def family_slopes(n_heads: int, facts: AlibiFacts,
                  max_bias: float = 8.0) -> tuple[tuple[float, ...], tuple[float, ...]]:
    r"""The family's slopes: exact, and as its code computes them (in float32, then rounded to its dtype).

    ``recurrence``: the official recurrence (:func:`refpos.encodings.alibi_slopes`), which BLOOM and Falcon compute as
    powers of a float32 base: :math:`\hat m_h = \mathrm{fl}_{32}(\mathrm{fl}_{32}(b)^h)`, :math:`b = 2^{-8/c}`
    (and :math:`2^{-4/c}` for the extra heads); ``mpt``: over the next power of two :math:`n' \ge n`,
    :math:`m_h = 2^{-\beta h / n'}` (:math:`h = 1 … n'`, :math:`\beta` = ``alibi_bias_max``), the odd entries
    before the even ones for :math:`n' \ne n`, the first :math:`n` kept, computed in float32 as
    :math:`1/2^{\mathrm{fl}_{32}(h)\,\mathrm{fl}_{32}(\beta/n')}` (transformers' ``build_mpt_alibi_tensor``).
    """
    one = np.float32(1.0)
    if facts.slopes == "recurrence":
        exact = [float(m) for m in alibi_slopes(n_heads, xp="numpy")]
        c = 1 << (n_heads.bit_length() - 1)
        base, extra = np.float32(2.0 ** (-8.0 / c)), np.float32(2.0 ** (-4.0 / c))
        computed = [base ** np.float32(h) for h in range(1, c + 1)]
        computed += [extra ** np.float32(h) for h in range(1, 2 * min(c, n_heads - c), 2)]
    else:
        padded = 1 << (n_heads - 1).bit_length()
        exact = [2.0 ** (-max_bias * h / padded) for h in range(1, padded + 1)]
        step = np.float32(max_bias / padded)
        computed = [one / np.float32(2.0) ** (np.float32(h) * step) for h in range(1, padded + 1)]
        if padded != n_heads:
            exact, computed = ((v[1::2] + v[0::2])[:n_heads] for v in (exact, computed))
    rounded = round_to(np.asarray(computed, dtype=np.float64), facts.dtype)
    return tuple(exact), tuple(float(m) for m in rounded)


@dataclass(frozen=True)
class AlibiLayer(LayerRecord):
    r"""ALiBi as the family's code builds it.

    ``slopes`` are the family's exact slopes (float64); ``computed_slopes`` are what its code holds: computed
    in float32 and rounded to ``dtype`` (BLOOM and MPT float32, Falcon bfloat16: its 0.917 is 0.91796875,
    :func:`family_slopes`); each product slope × position is rounded to ``dtype`` too.
    The bias of head ``h`` at query position ``i`` and key position ``j``, as the family computes it, is

    .. math:: b_{hij} = \operatorname{round}(\hat m_h\, j) \;\;(\texttt{key\_index}),
              \qquad b_{hij} = \operatorname{round}(\hat m_h (j - j_{\text{last}}))
              \;\;(\texttt{key\_index\_end}),
              \qquad b_{hij} = -\operatorname{round}(\hat m_h |i - j|) \;\;(\texttt{symmetric}: \text{Jais})

    with the positions :math:`j` rounded to ``dtype`` first, as torch converts an integer tensor before the
    product (Falcon's bfloat16 holds 2047 as 2048). Both forms equal the causal form :math:`-m_h (i - j)` under
    a causal mask, up to a per-row constant the softmax removes; ``rounded=False`` gives the exact bias.
    ``before_scale``: added to :math:`q\cdot k` before the :math:`1/\sqrt{d}` scale (Falcon), else after it
    (BLOOM, MPT).
    """

    slopes: tuple[float, ...] = ()
    computed_slopes: tuple[float, ...] = ()
    form: str = "key_index"
    before_scale: bool = False
    dtype: str = "float32"
    head_dim: int = 1
    kind: ClassVar[str] = "alibi"

    def params(self) -> dict[str, Any]:
        return {"n_heads": len(self.slopes), "slopes": list(self.slopes), "computed_slopes": list(self.computed_slopes),
                "form": self.form, "before_scale": self.before_scale, "dtype": self.dtype, "head_dim": self.head_dim}

    def bias(self, positions: Any = None, *, cache_position: Any = None, attention_mask: Any = None,
             rounded: bool = True) -> np.ndarray:
        """The bias of a call ``(H, T, T_k)`` (``(B, H, T, T_k)`` for a batched mask), float64, its keys read as
        the family's code reads them (``reads``): the running count of ``attention_mask`` (BLOOM, Falcon; the
        position ids are not read, and a call that gives only ``positions`` is refused) or the key's index
        (MPT); ``cache_position`` places the call's ``T`` tokens among the keys. ``rounded``: as the family's
        code computes it, else exact."""
        given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask)
        keys = self.read("key", "key", given)
        return self.bias_at(np.zeros(given.shape, dtype=np.int64), keys, rounded=rounded)

    def bias_at(self, q_positions: Any, k_positions: Any, *, rounded: bool = True) -> np.ndarray:
        """The bias ``(H, Tq, Tk)`` (or ``(B, H, Tq, Tk)`` for per-row positions) at key positions already read
        (:meth:`bias` reads them from a call's inputs), float64; ``rounded``: as the family's code computes it,
        else exact."""
        q = np.asarray(to_numpy(q_positions), dtype=np.int64)
        k = np.asarray(to_numpy(k_positions), dtype=np.int64)
        slopes = np.asarray(self.computed_slopes if rounded and self.computed_slopes else self.slopes,
                            dtype=np.float64)
        m = slopes[:, None, None]  # (H, 1, 1)
        if self.form in ("causal", "symmetric"):  # -m (i - j), -m |i - j|: per query and key
            distance = (q[..., :, None] - k[..., None, :]).astype(np.float64)[..., None, :, :]  # (..., 1, Tq, Tk)
            distance = np.abs(distance) if self.form == "symmetric" else distance
            if rounded:  # the distance converted to the slopes' dtype, then the product rounded to it
                return -round_to(m * round_to(distance, self.dtype), self.dtype)
            return -(m * distance)
        key = k - k[..., -1:] if self.form == "key_index_end" else k  # (..., Tk)
        key = key[..., None, None, :].astype(np.float64)  # (..., 1, 1, Tk)
        if rounded:  # torch converts the integer positions to the slopes' dtype before the product
            return self._broadcast(round_to(m * round_to(key, self.dtype), self.dtype), q, k)
        return self._broadcast(m * key, q, k)

    @staticmethod
    def _broadcast(products: np.ndarray, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The per-key products ``(..., H, 1, Tk)`` on every query row: ``(..., H, Tq, Tk)``."""
        return np.broadcast_to(products, (*products.shape[:-2], q.shape[-1], k.shape[-1])).copy()

    def _encoding(self, **weights: Any) -> Encoding:
        return _RecordBias(self)


class _RecordBias(Encoding):
    """The bias of an :class:`AlibiLayer` as a pipeline encoding (in the namespace of the positions)."""

    name = "alibi"

    def __init__(self, record: AlibiLayer) -> None:
        self.record, self.bias_scaled = record, record.before_scale

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        if n_heads != len(self.record.slopes):
            raise ValueError(f"the layer has {n_heads} heads, its ALiBi record {len(self.record.slopes)} slopes")
        xp = array_namespace(q_positions)
        return xp.asarray(self.record.bias_at(q_positions, k_positions))

    def __repr__(self) -> str:
        return f"_RecordBias({self.record.form}, before_scale={self.bias_scaled})"


def _max_bias(stack: Stack) -> float:
    """MPT's ``attn_config.alibi_bias_max`` (default 8) for the ``mpt`` slope rule; 8 otherwise."""
    if stack.facts.slopes != "mpt":
        return 8.0
    value = stack.view.value("attn_config.alibi_bias_max", 8)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{stack.view.name('attn_config.alibi_bias_max')} must be a positive number, got {value!r}")
    return float(value)


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`AlibiLayer` per layer: the stack's head count, the family's slopes, form and rounding."""
    shape = stack.geometry()
    facts: AlibiFacts = stack.facts
    slopes, computed = family_slopes(shape.heads, facts, _max_bias(stack))
    return [AlibiLayer(stack.name, i, None, slopes=slopes, computed_slopes=computed, form=facts.form,
                       before_scale=facts.before_scale, dtype=facts.dtype, head_dim=shape.head_dim,
                       reads=(("key", (facts.reads,)),)) for i in range(shape.layers)]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"n_heads": draw(st.integers(1, 128))}


ALIBI = EncodingKind(
    name="alibi", summary="a per-head linear bias −m_h·(i − j) on the logits (ALiBi)", record=AlibiLayer,
    build=build, hook="bias", reads=("mask_cumsum", "key_index"), doc="docs/alibi.md#the-math", facts=AlibiFacts,
    check="alibi", golden="alibi", contract=("alibi_slopes", "alibi_bias"), spec="spec_tests/test_alibi.py",
    draw=_draw, example={"config": {"n_layer": 2, "n_head": 4, "hidden_size": 32},
                         "facts": {"form": "key_index", "dtype": "float32"}}, inert=("lengths", "rotary"))


__all__ = ["ALIBI", "ALIBI_DTYPES", "ALIBI_READS", "ALIBI_SLOPES", "AlibiFacts", "AlibiLayer", "build", "family_slopes"]
