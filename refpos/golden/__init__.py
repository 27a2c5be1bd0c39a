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
"""
