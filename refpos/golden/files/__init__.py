"""A golden directory's files: the ``.npy`` reader and writer (:mod:`~refpos.golden.files.npy`, never unpickling;
:mod:`~refpos.golden.files.npy_file`, a file read block by block), the manifest's schema
(:mod:`~refpos.golden.files.schema`), cases, outputs and the manifest (:mod:`~refpos.golden.files.manifest`),
and writing a directory (:mod:`~refpos.golden.files.store`: nothing escapes it, nothing refpos did not write is
removed, an interrupted run leaves a directory that verifies). Every file is reached through the directory's
descriptor (:mod:`refpos.directory`)."""
