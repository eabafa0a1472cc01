#!/usr/bin/env python3
"""memtrain.Module under FSDP2 beside what FSDP2's users do instead, on
transformers' Llama (random weights from its configuration class) with
every decoder layer and the root `fully_shard`-ed, over Gloo in 2 or 4 CPU
processes. Each rank trains on Brown batches of its own, whose length
changes every step, with the loss computed by the loop.

Budgets are N% of the per-rank peak of plain FSDP2 at the longest batch
(the most any rank reached: its shards, the gathered weights, Adam's state,
the activations, every tensor memtrain's counting allocator sees).
Contenders:
- memtrain.Module with `mimose` and `optimal`, a budget in bytes per rank;
- FSDP2 with every layer checkpointed (torch.utils.checkpoint, non-reentrant);
- FSDP2 with every k-th layer checkpointed, at the best k that fits;
- FSDP2 with torchtitan's selective activation checkpointing policy;
- FSDP2 with each layer compiled (torch.compile, dynamic shapes, before
  fully_shard as torchtitan does) at the largest activation_memory_budget
  (of --memory-budgets) that fits; its first steps compile.
A peer fits a budget when its peak at the longest batch does on every rank.
Each contender's ranks are processes of their own, in a process group of
their own; the contenders take their turns step by step (ABBA), all of one
contender's ranks at once. Every step's gradient shards are compared with
plain FSDP2's by SHA-256, on every rank.

    scripts/bench.sh fsdp                  # or: PYTHONPATH=build/python python bench/fsdp_bench.py
    scripts/bench.sh fsdp --world 4 --section fsdp_bench_4
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import memtrain
from peers_bench import Training, as_lm_batch, blocks_of, checkpoint_blocks, make_model, torchtitan_policy
from side_by_side import Contender, abba_order, publish, serve, step_together


def rank_batches(args, rank):
    """The longest batch, and this rank's own batches (a seed per rank)."""
    data = memtrain.BrownBatches(args.batch, seed=args.seed + rank, vocabulary=args.vocab)

    def cut(pair):
        return tuple(t[:, :args.max_length] for t in pair)
    return as_lm_batch(cut(data.largest())), [as_lm_batch(cut(data.next())) for _ in range(args.steps)]


def loop_loss(model):
    """The loop's own loss over the logits, as most training loops compute it."""
    def forward(b):
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), b["labels"][:, 1:].flatten())
    return forward


def sharded_model(args):
    from torch.distributed.fsdp import fully_shard
    model = make_model(args)
    model.train()
    blocks = blocks_of(model)
    if args.contender == "compiled":
        # Each block compiled, as torchtitan does, before fully_shard; the
        # partitioner saves at most this share of the block's activations.
        import torch._functorch.config as functorch_config
        functorch_config.activation_memory_budget = args.memory_budget
        for block in blocks:
            block.compile(dynamic=True)
    if args.contender == "every-layer":
        checkpoint_blocks(model, lambda i: True)
    elif args.contender == "every-k":
        checkpoint_blocks(model, lambda i: i % args.k == 0)
    elif args.contender == "torchtitan-sac":
        checkpoint_blocks(model, lambda i: True, torchtitan_policy())
    for block in blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def run_rank(args):
    """A contender's rank: "ready", then a step per "step i", its record at "end"."""
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=args.rank, world_size=args.world)
    longest, steps = rank_batches(args, args.rank)
    model = sharded_model(args)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    record = {}
    forward = loop_loss(model)
    if args.contender.startswith("memtrain-"):
        sample = {k: longest[k] for k in ("input_ids", "attention_mask", "use_cache")}
        try:
            wrapped = memtrain.Module(model, budget=args.budget_bytes, blocks=blocks_of(model),
                                      planner=args.contender.split("-", 1)[1], sample=sample, optimizer=opt,
                                      collect_steps=args.collect_steps, keeps_output=False)
        except memtrain.Infeasible as e:  # every rank measured the sample; none steps
            least = e.min_bytes
            print("idle", flush=True)
            serve(lambda i: None, lambda: {"infeasible": least})
            dist.destroy_process_group()
            return
        forward = loop_loss(wrapped)
        record["plans"] = []
    t = Training(model, forward, opt)
    if args.probe:
        for i in range(2):  # the second with Adam's state
            t.run(-1 - i, longest)
        print(f"peak {max(t.peaks)}", flush=True)
        dist.destroy_process_group()
        return

    def step(i):
        t.run(i, steps[i])
        if "plans" in record:
            s = wrapped.last_step
            record["plans"].append(s["plan"])
    print("ready", flush=True)
    serve(step, lambda: dict(record, times=t.times, peaks=t.peaks, grads=t.grads))
    dist.destroy_process_group()


def rank_command(args, contender, rank, store, *extra):
    common = ["--world", args.world, "--steps", args.steps, "--batch", args.batch, "--width", args.width,
              "--heads", args.heads, "--layers", args.layers, "--vocab", args.vocab, "--seed", args.seed,
              "--threads", args.threads, "--collect-steps", args.collect_steps, "--max-length", args.max_length]
    role = ["--role", "rank", "--contender", contender, "--rank", rank, "--store", store]
    return [sys.executable, os.path.abspath(__file__)] + [str(a) for a in common + role + list(extra)]


def start_group(args, name, contender, *extra):
    """The ranks of one contender, in a process group of their own."""
    store = os.path.join(tempfile.mkdtemp(prefix="memtrain-fsdp-"), "store")
    return [Contender(f"{name} rank {r}", rank_command(args, contender, r, store, *extra)) for r in range(args.world)]


def probe(args, contender, *extra):
    """The most any rank's peak reached at the longest batch."""
    ranks = start_group(args, contender, contender, "--probe", *extra)
    peaks = []
    for c in ranks:
        line = c.process.stdout.readline().split()
        if c.process.wait() != 0 or not line or line[0] != "peak":
            raise RuntimeError(f"probe of {contender} failed")
        peaks.append(int(line[1]))
    return max(peaks)


def peers_that_fit(args, budget, peaks):
    """The peers whose probed peak fits `budget`; of every-k, the best k
    (the largest that fits); of the compiled blocks, the largest
    activation_memory_budget that fits."""
    fit = [(name, extra) for name, extra in (("every-layer", ()), ("torchtitan-sac", ()))
           if peaks[name] <= budget]
    ks = [k for k in args.ks if peaks[f"every-{k}"] <= budget]
    if ks:
        fit.append((f"every-{max(ks)}", ("--k", max(ks))))
    shares = [m for m in args.memory_budgets if peaks[f"compiled-{m:g}"] <= budget]
    if shares:
        fit.append((f"compiled-{max(shares):g}", ("--memory-budget", max(shares))))
    return fit


def kind_of(name):
    """The contender a row's name runs: every-2 is every-k, compiled-0.5 compiled."""
    if name.startswith("compiled-"):
        return "compiled"
    return "every-k" if name.startswith("every-") and name != "every-layer" else name


def run_budget(args, percent, reference, peaks):
    """Every contender that fits at `percent`% of `reference`, in turns."""
    budget = int(reference * percent / 100)
    names = [("memtrain-" + p, "memtrain-" + p, ("--budget-bytes", budget)) for p in args.planners]
    names += [(n, kind_of(n), e) for n, e in peers_that_fit(args, budget, peaks)]
    names.insert(0, ("plain", "plain", ()))
    groups = {n: start_group(args, n, c, *e) for n, c, e in names}
    # A contender that cannot plan the budget on some rank runs on none.
    ready = [n for n, ranks in groups.items() if [c.expect("ready", "idle") for c in ranks] == ["ready"] * len(ranks)]
    for i in range(args.steps):
        for name in abba_order(ready, i):
            step_together(groups[name], i)
    records = {n: [c.record() for c in ranks] for n, ranks in groups.items()}
    infeasible = {n: max(r.get("infeasible", 0) for r in rs) for n, rs in records.items() if n not in ready}
    return budget, {n: rs for n, rs in records.items() if n in ready}, infeasible


def summary(args, name, ranks, plain, budget):
    """A row: steps over budget (all ranks), mean step time (the slowest rank each step), exactness."""
    over = sum(p > budget for r in ranks for p in r["peaks"]) if name != "plain" else 0
    # Over the same steps for all: memtrain's collection steps left out.
    times = [max(r["times"][i] for r in ranks) for i in range(args.collect_steps, args.steps)]
    exact = all(r["grads"] == p["grads"] for r, p in zip(ranks, plain))
    return {"over": over, "time": statistics.mean(times), "exact": exact,
            "peak": max(max(r["peaks"]) for r in ranks)}


def report(args, reference, peaks, results, seconds):
    lines = [f"## FSDP2: a budget per rank on {args.world} CPU processes (Python)", "",
             f"FSDP2 over Gloo on {args.world} CPU processes: transformers' Llama ({args.layers} layers, width "
             f"{args.width}, vocabulary {args.vocab}), every layer and the root `fully_shard`-ed, Brown batches of "
             f"{args.batch} sentences (at most {args.max_length} words; each rank its own, their length changing "
             f"every step), the loss computed by the loop, Adam; {args.steps} steps in ABBA turns, the first "
             f"{args.collect_steps} (memtrain's collection) left out of the times. Plain FSDP2's per-rank peak at "
             f"the longest batch: {reference / 2**20:.1f} MiB; probed peaks of the peers there: "
             + ", ".join(f"{n} {p / 2**20:.1f} MiB" for n, p in peaks.items()) + ".",
             "", "| budget | contender | steps over budget (all ranks) | peak, MiB | step, s | vs plain | "
             "vs fastest peer that fits | exact |", "|---|---|---|---|---|---|---|---|"]
    for percent, (budget, rows) in results.items():
        peers = [r["time"] for n, r in rows.items() if n != "plain" and not n.startswith("memtrain-")]
        fastest = min(peers) if peers else None
        for name, r in rows.items():
            if "least" in r:
                lines.append(f"| {percent}% ({budget / 2**20:.1f} MiB) | {name} | does not fit: needs "
                             f"{r['least'] / 2**20:.1f} MiB | | | | | |")
                continue
            vs_peer = f"{fastest / r['time']:.2f}x" if fastest and name.startswith("memtrain-") else ""
            over = f"{r['over']} of {args.steps * args.world}" if name != "plain" else "no budget (the reference)"
            lines.append(f"| {percent}% ({budget / 2**20:.1f} MiB) | {name} | {over} | {r['peak'] / 2**20:.1f} | "
                         f"{r['time']:.3f} | "
                         f"{rows['plain']['time'] / r['time']:.2f}x | {vs_peer} | {'yes' if r['exact'] else 'NO'} |")
    lines += ["", "vs fastest peer: the fastest peer's step time over memtrain's (above 1: memtrain is faster); "
              "a budget no peer fits has none.", "",
              f"`{' '.join(['scripts/bench.sh', 'fsdp'] + sys.argv[1:])}`; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
              f"{datetime.date.today()}, {seconds / 60:.0f} minutes."]
    return "\n".join(lines) + "\n"


def run(args):
    t0 = time.perf_counter()
    reference = probe(args, "plain")
    peaks = {"every-layer": probe(args, "every-layer"), "torchtitan-sac": probe(args, "torchtitan-sac")}
    for k in args.ks:
        peaks[f"every-{k}"] = probe(args, "every-k", "--k", k)
    for m in args.memory_budgets:
        peaks[f"compiled-{m:g}"] = probe(args, "compiled", "--memory-budget", m)
    results = {}
    for percent in args.budgets:
        budget, records, infeasible = run_budget(args, percent, reference, peaks)
        rows = {n: summary(args, n, ranks, records["plain"], budget) for n, ranks in records.items()}
        rows.update({n: {"least": least} for n, least in infeasible.items()})
        results[percent] = (budget, rows)
        print(f"{percent}%: " + ", ".join(f"{n} {r['time']:.3f}s over {r['over']} exact {r['exact']}"
                                          if "time" in r else f"{n} infeasible" for n, r in rows.items()), flush=True)
    text = report(args, reference, peaks, results, time.perf_counter() - t0)
    publish(args.section, text, args.out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=2, help="processes (ranks) per contender")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--budgets", default="100,70,50,30", help="percent of plain FSDP2's per-rank peak")
    p.add_argument("--planners", default="mimose,optimal")
    p.add_argument("--ks", default="2,3", help="checkpoint every k-th layer, for these k")
    p.add_argument("--memory-budgets", default="1,0.5,0",
                   help="torch.compile's activation_memory_budget for the compiled blocks, these shares")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--max-length", type=int, default=64, help="cut Brown's sentences to this many words")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--collect-steps", type=int, default=3)
    p.add_argument("--section", default="fsdp_bench", help="the section of --out this run writes")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "BENCHMARKS.md"))
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--contender", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument("--budget-bytes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, help=argparse.SUPPRESS)
    p.add_argument("--memory-budget", type=float, help=argparse.SUPPRESS)
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.model = "llama"
    args.budgets = [int(b) for b in args.budgets.split(",") if b]
    args.planners = [x for x in args.planners.split(",") if x]
    args.ks = [int(k) for k in args.ks.split(",") if k]
    args.memory_budgets = [float(m) for m in args.memory_budgets.split(",") if m]
    if args.role == "rank":
        run_rank(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
