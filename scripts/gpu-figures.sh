#!/usr/bin/env bash
# On a GPU machine with PyTorch (CUDA), CMake and Ninja: builds memtrain's CUDA
# path (scripts/build-cuda.sh), runs the GPU tests, and measures what only a
# GPU can: GPT chains calibrated there (for build/bench/weight_swap_bench
# --chains), the host Adam on the GPU host's cores (host_adam_bench), training
# with the weights in host memory, `swap` against `swap-naive`, and the
# tagger's activation offload at batch 256 (none, optimal and swap).
# Everything it writes goes to OUTDIR.
#
#   scripts/gpu-figures.sh OUTDIR
#
# On a machine without memtrain's other libraries or the Brown corpus, carry
# .gpu/ from scripts/gpu-carry.sh (unpacked by scripts/gpu-unpack.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-figures.sh OUTDIR}
mkdir -p "$out"
log=$out/figures.log
say() { echo "gpu-figures: $*" | tee -a "$log"; }

. scripts/gpu-unpack.sh > >(tee -a "$log")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"
python3 -c 'import torch; print("torch", torch.__version__)' | tee -a "$log"

start=$(date +%s)
if ! MEMTRAIN_TARGETS="${MEMTRAIN_TARGETS:-memtrain runtime_memory_tests runtime_execution_tests runtime_training_tests host_adam_bench}" scripts/build-cuda.sh >/tmp/memtrain-build.log 2>&1; then
  say "build failed after $(($(date +%s) - start)) s; errors in build.log"
  cp /tmp/memtrain-build.log "$out/build.log"
  grep -E "error|Error" "$out/build.log" | head -40 | tee -a "$log"
  exit 1
fi
say "built in $(($(date +%s) - start)) s"
# The library path build-cuda.sh found for the unpacked packages, as it printed it.
ld_path=$(sed -n 's/^build-cuda: run with LD_LIBRARY_PATH=//p' /tmp/memtrain-build.log)
if [[ -n $ld_path ]]; then export LD_LIBRARY_PATH=$ld_path; fi
memtrain=build-cuda/src/cli/memtrain

# The GPU tests, and the CPU tests of what the GPU tests exercise (saved-tensor
# hooks, host weights) against this LibTorch.
tests_exit=0
for layer in memory execution training; do
  build-cuda/tests/runtime/$layer/runtime_${layer}_tests \
    --gtest_filter='Cuda*:SavedOffload*:WeightSwapExecution*:TrainerWeightsOnHost*:OffloadExecution*' \
    >>"$out/tests.log" 2>&1 || tests_exit=$?
done
say "GPU tests: exit $tests_exit ($(grep -c '^\[       OK \]' "$out/tests.log") passed, $(grep -c '^\[  FAILED  \]' "$out/tests.log") failed lines)"

# The host Adam that updates weights kept in host memory, on this host's
# cores: its bandwidth against a triad and LibTorch's Adam, and the spread of
# the update rate the Simulator prices host updates with.
build-cuda/bench/host_adam_bench --out "$out/host-adam.md" >>"$log" 2>&1
say "host Adam on $(nproc) cores: exit $?"

# GPT chains for weight_swap_bench --chains, calibrated on this GPU at one
# micro-batch of 2 sentences, and training measured on each: batch 16 in 8
# micro-batches of 2, weights, gradients and Adam state in host memory, a
# device budget a quarter of them. Width 1024 is the narrowest whose quarter
# leaves room beside the CUDA libraries' workspaces (75 MB on an H100); at
# 2048 the weights outweigh the compute as they do where swapping matters.
for width in ${MEMTRAIN_GPU_WIDTHS:-1024 2048}; do
  gpt=(--model gpt --width "$width" --heads 16 --layers 8)
  chain=$out/gpt-w$width-l8-gpu-batch2.json
  $memtrain calibrate --device cuda "${gpt[@]}" --batch 2 --json "$chain" >>"$log" 2>&1
  say "calibrate width $width: exit $?"
  budget=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(sum(s.get("param_bytes",0)+s.get("state_bytes",0) for s in c["stages"])//4)' "$chain")
  say "width $width: budget $budget bytes (a quarter of the model state)"
  for p in swap swap-naive; do
    $memtrain train --device cuda "${gpt[@]}" --batch 16 --micro-batches 8 --weights-on host --planner "$p" \
      --calibration "$chain" --budget "$budget" --steps "${MEMTRAIN_GPU_STEPS:-30}" \
      --json "$out/train-w$width-$p.json" >>"$log" 2>&1
    say "train width $width $p: exit $?"
  done
done
# Activation offload on this GPU: the tagger at batch 256, calibrated here,
# trained by none, optimal and swap at 50%, for the Simulator's error per step
# (summary median_time_prediction_error) after the executor's and planners'
# changes since the last GPU figures.
tagger_chain=$out/tagger-gpu-batch256.json
$memtrain calibrate --device cuda --batch 256 --json "$tagger_chain" >>"$log" 2>&1
say "calibrate tagger batch 256: exit $?"
for p in none optimal swap; do
  $memtrain train --device cuda --batch 256 --planner "$p" --calibration "$tagger_chain" --budget 50% \
    --steps "${MEMTRAIN_GPU_STEPS:-30}" --json "$out/train-tagger-b256-$p.json" >>"$log" 2>&1
  say "train tagger batch 256 $p: exit $?"
done
say "done in $(($(date +%s) - start)) s"
