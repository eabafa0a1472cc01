#!/usr/bin/env bash
# Installs what is missing, builds, and runs the benchmarks. With no argument,
# every bench marked "all" below, in turn; with a name, that bench, the further
# arguments going to it (e.g. `scripts/bench.sh planner --steps 100`);
# `scripts/bench.sh list` names them all. The table below is the one list of
# the benches: name, whether a run of all includes it, its command (@PY@:
# the venv's Python with the built module on its path) and what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
benches() {
  cat <<'TABLE'
planner|all|build/bench/planner_bench|the planners on the Brown tagger, in lockstep
optimal|all|build/bench/optimal_bench|optimal and joint against mimose; what operator variants buy
advisor|all|build/bench/advisor_bench|the performance model and the advisor against measured batches
swap|all|build/bench/swap_bench|activation offload against recompute only, simulated
weights|all|build/bench/weight_swap_bench|weight swapping (Harmony) against the naive swap, simulated
weights-train|all|build/bench/weight_swap_train_bench|training with the weights in host memory, measured
activations-train|all|build/bench/activation_swap_train_bench|activation offload while training, measured
graph-train|all|build/bench/graph_train_bench|the U-Net under the graph planner at several budgets
pipeline|all|build/bench/input_pipeline_bench|input stalls and coordinated preprocessing
jobs|all|build/bench/jobs_bench|every jobs policy over a sweep of budgets, 4 runs each in turns (about 17 minutes)
ranks|all|build/bench/ranks_bench|data-parallel ranks on loopback: exactness, sums beside the backward, a killed rank
host-adam|all|build/bench/host_adam_bench|memtrain's host Adam against a memory triad and LibTorch's Adams
resnet50|all|build/bench/resnet50_bench|ResNet-50 at 224 px: none, optimal and joint (about 4 minutes)
blas|all|build/bench/blas_threads_bench|memtrain train on each OpenBLAS build and thread count
python|no|@PY@ bench/python_bench.py|memtrain.Module against checkpoint_sequential
peers|no|@PY@ bench/peers_bench.py|memtrain.Module beside checkpointing, SAC and torch.compile's budget on GPT-2 and Llama
trainer|no|@PY@ bench/trainer_bench.py|transformers' Trainer on a Llama at 32000 words, bf16 and accumulation, memtrain at N% beside checkpointing
fsdp|no|@PY@ bench/fsdp_bench.py|memtrain.Module under FSDP2 beside every-layer, every-k, selective checkpointing and compiled layers, 2 or 4 Gloo ranks
builds|no|python3 bench/builds_bench.py|two memtrain binaries side by side (--build LABEL=PATH twice); prints its table
resume|no|python3 bench/resume_bench.py --memtrain build/src/cli/memtrain|kill -9 and resume in every output mode; prints its lines
jobs-cores|no|python3 bench/jobs_cores_bench.py --memtrain build/src/cli/memtrain|jobs sharing the cores against every job taking every core; prints its lines
step-speed|no|@PY@ - bench/step_speed.sh build|memtrain train against a plain LibTorch loop: DEVICE STEPS OUTDIR [ROUNDS]; prints its tables
TABLE
}
python="${MEMTRAIN_VENV:-/opt/memtrain/venv}/bin/python"
# Runs the command of a table row with the further arguments.
run_command() {
  local command=$1
  shift
  case "$command" in
    "@PY@ - "*) MEMTRAIN_PYTHON=$python exec ${command#@PY@ - } "$@" ;;
    "@PY@ "*) PYTHONPATH=build/python exec "$python" ${command#@PY@ } "$@" ;;
    *) exec $command "$@" ;;
  esac
}
if [ "${1:-}" = list ]; then
  benches | awk -F'|' '{ printf "%-18s %s%s\n", $1, $4, ($2 == "all" ? "" : " (not in a run of all)") }'
  exit 0
fi
row=
if [ -n "${1:-}" ]; then
  row=$(benches | awk -F'|' -v name="$1" '$1 == name')
  if [ -z "$row" ]; then
    echo "bench.sh: unknown benchmark '$1'; expected list or one of: $(benches | cut -d'|' -f1 | paste -sd' ')" >&2
    exit 2
  fi
  shift
fi
scripts/install-deps.sh
scripts/build.sh
if [ -z "$row" ]; then
  benches | awk -F'|' '$2 == "all" { print $3 }' | while read -r command; do $command; done
  exit 0
fi
run_command "$(echo "$row" | cut -d'|' -f3)" "$@"
