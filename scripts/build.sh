#!/usr/bin/env bash
# Configures and builds memtrain into build/ (Release, Ninja, ccache when
# present, two jobs: CI machines have two cores) against the torch of the
# Python environment scripts/install-deps.sh made, then installs the Python
# module into that environment with pip, from the same build tree.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MEMTRAIN_VENV:-/opt/memtrain/venv}
GLOO_DIR=${MEMTRAIN_GLOO_DIR:-/opt/memtrain/gloo}
export CCACHE_DIR=${CCACHE_DIR:-${HOME:-/tmp}/.cache/ccache}
# Paths below the clone are hashed relative to it, so a fresh clone elsewhere
# reuses what another clone compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
# Precompiled headers need these for ccache to cache the sources that use them.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMTRAIN_PYTHON_EXECUTABLE="$VENV/bin/python" \
  -DMEMTRAIN_GLOO_INCLUDE_DIR="$GLOO_DIR/usr/include" "$@"
cmake --build build -j "${MEMTRAIN_JOBS:-2}"

if grep -q '^MEMTRAIN_PYTHON:BOOL=ON' build/CMakeCache.txt; then
  # pip reuses build/ (already built), so this only installs; the options
  # pyproject.toml sets for a user's build are set back to build/'s.
  "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
    -C build-dir=build -C cmake.define.MEMTRAIN_TESTS=ON .
fi
