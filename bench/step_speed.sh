#!/usr/bin/env bash
# memtrain train's steps against the plain LibTorch loop over the same model
# and batches (bench/plain_loop_bench.cpp): the tagger at batch 32 and 256,
# under none (without collection steps, which checkpoint everything to teach
# a predictor none does not use: the executor's cost alone) and under mimose
# at 50%, taking turns, `rounds` times. Writes OUTDIR/speed.md (a table per
# round) and the runs' records beside it.
#
#   bench/step_speed.sh BUILD_DIR DEVICE STEPS OUTDIR [ROUNDS]
#   bench/step_speed.sh build cpu 20 /tmp/speed 2
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: bench/step_speed.sh BUILD_DIR DEVICE STEPS OUTDIR [ROUNDS]}
device=${2:?device}
steps=${3:?steps}
out=${4:?outdir}
rounds=${5:-1}
python=${MEMTRAIN_PYTHON:-python3}
mkdir -p "$out"
: >"$out/speed.md"
for round in $(seq 1 "$rounds"); do
  for batch in 32 256; do
    "$build/bench/plain_loop_bench" --device "$device" --batch "$batch" --steps "$steps" \
      >"$out/plain-$batch-$round.txt" 2>>"$out/speed.log"
    for planner in none mimose; do
      run=(--budget 100% --collect-steps 0)
      [[ $planner == mimose ]] && run=(--budget 50%)
      "$build/src/cli/memtrain" train --device "$device" --planner "$planner" "${run[@]}" --batch "$batch" \
        --steps "$steps" --quiet --json "$out/$planner-$batch-$round.json" >>"$out/speed.log" 2>&1
    done
  done
  "$python" - "$out" "$round" <<'EOF' >>"$out/speed.md" 2>&1
import json, re, sys
out, round_ = sys.argv[1], sys.argv[2]
print(f"\nRound {round_}:\n")
print("| batch | plain LibTorch loop | none | none / plain | mimose 50% | mimose / plain | waits per planned step | mimose's median time prediction error |")
print("|---|---|---|---|---|---|---|---|")
for batch in (32, 256):
    try:
        text = open(f"{out}/plain-{batch}-{round_}.txt").read()
        plain = float(re.search(r"mean_step_seconds (\S+)", text).group(1))
        none = json.load(open(f"{out}/none-{batch}-{round_}.json"))
        mimose = json.load(open(f"{out}/mimose-{batch}-{round_}.json"))
    except Exception as e:
        print(f"| {batch} | no result: {e} |")
        continue
    n, m = none["summary"]["mean_step_seconds"], mimose["summary"]["mean_step_seconds"]
    waits = sorted({r["synchronizations"] for run in (none, mimose) for r in run["steps"]
                    if r["plan"] != "collect" and r["retries"] == 0})
    print(f"| {batch} | {plain:.4f} s | {n:.4f} s | {n / plain:.3f} | {m:.4f} s | {m / plain:.3f} | "
          f"{', '.join(map(str, waits))} | {100 * mimose['summary']['median_time_prediction_error']:.1f}% |")
EOF
done
cat "$out/speed.md"
