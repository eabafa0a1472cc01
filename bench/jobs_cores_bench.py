#!/usr/bin/env python3
"""A group of jobs with default flags, whose jobs share the cores out, side by
side with the same group whose every job takes every core (what each
`memtrain train` does alone). The two take turns (A, B, B, A, ...), so drift
weighs on both alike. Reports each run's makespan, the spread of each
configuration over its runs, and the ratio of their medians.

    python3 bench/jobs_cores_bench.py --memtrain build/src/cli/memtrain --rounds 4
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from side_by_side import abba_order


def run(memtrain, jobs, budget, policy, report):
    cmd = [memtrain, "jobs", "--budget", budget, "--policy", policy, "--json", report, "--quiet"]
    for j in jobs:
        cmd += ["--job", j]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"jobs_cores_bench: {' '.join(cmd)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    with open(report) as f:
        r = json.load(f)
    return r["summary"]["makespan_seconds"], [j.get("threads") for j in r["jobs"]]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memtrain", default="build/src/cli/memtrain")
    p.add_argument("--rounds", type=int, default=4, help="runs of each configuration")
    p.add_argument("--budget", default="70%")
    p.add_argument("--policy", default="static")
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    if not os.access(args.memtrain, os.X_OK):
        sys.exit(f"jobs_cores_bench: --memtrain {args.memtrain}: not an executable")
    if args.rounds < 1:
        sys.exit(f"jobs_cores_bench: --rounds {args.rounds}: expected at least 1")
    cores = os.cpu_count() or 1
    base = [f"--steps {args.steps} --batch 8", f"--model resnet --steps {args.steps} --batch 8",
            f"--steps {args.steps} --batch 8 --seed 2"]
    configs = {"shared (default)": base, "every job every core": [j + f" --threads {cores}" for j in base]}
    times = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name in abba_order(configs, r):
                seconds, threads = run(args.memtrain, configs[name], args.budget, args.policy,
                                       os.path.join(tmp, "r.json"))
                times[name].append(seconds)
                print(f"round {r + 1}, {name}: makespan {seconds:.2f} s, threads per job {threads}")
    print(f"\n{len(base)} jobs, {cores} cores, policy {args.policy}, budget {args.budget}, {args.steps} steps each")
    for name, t in times.items():
        print(f"{name}: median makespan {statistics.median(t):.2f} s, spread (max/min) {max(t) / min(t):.3f}x")
    a, b = (statistics.median(times[n]) for n in configs)
    print(f"every job every core / shared: {b / a:.2f}x the makespan")


if __name__ == "__main__":
    main()
