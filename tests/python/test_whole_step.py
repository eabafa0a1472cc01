"""The whole step under the budget, at a language model's real proportions: a
32000-word vocabulary, the loss computed by the training loop outside the
model, lengths that change every step, in a process that also holds another
model (a reference, as an EMA or a teacher would be)."""

import gc
import random

import pytest
import torch
import torch.nn.functional as F

import memtrain
from models import NanoGPT

ROWS = 4
LONGEST = 96


def batches(seed, count, shortest=16, longest=LONGEST):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        length = rng.randint(shortest, longest)
        out.append(torch.randint(0, 32000, (ROWS, length + 1), generator=gen))
    return out


def lm_loss(logits, ids):
    return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())


def step(model, ids, opt, zero_first=False, **kwargs):
    """One training step. zero_first: the gradients are freed before the
    forward (nanoGPT's loop), else between the forward and the backward
    (PyTorch's tutorials), so they are alive while the blocks run forward."""
    if zero_first:
        opt.zero_grad(set_to_none=True)
    loss = lm_loss(model(ids[:, :-1], **kwargs), ids)
    if not zero_first:
        opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def checkpointed_peak(data, keeps_output=False):
    """The process's peak when every block is checkpointed with
    torch.utils.checkpoint (non-reentrant), the peer whose least budget
    memtrain's is held to, at the data's longest batch, in the loop that
    memtrain's least is stated for: with every gradient resident through the
    step (as accumulating micro-batches leave them), in float32 or under
    bfloat16 autocast, whichever peaks higher; keeps_output: the loop holds
    the logits through the backward."""
    longest = max(data, key=lambda ids: ids.shape[1])
    peaks = []
    for bf16 in (False, True):
        model = NanoGPT()
        for _ in range(2):  # the first allocates the gradients, as in training
            memtrain.reset_peak()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(longest[:, :-1], checkpoint=True)
                loss = lm_loss(logits, longest)
            if not keeps_output:
                del logits
            loss.backward()
            del loss
            logits = None
        peaks.append(memtrain.memory_stats()["peak_bytes"])
        del model
        gc.collect()
    return max(peaks)


def sample_of(data):
    return max(data, key=lambda ids: ids.shape[1])[:, :-1]


@pytest.fixture(scope="module")
def reference():
    return NanoGPT(seed=1)  # held through every test: resident bytes the budget counts


def train_within(budget, data, planner):
    """Trains a fresh model under `budget`; every step's peak, the loss,
    its backward and the update included, stays within it."""
    model = NanoGPT()
    m = memtrain.Module(model, budget=budget, blocks=model.blocks, planner=planner, sample=sample_of(data),
                        keeps_output=False)  # step() lets the logits go before the backward
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    plans = []
    for ids in data:
        memtrain.reset_peak()
        step(m, ids, opt)
        report = m.last_step
        plans.append(report["plan"])
        assert report["peak_bytes"] <= budget, report
        assert memtrain.memory_stats()["peak_bytes"] <= budget, f"step {report['step']}"
    return plans


@pytest.mark.parametrize("planner", ["mimose", "optimal"])
def test_from_the_least_budget_up_every_step_fits(reference, planner):
    data = batches(1, 10)
    peak = checkpointed_peak(data)
    for factor in (1.02, 1.2):
        plans = train_within(int(factor * peak), data, planner)
        assert plans[-1] in ("new", "cached"), plans


@pytest.mark.parametrize("keeps_output", [False, True], ids=["output-let-go", "output-kept"])
def test_below_the_least_budget_construction_is_refused(reference, keeps_output):
    """The least stated, for a loop that lets its logits go before the
    backward and for one that keeps them, is held to the peak of every
    block checkpointed in that loop."""
    data = batches(2, 1)
    peak = checkpointed_peak(data, keeps_output)
    model = NanoGPT()
    with pytest.raises(memtrain.Infeasible) as refused:
        memtrain.Module(model, budget=int(0.95 * peak), blocks=model.blocks, sample=sample_of(data),
                        keeps_output=keeps_output)
    assert 0.95 * peak < refused.value.min_bytes <= 1.02 * peak, (refused.value.min_bytes, peak)


def test_a_step_no_plan_fits_is_refused_before_it_changes_anything(reference):
    """A batch longer than the sample, at a budget only the sample fits: the
    step is refused from the Module's call, with the generators, weights and
    gradients as they were; the loop raises the budget and goes on, and the
    weights equal a plain run's on the same batches."""
    data = batches(3, 6, longest=48)
    data[3] = torch.randint(0, 32000, (ROWS, 4 * LONGEST + 1), generator=torch.Generator().manual_seed(9))

    def train(model, plain):
        torch.manual_seed(5)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        refusals = 0
        for ids in data:
            while True:
                rng, weights = torch.get_rng_state(), [p.detach().clone() for p in model.parameters()]
                try:
                    step(model, ids, opt, zero_first=True)
                    break
                except memtrain.Infeasible as e:
                    assert not plain
                    refusals += 1
                    assert e.min_bytes > model.budget_bytes
                    assert "larger than the sample's" in str(e), str(e)  # what to give instead
                    # The embeddings' dropout before block 0 drew and was put back.
                    assert torch.equal(rng, torch.get_rng_state())
                    assert all(torch.equal(p, w) for p, w in zip(model.parameters(), weights))
                    assert all(p.grad is None for p in model.parameters())
                    model.budget = e.min_bytes + (e.min_bytes >> 3)
        return refusals

    plain = NanoGPT()
    train(plain, plain=True)
    model = NanoGPT()
    m = memtrain.Module(model, budget=int(1.3 * checkpointed_peak(data[:3])), blocks=model.blocks,
                        sample=sample_of(data[:3]))
    assert train(m, plain=False) == 1
    assert m.last_step["peak_bytes"] <= m.budget_bytes
    for (name, p), q in zip(plain.named_parameters(), m.parameters()):
        assert torch.equal(p, q), f"{name} differs from the plain run's"


def test_gradient_accumulation_with_adam_at_the_least_budget_the_constructor_accepts(reference):
    data = batches(4, 9, longest=64)
    sample = sample_of(data)

    def wrapped(budget):
        model = NanoGPT()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        return memtrain.Module(model, budget=budget, blocks=model.blocks, planner="optimal", sample=sample,
                               optimizer=opt), opt

    with pytest.raises(memtrain.Infeasible) as refused:
        wrapped(1 << 20)
    least = refused.value.min_bytes
    del refused  # its traceback holds the refused model
    gc.collect()
    m, opt = wrapped(least)
    assert all(len(s) == 0 for s in opt.state.values())  # the measurement left no state behind
    for k in range(0, len(data), 3):  # three micro-steps per update; Adam's state appears at the first
        opt.zero_grad(set_to_none=True)
        for ids in data[k:k + 3]:
            memtrain.reset_peak()
            lm_loss(m(ids[:, :-1]), ids).backward()
            assert m.last_step["peak_bytes"] <= least
            assert memtrain.memory_stats()["peak_bytes"] <= least
        memtrain.reset_peak()
        opt.step()
        assert memtrain.memory_stats()["peak_bytes"] <= least
