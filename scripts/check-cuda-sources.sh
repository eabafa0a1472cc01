#!/usr/bin/env bash
# Compiles memtrain's CUDA-only sources (-fsyntax-only) on a machine with no
# GPU and no CUDA toolkit, so a change to them is checked before a GPU session:
# the CUDA headers come from Debian's nvidia-cuda-dev (non-free, about 770 MB,
# downloaded once and only its headers unpacked), LibTorch's CUDA headers from
# libtorch-dev. It checks that the code compiles against LibTorch 1.13 and
# CUDA 11.8; the GPU machine's PyTorch may differ, so it is no substitute for
# scripts/build-cuda.sh there. Not part of the test suite.
#
#   scripts/check-cuda-sources.sh          (MEMTRAIN_CUDA_DEB=FILE to use a .deb at hand)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${XDG_CACHE_HOME:-$HOME/.cache}/memtrain/cuda-check
mkdir -p "$cache"

deb=${MEMTRAIN_CUDA_DEB:-}
if [[ -z $deb ]]; then
  deb=$(ls "$cache"/nvidia-cuda-dev_*.deb 2>/dev/null | head -1 || true)
fi
if [[ -z $deb ]]; then
  # nvidia-cuda-dev lives in Debian's non-free component, which this machine
  # may not list; a sources file of our own adds it for this download only.
  src=/etc/apt/sources.list.d/memtrain-cuda-check.sources
  if ! apt-cache policy nvidia-cuda-dev 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    . /etc/os-release
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$VERSION_CODENAME" > "$src"
    trap 'rm -f "$src"; apt-get update -qq' EXIT
    apt-get update -qq
  fi
  (cd "$cache" && apt-get download -q nvidia-cuda-dev)
  deb=$(ls "$cache"/nvidia-cuda-dev_*.deb | head -1)
fi

headers=$cache/root
if [[ ! -f $headers/usr/include/cuda_runtime.h ]]; then
  mkdir -p "$headers"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$headers" --wildcards './usr/include/*'
fi
# A header CMake generates when LibTorch is built with CUDA; Debian's CPU
# LibTorch ships the rest of c10/cuda without it.
mkdir -p "$cache/stub/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$cache/stub/c10/cuda/impl/cuda_cmake_macros.h"

mapfile -t files < <(grep -rlE 'MEMTRAIN_WITH_CUDA|<c10/cuda/|<ATen/cuda/' src tests bench --include='*.cpp' | sort)
failed=0
for f in "${files[@]}"; do
  if c++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror -DMEMTRAIN_WITH_CUDA -D_GLIBCXX_USE_CXX11_ABI=1 \
      -Isrc -Itests -isystem /usr/include/torch/csrc/api/include -isystem "$cache/stub" \
      -isystem "$headers/usr/include" "$f"; then
    echo "compiles: $f"
  else
    echo "FAILS: $f"
    failed=1
  fi
done
exit $failed
