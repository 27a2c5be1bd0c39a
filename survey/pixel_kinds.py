r"""How each encoding kind of a vision, audio or feature model is judged against what its run recorded
(:mod:`survey.pixels`): one :class:`KindComparison` record per kind in :data:`COMPARISONS`.

A record takes refpos's layer record, the run and the position sites not yet accounted for, and returns an
:class:`Outcome`: the sites it accounts for, the largest error, and the verdict. Every comparison is made with the
kind's own ``refpos check`` target (:data:`refpos.check.kinds.BY_KIND`): its inputs built from the recorded weights
and inputs, its reference and its bound (a float32 port's), and its catalogued mistakes as the wrong answers each
observation must tell apart (a mistake whose output is within the bound of the observation *survives*, and the row
is then not exact: the survey cannot tell there). Every bound is taken at the unit roundoff ``u`` of the dtype the
model ran in (:data:`UNIT`: float64 where its code runs in it, ``2⁻⁵³``; float32 ``2⁻²⁴``), the kind's own
float32 steps (a grid resampled in float32) at float32's.

What an observation is, per kind:

``grid``
    the embedding module's output minus its output with the table zeroed: the resampled table, exactly what is
    added (the addition is linear in the table). Bound: the kind's plus the subtraction's, ``2u·max|output|``
    (``u = 2⁻²⁴``: the output and the zeroed output are float32 values, the sum rounded once).
``conv_position``
    the position module's input ``x`` (the frames) and output ``e``; compared as ``x + e`` with the reference of
    ``x + e`` from the module's weights (the weight-norm direction and magnitudes, or the kernel), within the
    kind's per-entry bound plus ``u·|x + e|`` (the sum).
``bias_table``
    the relative-position-bias module's output ``(H, N, N)`` for each layer, from that layer's table: within the
    kind's per-entry bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from survey.pixels import PixelRun, Site, additive

#: the unit roundoff of the dtype a model ran in
UNIT = {"float64": 2.0**-53, "float32": 2.0**-24}


def unit(run: PixelRun) -> float:
    """The unit roundoff of the run's dtype (float64 where the model's code runs in it)."""
    return UNIT[run.dtype]


@dataclass
class Outcome:
    """One record's comparison: ``status`` (exact, wrong, not reached), why, the sites it accounts for, the largest
    error, and the wrong answers tried and those that survived."""

    status: str
    cause: str = ""
    sites: tuple[str, ...] = ()
    error: float | None = None
    tried: int = 0
    survived: list[str] = field(default_factory=list)


def graded(cases: list[tuple[np.ndarray, np.ndarray, Any, dict[str, np.ndarray | None]]], sites: tuple[str, ...],
           what: str) -> Outcome:
    """The outcome of ``(observed, reference, bound, {mistake: its output})`` cases: wrong at the first case outside
    its bound; else exact, a mistake surviving when it is within the bound of every case it applies to."""
    worst, killed, tried = 0.0, set(), set()
    for observed, reference, bound, mistakes in cases:
        if observed.shape != reference.shape:
            return Outcome("wrong", f"{what}: transformers' shape {observed.shape}, refpos's {reference.shape}", sites)
        excess = np.abs(observed - reference) - bound
        worst = max(worst, float(np.max(np.abs(observed - reference))))
        if np.any(excess > 0) or not np.all(np.isfinite(observed)):
            at = np.unravel_index(int(np.argmax(excess)), excess.shape)
            return Outcome("wrong", f"{what}: differs by {float(np.abs(observed - reference)[at]):.3g} at {at} "
                           f"(bound {float(np.broadcast_to(bound, excess.shape)[at]):.3g})", sites, worst)
        for name, wrong in mistakes.items():
            if wrong is None:
                continue
            tried.add(name)
            if wrong.shape != observed.shape or np.any(np.abs(observed - wrong) > bound):
                killed.add(name)
    return Outcome("exact", "", sites, worst, len(tried), sorted(tried - killed))


def _check(kind: str) -> Any:
    from refpos.check.kinds import BY_KIND

    return BY_KIND[kind]


def _mistakes(kind: str, inputs: Any) -> dict[str, np.ndarray | None]:
    """The output of every catalogued mistake of ``kind``'s check target on ``inputs`` (``None``: not shown)."""
    check = _check(kind)
    out = {}
    for name in check.mistakes:
        try:
            wrong = check.wrong(inputs, name)
        except (ValueError, TypeError, IndexError):  # a mistake these inputs cannot take
            wrong = None
        out[name] = None if wrong is None else np.asarray(wrong, dtype=np.float64)
    return out


# ----------------------------------------------------------------------------------------------------- grid
def _rows(diff: np.ndarray, dim: int) -> np.ndarray | None:
    """An observed ``(1, n, d)``, ``(1, h, w, d)`` or ``(1, d, h, w)`` map as ``(n, d)`` rows (raster order)."""
    if diff.shape[-1] == dim:
        return diff.reshape(-1, dim)
    if diff.ndim == 4 and diff.shape[1] == dim:
        return np.moveaxis(diff, 1, -1).reshape(-1, dim)
    return None


def _patch_grid(patches: int, shape: list[int]) -> tuple[int, int] | None:
    """The ``(h, w)`` with ``h·w = patches`` whose aspect is the image's (``shape[-2:]``)."""
    height, width = shape[-2:]
    h = max(1, round((patches * height / width) ** 0.5))
    return (h, patches // h) if h * (patches // h) == patches else None


def embedding_site(site: Site) -> bool:
    """Whether the site's recorded owner tensors are the embedding its table is added to: an embedding module's
    output, or the first layer's input of the module that adds it (:attr:`survey.pixels.Site.at`)."""
    return bool(site.at) or "embed" in site.owner.rsplit(".", 1)[-1].lower()


def compare_grid(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A learned grid: the site whose table has ``record.table_rows × record.dim`` entries (module docstring)."""
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance

    size = record.table_rows * record.dim
    site = next((s for s in sites if additive(s) and any(p.size == size for p in s.params.values())), None)
    if site is None:
        return Outcome("wrong", f"no position table of {record.table_rows} × {record.dim} entries at an input site "
                       f"(sites: {', '.join(s.path for s in sites) or 'none'})")
    if not embedding_site(site):
        return Outcome("not reached", f"{site.path}: the table is added inside {site.owner or 'the model'}'s own "
                       "forward, whose output is not the embedding (the survey sees no input site)", (site.path,))
    table = next(p for p in site.params.values() if p.size == size).astype(np.float64).reshape(record.table_rows, -1)
    cases = []
    for name, capture in site.captures.items():
        if not capture.owner_out or not capture.owner_zeroed:
            return Outcome("not reached", f"{site.owner}: no output recorded at the {name} size", (site.path,))
        out, zeroed = capture.owner_out[0].astype(np.float64), capture.owner_zeroed[0].astype(np.float64)
        observed = _rows(out - zeroed, record.dim)
        if observed is None:
            return Outcome("not reached", f"{site.owner}: output {out.shape} has no axis of width {record.dim}",
                           (site.path,))
        extra = record.prefix + record.suffix if record.variant is None or record.variant.keep_extra else 0
        grid = _patch_grid(observed.shape[0] - extra, run.shapes[name])
        if grid is None:  # tokens the table does not reach (DINOv2's registers) gain exactly nothing: left out
            observed = observed[np.any(observed != 0, axis=1)]
            grid = _patch_grid(observed.shape[0] - extra, run.shapes[name])
        if grid is None:
            return Outcome("wrong", f"{site.owner}: {observed.shape[0]} rows at the {name} size are not "
                           f"{extra} extra rows and a patch grid of the image's aspect", (site.path,))
        noise = 2 * unit(run) * float(np.max(np.abs(out)))
        if record.variant is None:
            reference = record.reference(table, grid) if grid == record.grid else None
            if reference is None:
                return Outcome("wrong", f"the table is claimed fixed at {record.grid}, transformers resampled it "
                               f"to {grid}", (site.path,))
            cases.append((observed, reference, unit(run) * float(np.max(np.abs(table))) + noise, {
                "grid_transposed": table.reshape(*record.grid, -1).transpose(1, 0, 2).reshape(table.shape)
                if record.prefix == record.suffix == 0 else None}))
            continue
        inputs = GridInputs(table, grid, record.variant, prefix_tokens=record.prefix, suffix_tokens=record.suffix,
                            source_grid=record.grid)
        reference = np.asarray(record.reference(table, grid), dtype=np.float64)
        cases.append((observed, reference, grid_tolerance(inputs, run.dtype) + noise, _mistakes("grid", inputs)))
    return graded(cases, (site.path,), f"{site.path} grid")


# -------------------------------------------------------------------------------------------- conv_position
def compare_conv_position(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A convolutional position module: its input and output against its weights (module docstring)."""
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs, conv_position_bound

    site = next((s for s in sites if s.is_module and any(c.module_in is not None and c.module_out is not None
                                                          for c in s.captures.values())), None)
    if site is None:
        return Outcome("wrong", "no position module fed the frames (sites: "
                       f"{', '.join(s.path for s in sites) or 'none'})")
    if record.form not in ("weight_norm", "plain") or record.stride != 1:
        return Outcome("not reached", f"{site.path}: the survey compares the weight-norm and plain forms at stride 1 "
                       f"only, refpos claims {record.form} at stride {record.stride}", (site.path,))
    params = {name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1]: p.astype(np.float64)
              for name, p in site.params.items()}
    bias = next((p for n, p in params.items() if n.endswith(".bias")), None)
    g, v = params.get("weight.original0"), params.get("weight.original1")
    kernel = next((p for n, p in params.items() if n.endswith("conv.weight")), None)
    if bias is None or (v is None and kernel is None):
        return Outcome("not reached", f"{site.path}: no convolution weight and bias found ({', '.join(params)})",
                       (site.path,))
    width = (v if v is not None else kernel).shape[-1]
    if width != record.kernel:
        return Outcome("wrong", f"{site.path}: transformers' kernel is {width} taps, refpos claims {record.kernel}",
                       (site.path,))
    cases = []
    for capture in site.captures.values():
        x, e = capture.module_in.astype(np.float64), capture.module_out.astype(np.float64)
        if record.form == "weight_norm" and g is not None:
            inputs = ConvPositionInputs("weight_norm", x, (v,), (bias,), record.groups, record.activation,
                                        weight_g=g.reshape(-1))
        else:
            inputs = ConvPositionInputs("plain", x, (kernel if kernel is not None else v,), (bias,), record.groups,
                                        record.activation)
        reference = inputs.reference()
        observed = x[:, :e.shape[1]] + e
        cases.append((observed, reference, conv_position_bound(inputs, unit=unit(run)) + unit(run) * np.abs(observed),
                      _mistakes("conv_position", inputs)))
    return graded(cases, (site.path,), f"{site.path} conv_position")


# ----------------------------------------------------------------------------------------------- bias_table
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
                      _mistakes("bias_table", inputs)))
    return graded(cases, (site.path,), f"{site.path} bias_table")


# --------------------------------------------------------------------------------------- learned and sinusoid
def _table_site(record: Any, sites: list[Site]) -> tuple[Site, str] | None:
    """The first input site holding a table of ``record.dim`` columns, and that table's name."""
    for site in sites:
        for name, table in site.params.items():
            if additive(site) and table.ndim >= 2 and table.shape[-1] == record.dim:
                return site, name
    return None


def _read_rows(site: Site, name: str, record: Any, run: PixelRun, first: int) -> list[tuple]:
    """One case per size: the rows the embedding's output gained (it minus its output with the table zeroed) against
    the table's rows ``first, first + 1, …`` (the frames in order), within the subtraction's ``2u·max|output|``."""
    table = site.params[name].astype(np.float64).reshape(-1, record.dim)
    cases = []
    for capture in site.captures.values():
        if not capture.owner_out or not capture.owner_zeroed:
            continue
        out = capture.owner_out[0].astype(np.float64)
        observed = _rows(out - capture.owner_zeroed[0].astype(np.float64), record.dim)
        if observed is None or first + observed.shape[0] > table.shape[0]:
            continue
        # the claim read one row later or earlier: a row outside the table is no row (its shape differs: wrong)
        offsets = {f"rows read from {first + shift}": table[max(first + shift, 0):first + shift + observed.shape[0]]
                   for shift in (-1, 1)}
        cases.append((observed, table[first:first + observed.shape[0]], 2 * unit(run) * float(np.max(np.abs(out))),
                      offsets))
    return cases


def compare_learned(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A learned 1-D table at the input: the frames read rows ``offset, offset + 1, …`` of it."""
    found = _table_site(record, sites)
    if found is None or record.at != "input":
        return Outcome("wrong", f"no learned table of {record.dim} columns at an input site for {record.stack}")
    site, name = found
    if not embedding_site(site):
        return Outcome("not reached", f"{site.path}: the table is added inside {site.owner or 'the model'}'s own "
                       "forward, whose output is not the embedding (the survey sees no input site)", (site.path,))
    cases = _read_rows(site, name, record, run, record.offset)
    if not cases:
        return Outcome("not reached", f"{site.owner}: no rows of {name} recorded at the input", (site.path,))
    return graded(cases, (site.path,), f"{site.path} learned")


def compare_sinusoid1d(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A 1-D sinusoid at the input: the table the model's code builds (its values before the survey's seeded draw)
    against the variant's, with the kind's catalogued mistakes, and the rows the frames read (from ``past``)."""
    from refpos.encodings.sinusoid1d_mistakes import Sinusoid1dInputs

    if record.at != "input":
        return Outcome("not reached", f"{record.stack} layer {record.index}: the survey compares a sinusoid added "
                       "at the input only (this one is a table of relative distances inside attention)")
    found = _table_site(record, sites)
    if found is None:
        return Outcome("wrong", f"no sinusoid table of {record.dim} columns at an input site for {record.stack}")
    site, name = found
    built = site.initial.get(name, site.params[name]).astype(np.float64).reshape(-1, record.dim)
    inputs = Sinusoid1dInputs(record.variant, record.dim, {"positions": np.arange(built.shape[0]),
                                                           **dict(record.settings)})
    reference, bound = _check("sinusoid1d").reference(inputs)
    cases = [(built, np.asarray(reference, dtype=np.float64), bound, _mistakes("sinusoid1d", inputs))]
    read = _read_rows(site, name, record, run, record.past or 0) if embedding_site(site) else []
    return graded(cases + read, (site.path,),
                  f"{site.path} sinusoid1d")


@dataclass(frozen=True)
class KindComparison:
    """How the survey judges one refpos kind on a vision, audio or feature run (module docstring)."""

    kind: str
    compare: Callable[[Any, PixelRun, list[Site]], Outcome]
    observed: str

    def judge(self, record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
        """:attr:`compare`, a claim whose formula refuses the recorded weights (a kernel of another group count, a
        table of another size) graded wrong."""
        try:
            return self.compare(record, run, sites)
        except (ValueError, TypeError) as exc:
            return Outcome("wrong", f"{record.stack} layer {record.index}: refpos's {self.kind} does not take what "
                           f"transformers' model holds: {' '.join(str(exc).split())[:200]}")


#: one record per kind the survey compares on pixel, audio and feature runs
COMPARISONS: dict[str, KindComparison] = {c.kind: c for c in (
    KindComparison("grid", compare_grid, "the embedding's output minus its output with the table zeroed"),
    KindComparison("conv_position", compare_conv_position, "the position module's input and output"),
    KindComparison("bias_table", compare_bias_table, "each layer's relative position bias module's output"),
    KindComparison("learned", compare_learned, "the embedding's output minus its output with the table zeroed"),
    KindComparison("sinusoid1d", compare_sinusoid1d, "the table the model's code builds, and the rows the "
                   "embedding's output gains"),
)}
