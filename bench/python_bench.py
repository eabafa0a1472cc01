#!/usr/bin/env python3
"""memtrain.Module against torch.utils.checkpoint_sequential on a
Transformer written in plain PyTorch, trained on Brown sentences whose
lengths change every step.

For each budget (N% of the plain model's peak at the longest batch):
- memtrain.Module trains --steps steps on the batches and seeds of the
  plain run; every step's gradients must be bit-equal to the plain run's,
  and no step's measured peak may exceed the budget;
- every checkpoint_sequential segment count is measured at the longest batch;
  the fastest one whose peak fits the budget is its rival.
Memory is what memtrain's counting allocator sees: every tensor of the
process (weights, gradients, Adam's state, the batch, activations). So each
contender runs in a process of its own; the processes take turns, step by
step, so that their times are measured side by side.

    scripts/bench.sh python            # or: /opt/memtrain/venv/bin/python bench/python_bench.py

With --build LABEL=PATH twice or more, each build's memtrain package (PATH
holds it, as PYTHONPATH) trains as a contender of its own: two builds side
by side, on the same batches and turns.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

import memtrain
from side_by_side import Contender, abba_order, builds_of, digest, publish, with_pythonpath

# The tests' plain-PyTorch Transformer (dropout 0.1), not memtrain's own models.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from models import transformer  # noqa: E402


def make_model(args, words, tags):
    return transformer(vocab=words, width=args.width, heads=args.heads, layers=args.layers, classes=tags,
                       seed=args.seed)


def loss_of(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def batches(args):
    data = memtrain.BrownBatches(args.batch, seed=args.seed, vocabulary=args.vocab)
    longest = data.largest()
    return data, longest, [data.next() for _ in range(args.steps)]


class Training:
    """Trains a model with Adam, one step per call, through `step(x, y)`
    (forward and backward). Records each step's seconds, peak bytes (forward,
    backward and update) and gradient digest."""

    def __init__(self, model, step):
        self.model, self.step = model, step
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.times, self.peaks, self.grads = [], [], []

    def __call__(self, index, x, y):
        torch.manual_seed(1000 + index)  # the same draws for every contender at a step
        memtrain.reset_peak()
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        self.step(x, y)
        t1 = time.perf_counter()
        self.grads.append(digest(p.grad for p in self.model.parameters()))
        t2 = time.perf_counter()
        self.opt.step()
        self.times.append(t1 - t0 + time.perf_counter() - t2)
        self.peaks.append(memtrain.memory_stats()["peak_bytes"])


def plain_step(model):
    def step(x, y):
        loss_of(model(x), y).backward()
    return step


def checkpointed_step(model, segments):
    """checkpoint_sequential over the stages after the embedding, without
    reentrant autograd (what PyTorch 2.x recommends and will require be
    named)."""
    stages = list(model.children())
    rest = nn.Sequential(*stages[1:])

    def step(x, y):
        loss_of(checkpoint_sequential(rest, segments, stages[0](x), use_reentrant=False), y).backward()
    return step


def run_role(args):
    """One contender in this process. `reference` measures and prints at
    once; the others prepare, print "ready", then run step i on each "step i"
    line from stdin (answering "done"), and print their record as JSON on "end"."""
    data, longest, steps = batches(args)
    model = make_model(args, data.words, data.tags)
    record = {}
    if args.role == "reference":
        # The plain training step at the longest batch, Adam's state included.
        t = Training(model, plain_step(model))
        for i in range(3):
            t(i, *longest)
        print(json.dumps({"reference": max(t.peaks)}))
        return
    if args.role == "plain":
        t = Training(model, plain_step(model))
    elif args.role == "checkpoint":
        # Its peak at the longest batch: the most of two steps, the second with Adam's state.
        t = Training(model, checkpointed_step(model, args.segments))
        t(-1, *longest)
        t(-2, *longest)
        record["peak"] = max(t.peaks)
        t.times, t.peaks, t.grads = [], [], []
    else:
        m = t = None
        try:
            m = memtrain.Module(model, budget=args.budget_bytes, planner=args.planner, sample=longest[0],
                                keeps_output=False)  # the loop lets the output go before its backward
        except memtrain.Infeasible as e:
            record["least"] = e.min_bytes
        if m is not None:
            plans = record["plans"] = {}
            own = record["own"] = []  # memtrain's own seconds in each step (last_step's overhead_seconds)

            def step(x, y):
                loss_of(m(x), y).backward()
                plans[m.last_step["plan"]] = plans.get(m.last_step["plan"], 0) + 1
                own.append(m.last_step["overhead_seconds"])
            t = Training(m, step)
    print("ready" if t is not None else "idle", flush=True)  # idle: a budget below the least
    for line in sys.stdin:
        words = line.split()
        if words[0] == "end":
            break
        i = int(words[1])
        t(i, *steps[i])
        print("done", flush=True)
    if t is not None:
        record.update({"times": t.times, "peaks": t.peaks, "grads": t.grads, "final": digest(t.model.parameters())})
    print(json.dumps(record), flush=True)


def contender(args, *role, pythonpath=None):
    """One contender's process (side_by_side.Contender), with this run's
    settings; `pythonpath`: where its memtrain package is imported from."""
    common = ["--steps", args.steps, "--checkpoint-steps", args.checkpoint_steps, "--planner", args.planner,
              "--batch", args.batch, "--width", args.width, "--heads", args.heads, "--layers", args.layers,
              "--vocab", args.vocab, "--seed", args.seed, "--collect-steps", args.collect_steps]
    command = [sys.executable, os.path.abspath(__file__)] + [str(a) for a in common + list(role)]
    return Contender(" ".join(str(r) for r in role), command, env=with_pythonpath(pythonpath))


def reference_peak(args):
    # With the same batches alive as every contender: they count too.
    return contender(args, "--role", "reference").record(send_end=False)["reference"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--checkpoint-steps", type=int, default=60, help="steps timed per checkpoint_sequential run")
    p.add_argument("--budgets", default="100,50,30", help="percent of the plain peak at the longest batch")
    p.add_argument("--planner", default="optimal")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--collect-steps", type=int, default=4, help="memtrain.Module's collection steps (its default)")
    p.add_argument("--role", choices=["reference", "plain", "checkpoint", "memtrain"], help=argparse.SUPPRESS)
    p.add_argument("--segments", type=int, help=argparse.SUPPRESS)
    p.add_argument("--budget-bytes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--build", action="append", default=[], metavar="LABEL=PATH",
                   help="a directory holding a memtrain package (as PYTHONPATH), whose Module trains as a contender "
                        "of its own at every budget; twice or more compares builds side by side (default: the "
                        "installed memtrain)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "BENCHMARKS.md"))
    return p.parse_args()


def take_turns(args, reference, percents, timed):
    """Every contender in its own process, taking turns step by step: the
    plain model's record, checkpoint_sequential's per segment count, memtrain's per budget."""
    plain_process = contender(args, "--role", "plain")
    checkpoint_processes = [contender(args, "--role", "checkpoint", "--segments", s)
                            for s in range(1, args.layers + 3)]
    memtrain_processes = [contender(args, "--role", "memtrain", "--budget-bytes", int(reference * p / 100),
                                    pythonpath=path)
                          for p in percents for _, path in args.builds]
    for c in [plain_process] + checkpoint_processes:
        c.expect("ready")
    training = [c for c in memtrain_processes if c.expect("ready", "idle") == "ready"]
    for i in range(args.steps):
        takers = [plain_process] + training + (checkpoint_processes if i in timed else [])
        for c in abba_order(takers, i):
            c.step(i)
        if (i + 1) % 20 == 0:
            print(f"step {i + 1} of {args.steps}", file=sys.stderr, flush=True)
    plain = plain_process.record()
    checkpointed = []
    for segments, c in enumerate(checkpoint_processes, start=1):
        r = c.record()
        r["segments"] = segments
        checkpointed.append(r)
    records = [c.record() for c in memtrain_processes]
    for c in checkpointed:
        print(f"checkpoint_sequential {c['segments']}: peak {c['peak']} bytes, {statistics.mean(c['times']):.4f} s/step",
              file=sys.stderr, flush=True)
    return plain, checkpointed, records


def rows_of(args, reference, percents, plain, checkpointed, records, planned):
    """One row per budget and build: memtrain's record against the plain run, and the fastest fitting checkpoint_sequential."""
    rows = []
    for percent, (build, _) in ((p, b) for p in percents for b in args.builds):
        budget = int(reference * percent / 100)
        r = records.pop(0)
        if "least" in r:
            rows.append({"percent": percent, "budget": budget, "least": r["least"], "build": build})
            print(f"{percent}%: infeasible, least {r['least']} bytes", file=sys.stderr, flush=True)
            continue
        r.update({"percent": percent, "budget": budget, "build": build, "violations": sum(p > budget for p in r["peaks"]),
                  "unequal": sum(g != h for g, h in zip(r["grads"], plain["grads"])),
                  "equal_params": r["final"] == plain["final"]})
        fitting = [c for c in checkpointed if c["peak"] <= budget]
        if fitting:
            r["checkpoint"] = min(fitting, key=lambda c: statistics.mean(c["times"]))
        rows.append(r)
        print(f"{percent}% {build}: {r['violations']} over budget, {r['unequal']} unequal, plans {r['plans']}, "
              f"{statistics.mean(r['times'][planned]):.4f} s/step", file=sys.stderr, flush=True)
    return rows


def build_cell(r):
    """The build a row's memtrain is, where --build names several."""
    return f", {r['build']}" if r["build"] else ""


def checkpoint_cells(r, planned, n):
    """The fastest fitting checkpoint_sequential of row `r`: what, its s/step, memtrain's speed against it."""
    if "checkpoint" not in r:
        return ("none fits", "-", "-")
    c = r["checkpoint"]
    ck_time = statistics.mean(c["times"])
    same = statistics.mean(r["times"][planned][:n])
    medians = statistics.median(c["times"]) / statistics.median(r["times"][planned][:n])
    what = "1 segment (nothing checkpointed)" if c["segments"] == 1 else f"{c['segments']} segments"
    return (f"{what}, peak {c['peak'] / 2**20:.1f} MiB", f"{ck_time:.4f}", f"{ck_time / same:.2f}x (medians {medians:.2f}x)")


def report_lines(args, reference, longest, rows, plain, checkpointed, planned, n):
    cpu = platform.processor() or platform.machine()
    lines = [
        "## memtrain.Module against checkpoint_sequential (Python)\n",
        f"`{' '.join(['/opt/memtrain/venv/bin/python', 'bench/python_bench.py'] + sys.argv[1:])}` ({datetime.date.today()}, {os.cpu_count()} "
        f"cores {cpu}, torch {torch.__version__}, {torch.get_num_threads()} threads). A {args.layers}-block "
        f"Transformer tagger (width {args.width}, {args.heads} heads, dropout 0.1) as a plain `nn.Sequential`, "
        f"Adam, {args.steps} Brown batches of {args.batch} sentences (longest {tuple(longest[0].shape)}), planner "
        f"`{args.planner}`. Budget: N% of the plain model's training-step peak at the longest batch "
        f"({reference / 2**20:.1f} MiB: weights, gradients, Adam's state, batch, activations; everything in the "
        "process counted). Each contender trains in a process of its own, so only its own tensors count against its "
        "budget; the processes take turns step by step, so machine noise falls on all of them alike. A step's peak covers its forward, backward "
        "and Adam update. Gradients are compared with the plain run's, step by step, by SHA-256 of their bytes. "
        "Times are means over the steps after memtrain's collection steps (the last column also gives the ratio of medians). memtrain's own: its time in its steps outside the blocks' runs (its block calls and backward nodes less the operations they ran, planning included: `last_step['overhead_seconds']`), per step and as a share of its step. The checkpoint_sequential column is the "
        "fastest segment count whose peak at the longest batch fits the budget, timed on the first "
        f"{n} of those steps; the last column compares it with memtrain on the same {n} steps.\n",
        "| budget | steps over budget | steps with unequal gradients | final parameters equal | memtrain plans "
        "| plain s/step | memtrain s/step | memtrain / plain | memtrain's own | fastest fitting checkpoint_sequential "
        "| its s/step | memtrain's speed / its |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    plain_time = statistics.mean(plain["times"][planned])
    for r in rows:
        if "least" in r:
            lines.append(f"| {r['percent']}% ({r['budget'] / 2**20:.1f} MiB){build_cell(r)} | below the least budget of "
                         f"`{args.planner}`, {r['least'] / 2**20:.1f} MiB | | | | | | | | | | |")
            continue
        mine = statistics.mean(r["times"][planned])
        own = statistics.mean(r["own"][planned])
        plans = ", ".join(f"{k} {v}" for k, v in sorted(r["plans"].items()))
        ck = checkpoint_cells(r, planned, n)
        lines.append(f"| {r['percent']}% ({r['budget'] / 2**20:.1f} MiB){build_cell(r)} | {r['violations']} / {args.steps} | "
                     f"{r['unequal']} | {'yes' if r['equal_params'] else 'no'} | {plans} | {plain_time:.4f} | "
                     f"{mine:.4f} | {mine / plain_time:.3f} | {1e3 * own:.2f} ms ({own / mine:.1%}) | {ck[0]} | {ck[1]} | "
                     f"{ck[2]} |")
    lines += ["", "checkpoint_sequential, every segment count (peak at the longest batch, mean s/step):", "",
              "| segments | peak | s/step |", "|---|---|---|"]
    for c in checkpointed:
        lines.append(f"| {c['segments']} | {c['peak'] / 2**20:.1f} MiB | {statistics.mean(c['times']):.4f} |")
    return lines


def main():
    args = parse_args()
    if args.role:
        run_role(args)
        return
    args.builds = builds_of(args.build, "python_bench")
    _, longest, _ = batches(args)
    planned = slice(args.collect_steps, None)  # collection steps measure every stage, whatever the budget
    timed = range(args.steps)[planned][:args.checkpoint_steps]
    n = len(timed)
    reference = reference_peak(args)
    percents = [int(b) for b in args.budgets.split(",")]
    plain, checkpointed, records = take_turns(args, reference, percents, timed)
    rows = rows_of(args, reference, percents, plain, checkpointed, records, planned)
    lines = report_lines(args, reference, longest, rows, plain, checkpointed, planned, n)
    publish("python_bench", "\n".join(lines) + "\n", args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
