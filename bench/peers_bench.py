#!/usr/bin/env python3
"""memtrain.Module beside the tools a PyTorch user would pick instead, on
transformers' GPT-2 and Llama (random weights from their configuration
classes) and a nanoGPT-style GPT written here whose loss the training loop
computes outside the model, trained on Brown sentences whose length changes
every step. At a real vocabulary (--vocab 32000 or 50257) the head's logits
and the loss are the largest tensors of a step; --chunked adds the contenders
that never hold them whole: memtrain's linear_cross_entropy (its chunk chosen
under the budget) and torchtune's chunked cross-entropy (CEWithChunkedOutputLoss
from the torchtune 0.6.1 wheel on PyPI, its one file loaded alone: the package
does not import on torch 2.11) with every-k checkpointing.

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
    scripts/bench.sh peers --models nanogpt,gpt2 --vocab 50257 --chunked --batch 4 --section peers_real_vocab

With --build LABEL=PATH twice or more, each build's memtrain package (PATH
holds it, as PYTHONPATH) trains its own contenders in the same turns: two
builds side by side.
"""

import argparse
import datetime
import functools
import io
import os
import platform
import shlex
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import memtrain
from side_by_side import Contender, abba_order, builds_of, digest, publish, serve, with_pythonpath

TORCHTUNE_WHEEL = "torchtune==0.6.1"
MODEL_NAMES = {"gpt2": "transformers' GPT-2", "llama": "transformers' Llama",
               "nanogpt": "a nanoGPT-style GPT whose loss the loop computes"}


class NanoBlock(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(width)
        self.attn = torch.nn.MultiheadAttention(width, heads, dropout=0.1, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width), torch.nn.Dropout(0.1))

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class NanoGPT(torch.nn.Module):
    """nanoGPT's shape: token and position embeddings, causal blocks in a
    ModuleList, a final norm and a head; forward returns the logits (or,
    with hidden=True, the states the head reads) and the loop computes the loss."""

    def __init__(self, vocab, width, heads, layers, positions=512):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Embedding(positions, width)
        self.drop = torch.nn.Dropout(0.1)
        self.blocks = torch.nn.ModuleList([NanoBlock(width, heads) for _ in range(layers)])
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, ids, hidden=False):
        length = ids.shape[1]
        mask = torch.triu(torch.full((length, length), float("-inf"), device=ids.device), 1)
        x = self.drop(self.embed(ids) + self.pos(torch.arange(length, device=ids.device)))
        for block in self.blocks:
            x = block(x, mask)
        x = self.norm(x)
        return x if hidden else self.head(x)


def torchtune_chunked_loss():
    """torchtune's CEWithChunkedOutputLoss, from its PyPI wheel (downloaded
    once into ~/.cache/memtrain): the file alone, which imports only torch."""
    import glob
    import importlib.util
    import subprocess
    import zipfile
    cache = os.path.join(os.path.expanduser("~"), ".cache", "memtrain", "torchtune")
    wheels = glob.glob(os.path.join(cache, "torchtune-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", cache, TORCHTUNE_WHEEL],
                       check=True)
        wheels = glob.glob(os.path.join(cache, "torchtune-*.whl"))
    path = os.path.join(cache, "ce_chunked_output_loss.py")
    if not os.path.exists(path):
        with zipfile.ZipFile(wheels[0]) as wheel, open(path, "wb") as out:
            out.write(wheel.read("torchtune/modules/loss/ce_chunked_output_loss.py"))
    spec = importlib.util.spec_from_file_location("torchtune_ce_chunked_output_loss", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CEWithChunkedOutputLoss()


def make_model(args):
    torch.manual_seed(args.seed)
    if args.model == "nanogpt":
        return NanoGPT(args.vocab, args.width, args.heads, args.layers)
    import transformers
    transformers.logging.set_verbosity_error()
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
    if isinstance(model, NanoGPT):
        return model.blocks
    return model.transformer.h if hasattr(model, "transformer") else model.model.layers


def full_loss(model):
    """The step's loss with the whole logits: transformers' own (labels
    given), or, for the nanoGPT, cross-entropy computed by the loop."""
    if isinstance(model, NanoGPT):
        return lambda b: F.cross_entropy(model(b["input_ids"][:, :-1]).flatten(0, 1), b["labels"][:, 1:].flatten())
    return lambda b: model(**b).loss


def hidden_and_head(model):
    """A function from a batch to the states the head reads (before the
    last position, whose next token is unknown), and the head's weight."""
    if isinstance(model, NanoGPT):
        return lambda b: model(b["input_ids"][:, :-1], hidden=True), model.head.weight
    body = model.transformer if hasattr(model, "transformer") else model.model
    return (lambda b: body(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                           use_cache=False).last_hidden_state[:, :-1]), model.lm_head.weight


def torchtune_loss(model):
    """torchtune's recipe: the head applied to chunks of the sequence and
    its chunked cross-entropy, which upcasts one chunk at a time."""
    loss = torchtune_chunked_loss()
    hidden, weight = hidden_and_head(model)

    def forward(b):
        chunks = [F.linear(h, weight) for h in hidden(b).chunk(loss.num_output_chunks, dim=1)]
        return loss(chunks, b["labels"][:, 1:])
    return forward


def as_lm_batch(pair):
    """Brown's (word ids, tags) as a language-model batch: padding masked
    out of the attention and of the loss."""
    ids, tags = pair
    mask = (tags != -100).long()
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100), "use_cache": False}


def batches(args):
    data = memtrain.BrownBatches(args.batch, seed=args.seed, vocabulary=args.vocab)

    def cut(pair):
        return tuple(t[:, :args.max_length] for t in pair) if args.max_length else pair
    return as_lm_batch(cut(data.largest())), [as_lm_batch(cut(data.next())) for _ in range(args.steps)]


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


def adam(model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


class Training:
    """Adam, one step per call: the step's seconds (forward, backward and
    update), peak bytes and gradient digest."""

    def __init__(self, model, forward, opt=None):
        self.model, self.forward = model, forward
        self.opt = opt if opt is not None else adam(model)
        self.times, self.peaks, self.grads = [], [], []
        self.error = None  # the first step's error: later steps do nothing

    def __call__(self, index, batch):
        if self.error is not None:
            return
        try:
            self.run(index, batch)
        except Exception as e:  # the row says so: a contender that fails in a step did not complete
            self.error = f"step {len(self.times) + 1}: {type(e).__name__}: {str(e).splitlines()[0][:160]}"

    def run(self, index, batch):
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
    Adam's state), leaving the weights as they were and no optimizer state.
    The weights wait in serialized bytes, outside the tensors the peak
    counts: a copy as tensors would add the model's size to the peak."""
    kept = io.BytesIO()
    torch.save(model.state_dict(), kept)
    t = Training(model, forward)
    t.run(-1, longest)
    t.run(-2, longest)
    kept.seek(0)
    model.load_state_dict(torch.load(kept))
    model.zero_grad(set_to_none=True)
    return max(t.peaks)


def memtrain_role(args, model, longest, record):
    """memtrain.Module around `model` under the budget: the step's forward,
    the parameters the optimizer trains, the optimizer and what counts the
    plans; None when the budget was refused (the process then serves idle)."""
    chunked = args.loss == "chunked"
    wrapped, sample = model, longest
    if isinstance(model, NanoGPT):
        sample = {"ids": longest["input_ids"][:, :-1], "hidden": chunked}
    elif chunked:  # what the step calls: the body, whose output is the hidden states
        wrapped = model.transformer if hasattr(model, "transformer") else model.model
        sample = {k: longest[k] for k in ("input_ids", "attention_mask", "use_cache")}
    opt = adam(model)  # measured with the sample, so its state counts from the first step
    try:
        m = memtrain.Module(wrapped, budget=args.budget_bytes, blocks=blocks_of(model), planner=args.planner,
                            sample=sample, collect_steps=args.collect_steps, optimizer=opt, keeps_output=False)
    except memtrain.Infeasible as e:
        record["least"] = e.min_bytes
        print("idle", flush=True)
        serve(lambda i: None, lambda: record)
        return None
    plans = record["plans"] = {}
    if chunked:
        hidden, weight = hidden_and_head(model)
        forward = lambda b: m.linear_cross_entropy(hidden(b), weight, b["labels"][:, 1:])  # noqa: E731
    elif isinstance(model, NanoGPT):
        forward = lambda b: F.cross_entropy(m(b["input_ids"][:, :-1]).flatten(0, 1),  # noqa: E731
                                            b["labels"][:, 1:].flatten())
    else:
        forward = lambda b: m(**b).loss  # noqa: E731
    trained = model  # the optimizer's parameters: the head's too where the Module wraps the body
    # The two steps at the longest batch every contender runs before the
    # timed steps (memtrain's first collection steps), so that all enter
    # them alike.
    try:
        record["peak"] = peak_at_longest(model, forward, longest)
    except memtrain.Infeasible as e:  # refused at a step, once it measured the loss the sample could not show
        record["least"] = e.min_bytes
        print("idle", flush=True)
        serve(lambda i: None, lambda: record)
        return None

    own = record["own"] = []

    def count_plan():
        last = m.last_step
        plans[last["plan"]] = plans.get(last["plan"], 0) + 1
        own.append(last["overhead_seconds"])
    return forward, trained, opt, count_plan


def peer_forward(args, model):
    """The forward of the peer `args.role` names, with its checkpointing applied to `model`."""
    loss = full_loss(model)
    if args.role == "plain":
        forward = loss
    elif args.role == "hf_gc" and isinstance(model, NanoGPT):  # every block, as transformers' does
        checkpoint_blocks(model, lambda i: True)
        forward = loss
    elif args.role == "hf_gc":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        forward = loss
    elif args.role == "every_k":
        checkpoint_blocks(model, lambda i: i % args.k == 0)
        forward = loss
    elif args.role == "torchtune_k":
        checkpoint_blocks(model, lambda i: i % args.k == 0)
        forward = torchtune_loss(model)
    elif args.role == "sac":
        checkpoint_blocks(model, lambda i: True, torchtitan_policy())
        forward = loss
    elif args.role == "compile_budget":
        import torch._functorch.config as functorch_config
        functorch_config.activation_memory_budget = args.fraction
        compiled = torch.compile(model, dynamic=True)
        forward = full_loss(compiled) if not isinstance(model, NanoGPT) else (
            lambda b: F.cross_entropy(compiled(b["input_ids"][:, :-1]).flatten(0, 1), b["labels"][:, 1:].flatten()))
    elif args.role == "save_on_cpu":
        def forward(b):
            with torch.autograd.graph.save_on_cpu():
                return loss(b)
    return forward


def run_role(args):
    longest, steps = batches(args)
    model = make_model(args)
    model.train()
    record = {}
    t0 = time.perf_counter()
    forward = None
    if args.role == "reference":
        t = Training(model, full_loss(model))
        for i in range(3):
            t.run(-i, longest)
        print(f"{max(t.peaks)}", flush=True)
        return
    if args.compiled_blocks:
        blocks = blocks_of(model)
        for i, block in enumerate(blocks):
            blocks[i] = torch.compile(block, dynamic=True)
    if args.role == "memtrain":
        wrapped = memtrain_role(args, model, longest, record)
        if wrapped is None:
            return
        forward, trained, opt, count_plan = wrapped
    else:
        trained, opt = model, None
        count_plan = None
        forward = peer_forward(args, model)
        record["peak"] = peak_at_longest(model, forward, longest)
        if args.probe:
            print(f"peak {record['peak']}", flush=True)
            return
    record["setup_seconds"] = time.perf_counter() - t0
    t = Training(trained, forward, opt)

    def step(i):
        t(i, steps[i % len(steps)])
        if count_plan:
            count_plan()
    print("ready", flush=True)
    serve(step, lambda: dict(record, times=t.times, peaks=t.peaks, grads=t.grads, error=t.error))


def role_command(args, *role):
    common = ["--model", args.model, "--steps", args.steps, "--batch", args.batch, "--width", args.width,
              "--heads", args.heads, "--layers", args.layers, "--vocab", args.vocab, "--seed", args.seed,
              "--threads", args.threads, "--collect-steps", args.collect_steps, "--max-length", args.max_length]
    return [sys.executable, os.path.abspath(__file__)] + [str(a) for a in common + list(role)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt2,llama")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--budgets", default="70,50,30", help="percent of the plain peak at the longest batch")
    p.add_argument("--planners", default="mimose,optimal,swap")
    p.add_argument("--compiled", default="optimal", help="planners also run with compiled blocks ('' for none)")
    p.add_argument("--fractions", default="1.0,0.5,0.0",
                   help="activation_memory_budget fractions torch.compile is probed at before the search rounds "
                        "('' for none: no torch.compile peer)")
    p.add_argument("--search-rounds", type=int, default=1,
                   help="rounds of midpoints probed between the fractions to find the largest that fits each budget")
    p.add_argument("--ks", default="2,3", help="checkpoint every k-th block, for these k")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads per contender (0: torch's default)")
    p.add_argument("--collect-steps", type=int, default=4, help="memtrain's collection steps, left out of the means")
    p.add_argument("--full-rounds", type=int, default=3,
                   help="rounds through the batches at 100%% (two contenders: cheap, and a 3%% gap needs the steps)")
    p.add_argument("--chunked", action="store_true",
                   help="add the contenders that never hold the whole logits: memtrain's linear_cross_entropy and "
                        "torchtune's chunked cross-entropy with every-k checkpointing")
    p.add_argument("--max-length", type=int, default=0, help="cut Brown's sentences to this many words (0: none)")
    p.add_argument("--section", default="peers_bench", help="the section of --out this run writes")
    p.add_argument("--loss", default="full", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--planner", help=argparse.SUPPRESS)
    p.add_argument("--budget-bytes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, help=argparse.SUPPRESS)
    p.add_argument("--fraction", type=float, help=argparse.SUPPRESS)
    p.add_argument("--compiled-blocks", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--build", action="append", default=[], metavar="LABEL=PATH",
                   help="a directory holding a memtrain package (as PYTHONPATH), whose Modules train as contenders "
                        "of their own, named with LABEL; twice or more compares builds side by side in the same "
                        "turns (default: the installed memtrain)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "BENCHMARKS.md"))
    return p.parse_args()


def main():
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.role:
        run_role(args)
        return
    args.builds = builds_of(args.build, "peers_bench")
    sections = []
    for model in args.models.split(","):
        args.model = model
        sections.append(bench_model(args))
    cpu = platform.processor() or platform.machine()
    head = [
        f"## memtrain.Module beside its peers on {', '.join(MODEL_NAMES[m] for m in args.models.split(','))}, "
        f"vocabulary {args.vocab} (Python)\n",
        f"`{shlex.join(['scripts/bench.sh', 'peers'] + sys.argv[1:])}` ({datetime.date.today()}, {os.cpu_count()} cores "
        f"{cpu}, torch {torch.__version__}, {torch.get_num_threads()} threads). {args.layers} blocks, width "
        f"{args.width}, {args.heads} heads, vocabulary {args.vocab} (Brown's most frequent words), dropout 0.1, "
        f"Adam; {args.steps} Brown batches of {args.batch} sentences, the length changing every step. Budget: N% of "
        "the plain model's training-step peak at the longest batch, every tensor of the process counted. Each "
        "peer's peak at the longest batch is measured first, in a process alone; a peer fits a budget when that "
        "peak does (for every_k the largest k that fits, for torch.compile the largest activation_memory_budget "
        "fraction that fits, both the fewest recomputations). Then, for each budget, one group of processes, "
        "one contender each: the plain model, memtrain's planners at that budget and the peers that fit it; "
        "they take turns step by step, so ratios within a group are side by side. At 100%, where only the plain "
        f"model and memtrain `optimal` run, they go through the batches {args.full_rounds} times. Before its timed "
        "steps every contender, memtrain included, runs two steps at the longest batch and starts again from the "
        "same weights (memtrain's are its first collection steps). Times: mean seconds per step (forward, "
        f"backward, Adam) over the steps after the first {args.collect_steps} (memtrain's collection steps end "
        "within them). Exact: every step's gradients bit-equal to the plain model's (memtrain with compiled "
        "blocks: to the plain model's with the same compiled blocks). memtrain's own: its time in its steps "
        "outside the blocks' runs (planning each new size, bookkeeping around each block), from "
        "`last_step['overhead_seconds']`, as a share of its step. Setup: seconds from "
        "the process's start to its first timed step (memtrain's calibration; torch.compile's compilation; "
        "the two steps at the longest batch).\n",
        ("Chunked contenders never hold the whole logits: `memtrain ... chunked` computes the head and the loss "
         "with `Module.linear_cross_entropy` (its chunk chosen under the budget), `torchtune_k k` applies the head "
         "to 8 chunks of the sequence and sums torchtune's CEWithChunkedOutputLoss over them, with every k-th block "
         "checkpointed. Their gradients differ from the plain model's by rounding, so their `exact` is blank; "
         "Liger-Kernel's fused linear cross-entropy is a Triton kernel and runs on a GPU only.\n"
         if args.chunked else ""),
        "Rockmate is not in the table: rockmate 2.0.0 from PyPI does not import (its rkgb 2.0.0 package lacks "
        "`rkgb.core`), and rockmate 1.0.1 with rkgb 1.0.1 fails in rkgb's TorchScript graph builder on torch "
        "2.11 (\"TorchScript usually changes torch.dtype by weird integers, but here it's neither a dtype nor an "
        "integer\", building GPT-2); 1.0.1 also needs Gurobi (gurobipy).\n",
    ]
    publish(args.section, "\n".join(head + sections) + "\n", args.out)


def peer_command(args, peer, *more):
    """The command of a peer named as "role" or "role value" (every_k's and
    torchtune_k's k, compile_budget's fraction)."""
    role, *value = peer.split()
    extra = ["--k", value[0]] if role in ("every_k", "torchtune_k") else ["--fraction", value[0]] if value else []
    return role_command(args, "--role", role, *more, *extra)


def probe(args, peer):
    """A peer's peak at the longest batch, measured in a process alone."""
    c = Contender(peer, peer_command(args, peer, "--probe"))
    line = c.process.stdout.readline().split()
    if c.process.wait() != 0 or len(line) != 2 or line[0] != "peak":
        raise RuntimeError(f"peer {peer} did not measure its peak")
    print(f"{args.model}: {peer} peaks at {int(line[1])} bytes", file=sys.stderr, flush=True)
    return int(line[1])


def refinements(fractions, budget):
    """The activation_memory_budget fractions to probe next for `budget`,
    given the peaks measured at `fractions`: the midpoint above the largest
    fraction that fits, or, when none fits, the midpoints beside the fraction
    with the least peak (peaks need not fall with the fraction); none when
    none was probed (`--fractions ''` leaves torch.compile out)."""
    probed = sorted(fractions)
    if not probed:
        return []
    fitting = [f for f in probed if fractions[f] <= budget]
    if fitting:
        above = [f for f in probed if f > max(fitting)]
        return [round((max(fitting) + above[0]) / 2, 3)] if above else []
    least = min(probed, key=lambda f: fractions[f])
    i = probed.index(least)
    return [round((least + probed[j]) / 2, 3) for j in (i - 1, i + 1) if 0 <= j < len(probed)]


def peers_for(args, budgets):
    """Each peer's peak at the longest batch, and for each budget the peers
    to time: every fixed peer that fits, the largest k of every_k that fits
    and the largest activation_memory_budget fraction that fits (the fewest
    recomputations of each kind)."""
    if not budgets:
        return {}, {}
    peaks = {peer: probe(args, peer) for peer in ["hf_gc", "sac", "save_on_cpu"]}
    for k in sorted((int(k) for k in args.ks.split(",") if k), reverse=True):
        peaks[f"every_k {k}"] = probe(args, f"every_k {k}")
    if args.chunked:
        for k in sorted({1} | {int(k) for k in args.ks.split(",") if k}, reverse=True):
            peaks[f"torchtune_k {k}"] = probe(args, f"torchtune_k {k}")
    fractions = {}  # activation_memory_budget fraction: peak
    for fraction in sorted({float(f) for f in args.fractions.split(",") if f}, reverse=True):
        fractions[fraction] = probe(args, f"compile_budget {fraction:g}")
    for _ in range(args.search_rounds):
        wanted = sorted({f for b in budgets.values() for f in refinements(fractions, b)} - set(fractions), reverse=True)
        for fraction in wanted:
            fractions[fraction] = probe(args, f"compile_budget {fraction:g}")
    for fraction in sorted(fractions, reverse=True):
        peaks[f"compile_budget {fraction:g}"] = fractions[fraction]
    chosen = {}
    for percent, budget in budgets.items():
        fitting = [p for p, peak in peaks.items() if peak <= budget]
        best = {}
        for p in fitting:  # probed largest k and fraction first
            best.setdefault(p.split()[0], p)
        chosen[percent] = list(best.values())
    return peaks, chosen


def bench_model(args):
    """One group of processes per budget, taking turns step by step: the
    plain model, memtrain's planners at that budget and the peers that fit
    it. Groups keep the processes alive at once (each holds its peak) few."""
    percents = [int(b) for b in args.budgets.split(",") if b]
    measuring = Contender("reference", role_command(args, "--role", "reference"))
    reference = int(measuring.process.stdout.readline())
    measuring.process.wait()
    print(f"{args.model}: plain peak at the longest batch {reference} bytes", file=sys.stderr, flush=True)
    budgets = {percent: reference * percent // 100 for percent in [100] + percents}
    peaks, chosen = peers_for(args, {percent: budgets[percent] for percent in percents})
    groups = {}
    for percent, budget in budgets.items():
        contenders = {"plain": Contender("plain", role_command(args, "--role", "plain"))}
        if args.compiled and percent != 100:  # what memtrain with compiled blocks must equal
            contenders["plain compiled"] = Contender("plain compiled", role_command(args, "--role", "plain",
                                                                                    "--compiled-blocks"))
        contenders.update(memtrain_contenders(args, percent, budget))
        for peer in chosen.get(percent, []):
            contenders[peer] = Contender(peer, peer_command(args, peer))
        active = [c for c in contenders.values() if c.expect("ready", "idle") == "ready"]
        turns = args.steps * (args.full_rounds if percent == 100 else 1)
        for i in range(turns):
            for c in abba_order(active, i):
                c.step(i)
            if (i + 1) % 10 == 0:
                print(f"{args.model} {percent}%: step {i + 1} of {turns}", file=sys.stderr, flush=True)
        groups[percent] = {name: c.record() for name, c in contenders.items()}
    return table(args, budgets, peaks, groups)


def memtrain_contenders(args, percent, budget):
    """memtrain's contenders at `percent` (`budget` bytes), by name: each
    planner eager, chunked and compiled as asked, once per build (its label
    in the name where --build names builds)."""
    forms = [(planner, []) for planner in (args.planners.split(",") if percent != 100 else ["optimal"])]
    if percent != 100:
        forms += [(f"{planner} chunked", ["--loss", "chunked"]) for planner in args.planners.split(",")
                  if args.chunked]
        forms += [(f"{planner} compiled", ["--compiled-blocks"]) for planner in args.compiled.split(",") if planner]
    contenders = {}
    for label, pythonpath in args.builds:
        for form, flags in forms:
            name = f"memtrain {form}" + (f" ({label})" if label else "")
            planner = form.split()[0]
            command = role_command(args, "--role", "memtrain", "--planner", planner, *flags, "--budget-bytes", budget)
            contenders[name] = Contender(name, command, env=with_pythonpath(pythonpath))
    return contenders


def mean_step(args, r):
    """A contender's mean step after memtrain's collection steps."""
    return statistics.mean(r["times"][args.collect_steps:])


def mean_own(args, r):
    """memtrain's own time per step, after its collection steps."""
    return statistics.mean(r["own"][args.collect_steps:])


def exact(r, plain):
    return all(g == h for g, h in zip(r["grads"], plain["grads"]))


def at_full_budget(args, full, reference):
    """The lines of 100%: each memtrain build's `optimal` against the plain model."""
    lines = []
    plain = full["plain"]
    for name, m in ((n, r) for n, r in full.items() if n.startswith("memtrain optimal")):
        if "least" in m or m.get("error"):
            continue
        build, mean, own = name[len("memtrain optimal"):], mean_step(args, m), mean_own(args, m)
        lines.append(f"**100%**: memtrain `optimal`{build} {mean:.4f} s/step against the plain model's "
                     f"{mean_step(args, plain):.4f} s/step in the same turns, **{mean / mean_step(args, plain):.3f}x** "
                     f"(planning each new size and the bookkeeping around each block included), "
                     f"{sum(p > reference for p in m['peaks'])} steps over, exact: {'yes' if exact(m, plain) else 'no'}. "
                     f"memtrain's own time in its steps (`last_step['overhead_seconds']`: planning and the bookkeeping "
                     f"around each block, measured inside memtrain): {own * 1e3:.2f} ms/step, **{own / mean:.1%}** of "
                     "its step.\n")
    return lines


def table(args, budgets, peaks, groups):
    reference = budgets[100]

    def mean(r):
        return mean_step(args, r)

    def own(r):
        return mean_own(args, r)

    def exact_against(name, r, records):
        same = records.get("plain compiled") if "compiled" in name else None
        return exact(r, records["plain"] if same is None or same is r else same)

    def row(name, r, budget, records):
        if "least" in r:
            return f"| {name} | refused, least {r['least'] / 2**20:.1f} MiB | | | | | | |"
        over = sum(p > budget for p in r["peaks"])
        done = "yes" if not r.get("error") else f"no, {r['error']}"
        if len(r["times"]) <= args.collect_steps:
            return f"| {name} | {done} | {over} / {len(r['peaks'])} | | | | | |"
        share = f"{own(r) / mean(r):.1%}" if "own" in r else ""
        exact = "" if "chunked" in name or name.startswith("torchtune") else (
            "yes" if exact_against(name, r, records) else "no")
        return (f"| {name} | {done} | {over} / {len(r['peaks'])} | {mean(r):.4f} | "
                f"{mean(r) / mean(records['plain']):.3f}x | {exact} | {share} | {r.get('setup_seconds', 0):.1f} |")

    lines = [f"### {args.model}\n", f"Plain model's peak at the longest batch: {reference / 2**20:.1f} MiB. Peers' "
             "peaks at the longest batch, each measured alone: " +
             ", ".join(f"{p} {peak / 2**20:.1f} MiB" for p, peak in peaks.items()) + ".\n"]
    lines += at_full_budget(args, groups[100], reference)
    for percent, budget in budgets.items():
        if percent == 100:
            continue
        records = groups[percent]
        plain = records["plain"]
        lines += [f"**{percent}%** ({budget / 2**20:.1f} MiB)\n",
                  "| contender | completed | steps over budget | s/step | / plain | exact | memtrain's own | setup s |",
                  "|---|---|---|---|---|---|---|---|",
                  row("plain (no budget)", plain, budget, records)]
        if "plain compiled" in records:
            lines.append(row("plain, blocks compiled (no budget)", records["plain compiled"], budget, records))
        mine = {n: r for n, r in records.items() if n.startswith("memtrain")}
        timed_peers = {n: r for n, r in records.items() if not n.startswith("plain") and n not in mine}
        for name, r in list(mine.items()) + list(timed_peers.items()):
            lines.append(row(name, r, budget, records))
        unfit = [p for p in peaks if peaks[p] > budget and p.split()[0] not in {n.split()[0] for n in timed_peers}]
        if unfit:
            lines.append("| does not fit (peak at the longest batch): " +
                         ", ".join(f"{p} {peaks[p] / 2**20:.1f} MiB" for p in unfit) + " | | | | | | | |")

        def within(r):
            return ("least" not in r and not r.get("error") and len(r["times"]) > args.collect_steps
                    and all(p <= budget for p in r["peaks"]))
        good_peers = {n: r for n, r in timed_peers.items() if within(r)}
        fastest_mine = min((n for n, r in mine.items() if within(r)), key=lambda n: mean(mine[n]), default=None)
        if good_peers and fastest_mine:
            best = min(good_peers, key=lambda n: mean(good_peers[n]))
            lines.append(f"\nFastest peer whose steps all stayed within the budget: {best}, "
                         f"{mean(good_peers[best]):.4f} s/step; memtrain's fastest ({fastest_mine}): "
                         f"{mean(mine[fastest_mine]):.4f} s/step, **{mean(good_peers[best]) / mean(mine[fastest_mine]):.2f}x** "
                         "its speed.\n")
        elif fastest_mine:
            lines.append(f"\nNo peer stayed within the budget at every step; memtrain's fastest ({fastest_mine}) did, "
                         f"at {mean(mine[fastest_mine]) / mean(plain):.2f}x the plain step.\n")
        else:
            lines.append("\nmemtrain did not stay within the budget.\n")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
