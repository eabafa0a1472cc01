#!/usr/bin/python3
"""memtrain.Module against torch.utils.checkpoint_sequential on a
Transformer written in plain PyTorch, trained on Brown sentences whose
lengths change every step.

For each budget (N% of the plain model's peak at the longest batch):
- memtrain.Module runs --steps steps beside the plain model on the same
  batches and seeds; every step's gradients must be bit-equal to the plain
  model's, and no step's measured peak may exceed the budget;
- every checkpoint_sequential segment count is measured at the longest batch;
  the fastest one whose peak fits the budget is timed on the same batches.
Memory is what memtrain's counting allocator sees: every tensor of the
process (weights, gradients, Adam's state, the batch, activations).
Step times are medians, measured in one run, side by side.

    scripts/bench.sh python            # or: /usr/bin/python3 bench/python_bench.py
"""

import argparse
import datetime
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


class Block(nn.Module):
    def __init__(self, width, heads, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width),
                                 nn.Dropout(dropout))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def make_model(args, words, tags):
    torch.manual_seed(args.seed)
    return nn.Sequential(nn.Embedding(words, args.width), *[Block(args.width, args.heads, 0.1)
                                                           for _ in range(args.layers)],
                         nn.LayerNorm(args.width), nn.Linear(args.width, tags))


def loss_of(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def batches(args):
    data = memtrain.BrownBatches(args.batch, seed=args.seed, vocabulary=args.vocab)
    longest = data.largest()
    return data, longest, [data.next() for _ in range(args.steps)]


def checkpointed_step(model, segments):
    """One step of the model with checkpoint_sequential over the stages after
    the embedding (reentrant checkpointing needs an input that requires grad)."""
    stages = list(model.children())

    def step(x, y):
        h = stages[0](x)
        out = checkpoint_sequential(nn.Sequential(*stages[1:]), segments, h) if segments > 0 else \
            nn.Sequential(*stages[1:])(h)
        loss = loss_of(out, y)
        loss.backward()
        return loss
    return step


def peak_of(step, x, y, model, opt):
    """Peak bytes of one training step (update included) at input (x, y)."""
    opt.zero_grad()
    memtrain.reset_peak()
    step(x, y)
    opt.step()
    peak = memtrain.memory_stats()["peak_bytes"]
    opt.zero_grad()
    return peak


def timed(step, data, model, opt):
    times = []
    for x, y in data:
        t0 = time.perf_counter()
        opt.zero_grad()
        step(x, y)
        opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def plain_peak(args, longest, words, tags):
    """The plain model's training-step peak at the longest batch, Adam's state included."""
    model = make_model(args, words, tags)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = checkpointed_step(model, 0)
    return max(peak_of(step, longest[0], longest[1], model, opt) for _ in range(3))


def run_budget(args, percent, reference, longest, data, words, tags, report):
    plain = make_model(args, words, tags)
    m = memtrain.Module(make_model(args, words, tags), budget=int(reference * percent / 100), planner=args.planner,
                        sample=longest[0])
    opt_plain = torch.optim.Adam(plain.parameters(), lr=1e-3)
    opt_m = torch.optim.Adam(m.parameters(), lr=1e-3)
    violations = unequal = 0
    t_plain, t_m, plans = [], [], {}
    for step, (x, y) in enumerate(data):
        torch.manual_seed(1000 + step)
        t0 = time.perf_counter()
        opt_plain.zero_grad(set_to_none=True)
        loss_of(plain(x), y).backward()
        grads = [p.grad.clone() for p in plain.parameters()]
        opt_plain.step()
        t_plain.append(time.perf_counter() - t0)
        torch.manual_seed(1000 + step)
        memtrain.reset_peak()
        t0 = time.perf_counter()
        opt_m.zero_grad(set_to_none=True)
        loss_of(m(x), y).backward()
        same = all(torch.equal(g, q.grad) for g, q in zip(grads, m.parameters()))
        opt_m.step()
        t_m.append(time.perf_counter() - t0)
        s = m.last_step
        plans[s["plan"]] = plans.get(s["plan"], 0) + 1
        unequal += not same
        violations += s["peak_bytes"] > m.budget_bytes
    equal_params = all(torch.equal(p, q) for p, q in zip(plain.parameters(), m.parameters()))
    # Planned steps only: the first steps measure every stage, whatever the budget.
    planned = slice(args.collect_steps, None)
    row = {"percent": percent, "budget": m.budget_bytes, "violations": violations, "unequal": unequal,
           "equal_params": equal_params, "memtrain": statistics.median(t_m[planned]),
           "plain": statistics.median(t_plain[planned]), "plans": plans}

    # checkpoint_sequential: every segment count, its peak at the longest batch.
    fits = []
    for segments in range(0, args.layers + 3):
        model = make_model(args, words, tags)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        step = checkpointed_step(model, segments)
        peak = max(peak_of(step, longest[0], longest[1], model, opt) for _ in range(2))
        if peak <= m.budget_bytes:
            fits.append((segments, peak, model, opt, step))
    if fits:
        times = [(timed(step, data[planned][:args.checkpoint_steps], model, opt), segments, peak)
                 for segments, peak, model, opt, step in fits]
        best = min(times)
        # memtrain's time on the same steps, for the ratio.
        row["checkpoint"] = best[0]
        row["segments"] = best[1]
        row["checkpoint_peak"] = best[2]
        row["memtrain_same_steps"] = statistics.median(t_m[planned][:args.checkpoint_steps])
    report.append(row)
    print(row, file=sys.stderr, flush=True)


def publish(name, text, path):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    doc = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    section = f"{begin}\n{text}{end}"
    b, e = doc.find(begin), doc.find(end)
    doc = doc[:b] + section + doc[e + len(end):] if b >= 0 and e > b else doc + "\n" + section + "\n"
    open(path, "w").write(doc)
    print(f"{name}: wrote {path}", file=sys.stderr)


def main():
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
    p.add_argument("--collect-steps", type=int, default=4)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "BENCHMARKS.md"))
    args = p.parse_args()

    data, longest, steps = batches(args)
    words, tags = data.words, data.tags
    report = []
    reference = plain_peak(args, longest, words, tags)
    for percent in [int(b) for b in args.budgets.split(",")]:
        run_budget(args, percent, reference, longest, steps, words, tags, report)

    cpu = platform.processor() or platform.machine()
    lines = [
        "## memtrain.Module against checkpoint_sequential (Python)\n",
        f"`/usr/bin/python3 bench/python_bench.py {' '.join(sys.argv[1:])}` ({datetime.date.today()}, {os.cpu_count()} "
        f"cores {cpu}, torch {torch.__version__}, {torch.get_num_threads()} threads). A {args.layers}-block "
        f"Transformer tagger (width {args.width}, {args.heads} heads, dropout 0.1) as a plain `nn.Sequential`, "
        f"Adam, Brown batches of {args.batch} sentences (longest {tuple(longest[0].shape)}), planner "
        f"`{args.planner}`. Budget: N% of the plain model's training-step peak at the longest batch "
        f"({reference / 2**20:.1f} MiB: weights, gradients, Adam's state, batch, activations; everything in the "
        "process counted). Times: median step over the planned steps (collection steps left out); the checkpoint column is "
        "the fastest segment count whose measured peak at the longest batch fits the budget, timed on the first "
        f"{args.checkpoint_steps} of the same steps.\n",
        "| budget | steps over budget | steps with unequal gradients | final parameters equal | plain s/step "
        "| memtrain s/step | memtrain / plain | fastest fitting checkpoint_sequential | its s/step | its speed / "
        "memtrain's (same steps) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report:
        ck = (f"{r['segments']} segments, peak {r['checkpoint_peak'] / 2**20:.1f} MiB", f"{r['checkpoint']:.4f}",
              f"{r['checkpoint'] / r['memtrain_same_steps']:.2f}x") if "checkpoint" in r else ("none fits", "-", "-")
        lines.append(f"| {r['percent']}% ({r['budget'] / 2**20:.1f} MiB) | {r['violations']} / {args.steps} | "
                     f"{r['unequal']} | {'yes' if r['equal_params'] else 'no'} | {r['plain']:.4f} | "
                     f"{r['memtrain']:.4f} | {r['memtrain'] / r['plain']:.3f} | {ck[0]} | {ck[1]} | {ck[2]} |")
    publish("python_bench", "\n".join(lines) + "\n", args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
