#!/usr/bin/env python3
"""Checkpoints as people use them: `memtrain train` killed with SIGKILL at a
random step, then resumed with the same flags, in every output mode. Each
resumed run must end with the parameter digest of a run never interrupted.

Modes: --quiet (no progress line), a terminal (a pseudo-terminal: the
progress bar redraws in place) and a pipe (the progress bar as a log).

    python3 bench/resume_bench.py --memtrain build/src/cli/memtrain --trials 5

Prints one line per trial and a summary; exits 1 when any digest differs.
"""

import argparse
import json
import os
import pty
import random
import select
import signal
import subprocess
import sys
import tempfile
import time


def run_to_end(cmd, mode, timeout=600):
    """Runs `cmd` to its end in `mode`; returns (status, output)."""
    if mode == "terminal":
        leader, follower = pty.openpty()
        proc = subprocess.Popen(cmd, stdin=follower, stdout=follower, stderr=follower, close_fds=True)
        os.close(follower)
        out = b""
        deadline = time.time() + timeout
        while time.time() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the terminal closed: the process ended
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        os.close(leader)
        return proc.wait(), out.decode(errors="replace")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stderr + result.stdout


def start(cmd, mode, log):
    """Starts `cmd` in `mode` (output to `log`, or to a pseudo-terminal drained into it)."""
    if mode == "terminal":
        leader, follower = pty.openpty()
        proc = subprocess.Popen(cmd, stdin=follower, stdout=follower, stderr=follower, close_fds=True)
        os.close(follower)
        return proc, leader
    with open(log, "w") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT), None


def steps_in(checkpoint_dir):
    """Whether a checkpoint is in place yet."""
    return os.path.exists(os.path.join(checkpoint_dir, "memtrain-rank0.ckpt"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memtrain", default="build/src/cli/memtrain")
    p.add_argument("--trials", type=int, default=5, help="kills per output mode")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--modes", default="quiet,terminal,pipe")
    p.add_argument("--seed", type=int, default=1, help="of the random kill times")
    args = p.parse_args()
    if not os.access(args.memtrain, os.X_OK):
        sys.exit(f"resume_bench: --memtrain {args.memtrain}: not an executable")
    modes = args.modes.split(",")
    for m in modes:
        if m not in ("quiet", "terminal", "pipe"):
            sys.exit(f"resume_bench: --modes: unknown mode {m!r}; expected quiet, terminal or pipe")
    rng = random.Random(args.seed)
    flags = ["--model", "transformer", "--layers", "2", "--width", "64", "--heads", "4", "--batch", "8",
             "--budget", "75%", "--threads", "1", "--seed", "1"]

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        whole = os.path.join(tmp, "whole.json")
        status, out = run_to_end([args.memtrain, "train"] + flags + ["--steps", str(args.steps), "--quiet",
                                                                      "--json", whole], "pipe")
        if status != 0:
            sys.exit(f"resume_bench: the uninterrupted run exited {status}:\n{out}")
        with open(whole) as f:
            expected = json.load(f)["parameter_digest"]
        t0 = time.time()
        status, _ = run_to_end([args.memtrain, "train"] + flags + ["--steps", str(args.steps), "--quiet"], "pipe")
        run_seconds = time.time() - t0
        print(f"uninterrupted: {args.steps} steps in {run_seconds:.1f} s, digest {expected}")
        for mode in modes:
            for trial in range(args.trials):
                ckpt = os.path.join(tmp, f"{mode}-{trial}")
                quiet = ["--quiet"] if mode == "quiet" else []
                cmd = [args.memtrain, "train"] + flags + ["--steps", str(args.steps), "--checkpoint-dir", ckpt,
                                                          "--checkpoint-every", "1"] + quiet
                proc, leader = start(cmd, mode, os.path.join(tmp, "log"))
                while not steps_in(ckpt) and proc.poll() is None:
                    time.sleep(0.05)
                time.sleep(rng.uniform(0, 0.8 * run_seconds))
                if leader is not None:
                    # Keep the terminal drained so the run never blocks on it.
                    while select.select([leader], [], [], 0)[0]:
                        try:
                            os.read(leader, 65536)
                        except OSError:
                            break
                ended_before = proc.poll() is not None
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                if leader is not None:
                    os.close(leader)
                resumed_json = os.path.join(ckpt, "resumed.json")
                status, out = run_to_end(cmd + ["--resume", "--json", resumed_json], mode)
                at = next((line for line in out.splitlines() if "resumed from" in line), "")
                digest = None
                if status == 0:
                    with open(resumed_json) as f:
                        digest = json.load(f)["parameter_digest"]
                ok = status == 0 and digest == expected
                failures += not ok
                where = at.split("after ")[-1].strip() if at else ("ended before the kill" if ended_before else "?")
                print(f"{mode:8s} trial {trial + 1}: killed, {where}; resumed: exit {status}, digest "
                      f"{digest} {'equal' if ok else 'DIFFERS'}")
                if status != 0:
                    print("  " + out.strip().replace("\n", "\n  ")[-2000:])
    total = args.trials * len(modes)
    print(f"{total - failures} of {total} resumed runs end with the uninterrupted run's digest")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
