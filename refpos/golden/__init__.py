"""Golden outputs: the files, their tolerances, and their certification.

* :mod:`~refpos.golden.tolerance` — the error a correct implementation in a dtype may show;
* :mod:`~refpos.golden.compare` — the one comparison ``|y − r| ≤ atol + rtol·|r| + ulps·ulp(r)``;
* :mod:`~refpos.golden.npy` — the ``.npy`` reader and writer (never unpickles);
  :mod:`~refpos.golden.npy_file` — a ``.npy`` file read block by block with explicit reads (``refpos check``);
* :mod:`~refpos.golden.certify` — exact (mpmath) recomputation of the golden outputs;
* :mod:`~refpos.golden.entries` — an output's tolerance entry per dtype, and comparing a candidate under it;
* :mod:`~refpos.golden.manifest` — cases, outputs, the manifest, and reading a case's files;
* :mod:`~refpos.golden.store` — writing a golden directory (``--out``): nothing escapes it, nothing refpos
  did not write is removed, an interrupted run leaves a directory that verifies;
* :mod:`~refpos.golden.cases`, :mod:`~refpos.golden.deberta_cases`, :mod:`~refpos.golden.rope_cases`,
  :mod:`~refpos.golden.scenarios` — the committed cases;
* :mod:`~refpos.golden.generate` — generate and verify a golden directory.

``__all__`` is this package's public API: the tolerances, the comparison, and reading a golden directory.
Generating and verifying one is :func:`refpos.golden.generate.generate` and
:func:`refpos.golden.generate.verify` (``refpos golden``): they share their module's name, which stays a module.
"""

from refpos.golden.compare import allowed_error, within
from refpos.golden.manifest import GoldenError, default_golden_dir, find_case, load_arrays, load_manifest, read_case
from refpos.golden.tolerance import (
    angle_error_bound,
    correct_error,
    integer_tolerance,
    probability_tolerance,
    rope_tolerance,
    value_tolerance,
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
