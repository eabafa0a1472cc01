#!/usr/bin/env bash
# Builds memtrain against the CUDA LibTorch that ships with the machine's
# PyTorch (python3 -c 'import torch'; MEMTRAIN_PYTHON names another Python),
# and its Python module for that Python, into build-cuda/. For a GPU machine
# that has PyTorch, nvcc, CMake and Ninja but not memtrain's other libraries:
# set MEMTRAIN_DEPS_ROOT to a folder holding Debian packages unpacked with
# `dpkg -x` and Gloo's headers in usr/include (scripts/gpu-carry.sh makes
# both on a Debian 12 machine); their headers, libraries and pkg-config files
# are used from there. Run the binaries with the LD_LIBRARY_PATH this script
# prints. scripts/gpu-check.sh unpacks them from MEMTRAIN_DEBS.
set -euo pipefail
cd "$(dirname "$0")/.."

python=$(command -v "${MEMTRAIN_PYTHON:-python3}")
prefixes=""
args=(-DMEMTRAIN_PYTHON_EXECUTABLE="$python")
if [[ -n ${MEMTRAIN_DEPS_ROOT:-} ]]; then
  deps=$(cd "$MEMTRAIN_DEPS_ROOT" && pwd)
  lib=$deps/usr/lib/x86_64-linux-gnu
  prefixes="$deps/usr"
  args+=(-DMEMTRAIN_GLOO_INCLUDE_DIR="$deps/usr/include")
  export PKG_CONFIG_PATH=$lib/pkgconfig:$deps/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$deps
  # The shared library: a module cannot link libz.a.
  args+=(-DZLIB_ROOT="$deps/usr" -DZLIB_LIBRARY="$lib/libz.so" -DZLIB_LIBRARY_RELEASE="$lib/libz.so" -DCMAKE_EXE_LINKER_FLAGS="-L$lib -L$deps/lib/x86_64-linux-gnu -Wl,-rpath-link,$lib/lapack:$lib/blas:$lib:$deps/lib/x86_64-linux-gnu")
  # The build runs the test binaries to list their tests, so it needs them too.
  export LD_LIBRARY_PATH=$lib:$lib/lapack:$lib/blas:$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "build-cuda: run with LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
fi
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export CCACHE_DIR=${CCACHE_DIR:-${HOME:-/tmp}/.cache/ccache}
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefixes" "${args[@]}" "$@"
# MEMTRAIN_TARGETS (e.g. "memtrain") builds only those targets.
read -ra targets <<<"${MEMTRAIN_TARGETS:-all}"
cmake --build build-cuda -j "${MEMTRAIN_JOBS:-$(nproc)}" --target "${targets[@]}"
