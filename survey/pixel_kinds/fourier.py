r"""The ``fourier`` comparison: SAM's random Fourier features, observed as every call of the module that computes
them (:attr:`survey.pixels.Capture.calls`: ``SamPositionalEmbedding``, a module holding nothing but the matrix
``G``, a bare parameter the survey redraws), each call's input and output, with the prompts the model was fed
(:attr:`survey.pixels.PixelRun.prompts`: seeded whole-pixel points and a box, :mod:`survey.pixel_beside`).

The features are ``P = [sin φ | cos φ]``, ``φ_j = 2π Σ_i (2c_i − 1) G_ij`` (:mod:`refpos.encodings.fourier`),
``G`` ``(2, m)`` the site's recorded tensor. What each record reads is its variant's:

* ``sam_prompts`` (the prompt encoder's input): each call fed a prompt (its input of a prompt's shape: the
  points ``(1, 1, 3, 2)``; the box as its two corners ``(1, 1, 2, 2)``). Its output against refpos's features of
  the pixel points *fed* (not the call's input: the pixel centre's ``+ 0.5`` is refpos's claim to test) in an
  image of the size fed, ``fourier_features(pixel_centre_coordinates(points, (H, W)), G)``: the kind's check
  target on its ``sam_prompts`` form (``sam_prompt_features``).
* ``sam_image_grid`` (each layer of the mask decoder, whose keys gain it): the call fed an ``(H, W, 2)`` grid. Its
  output ``(H, W, 2m)`` in raster order against ``fourier_features(grid_centre_coordinates(H, W), G)`` (the
  target's ``sam`` form at refpos's centres, ``((j + ½)/W, (i + ½)/H)``); beside the catalogued mistakes, the grid
  read at its corners ``(j/W, i/H)`` and spread over ``[0, 1]`` ends included (``j/(W − 1)``) are wrong answers too.
  That the decoder's layers add these features to their image keys is not observed: the composite computes them
  once and hands them over.

A record's calls are those of the modules inside its stack's module (the prompt encoder's ``shared_embedding``);
where none is (the mask decoder holds no ``G``), the composite's own (a top-level module: ``SamModel``'s
``shared_image_embedding``, whose output it hands to the decoder). SAM's one ``G`` serves both (tied: one site), so
the site is looked for among all the run's sites, not only those no record has accounted for yet; where each has
its own (SAM 2's), each record finds its own.

**Bound.** A correct port may compute in the dtype it runs in (``u``: float64's ``2⁻⁵³`` where SAM runs in it,
float32's ``2⁻²⁴`` otherwise; the drawn ``G`` and the whole-pixel prompts are exact in either):

* the coordinate ``c = (x + ½)/W`` is two roundings (the sum, the quotient), a grid centre one (``cumsum`` of ones
  and ``− ½`` are exact, the quotient not): ``|Δc| ≤ 2u·c``; ``2c − 1`` adds one more (the doubling is exact):
  ``|Δ(2c − 1)| ≤ 6u`` on ``c ∈ [0, 1]`` (the catalogue's count);
* the product with ``G`` (``n = 2`` terms) adds ``(n + 1)u·Σ_i |(2c − 1)_i G_ij|``, and the ``6u`` above times
  ``Σ_i |G_ij|``; ``2π`` stored in the dtype and multiplied, ``2u·|φ_j|``. With ``|2c − 1| ≤ 1`` (every prompt and
  grid centre lies inside the image): ``|φ_j| ≤ 2π Σ_i |G_ij|`` and

  .. math:: |\Delta\varphi_j| \le 2\pi\,(n + 9)\,u\,\textstyle\sum_i |G_{ij}|\,\max(1, \max|2c - 1|);

* ``sin`` and ``cos`` are 1-Lipschitz, so the angle's error passes to the output at most as it is; their evaluation
  (within an ulp or two, float32 and float64 alike) and the stored result add ``3u``, and one ``u`` of margin:
  ``β = u·(2π(n + 9)·max_j Σ_i |G_ij|·max(1, max|2c − 1|) + 4)``, one bound for every entry.

That is refpos's :meth:`~refpos.encodings.fourier_mistakes.FourierInputs.bound` (taken at float32's ``u``) scaled
to the run's ``u``. A catalogued mistake changes entries by ``O(1)`` (a swapped half, a missing ``2π``) or by
``|Δφ| ≈ π·Σ|G|/W`` (the pixel centre's ``½`` missing): far outside ``β``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, absent, check_target, graded, mistakes_of, unit
from survey.pixels import PixelRun, PositionCall, Site


def _gaussian(site: Site) -> np.ndarray | None:
    """The site's matrix ``G`` ``(2, m)``, float64 (``None`` where it holds none)."""
    return next((p.astype(np.float64) for p in site.params.values() if p.ndim == 2 and p.shape[0] == 2), None)


def _calls_of(record: Any, site: Site, size: str, own: bool) -> list[PositionCall]:
    """The site's calls at ``size`` of the modules inside the record's stack's module (``own``), or of the
    composite's own modules (a top-level path)."""
    root = record.stack.split(".")[0] + "."
    return [c for c in site.captures[size].calls if (c.module.startswith(root) if own else "." not in c.module)]


def _site_of(record: Any, run: PixelRun) -> tuple[Site, bool] | None:
    """The site holding a ``G`` whose module the record's stack calls, else one the composite's own module calls
    (module docstring), and which of the two it is: the first such among all the run's sites."""
    sites = [s for s in run.sites if _gaussian(s) is not None and any(c.calls for c in s.captures.values())]
    for own in (True, False):
        site = next((s for s in sites if any(_calls_of(record, s, size, own) for size in s.captures)), None)
        if site is not None:
            return site, own
    return None


def _corners(prompt: np.ndarray) -> np.ndarray:
    """A prompt fed as the model reads it, ``(…, 2)`` points: a box ``(…, 4)`` as its two corners ``(…, 2, 2)``."""
    return prompt.reshape(*prompt.shape[:-1], 2, 2) if prompt.shape[-1] == 4 else prompt


def _scaled(bound: Any, run: PixelRun) -> np.ndarray:
    """The kind's bound, derived at float32's unit roundoff, at the run's (module docstring)."""
    from refpos.encodings.fourier_mistakes import U32

    return np.asarray(bound, dtype=np.float64) * (unit(run) / U32)


def _prompt_cases(run: PixelRun, size: str, calls: list[PositionCall], gaussian: np.ndarray
                  ) -> list[tuple] | str:
    """One case per prompt fed at ``size`` whose call was recorded; a string saying why where none was."""
    from refpos.check.kinds.fourier import sam_prompt_features

    fed = {name: _corners(p.astype(np.float64)) for name, p in run.prompts.get(size, {}).items()}
    if not fed:
        return f"the model was fed no prompt at the {size} size (its forward takes none of SAM's)"
    image = run.shapes[size][-2:]  # (H, W) of the image fed: the prompts are its pixels
    cases = []
    for points in fed.values():
        call = next((c for c in calls if c.input.shape == points.shape), None)
        if call is None:
            continue
        inputs = sam_prompt_features(points.reshape(-1, 2), list(image), gaussian)
        reference, bound = check_target("fourier").reference(inputs)
        cases.append((call.output.astype(np.float64).reshape(-1, call.output.shape[-1]), reference,
                      _scaled(bound, run), mistakes_of("fourier", inputs)))
    if not cases:
        return (f"no call of {', '.join(dict.fromkeys(c.module for c in calls)) or 'a Fourier module'} at the "
                f"{size} size was fed a prompt's points ({', '.join(f'{n} {p.shape}' for n, p in fed.items())})")
    return cases


def _grid_cases(run: PixelRun, size: str, calls: list[PositionCall], gaussian: np.ndarray) -> list[tuple] | str:
    """The case of the call fed an ``(H, W, 2)`` grid at ``size``; a string saying why where there is none."""
    from refpos.encodings.fourier import grid_centre_coordinates
    from refpos.encodings.fourier_mistakes import FourierInputs

    call = next((c for c in calls if c.input.ndim == 3 and c.input.shape[-1] == 2), None)
    if call is None:
        return f"no call at the {size} size was fed an (H, W, 2) grid"
    height, width = call.input.shape[:2]
    centres = np.asarray(grid_centre_coordinates(height, width, xp=np), dtype=np.float64).reshape(-1, 2)
    inputs = FourierInputs("sam", centres, gaussian)
    reference, bound = check_target("fourier").reference(inputs)
    j, i = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    spread = np.stack([j / max(width - 1, 1), i / max(height - 1, 1)], axis=-1).reshape(-1, 2)
    wrong = mistakes_of("fourier", inputs) | {
        "grid read at its corners, not its centres": FourierInputs(
            "sam", np.stack([j / width, i / height], axis=-1).reshape(-1, 2), gaussian).output(),
        "grid spread over [0, 1], ends included": FourierInputs("sam", spread, gaussian).output()}
    observed = call.output.astype(np.float64).reshape(-1, call.output.shape[-1])
    return [(observed, reference, _scaled(bound, run), wrong)]


def compare_fourier(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """SAM's Fourier features of the prompts or of the image grid, by the record's variant (module docstring)."""
    found = _site_of(record, run)
    if found is None:
        return absent(run, f"no called module computing with a (2, m) matrix for {record.stack} layer "
                      f"{record.index} (sites: {', '.join(s.path for s in run.sites) or 'none'})")
    site, own = found
    gaussian = _gaussian(site)
    what = f"{record.stack} layer {record.index} fourier({record.variant})"
    if gaussian.shape[1] != record.m:
        return Outcome("wrong", f"{what}: refpos's G is (2, {record.m}), transformers' {site.path} "
                       f"{gaussian.shape}", (site.path,))
    cases: list[tuple] = []
    for size in site.captures:
        calls = _calls_of(record, site, size, own)
        at_size = (_prompt_cases(run, size, calls, gaussian) if record.variant == "sam_prompts"
                   else _grid_cases(run, size, calls, gaussian))
        if isinstance(at_size, str):
            status = "not reached" if record.variant == "sam_prompts" and not run.prompts.get(size) else "wrong"
            return Outcome(status, f"{what}: {at_size}", (site.path,))
        cases += at_size
    if not cases:
        return Outcome("not reached", f"{what}: {site.path} recorded at no size", (site.path,))
    return graded(cases, (site.path,), what)
