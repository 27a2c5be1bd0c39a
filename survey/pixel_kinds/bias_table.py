r"""The ``bias_table`` comparison: each layer's window bias, observed as a relative-position-bias module's output
(BEiT) or, where the attention gathers it in its own forward (Swin's table, Swin v2's continuous bias), as the
logits its softmax is fed with the key projection zero (:mod:`survey.pixel_logits`): ``q·kᵀ = 0`` exactly, so the
first window's logits are the bias itself (the first window of a shifted layer has no mask).

The reference is the kind's (``window_bias`` of the layer's weights: Swin's and BEiT's table, Swin v2's MLP
``(w1, b1, w2)`` read from ``Linear(2, n)``, ``Linear(n, H)``), its bound the kind's per table row at the run's
unit roundoff (:func:`refpos.encodings.bias_table_mistakes.bias_table_bound`; Swin v2's log-spaced coordinates at
float32's, the precision transformers builds them in before a float64 run converts them). Adding the bias to the
zero scores is exact, so nothing is added to the bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, absent, graded, mistakes_of, unit, unrecorded
from survey.pixels import PixelRun, Site

#: the unit roundoff of the coordinates Swin v2's code builds (float32, whatever the run's dtype)
COORD_UNIT = 2.0**-24


def _mlp(record: Any, site: Site) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Swin v2's ``(w1 (2, n), b1 (n,), w2 (n, H))`` from the site's ``Linear(2, n)`` and ``Linear(n, H)``."""
    params = [p.astype(np.float64) for p in site.params.values()]
    first = next((p for p in params if p.ndim == 2 and p.shape[1] == 2), None)
    if first is None:
        return None
    bias = next((p for p in params if p.shape == (first.shape[0],)), None)
    second = next((p for p in params if p.ndim == 2 and p.shape == (record.n_heads, first.shape[0])), None)
    return None if bias is None or second is None else (first.T, bias, second.T)


def _table(record: Any, site: Site) -> np.ndarray | None:
    """Swin's or BEiT's table ``(R, H)``: the site's 2-D parameter of at least ``(2Wh − 1)(2Ww − 1)`` rows."""
    rows = (2 * record.window[0] - 1) * (2 * record.window[1] - 1)
    return next((p.astype(np.float64) for p in site.params.values() if p.ndim == 2 and p.shape[0] >= rows), None)


def _inputs(record: Any, site: Site) -> Any:
    from refpos.encodings.bias_table_mistakes import BiasTableInputs

    if record.form == "swinv2":
        mlp = _mlp(record, site)
        return None if mlp is None else BiasTableInputs("swinv2", record.window, mlp=mlp,
                                                        pretrained_window=record.pretrained_window)
    table = _table(record, site)
    return None if table is None else BiasTableInputs(record.form, record.window, table=table)


def _bias_module(sites: list[Site], fits: Any) -> Site | None:
    """The first module site with an output whose shape ``fits``."""
    return next((s for s in sites if s.is_module and any(c.module_out is not None and fits(c.module_out.shape)
                                                          for c in s.captures.values())), None)


def compare_bias_table(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's window bias: the next bias module whose output is ``(1, H, N, N)``, else the next attention
    whose logits were recorded (module docstring)."""
    n = record.window[0] * record.window[1] + (1 if record.form == "beit" else 0)
    site = _bias_module(sites, lambda shape: shape[-2:] == (n, n))
    if site is not None:
        return compare_module(record, run, site, n)
    other = _bias_module(sites, lambda shape: len(shape) >= 3 and shape[-1] == shape[-2])
    if other is not None and not any(c.logits is not None for s in sites for c in s.captures.values()):
        shape = next(c.module_out.shape for c in other.captures.values() if c.module_out is not None)
        return Outcome("wrong", f"{other.path}: a bias of {shape}, refpos claims {n} × {n} entries for "
                       f"{record.stack} layer {record.index}", (other.path,))
    return compare_inline(record, run, sites)


def compare_module(record: Any, run: PixelRun, site: Site, n: int) -> Outcome:
    """A bias module's output ``(1, H, N, N)`` against the reference of its table, within the kind's bound."""
    from refpos.encodings.bias_table_mistakes import BiasTableInputs, bias_table_bound

    table = next(p for p in site.params.values() if p.ndim == 2).astype(np.float64)
    cases = []
    for capture in site.captures.values():
        if capture.module_out is None:
            continue
        observed = capture.module_out.astype(np.float64).reshape(-1, n, n)
        inputs = BiasTableInputs(record.form, record.window, table=table)
        cases.append((observed, inputs.reference(), bias_table_bound(inputs, unit=unit(run)),
                      mistakes_of("bias_table", inputs)))
    return graded(cases, (site.path,), f"{site.path} bias_table")


def compare_inline(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A bias the attention adds in its own forward: the first window's logits with the key projection zero,
    ``(H, rows, N)``, against the reference's rows, within the kind's bound."""
    from refpos.encodings.bias_table_mistakes import bias_table_bound

    site = next((s for s in sites if any(c.logits is not None for c in s.captures.values())), None)
    if site is None:
        inline = next((s for s in sites if "attention" in s.owner or "attn" in s.owner), None)
        if inline is not None:
            return unrecorded(inline, sites, "the bias is computed")
        return absent(run, f"no relative position bias of a {record.window} window for {record.stack} layer "
                       f"{record.index}")
    inputs = _inputs(record, site)
    if inputs is None:
        return Outcome("wrong", f"{site.owner}: holds {', '.join(f'{n} {p.shape}' for n, p in site.params.items())}"
                       f", not the weights of refpos's {record.form} bias of {record.n_heads} heads over a "
                       f"{record.window} window", (site.path,))
    reference = inputs.reference()
    bound = bias_table_bound(inputs, unit=unit(run), coord_unit=COORD_UNIT if record.form == "swinv2" else None)
    mistakes = mistakes_of("bias_table", inputs)
    cases = []
    for capture in site.captures.values():
        if capture.logits is None:
            continue
        rows = capture.logit_rows
        observed = capture.logits[:record.n_heads].astype(np.float64)
        if observed.shape[0] < record.n_heads or observed.shape[-1] != reference.shape[-1]:
            return Outcome("wrong", f"{site.owner}: logits {capture.logits.shape} are not {record.n_heads} heads' "
                           f"bias over a {record.window} window", (site.path,))
        cases.append((observed, reference[:, rows], bound[:, rows],
                      {name: None if wrong is None else wrong[:, rows] for name, wrong in mistakes.items()}))
    return graded(cases, (site.path,), f"{site.owner} bias_table (the logits with the key projection zero)")
