#!/usr/bin/env python3
"""Two memtrain builds side by side: the same `memtrain train` run by each,
in turns (A B, B A, A B, ...), so both see the same machine load. Reports each
build's mean step time per budget, the ratio, and what each says of itself
(its LibTorch). Used to compare memtrain on two LibTorch versions:

    python3 bench/builds_bench.py --build 2.11=build/src/cli/memtrain \\
        --build 1.13=/tmp/old113/build/src/cli/memtrain --budgets 100%,50% --rounds 3

Extra arguments after `--` go to every `memtrain train` (default: the
tagger at batch 32, 40 steps, seed 1).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from side_by_side import abba_order


def run(binary, budget, extra, report):
    cmd = [binary, "train", "--budget", budget, "--quiet", "--json", report] + extra
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"builds_bench: {' '.join(cmd)} exited {result.returncode}:\n{result.stderr}")
    with open(report) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="append", required=True, metavar="LABEL=PATH",
                        help="a memtrain binary and the label its rows get; give two or more")
    parser.add_argument("--budgets", default="100%,50%")
    parser.add_argument("--rounds", type=int, default=3, help="turns each build takes per budget")
    parser.add_argument("extra", nargs="*", help="arguments for memtrain train, after --")
    args = parser.parse_args()
    builds = []
    for b in args.build:
        label, sep, path = b.partition("=")
        if not sep or not os.access(path, os.X_OK):
            sys.exit(f"builds_bench: --build {b!r}: expected LABEL=PATH to an executable memtrain")
        builds.append((label, path))
    if len(builds) < 2:
        sys.exit("builds_bench: give at least two --build LABEL=PATH")
    if args.rounds < 1:
        sys.exit(f"builds_bench: --rounds {args.rounds}: expected at least 1")
    extra = args.extra or ["--steps", "40", "--seed", "1"]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for budget in args.budgets.split(","):
            times = {label: [] for label, _ in builds}
            last = {}
            for r in range(args.rounds):
                for label, path in abba_order(builds, r):
                    report = run(path, budget, extra, os.path.join(tmp, "r.json"))
                    times[label].append(report["summary"]["mean_step_seconds"])
                    last[label] = report
            base = statistics.median(times[builds[0][0]])
            for label, _ in builds:
                s = last[label]["summary"]
                median = statistics.median(times[label])
                rows.append((budget, label, median, median / base, s["max_peak_bytes"], last[label]["budget_bytes"],
                             s["violations"], s["retries"]))
                print(f"builds_bench: {budget} {label}: {median:.4f} s/step (runs {', '.join(f'{t:.4f}' for t in times[label])})",
                      file=sys.stderr)

    print(f"`python3 bench/builds_bench.py {' '.join(sys.argv[1:])}`, {args.rounds} turns each, "
          f"median of the runs' mean step times\n")
    print(f"| budget | build | step | against {builds[0][0]} | max peak | budget | violations | retries |")
    print("|---|---|---|---|---|---|---|---|")
    for budget, label, median, ratio, peak, limit, violations, retries in rows:
        print(f"| {budget} | {label} | {median:.4f} s | {ratio:.2f}x | {peak / 2**20:.1f} MiB | {limit / 2**20:.1f} MiB "
              f"| {violations} | {retries} |")


if __name__ == "__main__":
    main()
