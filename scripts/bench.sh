#!/usr/bin/env bash
# Installs what is missing, builds, and runs the planner benchmark, which
# rewrites its section of docs/BENCHMARKS.md. Arguments go to planner_bench
# (e.g. --steps 100, --budgets 50).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/bench/planner_bench "$@"
