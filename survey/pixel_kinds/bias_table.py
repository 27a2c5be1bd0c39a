r"""The ``bias_table`` comparison: each layer's relative position bias module's output."""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, graded, mistakes_of, unit
from survey.pixels import PixelRun, Site


def compare_bias_table(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's window bias: the next bias module whose output is ``(1, H, N, N)`` (module docstring)."""
    from refpos.encodings.bias_table_mistakes import BiasTableInputs, bias_table_bound

    if record.form == "swinv2":
        return Outcome("not reached", f"{record.stack} layer {record.index}: Swin v2's continuous bias (an MLP of "
                       "log-spaced coordinates, gathered in the attention's forward) is not compared by the survey",
                       tuple(s.path for s in sites if "attention" in s.owner and "layers" in s.owner))
    n = record.window[0] * record.window[1] + (1 if record.form == "beit" else 0)
    site = next((s for s in sites if s.is_module and any(
        c.module_out is not None and c.module_out.shape[-2:] == (n, n) for c in s.captures.values())), None)
    if site is None:
        rows = (2 * record.window[0] - 1) * (2 * record.window[1] - 1)
        inline = next((s for s in sites if all(c.module_out is None for c in s.captures.values())
                       and any(p.ndim == 2 and p.shape[0] >= rows for p in s.params.values())), None)
        if inline is not None:
            return Outcome("not reached", f"{inline.path}: the bias is computed inside the attention's forward, not "
                           "by a module whose output the survey records", (inline.path,))
        return Outcome("wrong", f"no relative position bias of {n} × {n} entries for {record.stack} layer "
                       f"{record.index}")
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
