"""Fuzzing the two front ends with seeded mutations, each case in a process
of its own so that a death by a signal shows:
- the CLI (`memtrain train`) on flag sets drawn from its flags, valid and
  broken values, unknown flags and flags without values: no signal, no c10
  backtrace, exit 0 or 1 for what it accepts and ran, 2 for bad input with
  a message that names a flag;
- the Python module on Module arguments, samples and calls drawn the same
  way: no signal, no backtrace, a refusal names the argument, and an
  accepted case's gradients equal the plain model's, bit for bit;
- the Python module under what users do to a model, one to three things
  at once (adapters added to it after wrapping, a low-rank adapter, parts
  frozen, torch.func.functional_call, bfloat16 autocast around the forward
  or the whole micro-step, accumulation,
  m.step(closure), a copy of the model trained beside it, Ctrl-C in a
  block's backward, wrapping it again after unwrap()): each as on the
  plain model, bit for bit, with an interrupt reaching the loop as raised.
The Python cases fork from one process that imported torch once
(forked.py). MEMTRAIN_FUZZ_CASES sets how many cases each draws (default
24)."""

import json
import os
import random
import subprocess

import pytest
from forked import Forks

CLI = os.environ.get("MEMTRAIN_CLI")
CASES = int(os.environ.get("MEMTRAIN_FUZZ_CASES", "24"))
BACKTRACE = "Exception raised from"

# (flag, values): good values first, then broken ones.
CLI_FLAGS = [
    ("--steps", ["1", "2", "0", "-3", "x", "1.5"]),
    ("--batch", ["4", "8", "0", "100000", "y"]),
    ("--budget", ["100%", "90%", "64MiB", "0%", "150%", "1.5", "12 parsecs", "1 GB"]),
    ("--planner", ["mimose", "optimal", "none", "rotor", ""]),
    ("--collect-steps", ["1", "2", "11", "-1"]),
    ("--threads", ["1", "2", "0", "2000"]),
    ("--margin", ["0.1", "-1", "nan"]),
    ("--bandwidth", ["25GB/s", "fast"]),
    ("--checkpoint-dir", ["{dir}/ckpt", "{file}"]),
    ("--checkpoint-every", ["1", "0"]),
    ("--frobnicate", ["1"]),
]


def cli_case(rng, tmp):
    args = ["train", "--quiet", "--steps", "1", "--batch", "4", "--budget", "100%"]
    chosen = rng.sample(CLI_FLAGS, rng.randint(1, 3))
    for flag, values in chosen:
        if flag in args:
            i = args.index(flag)
            del args[i:i + 2]
        value = rng.choice(values).format(dir=tmp, file=os.path.join(tmp, "file"))
        args += [flag] if rng.random() < 0.1 else [flag, value]  # sometimes without its value
    return args


@pytest.mark.skipif(not CLI, reason="MEMTRAIN_CLI not set")
def test_the_cli_refuses_by_name_and_never_dies(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    rng = random.Random(1)
    for case in range(CASES):
        args = cli_case(rng, str(tmp_path))
        out = subprocess.run([CLI] + args, capture_output=True, text=True, timeout=120)
        said = out.stdout + out.stderr
        where = f"case {case}: memtrain {' '.join(args)} -> {out.returncode}: {said[-400:]}"
        assert out.returncode >= 0, "died by a signal: " + where
        assert BACKTRACE not in said, where
        assert out.returncode in (0, 1, 2), where
        if out.returncode == 2:
            assert "--" in out.stderr or "unknown" in out.stderr, where


# What every Python case imports, imported once by the process they fork from.
PRELOAD = ["torch", "torch.nn.functional", "memtrain", "models", "exact"]


def test_a_forked_case_that_dies_by_a_signal_shows_it():
    """The fork server reports a case's signal, its exit status and what it
    printed, as a process of its own would: the checks below can fail."""
    with Forks(PRELOAD) as forks:
        died = forks.run("import os, signal; print('x'); os.kill(os.getpid(), signal.SIGSEGV)", [], timeout=60)
        exited = forks.run("import sys; print(sys.argv[1]); sys.exit(3)", ["y"], timeout=60)
        raised = forks.run("raise ValueError('z')", [], timeout=60)
    assert died.returncode == -11 and died.stdout == "x\n", died
    assert exited.returncode == 3 and exited.stdout == "y\n", exited
    assert raised.returncode == 1 and "ValueError: z" in raised.stderr, raised


PYTHON_CASE = r'''
import json, sys, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[2])
import memtrain
from models import MaskedGPT
case = json.loads(sys.argv[1])
def batch(length, seed):
    return torch.randint(0, 300, (3, length), generator=torch.Generator().manual_seed(seed))
kwargs = {k: v for k, v in case["kwargs"].items()}
if "sample" in case:
    kwargs["sample"] = batch(case["sample"], 0)
try:
    m = memtrain.Module(MaskedGPT(layers=3), **kwargs)
except (memtrain.Error, TypeError, ValueError) as e:
    print(json.dumps({"refused": str(e)}))
    sys.exit(0)
plain = MaskedGPT(layers=3)
for step, length in enumerate(case["lengths"]):
    ids = batch(length, step + 1)
    grads = []
    for model in (plain, m):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(step)
        try:
            F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
        except memtrain.Error as e:  # a refusal, or a budget no schedule fits
            print(json.dumps({"step_error": str(e)}))
            sys.exit(0)
        grads.append([p.grad for p in model.parameters()])
    if not all(torch.equal(a, b) for a, b in zip(*grads)):
        print(json.dumps({"inexact": step}))
        sys.exit(0)
print(json.dumps({"trained": len(case["lengths"])}))
'''

# Module arguments: names and the values drawn for them.
PYTHON_ARGS = {
    "budget": ["70%", "100%", 64 << 20, "64MiB", -5, 0, 2**70, "1.5", "lots", None, 3.5, True],
    "planner": ["mimose", "optimal", "joint", None, 3, "rotor"],
    "collect_steps": [0, 2, 4, "a", -1, 11, True],
}


def python_case(rng):
    kwargs = {"budget": "70%"}
    for name in rng.sample(sorted(PYTHON_ARGS), rng.randint(1, 2)):
        kwargs[name] = rng.choice(PYTHON_ARGS[name])
    case = {"kwargs": kwargs, "lengths": [rng.choice([8, 16, 24]) for _ in range(3)]}
    if rng.random() < 0.8:
        case["sample"] = rng.choice([24, 0])
    return case


def test_the_module_refuses_by_name_and_what_it_accepts_is_exact():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(2)
    with Forks(PRELOAD) as forks:
        outcomes = draw_module_cases(forks, rng, here)
    # The draw covers both sides: refusals and cases that train.
    assert outcomes.get("refused", 0) > 0 and outcomes.get("trained", 0) > 0, outcomes


def draw_module_cases(forks, rng, here):
    outcomes = {}
    for case_number in range(CASES):
        case = python_case(rng)
        out = forks.run(PYTHON_CASE, [json.dumps(case), here], timeout=120)
        where = f"case {case_number}: {case} -> {out.returncode}: {(out.stdout + out.stderr)[-600:]}"
        assert out.returncode == 0, "died (by a signal where negative): " + where
        assert BACKTRACE not in out.stdout + out.stderr, where
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert "inexact" not in result, where
        if "refused" in result:
            message = result["refused"]
            named = [n for n in list(case["kwargs"]) + ["sample", "budget"] if n in message]
            assert named, "a refusal that names no argument: " + where
        outcomes[next(iter(result))] = outcomes.get(next(iter(result)), 0) + 1
    return outcomes


USER_CASE = r'''
import copy, json, sys, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[2])
import memtrain
from exact import digest
from models import VOCAB, SharedGainNet, add_adapters, add_low_rank
actions = json.loads(sys.argv[1])
g = torch.Generator().manual_seed(0)
data = [[torch.randint(0, VOCAB, (2, n), generator=g) for n in lengths] for lengths in ((33, 41), (49, 25), (57, 33))]
micro = 2 if "accumulate" in actions else 1

def loss_of(model, ids, params=None):
    # hidden-loss: a hook that records block 1's output, and a loss on it beside the model's
    hidden = []
    hook = (model.blocks[1].register_forward_hook(lambda block, args, out: hidden.append(out))
            if "hidden-loss" in actions else None)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled="bf16" in actions or "autocast-span" in actions):
        logits = torch.func.functional_call(model, params, (ids,)) if params is not None else model(ids)
    if hook is not None:
        hook.remove()
    loss = F.cross_entropy(logits[:, :-1].float().flatten(0, 1), ids[:, 1:].flatten())
    for h in hidden:
        loss = loss + h.float().pow(2).mean()
    return loss / micro

def change(model, step):
    if step == 1 and "adapters" in actions:
        add_adapters(model)
    if step == 1 and "low-rank" in actions:
        add_low_rank(model)
    if step == 1 and "freeze" in actions:
        for p in list(model.embed.parameters()) + list(model.blocks[0].parameters()):
            p.requires_grad_(False)

def micro_step(model, ids, params, wrapped, first):
    if "interrupt" in actions and wrapped and first:
        # Ctrl-C in a block's backward, at an update's start: the loop
        # catches it, puts the generator back and runs the micro-batch again.
        def stop(grad):
            raise KeyboardInterrupt
        rng = torch.get_rng_state()
        owned = [(b.noise, b.noise.get_state()) for b in model.blocks if b.noise is not None]
        weight = params["blocks.1.fc2.weight"] if params is not None else model.blocks[1].fc2.weight
        handle = weight.register_hook(stop)
        try:
            loss_of(model, ids, params).backward()
            raise AssertionError("the interrupt did not reach the loop")
        except KeyboardInterrupt:
            pass
        handle.remove()
        model.zero_grad(set_to_none=True)
        if params is not None:
            for t in params.values():
                t.grad = None
        torch.set_rng_state(rng)
        for g, state in owned:
            g.set_state(state)
    if "step" in actions and wrapped:
        model.step(lambda: loss_of(model, ids, params))
    else:
        loss_of(model, ids, params).backward()

def train(model, wrapped):
    torch.manual_seed(3)
    seen, twin = [], copy.deepcopy(model) if "copy" in actions else None
    for step, update in enumerate(data):
        change(model, step)
        params = ({n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in model.named_parameters()}
                  if "functional" in actions else None)
        for ids in update[:micro]:
            # autocast-span: the whole micro-step (its backward, a run again) inside one autocast context
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled="autocast-span" in actions):
                micro_step(model, ids, params, wrapped, first=step == 1 and ids is update[0])
        if twin is not None:  # a copy trained beside it: its own, reaching neither the model nor memtrain
            loss_of(twin, update[0]).backward()
            twin.zero_grad(set_to_none=True)
        holders = params.values() if params is not None else [p for _, p in model.named_parameters()]
        seen.append([digest(p.grad) for p in holders])
        with torch.no_grad():
            for p in holders:
                if p.grad is not None:
                    p -= 0.1 * p.grad
        model.zero_grad(set_to_none=True)
    return seen

plain = train(SharedGainNet(own_generator="own-generator" in actions), False)
model = SharedGainNet(own_generator="own-generator" in actions)
sample = max((ids for u in data for ids in u), key=lambda t: t.shape[1])
m = memtrain.Module(model, budget="100%", sample=sample)
if "rewrap" in actions:
    m.unwrap()
    m = memtrain.Module(model, budget="100%", sample=sample)
m.budget = 2 * m.budget_bytes  # room for what the case keeps beside it (a copy, functional parameters)
got = train(m, True)  # its first steps collect: every block recomputed in the backward
print(json.dumps({"exact": got == plain, "steps": len(got)}))
'''

USER_ACTIONS = ["adapters", "low-rank", "freeze", "functional", "bf16", "accumulate", "step", "copy", "interrupt",
                "rewrap", "autocast-span", "own-generator", "hidden-loss"]


# Drawn every time beside the random ones: a micro-step run again inside
# the autocast context its failed run cast the weights in; blocks that draw
# from generators of their own, a micro-step of them run again; a loss on
# a hidden state between blocks, through functional parameters.
PINNED_ACTIONS = [["autocast-span", "interrupt"], ["autocast-span", "step", "accumulate"],
                  ["own-generator", "interrupt", "step"], ["hidden-loss", "functional", "bf16"]]


def test_what_users_do_to_a_model_trains_as_the_plain_model():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(3)
    drawn = [rng.sample(USER_ACTIONS, rng.randint(1, 3)) for _ in range(max(4, CASES // 2))]
    with Forks(PRELOAD) as forks:
        for case_number, actions in enumerate(PINNED_ACTIONS + drawn):
            check_user_case(forks, case_number, actions, here)


def check_user_case(forks, case_number, actions, here):
    out = forks.run(USER_CASE, [json.dumps(actions), here], timeout=180)
    where = f"case {case_number}: {actions} -> {out.returncode}: {(out.stdout + out.stderr)[-900:]}"
    assert out.returncode == 0, where
    assert BACKTRACE not in out.stdout + out.stderr, where
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"exact": True, "steps": 3}, where
