#!/usr/bin/env python3
"""memtrain.Module beside the tools a PyTorch user would pick instead, on
transformers' GPT-2 and Llama (random weights from their configuration
classes) trained on Brown sentences whose length changes every step.

Budgets are N% of the plain model's training-step peak at the longest batch
(weights, gradients, Adam's state, batch, activations: every tensor of the
process, as memtrain's counting allocator sees them). Contenders:
- memtrain.Module with `mimose`, `optimal` and `swap`, its blocks eager, and
  `optimal` with its blocks compiled (torch.compile, inductor, dynamic);
- transformers' gradient_checkpointing_enable() (every block checkpointed);
- torch.utils.checkpoint on every k-th block, for each k;
- selective activation checkpointing with torchtitan's policy (save matrix
  products but every second one, attention and max; recompute the rest);
- torch.compile of the whole model with dynamic shapes under
  torch._functorch.config.activation_memory_budget, for several fractions;
- torch.autograd.graph.save_on_cpu.
A peer fits a budget when its peak at the longest batch does. Each
contender runs in its own process; they take turns step by step. Every
step's gradients are compared with the plain model's by SHA-256.

    scripts/bench.sh peers             # or: PYTHONPATH=build/python python bench/peers_bench.py
"""

import argparse
import datetime
import functools
import os
import platform
import statistics
import sys
import time

import torch

import memtrain
from side_by_side import Contender, digest, publish, serve


def make_model(args):
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(args.seed)
    if args.model == "gpt2":
        config = transformers.GPT2Config(vocab_size=args.vocab, n_positions=512, n_embd=args.width,
                                         n_layer=args.layers, n_head=args.heads)
        return transformers.GPT2LMHeadModel(config)
    config = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.width, intermediate_size=3 * args.width,
                                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                                      num_key_value_heads=args.heads // 2, max_position_embeddings=512,
                                      attention_dropout=0.1)
    return transformers.LlamaForCausalLM(config)


def blocks_of(model):
    return model.transformer.h if hasattr(model, "transformer") else model.model.layers


def as_lm_batch(pair):
    """Brown's (word ids, tags) as a language-model batch: padding masked
    out of the attention and of the loss."""
    ids, tags = pair
    mask = (tags != -100).long()
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100), "use_cache": False}


def batches(args):
    data = memtrain.BrownBatches(args.batch, seed=args.seed, vocabulary=args.vocab)
    return as_lm_batch(data.largest()), [as_lm_batch(data.next()) for _ in range(args.steps)]


def checkpoint_blocks(model, which, context_fn=None):
    """torch.utils.checkpoint (non-reentrant) around the blocks `which` picks."""
    from torch.utils.checkpoint import checkpoint
    for i, block in enumerate(blocks_of(model)):
        if which(i):
            kwargs = {"use_reentrant": False}
            if context_fn is not None:
                kwargs["context_fn"] = context_fn
            block.forward = functools.partial(checkpoint, block.forward, **kwargs)


def torchtitan_policy():
    """torchtitan's selective activation checkpointing policy: save the ops
    in its list (every second matrix product only), recompute the rest."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default, aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten.max.default}

    def context_fn():
        counts = {"mm": 0}

        def policy(ctx, func, *args, **kwargs):
            if func == aten.mm.default:
                if not ctx.is_recompute:
                    counts["mm"] += 1
                return CheckpointPolicy.MUST_SAVE if counts["mm"] % 2 == 0 else CheckpointPolicy.PREFER_RECOMPUTE
            return CheckpointPolicy.MUST_SAVE if func in save else CheckpointPolicy.PREFER_RECOMPUTE
        return create_selective_checkpoint_contexts(policy)
    return context_fn


class Training:
    """Adam, one step per call: the step's seconds (forward, backward and
    update), peak bytes and gradient digest."""

    def __init__(self, model, forward):
        self.model, self.forward = model, forward
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.times, self.peaks, self.grads = [], [], []

    def __call__(self, index, batch):
        torch.manual_seed(1000 + index)  # the same draws for every contender at a step
        memtrain.reset_peak()
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        self.forward(batch).backward()
        t1 = time.perf_counter()
        self.grads.append(digest(p.grad for p in self.model.parameters() if p.grad is not None))
        t2 = time.perf_counter()
        self.opt.step()
        self.times.append(t1 - t0 + time.perf_counter() - t2)
        self.peaks.append(memtrain.memory_stats()["peak_bytes"])


def peak_at_longest(model, forward, longest):
    """The peak of two training steps at the longest batch (the second with
    Adam's state), leaving the weights as they were and no optimizer state."""
    kept = {k: v.clone() for k, v in model.state_dict().items()}
    t = Training(model, forward)
    t(-1, longest)
    t(-2, longest)
    with torch.no_grad():
        for k, v in model.state_dict().items():
            v.copy_(kept[k])
    model.zero_grad(set_to_none=True)
    return max(t.peaks)


def run_role(args):
    longest, steps = batches(args)
    model = make_model(args)
    model.train()
    record = {}
    t0 = time.perf_counter()
    forward = None
    if args.role == "reference":
        t = Training(model, lambda b: model(**b).loss)
        for i in range(3):
            t(-i, longest)
        print(f"{max(t.peaks)}", flush=True)
        return
    if args.role == "memtrain":
        if args.compiled_blocks:
            blocks = blocks_of(model)
            for i, block in enumerate(blocks):
                blocks[i] = torch.compile(block, dynamic=True)
        try:
            m = memtrain.Module(model, budget=args.budget_bytes, planner=args.planner, sample=longest,
                                collect_steps=args.collect_steps)
        except memtrain.Infeasible as e:
            record["least"] = e.min_bytes
            print("idle", flush=True)
            serve(lambda i: None, lambda: record)
            return
        plans = record["plans"] = {}

        def forward(b):
            loss = m(**b).loss
            return loss
        trained = m

        def count_plan():
            plans[m.last_step["plan"]] = plans.get(m.last_step["plan"], 0) + 1
    else:
        trained = model
        count_plan = None
        if args.role == "plain":
            forward = lambda b: model(**b).loss  # noqa: E731
        elif args.role == "hf_gc":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            forward = lambda b: model(**b).loss  # noqa: E731
        elif args.role == "every_k":
            checkpoint_blocks(model, lambda i: i % args.k == 0)
            forward = lambda b: model(**b).loss  # noqa: E731
        elif args.role == "sac":
            checkpoint_blocks(model, lambda i: True, torchtitan_policy())
            forward = lambda b: model(**b).loss  # noqa: E731
        elif args.role == "compile_budget":
            import torch._functorch.config as functorch_config
            functorch_config.activation_memory_budget = args.fraction
            compiled = torch.compile(model, dynamic=True)
            forward = lambda b: compiled(**b).loss  # noqa: E731
        elif args.role == "save_on_cpu":
            def forward(b):
                with torch.autograd.graph.save_on_cpu():
                    return model(**b).loss
        record["peak"] = peak_at_longest(model, forward, longest)
    record["setup_seconds"] = time.perf_counter() - t0
    t = Training(trained, forward)

    def step(i):
        t(i, steps[i])
        if count_plan:
            count_plan()
    print("ready", flush=True)
    serve(step, lambda: dict(record, times=t.times, peaks=t.peaks, grads=t.grads))


def role_command(args, *role):
    common = ["--model", args.model, "--steps", args.steps, "--batch", args.batch, "--width", args.width,
              "--heads", args.heads, "--layers", args.layers, "--vocab", args.vocab, "--seed", args.seed,
              "--threads", args.threads, "--collect-steps", args.collect_steps]
    return [sys.executable, os.path.abspath(__file__)] + [str(a) for a in common + list(role)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt2,llama")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--budgets", default="70,50,30", help="percent of the plain peak at the longest batch")
    p.add_argument("--planners", default="mimose,optimal,swap")
    p.add_argument("--compiled", default="optimal", help="planners also run with compiled blocks ('' for none)")
    p.add_argument("--fractions", default="1.0,0.5,0.0", help="activation_memory_budget values torch.compile tries")
    p.add_argument("--ks", default="2,3", help="checkpoint every k-th block, for these k")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads per contender (0: torch's default)")
    p.add_argument("--collect-steps", type=int, default=4, help="memtrain's collection steps, left out of the means")
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--planner", help=argparse.SUPPRESS)
    p.add_argument("--budget-bytes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, help=argparse.SUPPRESS)
    p.add_argument("--fraction", type=float, help=argparse.SUPPRESS)
    p.add_argument("--compiled-blocks", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "BENCHMARKS.md"))
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.role:
        run_role(args)
        return
    sections = []
    for model in args.models.split(","):
        args.model = model
        sections.append(bench_model(args))
    cpu = platform.processor() or platform.machine()
    head = [
        "## memtrain.Module beside its peers on transformers' GPT-2 and Llama (Python)\n",
        f"`{' '.join(['scripts/bench.sh peers'] + sys.argv[1:])}` ({datetime.date.today()}, {os.cpu_count()} cores "
        f"{cpu}, torch {torch.__version__}, {torch.get_num_threads()} threads). {args.layers} blocks, width "
        f"{args.width}, {args.heads} heads, vocabulary {args.vocab} (Brown's most frequent words), dropout 0.1, "
        f"Adam; {args.steps} Brown batches of {args.batch} sentences, the length changing every step. Budget: N% of "
        "the plain model's training-step peak at the longest batch, every tensor of the process counted. Each "
        "contender trains in a process of its own; the processes take turns step by step. A peer fits a budget "
        "when its peak at the longest batch does (each k and each activation_memory_budget fraction is its own "
        "contender; the table shows the fastest k that fits and the largest fraction that fits). Times: mean "
        f"seconds per step (forward, backward, Adam) over the steps after memtrain's {args.collect_steps} "
        "collection steps. Exact: every step's gradients bit-equal to the plain model's. Setup: seconds from "
        "the process's start to its first step (memtrain's calibration; torch.compile's compilation; a peer's "
        "two measuring steps).\n",
        "Rockmate is not in the table: rockmate 2.0.0 from PyPI does not import (its rkgb 2.0.0 package lacks "
        "`rkgb.core`), and rockmate 1.0.1 with rkgb 1.0.1 fails in rkgb's TorchScript graph builder on torch "
        "2.11 (\"TorchScript usually changes torch.dtype by weird integers, but here it's neither a dtype nor an "
        "integer\", building GPT-2); 1.0.1 also needs Gurobi (gurobipy).\n",
    ]
    publish("peers_bench", "\n".join(head + sections) + "\n", args.out)


def bench_model(args):
    percents = [int(b) for b in args.budgets.split(",")]
    measuring = Contender("reference", role_command(args, "--role", "reference"))
    reference = int(measuring.process.stdout.readline())
    measuring.process.wait()
    print(f"{args.model}: plain peak at the longest batch {reference} bytes", file=sys.stderr, flush=True)
    contenders = {"plain": Contender("plain", role_command(args, "--role", "plain"))}
    for percent in percents + [100]:
        planners = args.planners.split(",") if percent != 100 else ["optimal"]
        for planner in planners:
            name = f"memtrain {planner} {percent}%"
            contenders[name] = Contender(name, role_command(args, "--role", "memtrain", "--planner", planner,
                                                            "--budget-bytes", reference * percent // 100))
        for planner in [c for c in args.compiled.split(",") if c] if percent != 100 else []:
            name = f"memtrain {planner} compiled {percent}%"
            contenders[name] = Contender(name, role_command(args, "--role", "memtrain", "--planner", planner,
                                                            "--compiled-blocks", "--budget-bytes",
                                                            reference * percent // 100))
    peers = ["hf_gc", "sac", "save_on_cpu"] + [f"every_k {k}" for k in args.ks.split(",") if k] + \
        [f"compile_budget {f}" for f in args.fractions.split(",") if f]
    for peer in peers:
        role, *value = peer.split()
        extra = ["--k", value[0]] if role == "every_k" else ["--fraction", value[0]] if value else []
        contenders[peer] = Contender(peer, role_command(args, "--role", role, *extra))
    active = [c for c in contenders.values() if c.expect("ready", "idle") == "ready"]
    for i in range(args.steps):
        k = i % len(active)
        for c in active[k:] + active[:k]:
            c.step(i)
        if (i + 1) % 10 == 0:
            print(f"{args.model}: step {i + 1} of {args.steps}", file=sys.stderr, flush=True)
    records = {name: c.record() for name, c in contenders.items()}
    return table(args, reference, percents, records)


def table(args, reference, percents, records):
    timed = slice(args.collect_steps, None)
    plain = records["plain"]

    def mean(r):
        return statistics.mean(r["times"][timed])

    def exact(r):
        return all(g == h for g, h in zip(r["grads"], plain["grads"]))

    def row(name, r, budget):
        if "least" in r:
            return f"| {name} | infeasible: least {r['least'] / 2**20:.1f} MiB | | | | |"
        over = sum(p > budget for p in r["peaks"])
        fits = "" if "peak" not in r else f" (peak at longest {r['peak'] / 2**20:.1f} MiB)"
        return (f"| {name}{fits} | {over} / {len(r['peaks'])} | {mean(r):.4f} | {mean(r) / mean(plain):.2f}x | "
                f"{'yes' if exact(r) else 'no'} | {r['setup_seconds'] if 'setup_seconds' in r else 0:.1f} |")

    lines = [f"### {args.model}\n", f"Plain: {mean(plain):.4f} s/step, peak at the longest batch "
             f"{reference / 2**20:.1f} MiB.\n"]
    full = records.get("memtrain optimal 100%")
    if full and "least" not in full:
        lines.append(f"At 100%: memtrain `optimal` {mean(full):.4f} s/step, {mean(full) / mean(plain):.3f}x the plain "
                     f"step, {sum(p > reference for p in full['peaks'])} steps over, exact: "
                     f"{'yes' if exact(full) else 'no'}.\n")
    for percent in percents:
        budget = reference * percent // 100
        lines += [f"**{percent}%** ({budget / 2**20:.1f} MiB)\n",
                  "| contender | steps over budget | s/step | / plain | exact | setup s |", "|---|---|---|---|---|---|"]
        mine = {n: r for n, r in records.items() if n.startswith("memtrain") and n.endswith(f" {percent}%")}
        for name, r in mine.items():
            lines.append(row(name.rsplit(" ", 1)[0], r, budget))
        peers = {n: r for n, r in records.items() if not n.startswith("memtrain") and n != "plain"}
        fitting = {n: r for n, r in peers.items() if r["peak"] <= budget}
        shown = {}
        for n, r in peers.items():
            kind = n.split()[0]
            if kind in ("every_k", "compile_budget"):
                best = shown.get(kind)
                fits = n in fitting
                better = best is None or (fits and (best[0] not in fitting or mean(r) < mean(best[1])))
                if better:
                    shown[kind] = (n, r)
            else:
                shown[n] = (n, r)
        for kind, (n, r) in shown.items():
            lines.append(row(n + ("" if n in fitting else ", does not fit"), r, budget))
        within = {n: r for n, r in fitting.items() if all(p <= budget for p in r["peaks"])}
        fastest_mine = min((r for r in mine.values() if "least" not in r and
                            all(p <= budget for p in r["peaks"])), key=mean, default=None)
        if within and fastest_mine:
            best_peer = min(within, key=lambda n: mean(within[n]))
            lines.append(f"\nFastest peer whose steps all stayed within the budget: {best_peer}, "
                         f"{mean(within[best_peer]):.4f} s/step; memtrain's fastest: {mean(fastest_mine):.4f} s/step, "
                         f"**{mean(within[best_peer]) / mean(fastest_mine):.2f}x** its speed.\n")
        else:
            lines.append("\nNo peer stayed within the budget at every step.\n" if not within else
                         "\nmemtrain did not stay within the budget.\n")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
