#!/usr/bin/env bash
# Installs what is missing, builds, and runs the benchmarks; each rewrites its
# own section of docs/BENCHMARKS.md. Optional first argument: planner,
# optimal, advisor, swap, weights, weights-train, activations-train, graph-train, pipeline,
# jobs (every policy over a sweep of budgets, 4 runs each in turns; about 17 minutes), ranks, blas, python,
# peers (memtrain.Module beside checkpointing, SAC and torch.compile's budget on transformers' GPT-2 and Llama),
# host-adam, resnet50 (ResNet-50 at 224 px: none, optimal and joint within 1.16x and at a third of the
# plain activation memory; about 4 minutes), resume (kill -9 and resume in every output mode; it prints
# its lines), jobs-cores (a group's jobs sharing the cores against every job taking every core; it prints
# its lines), step-speed [DEVICE [STEPS [OUTDIR [ROUNDS]]]] (memtrain train against a plain LibTorch loop,
# bench/step_speed.sh; it prints its tables)
# or builds (two memtrain binaries side by side, --build LABEL=PATH twice; it prints its table), to run one;
# further arguments go to it
# (e.g. --steps 100).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
case "${1:-}" in
  planner) shift; exec build/bench/planner_bench "$@" ;;
  optimal) shift; exec build/bench/optimal_bench "$@" ;;
  advisor) shift; exec build/bench/advisor_bench "$@" ;;
  swap) shift; exec build/bench/swap_bench "$@" ;;
  weights) shift; exec build/bench/weight_swap_bench "$@" ;;
  weights-train) shift; exec build/bench/weight_swap_train_bench "$@" ;;
  activations-train) shift; exec build/bench/activation_swap_train_bench "$@" ;;
  graph-train) shift; exec build/bench/graph_train_bench "$@" ;;
  pipeline) shift; exec build/bench/input_pipeline_bench "$@" ;;
  jobs) shift; exec build/bench/jobs_bench "$@" ;;
  ranks) shift; exec build/bench/ranks_bench "$@" ;;
  blas) shift; exec build/bench/blas_threads_bench "$@" ;;
  python) shift; PYTHONPATH=build/python exec "${MEMTRAIN_VENV:-/opt/memtrain/venv}/bin/python" bench/python_bench.py "$@" ;;
  peers) shift; PYTHONPATH=build/python exec "${MEMTRAIN_VENV:-/opt/memtrain/venv}/bin/python" bench/peers_bench.py "$@" ;;
  builds) shift; exec python3 bench/builds_bench.py "$@" ;;
  host-adam) shift; exec build/bench/host_adam_bench "$@" ;;
  resnet50) shift; exec build/bench/resnet50_bench "$@" ;;
  resume) shift; exec python3 bench/resume_bench.py --memtrain build/src/cli/memtrain "$@" ;;
  jobs-cores) shift; exec python3 bench/jobs_cores_bench.py --memtrain build/src/cli/memtrain "$@" ;;
  step-speed) shift; MEMTRAIN_PYTHON=${MEMTRAIN_VENV:-/opt/memtrain/venv}/bin/python exec bench/step_speed.sh build "${1:-cpu}" "${2:-20}" "${3:-/tmp/memtrain-step-speed}" "${4:-2}" ;;
  "") build/bench/planner_bench; build/bench/optimal_bench; build/bench/advisor_bench; build/bench/swap_bench; build/bench/weight_swap_bench; build/bench/weight_swap_train_bench; build/bench/activation_swap_train_bench; build/bench/graph_train_bench; build/bench/input_pipeline_bench; build/bench/jobs_bench; build/bench/ranks_bench; build/bench/host_adam_bench; build/bench/resnet50_bench; exec build/bench/blas_threads_bench ;;
  *) echo "bench.sh: unknown benchmark '$1'; expected planner, optimal, advisor, swap, weights, weights-train, activations-train, graph-train, pipeline, jobs, ranks, blas, python, peers, host-adam, resnet50, builds, resume, jobs-cores or step-speed" >&2; exit 2 ;;
esac
