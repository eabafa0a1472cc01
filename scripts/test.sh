#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test; install
# the module as a PyTorch user does (scripts/pip-install-check.sh); then
# build the torch-free layers again under AddressSanitizer and UBSan and run
# their tests there.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# One compute thread per test process where a test sets none: ctest runs as
# many tests as there are cores, and two of torch's thread pools side by
# side spin against each other (the CLI's ranks and jobs tests measured
# 223 s with two threads each, 164 s with one; tests/python sets it too).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ctest --test-dir build --output-on-failure -j "${MEMTRAIN_JOBS:-2}"
# A PyTorch user's `pip install .`, not as root, into a fresh environment.
scripts/pip-install-check.sh

export CCACHE_DIR=${CCACHE_DIR:-${HOME:-/tmp}/.cache/ccache}
# Paths below the clone are hashed relative to it, so a fresh clone elsewhere
# reuses what another clone compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMEMTRAIN_TORCH=OFF -DMEMTRAIN_SANITIZE=ON
cmake --build build-sanitize -j "${MEMTRAIN_JOBS:-2}"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-sanitize --output-on-failure -j "${MEMTRAIN_JOBS:-2}"
