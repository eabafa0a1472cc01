#!/usr/bin/env bash
# One prepared run for a GPU machine that has PyTorch (CUDA), nvcc, CMake and
# Ninja but nothing of memtrain's: builds the CLI, the CUDA tests and the
# Python module against that machine's torch (scripts/build-cuda.sh), runs the
# CUDA tests, imports the module and runs its CUDA tests, trains a GPT of GPT-2 small's shape at a
# 32000-word vocabulary under memtrain beside its peers (bench/gpu_whole_step.py), trains a Llama
# through transformers' Trainer under memtrain beside its peers (bench/trainer_bench.py), times the tagger's
# steps under memtrain beside a plain LibTorch loop (bench/step_speed.sh), and prints the
# headline figures (the tagger under mimose at 50% on CUDA). Each phase has a time limit, so the whole fits
# in MEMTRAIN_GPU_SECONDS (480 by default) and a failed phase still leaves
# the others' results. Everything it writes goes to OUTDIR; check.log says
# what happened, phase by phase.
#
#   scripts/gpu-carry.sh              here, once: makes .gpu/ (debs, Gloo headers, corpus)
#   scripts/gpu-check.sh OUTDIR       there, with .gpu carried
#   MEMTRAIN_GPU_DRY_RUN=1 MEMTRAIN_PYTHON=/opt/memtrain/venv/bin/python scripts/gpu-check.sh OUTDIR
#                                     on a machine without a GPU: every phase
#                                     runs, the CUDA tests skip and the
#                                     tagger trains on the CPU
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
log=$out/check.log
: >"$log"
start=$(date +%s)
total=${MEMTRAIN_GPU_SECONDS:-480}
say() { echo "gpu-check: [$(($(date +%s) - start)) s] $*" | tee -a "$log"; }
# What is left of the total, less a reserve for the phases after this one.
left() { echo $((total - ($(date +%s) - start) - ${1:-0})); }

. scripts/gpu-unpack.sh > >(tee -a "$log")
# The Python whose torch memtrain builds against (scripts/build-cuda.sh too).
python=$(command -v "${MEMTRAIN_PYTHON:-python3}")
export MEMTRAIN_PYTHON=$python
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"
fi
"$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' | tee -a "$log"
gpu=$("$python" -c 'import torch; print(int(torch.cuda.is_available()))')
if [[ $gpu != 1 && -z ${MEMTRAIN_GPU_DRY_RUN:-} ]]; then
  say "no GPU visible to torch; set MEMTRAIN_GPU_DRY_RUN=1 to run the phases anyway"
  exit 1
fi

# 1. Build: the CLI, the tests of the layers with CUDA code, the module
# (where this Python has the headers to build a module against).
targets="memtrain plain_loop_bench runtime_memory_tests runtime_execution_tests runtime_training_tests"
module=(-DMEMTRAIN_PYTHON=ON)
if "$python" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  targets+=" memtrain_python_module"
else
  module=(-DMEMTRAIN_PYTHON=OFF)
  say "no Python.h for $python: the module is not built"
fi
MEMTRAIN_TARGETS=$targets timeout "$(left 150)" scripts/build-cuda.sh "${module[@]}" >"$out/build.log" 2>&1
build_exit=$?
say "build: exit $build_exit (targets: $targets)"
if ((build_exit != 0)); then
  grep -E "error|Error" "$out/build.log" | head -30 | tee -a "$log"
  exit 1
fi
ld_path=$(sed -n 's/^build-cuda: run with LD_LIBRARY_PATH=//p' "$out/build.log")
if [[ -n $ld_path ]]; then export LD_LIBRARY_PATH=$ld_path; fi
memtrain=build-cuda/src/cli/memtrain
ldd "$memtrain" | grep -E "libtorch_cuda|libc10_cuda|not found" | tee -a "$log"

# 2. The CUDA tests (they skip without a GPU), and the CPU tests of what they
# exercise (saved-tensor hooks, host weights).
tests_exit=0
for layer in memory execution training; do
  timeout "$(left 90)" build-cuda/tests/runtime/$layer/runtime_${layer}_tests \
    --gtest_filter='Cuda*:SavedOffload*:WeightSwapExecution*:OffloadExecution*' \
    >>"$out/tests.log" 2>&1 || tests_exit=$?
done
say "CUDA tests: exit $tests_exit; $(grep -c '^\[       OK \]' "$out/tests.log") passed," \
  "$(grep -c '^\[  FAILED  \]' "$out/tests.log") failed lines, $(grep -c '^\[  SKIPPED \]' "$out/tests.log") skipped"

# 3. The module, built for this machine's Python and torch.
PYTHONPATH=build-cuda/python timeout 60 "$python" -c '
import torch, memtrain
print("import memtrain:", memtrain.__file__, "torch", torch.__version__, "planners", len(memtrain.planner_names()))
' 2>&1 | tee -a "$log"
say "module import: exit ${PIPESTATUS[0]}"

# 4. The module on CUDA: a budget on a model whose blocks take a mask, exact
# and kept, alone and as FSDP2's one rank (tests/python/test_cuda.py), with
# pytest from the carried wheels when this Python has none.
pytest_path=
if ! "$python" -c 'import pytest' 2>/dev/null && [[ -d ${gpu_carry:-.gpu}/wheels ]]; then
  pytest_path=/tmp/memtrain-pytest
  "$python" -m pip install -q --no-index --find-links "${gpu_carry:-.gpu}/wheels" --target "$pytest_path" pytest \
    >>"$out/python-tests.log" 2>&1
fi
PYTHONPATH=build-cuda/python${pytest_path:+:$pytest_path} timeout "$(left 60)" "$python" -m pytest -q \
  -p no:cacheprovider tests/python/test_cuda.py >>"$out/python-tests.log" 2>&1
say "Python CUDA tests: exit $?; $(tail -1 "$out/python-tests.log")"

# 5. The whole step at a real vocabulary: a GPT of GPT-2 small's shape,
# vocabulary 32000, lengths 128-1024, the loss in the loop, under memtrain at
# 100/50/30% beside every-k checkpointing and torch.compile's budget
# (bench/gpu_whole_step.py); a dry run takes a small size on the CPU.
shape=()
[[ $gpu == 1 ]] || shape=(--device cpu --width 64 --heads 4 --layers 4 --batch 2 --min-length 16 --max-length 64
  --steps 8 --fraction -1)
PYTHONPATH=build-cuda/python:bench timeout "$(left 150)" "$python" bench/gpu_whole_step.py --out "$out/whole-step.md" \
  "${shape[@]}" >>"$out/whole-step.log" 2>&1
say "whole step at a real vocabulary: exit $?"
[[ -f $out/whole-step.md ]] && tee -a "$log" <"$out/whole-step.md"

device=cuda
[[ $gpu == 1 ]] || device=cpu

# 5b. transformers' Trainer on a Llama (8 layers, width 512, vocabulary 32000,
# rows of 32-512 tokens, bf16, 4 micro-batches accumulated, its own AdamW)
# under memtrain at 100/70/50% of the plain run's peak, beside the plain run,
# transformers' gradient checkpointing (alone and with torchtune's chunked
# cross-entropy) and every second layer checkpointed,
# each a Trainer in its own process, taking turns (bench/trainer_bench.py);
# a dry run takes a small Llama on the CPU.
shape=(--device cuda --updates 4 --budgets 100,70,50)
[[ $gpu == 1 ]] || shape=(--device cpu --width 64 --layers 2 --longest 64 --updates 3 --budgets 100,50)
# transformers and accelerate from the carried wheels when this Python has none.
hf_path=
if ! "$python" -c 'import transformers, accelerate' 2>/dev/null && [[ -d ${gpu_carry:-.gpu}/hf-wheels ]]; then
  hf_path=/tmp/memtrain-hf
  "$python" -m pip install -q --no-deps --no-index --target "$hf_path" "${gpu_carry:-.gpu}"/hf-wheels/*.whl \
    >"$out/trainer.log" 2>&1
fi
# torchtune's chunked cross-entropy, a peer's loss, from its carried wheel
# where the machine cannot download it (bench/peers_bench.py looks there).
if compgen -G "${gpu_carry:-.gpu}/torchtune/torchtune-*.whl" >/dev/null; then
  mkdir -p "$HOME/.cache/memtrain/torchtune" && cp "${gpu_carry:-.gpu}"/torchtune/torchtune-*.whl "$HOME/.cache/memtrain/torchtune/"
fi
PYTHONPATH=build-cuda/python:bench${hf_path:+:$hf_path} timeout "$(left 60)" "$python" bench/trainer_bench.py --no-publish "${shape[@]}" \
  >"$out/trainer.md" 2>>"$out/trainer.log"
say "the Trainer under memtrain: exit $?"
tee -a "$log" <"$out/trainer.md"

# 6. Steps at the device's speed: the tagger at batch 32 and 256 under none
# and under mimose at 50%, beside the plain LibTorch loop over the same model
# and batches, taking turns (bench/step_speed.sh); a dry run takes 3 steps.
speed_steps=${MEMTRAIN_GPU_SPEED_STEPS:-40}
[[ $gpu == 1 ]] || speed_steps=3
MEMTRAIN_PYTHON=$python timeout "$(left 40)" bench/step_speed.sh build-cuda "$device" "$speed_steps" "$out/speed" \
  >/dev/null 2>&1
say "steps at the device's speed: exit $?"
[[ -f $out/speed/speed.md ]] && tee -a "$log" <"$out/speed/speed.md"

# 7. Headline: the tagger at batch 32 under mimose at 50% on CUDA.
timeout "$(left 10)" "$memtrain" train --device "$device" --planner mimose --budget 50% \
  --steps "${MEMTRAIN_GPU_STEPS:-60}" --quiet --json "$out/tagger-mimose-50.json" >>"$log" 2>&1
say "tagger mimose 50% on $device: exit $?"
"$python" - "$out/tagger-mimose-50.json" <<'EOF' 2>&1 | tee -a "$log"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no report: {e}")
s = r["summary"]
keys = ["steps", "mean_step_seconds", "max_peak_bytes", "violations", "retries", "median_prediction_error",
        "max_prediction_error", "median_time_prediction_error"]
print("headline: device", r["device"], "budget_bytes", r["budget_bytes"], ", ".join(f"{k} {s[k]}" for k in keys))
EOF
say "done in $(($(date +%s) - start)) s of $total"
