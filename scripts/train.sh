#!/usr/bin/env bash
# README command 1: install what is missing, build, and run memtrain's main
# job (the Transformer tagger on the Brown corpus, planner mimose, budget 50%).
# Extra arguments go to `memtrain train`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/src/cli/memtrain train "$@"
