#!/usr/bin/env bash
# Configures and builds memtrain into build/ (Release, Ninja, ccache when
# present, two jobs: CI machines have two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-${HOME:-/tmp}/.cache/ccache}
# Precompiled headers need these for ccache to cache the sources that use them.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "${MEMTRAIN_JOBS:-2}"

# The Python module goes where /usr/bin/python3 finds it without PYTHONPATH.
if grep -q '^MEMTRAIN_PYTHON:BOOL=ON' build/CMakeCache.txt; then
  if [[ $(id -u) -eq 0 ]]; then
    cmake --install build --component python
  else
    echo "build: not root; the Python module stays in build/python (PYTHONPATH=build/python)" >&2
  fi
fi
