"""Build ggml's CPU libraries from the llama-cpp-python source package on PyPI; print their directory.

``python -m spec_tests.adapters.build_ggml [--cache DIR]`` downloads ``llama-cpp-python==VERSION`` as a
source distribution (``pip download --no-binary :all: --no-deps``), unpacks its vendored
``vendor/llama.cpp/ggml`` (with the converter, ``conversion/`` and ``gguf-py/``) into the cache, configures
it with CMake as a subproject (the source package leaves out ``ggml.pc.in``, which ggml only reads when it
is the top-level project) and builds
``libggml-base.so`` and ``libggml-cpu.so`` (Release, ``-march=native``, OpenMP). The last line printed is
the directory of the libraries, for ``REFPOS_GGML_LIB``. A cache that already holds them is reused; nothing
is written inside the repository. Needs cmake and a C/C++ compiler (measured on the 2-core VM: 3–4 min).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
from pathlib import Path

VERSION = "0.3.36"
#: the parts of vendor/llama.cpp unpacked: ggml, and the converter with its gguf package (the ggml adapter
#: calls the converter for the freq_factors it writes: spec_tests/adapters/_ggml_converter.py)
UNPACKED = ("ggml", "conversion", "gguf-py")
#: the CMake project that adds ggml as a subdirectory (written into the cache, not kept in the repository)
WRAPPER = """cmake_minimum_required(VERSION 3.14)
project(refpos_ggml C CXX)
add_subdirectory(${GGML_SOURCE} ggml)
"""


def build(cache: Path, version: str = VERSION, jobs: int = 2) -> Path:
    """The directory holding ``libggml-base.so`` and ``libggml-cpu.so`` built from ``llama-cpp-python==version``."""
    root = cache / f"llama-cpp-python-{version}"
    libs = root / "build" / "ggml" / "src"
    if (libs / "libggml-cpu.so").is_file() and (libs / "libggml-base.so").is_file():
        return libs
    root.mkdir(parents=True, exist_ok=True)
    sdist = root / f"llama_cpp_python-{version}.tar.gz"
    if not sdist.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                        f"llama-cpp-python=={version}", "-d", str(root)], check=True)
    vendor = root / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    source = vendor / "ggml"
    if not all((vendor / part).is_dir() for part in UNPACKED):
        prefixes = tuple(f"llama_cpp_python-{version}/vendor/llama.cpp/{part}/" for part in UNPACKED)
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefixes) and (m.isfile() or m.isdir())]
            tar.extractall(root, members=members, filter="data")
    (root / "wrapper").mkdir(exist_ok=True)
    (root / "wrapper" / "CMakeLists.txt").write_text(WRAPPER, encoding="utf-8")
    subprocess.run(["cmake", "-S", str(root / "wrapper"), "-B", str(root / "build"), f"-DGGML_SOURCE={source}",
                    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DGGML_NATIVE=ON",
                    "-DGGML_BUILD_TESTS=OFF", "-DGGML_BUILD_EXAMPLES=OFF"], check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", str(root / "build"), "-j", str(jobs), "--target", "ggml-cpu"], check=True,
                   stdout=sys.stderr)
    return libs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spec_tests.adapters.build_ggml",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=os.environ.get("REFPOS_GGML_CACHE",
                                                          str(Path.home() / ".cache" / "refpos" / "ggml")),
                        help="where the source package is unpacked and built (default $REFPOS_GGML_CACHE or "
                             "~/.cache/refpos/ggml)")
    parser.add_argument("--version", default=VERSION, help=f"llama-cpp-python version (default {VERSION})")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    args = parser.parse_args(argv)
    print(build(Path(args.cache).expanduser(), args.version, args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
