#!/usr/bin/env python3
"""memtrain.Module on a language model of GPT-2 small's shape at a real
vocabulary, the loss computed by the loop in float32, the length changing
every micro-batch, gradients accumulated over --accumulate micro-batches:
the plain model, memtrain's planners at N% of the plain peak and at the
least budget memtrain names, every-k checkpointing and torch.compile's
activation_memory_budget, one after another in one process. Each row: completed or not (with the error), the
steps whose peak went over the budget in allocated bytes and in reserved
bytes, and the mean seconds per step after the first `--collect-steps`.

On a GPU it is a phase of scripts/gpu-check.sh; on the CPU (no GPU, or
--device cpu) it runs the same contenders at a small size, as a dry run,
with memory counted by memtrain's allocator (reserved = allocated there).

    python bench/gpu_whole_step.py --out OUT.md [--device cuda] [--width 768 --layers 12 ...]
"""

import argparse
import gc
import random
import sys
import time

import torch
import torch.nn.functional as F

import memtrain
from peers_bench import NanoGPT, checkpoint_blocks


class Memory:
    """Allocated and reserved bytes of the device, and their peaks, as
    memtrain.memory_stats keeps them: memtrain resets the caching allocator's
    peak statistics as it measures each operation, and keeps the peaks it
    reset, so torch.cuda.max_memory_allocated alone would miss them."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.name = str(device)

    def reset(self):
        if self.cuda:
            torch.cuda.synchronize()
        memtrain.reset_peak(self.name)

    def peaks(self):
        if self.cuda:
            torch.cuda.synchronize()
        stats = memtrain.memory_stats(self.name)
        return stats["peak_bytes"], stats["reserved_peak_bytes"]

    def release(self):
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()


def batches(args, device):
    rng = random.Random(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    lengths = [args.max_length] + [rng.randint(args.min_length, args.max_length)
                                   for _ in range(args.steps * args.accumulate - 1)]
    ids = [torch.randint(0, args.vocab, (args.batch, n + 1), generator=g).to(device) for n in lengths]
    return [ids[i:i + args.accumulate] for i in range(0, len(ids), args.accumulate)]


def lm_loss(logits, ids):
    return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())


def make(args, device):
    torch.manual_seed(args.seed)
    return NanoGPT(args.vocab, args.width, args.heads, args.layers, positions=args.max_length + 1).to(device)


def contender(name, args, device, data, memory, budget, setup):
    """Trains a fresh model with `setup(model, optimizer) -> forward` over
    `data`; the row of the table."""
    memory.release()
    row = {"name": name, "done": "yes", "over_allocated": 0, "over_reserved": 0, "times": []}
    model = make(args, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    try:
        forward = setup(model, opt)
    except Exception as e:  # noqa: BLE001: a refusal (Infeasible) is this row's outcome
        row["done"] = f"refused: {type(e).__name__}: {str(e).splitlines()[0][:140]}"
        data = []
    try:
        for i, update in enumerate(data):
            memory.reset()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            for ids in update:  # the micro-batches, their gradients accumulated
                (lm_loss(forward(ids[:, :-1]), ids) / len(update)).backward()
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            row["times"].append(time.perf_counter() - t0)
            allocated, reserved = memory.peaks()
            row["over_allocated"] += budget is not None and allocated > budget
            row["over_reserved"] += budget is not None and reserved > budget
            row["peak"] = max(row.get("peak", 0), allocated)
    except Exception as e:  # noqa: BLE001: the row says what failed
        row["done"] = f"no, step {len(row['times']) + 1}: {type(e).__name__}: {str(e).splitlines()[0][:140]}"
    memory.release()
    print(f"gpu_whole_step: {name}: {row['done']}", file=sys.stderr, flush=True)
    return row


def memtrain_setup(budget, planner, sample):
    def setup(model, opt):
        # The loop runs in float32 and lets the logits go before its
        # backward: the least is measured for it alone.
        return memtrain.Module(model, budget=budget, blocks=model.blocks, planner=planner, sample=sample,
                               optimizer=opt, autocast=False, keeps_output=False)
    return setup


def least_of(args, device, memory, planner, sample):
    """memtrain's least budget for this loop: what it names refusing one byte."""
    memory.release()
    model = make(args, device)
    try:
        memtrain_setup(1, planner, sample)(model, torch.optim.Adam(model.parameters(), lr=1e-4))
    except memtrain.Infeasible as e:
        return e.min_bytes
    finally:
        del model
        memory.release()
    raise RuntimeError("memtrain accepted a budget of one byte")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--min-length", type=int, default=128)
    p.add_argument("--max-length", type=int, default=1024)
    p.add_argument("--steps", type=int, default=12, help="updates, each of --accumulate micro-batches")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches whose gradients each update sums")
    p.add_argument("--collect-steps", type=int, default=4, help="steps left out of the mean time")
    p.add_argument("--budgets", default="100,50,30,least",
                   help="percent of the plain model's peak, or least: the least memtrain names")
    p.add_argument("--planners", default="mimose,optimal")
    p.add_argument("--ks", default="1,2,4", help="every-k checkpointing, for these k")
    p.add_argument("--fraction", type=float, default=0.5,
                   help="torch.compile's activation_memory_budget (at the longest length only: compiling every "
                        "length takes minutes); negative: leave torch.compile out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    device = torch.device(args.device)
    memory = Memory(device)
    data = batches(args, device)
    sample = data[0][0][:, :-1]

    rows = [contender("plain", args, device, data, memory, None, lambda model, opt: model)]
    reference = rows[0].get("peak", 0)
    for k in (int(k) for k in args.ks.split(",") if k):
        def every_k(model, opt, k=k):
            checkpoint_blocks(model, lambda i: i % k == 0)
            return model
        rows.append(contender(f"every_k {k}", args, device, data, memory, None, every_k))
    if args.fraction >= 0:
        def compiled(model, opt):
            import torch._functorch.config as functorch_config
            functorch_config.activation_memory_budget = args.fraction
            return torch.compile(model, dynamic=False)
        rows.append(contender(f"torch.compile budget {args.fraction:g} (length {args.max_length} only)", args,
                              device, [[data[0][0]] * args.accumulate] * len(data), memory, None, compiled))
    for share in (b.strip() for b in args.budgets.split(",") if b.strip()):
        for planner in args.planners.split(","):
            if share == "least":
                budget, label = least_of(args, device, memory, planner, sample), "its least"
            else:
                budget, label = reference * int(share) // 100, f"{share}%"
            rows.append(contender(f"memtrain {planner} {label}", args, device, data, memory, budget,
                                  memtrain_setup(budget, planner, sample)))
            rows[-1]["budget"] = budget

    def mean(r):
        timed = r["times"][args.collect_steps:] or r["times"]
        return sum(timed) / len(timed) if timed else float("nan")

    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu (counted by memtrain)"
    lines = [f"## Whole step at a real vocabulary on {name}\n",
             f"`python bench/gpu_whole_step.py {' '.join(sys.argv[1:])}` (torch {torch.__version__}). A GPT of "
             f"{args.layers} blocks, width {args.width}, {args.heads} heads, vocabulary {args.vocab}, dropout 0.1, "
             f"batch {args.batch}, lengths {args.min_length}-{args.max_length} changing every micro-batch, "
             f"{args.accumulate} micro-batch(es) per update, the loss computed by the loop, Adam. Plain peak {reference / 2**20:.1f} MiB (allocated). Budgets are of it; "
             "a step is over when its peak allocated (or reserved) bytes exceed the budget.\n",
             "| contender | budget | completed | over (allocated) | over (reserved) | s/step | / plain | peak |",
             "|---|---|---|---|---|---|---|---|"]
    plain = mean(rows[0])
    for r in rows:
        budget = f"{r['budget'] / 2**20:.1f} MiB" if "budget" in r else ""
        timing = f"{mean(r):.4f} | {mean(r) / plain:.2f}x" if r["times"] else " | "
        peak = f"{r['peak'] / 2**20:.1f} MiB" if "peak" in r else ""
        lines.append(f"| {r['name']} | {budget} | {r['done']} | {r['over_allocated']} | {r['over_reserved']} | "
                     f"{timing} | {peak} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
