#!/usr/bin/env python3
"""Two memtrain builds side by side: the same `memtrain train` (or, with
--jobs, the same `memtrain jobs` group) run by each, in turns (A B, B A, A B,
...), so both see the same machine load. Reports each build's median time per
budget, the ratio, its peak and its budget. Used to compare memtrain on two
LibTorch versions, or a change against the source before it:

    python3 bench/builds_bench.py --build 2.11=build/src/cli/memtrain \\
        --build 1.13=/tmp/old113/build/src/cli/memtrain --budgets 100%,50% --rounds 3
    python3 bench/builds_bench.py --build after=build/src/cli/memtrain \\
        --build before=OLD/build/src/cli/memtrain --jobs arbiter --budgets 100%,60% --rounds 2

Extra arguments after `--` go to every `memtrain train` (default: the
tagger at batch 32, 40 steps, seed 1), or with --jobs to every job (default:
20 steps at batch 8). The group of --jobs is jobs_bench's: the Brown tagger,
the Fashion-MNIST ResNet and the GPT, each with default flags.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from side_by_side import abba_order

JOB_MODELS = ([], ["--model", "resnet"], ["--model", "gpt"])


def run(binary, budget, policy, extra, tmp):
    """One run's report: `memtrain train`, or with a policy `memtrain jobs`."""
    report = os.path.join(tmp, "r.json")
    if policy is None:
        cmd = [binary, "train", "--budget", budget, "--quiet", "--json", report] + extra
    else:
        work = tempfile.mkdtemp(dir=tmp)
        cmd = [binary, "jobs", "--budget", budget, "--policy", policy, "--quiet", "--json", report, "--work-dir", work]
        for model in JOB_MODELS:
            cmd += ["--job", " ".join(extra + model)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"builds_bench: {' '.join(cmd)} exited {result.returncode}:\n{result.stderr}")
    with open(report) as f:
        return json.load(f)


def figures(report, policy):
    """(seconds, peak, budget, violations, last column) of one run: the mean
    step and the retries of a train run; a group's makespan, its most live
    bytes at once and the jobs that completed."""
    s = report["summary"]
    if policy is None:
        return s["mean_step_seconds"], s["max_peak_bytes"], report["budget_bytes"], s["violations"], s["retries"]
    completed = sum(j["completed"] for j in report["jobs"])
    return (s["makespan_seconds"], s["max_total_live_bytes"], report["budget_bytes"], s["violations"],
            f"{completed} of {len(report['jobs'])}")


def builds_of(given):
    builds = []
    for b in given:
        label, sep, path = b.partition("=")
        if not sep or not os.access(path, os.X_OK):
            sys.exit(f"builds_bench: --build {b!r}: expected LABEL=PATH to an executable memtrain")
        builds.append((label, path))
    if len(builds) < 2:
        sys.exit("builds_bench: give at least two --build LABEL=PATH")
    return builds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="append", required=True, metavar="LABEL=PATH",
                        help="a memtrain binary and the label its rows get; give two or more")
    parser.add_argument("--budgets", default="100%,50%")
    parser.add_argument("--rounds", type=int, default=3, help="turns each build takes per budget")
    parser.add_argument("--jobs", metavar="POLICY",
                        help="run jobs_bench's group of three jobs under this policy (static, proportional, fcfs, "
                             "arbiter, tensile) instead of one `memtrain train`")
    parser.add_argument("extra", nargs="*", help="arguments for memtrain train (or each job), after --")
    args = parser.parse_args()
    builds = builds_of(args.build)
    if args.rounds < 1:
        sys.exit(f"builds_bench: --rounds {args.rounds}: expected at least 1")
    default = ["--steps", "40", "--seed", "1"] if args.jobs is None else ["--steps", "20", "--batch", "8"]
    extra = args.extra or default

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for budget in args.budgets.split(","):
            times = {label: [] for label, _ in builds}
            last = {}
            for r in range(args.rounds):
                for label, path in abba_order(builds, r):
                    last[label] = figures(run(path, budget, args.jobs, extra, tmp), args.jobs)
                    times[label].append(last[label][0])
            base = statistics.median(times[builds[0][0]])
            for label, _ in builds:
                median = statistics.median(times[label])
                rows.append((budget, label, median, median / base) + last[label][1:])
                print(f"builds_bench: {budget} {label}: {median:.4f} s (runs {', '.join(f'{t:.4f}' for t in times[label])})",
                      file=sys.stderr)

    what = "mean step times" if args.jobs is None else "makespans"
    print(f"`python3 bench/builds_bench.py {' '.join(sys.argv[1:])}`, {args.rounds} turns each, "
          f"median of the runs' {what}\n")
    if args.jobs is None:
        print(f"| budget | build | step | against {builds[0][0]} | max peak | budget | violations | retries |")
    else:
        print(f"| budget | build | makespan | against {builds[0][0]} | most live at once | budget | violations | "
              "completed |")
    print("|---|---|---|---|---|---|---|---|")
    for budget, label, median, ratio, peak, limit, violations, last in rows:
        print(f"| {budget} | {label} | {median:.4f} s | {ratio:.2f}x | {peak / 2**20:.1f} MiB | {limit / 2**20:.1f} MiB "
              f"| {violations} | {last} |")


if __name__ == "__main__":
    main()
