"""Golden outputs: the cases, their files, their tolerances, and their certification.

* :mod:`~refpos.golden.registry` — the case families (an id prefix, its builder, the kinds it covers), which
  :mod:`~refpos.golden.generate` iterates to generate and verify a golden directory;
* :mod:`~refpos.golden.cases` — the builders, one module per family;
* :mod:`~refpos.golden.files` — the ``.npy`` files (never unpickled), the manifest and its schema, and writing a
  directory (nothing escapes it, nothing refpos did not write is removed);
* :mod:`~refpos.golden.exact` — the tolerances a correct implementation in a dtype stays within, the one
  comparison ``|y − r| ≤ atol + rtol·|r| + ulps·ulp(r)``, an output's tolerance entry per dtype, and the exact
  (mpmath) recomputation that certifies every output.

``__all__`` is this package's public API: the tolerances, the comparison, and reading a golden directory.
Generating and verifying one is :func:`refpos.golden.generate.generate` and
:func:`refpos.golden.generate.verify` (``refpos golden``): they share their module's name, which stays a module.
"""

from refpos.golden.exact.compare import allowed_error, within
from refpos.golden.exact.tolerance import (
    angle_error_bound,
    correct_error,
    integer_tolerance,
    probability_tolerance,
    rope_tolerance,
    value_tolerance,
)
from refpos.golden.files.manifest import (
    GoldenError,
    default_golden_dir,
    find_case,
    load_arrays,
    load_manifest,
    read_case,
)

__all__ = [
    "GoldenError",
    "allowed_error",
    "angle_error_bound",
    "correct_error",
    "default_golden_dir",
    "find_case",
    "integer_tolerance",
    "load_arrays",
    "load_manifest",
    "probability_tolerance",
    "read_case",
    "rope_tolerance",
    "value_tolerance",
    "within",
]
