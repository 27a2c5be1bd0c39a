r"""The ``tiled_grid`` comparison: a tiled tower's gated grid per aspect-ratio tile and its gated rows per tile,
observed as what each of its three position modules adds to its input (Llama 3.2 Vision's tower).

The modules are the sites the record names (``record.grid``, ``record.pre``, ``record.post``); each holds its
tables and a gate of one entry. The survey feeds one image of its tiles ``(1, 1, T, C, H, W)`` and the aspect-ratio
id it keeps with the run (:func:`survey.pixel_beside.aspect_ratio_id`); at that size each module's output minus its
input is what it adds:

* the grid module: the gated grid ``(T, N, D)`` on every row, the class token's too;
* the pre-tile module: the gated row on each tile's ``n = N − 1`` patches (the class token is not fed through it);
* their sum, the class rows gaining the grid alone: what the tokens gain before the local encoder, against
  :meth:`refpos.models.kinds.tiled_grid.TiledGridLayer.reference` with the wrong answers of
  :func:`refpos.encodings.tiled_grid_mistakes.input_mistakes`;
* the post-tile module: the gated row on every row of each tile before the global encoder, padding rows included.

Bound: the kind's (refpos/encodings/tiled_grid_mistakes.py) scaled from float32's unit roundoff to the run's, plus
the rounding of the module's own sums and of the subtraction (``u`` times each magnitude summed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, absent, graded, unit
from survey.pixels import PixelRun, Site

#: float32's unit roundoff: the kind's bound is derived at it, and scaled to the run's
U32 = 2.0**-24


def _site(sites: list[Site], name: str) -> Site | None:
    return next((s for s in sites if s.is_module and (s.path == name or s.path.endswith("." + name))), None)


def _weights(site: Site, sizes: dict[str, int]) -> dict[str, Any] | str:
    """The site's parameters by role (``gate`` one entry, and each table by its size), or what is missing."""
    out: dict[str, Any] = {}
    for role, size in {"gate": 1, **sizes}.items():
        found = next((p for p in site.params.values() if p.size == size), None)
        if found is None:
            return f"{site.path}: no parameter of {size} entries ({role})"
        out[role] = float(found.reshape(-1)[0]) if role == "gate" else found.astype(np.float64)
    return out


def _gained(site: Site, size: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The module's first input and output at ``size`` (first image) and their difference."""
    capture = site.captures.get(size)
    if capture is None or capture.module_in is None or capture.module_out is None:
        return None
    x, y = capture.module_in.astype(np.float64)[0], capture.module_out.astype(np.float64)[0]
    return x, y, y - x if x.shape == y.shape else None


def compare_tiled_grid(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """The three position modules of a tiled tower (module docstring)."""
    from refpos.encodings.tiled_grid import aspect_ratio_rows
    from refpos.encodings.tiled_grid_mistakes import aspect_ratio_bound, input_bound, input_mistakes

    found = {role: _site(sites, getattr(record, role)) for role in ("grid", "pre", "post")}
    if any(site is None for site in found.values()):
        return absent(run, f"no modules {record.grid}, {record.pre}, {record.post} at position sites (sites: "
                      f"{', '.join(s.path for s in sites) or 'none'})")
    paths = tuple(site.path for site in found.values())
    rows, tiles, dim, ids = record.rows, record.tiles, record.dim, record.ids
    grid = _weights(found["grid"], {"embedding": rows * dim, "tiles": ids * tiles * rows * dim})
    pre = _weights(found["pre"], {"table": ids * tiles * dim})
    post = _weights(found["post"], {"table": ids * tiles * dim})
    for weights in (grid, pre, post):
        if isinstance(weights, str):
            return Outcome("wrong", f"refpos's tiled_grid does not take what transformers' model holds: {weights}",
                           paths)
    E, G = grid["embedding"].reshape(rows, dim), grid["tiles"].reshape(ids, -1)
    A_pre, A_post = pre["table"].reshape(ids, -1), post["table"].reshape(ids, -1)
    u, scale, cases = unit(run), unit(run) / U32, []
    for size in found["grid"].captures:
        fed = run.prompts.get(size, {}).get("aspect_ratio_ids")
        seen = {role: _gained(site, size) for role, site in found.items()}
        if fed is None or any(v is None or v[2] is None for v in seen.values()):
            return Outcome("not reached", f"{paths[0]}: no module input and output, or no aspect-ratio id, recorded "
                           f"at the {size} size", paths)
        a = int(np.asarray(fed).reshape(-1)[0])
        (x_g, y_g, p_obs), (_, y_p, r_obs), (_, y_q, q_obs) = seen["grid"], seen["pre"], seen["post"]
        t = np.tanh(grid["gate"])
        parts = np.abs((1 - t) * E)[None] + np.abs(t * G[a].reshape(tiles, rows, dim))
        # the grid module's two sums and the subtraction: u(2|x| + 2|A| + |B| + |y| + |y − x|)
        grid_noise = u * (2 * np.abs(x_g) + 2 * parts + np.abs(y_g) + np.abs(p_obs))
        pre_noise = u * (np.abs(y_p) + np.abs(r_obs))  # one sum and the subtraction
        pre_rows = aspect_ratio_rows(A_pre, pre["gate"], a, tiles)
        pre_case = np.repeat(pre_rows[:, None, :], rows - 1, axis=1)
        pre_bound = aspect_ratio_bound(A_pre, pre["gate"], a, tiles)[:, None, :] * scale + pre_noise
        cases.append((r_obs, pre_case, pre_bound, {"pre_tile_on_class_row": np.repeat(
            pre_rows[:, None, :], rows, axis=1), "pre_post_swapped": np.repeat(aspect_ratio_rows(
                A_post, post["gate"], a, tiles)[:, None, :], rows - 1, axis=1)}))
        if r_obs.shape != (tiles, rows - 1, dim) or p_obs.shape != (tiles, rows, dim):
            return graded(cases, paths, f"{paths[1]} tiled_grid")
        observed = p_obs.copy()
        observed[:, 1:] += r_obs  # the class rows gain the grid alone: the pre-tile module runs before them
        args = (E, G, grid["gate"], A_pre, pre["gate"], a)
        bound = input_bound(*args, tiles) * scale + grid_noise
        bound[:, 1:] += pre_noise
        cases.append((observed, np.asarray(record.reference(*args)), bound,
                      input_mistakes(E, G, grid["gate"], A_pre, pre["gate"], A_post, post["gate"], a, tiles)))
        post_rows = record.post_rows(A_post, post["gate"], a)
        length = q_obs.shape[1] if q_obs.ndim == 3 else 0
        post_case = np.repeat(post_rows[:, None, :], length, axis=1)
        no_padding = post_case.copy()
        no_padding[:, rows:] = 0.0
        post_bound = aspect_ratio_bound(A_post, post["gate"], a, tiles)[:, None, :] * scale + u * (
            np.abs(y_q) + np.abs(q_obs))
        cases.append((q_obs, post_case, post_bound, {
            "post_pre_swapped": np.repeat(pre_rows[:, None, :], length, axis=1),
            "post_other_id": np.repeat(aspect_ratio_rows(A_post, post["gate"], (a + 1) % ids, tiles)[:, None, :],
                                       length, axis=1),
            "post_gate_not_tanh": post_case * (post["gate"] / np.tanh(post["gate"])) if np.tanh(post["gate"]) else
            None, "post_padding_rows_gain_none": no_padding if length > rows else None}))
    return graded(cases, paths, f"{paths[0]} tiled_grid")


__all__ = ["compare_tiled_grid"]
