"""Module.step(closure): a micro-step memtrain can run again whole. Where
any part of it fails (its forward, the loop's own loss, or the backward
after some gradients were added to), it is rolled back: random
generators, buffers and every gradient as they were before it. Run again
after a failure of the budget, the loop's result is bit for bit that of a
loop where nothing failed; any other error reaches the loop unchanged,
with nothing of the micro-step left behind."""

import gc

import pytest
import torch
import torch.nn.functional as F

import memtrain
from exact import digest
from models import NanoGPT

VOCAB = 32000
MICRO = 2


def batches(seed=0):
    """Two updates of MICRO micro-batches, each of its own length."""
    g = torch.Generator().manual_seed(seed)
    return [[torch.randint(0, VOCAB, (2, length), generator=g) for length in lengths]
            for lengths in ((41, 57), (33, 49))]


def lm_loss(logits, ids):
    return F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten()) / MICRO


class Fault:
    """Raises `error` once, at `where` in the micro-step numbered `at`:
    "forward" (block 0's input, in the forward), "loss" (the loop's code
    after the blocks) or "backward" (block 0's input's gradient: the
    blocks' gradients are added to by then)."""

    def __init__(self, where, at, error):
        self.where, self.at, self.error = where, at, error
        self.micro_step = -1
        self.fired = False

    def arm(self, block0):
        def before_block0(module, args):
            if self.due("forward"):
                self.fire()
            if self.due("backward") and args[0].requires_grad:
                args[0].register_hook(lambda grad: self.fire() if self.due("backward") else None)
        return block0.register_forward_pre_hook(before_block0)

    def due(self, where):
        return not self.fired and self.where == where and self.micro_step == self.at

    def fire(self):
        self.fired = True
        raise self.error


def loop(model, data, fault=None, use_step=False, bf16=False):
    """AdamW over the updates; the micro-steps through m.step(closure) or a
    plain loss.backward(), inside a bfloat16 autocast context where bf16
    (a micro-step run again runs in the same context). Returns the
    weights' digests and the reruns."""
    torch.manual_seed(7)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle = fault.arm(model.blocks[0]) if fault is not None else None
    reruns = []
    for update in data:
        for ids in update:
            if fault is not None:
                fault.micro_step += 1

            def closure():
                loss = lm_loss(model(ids[:, :-1]), ids)
                if fault is not None and fault.due("loss"):
                    fault.fire()
                return loss
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                if use_step:
                    model.step(closure)
                    reruns.append(model.last_step["reruns"])
                else:
                    closure().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if handle is not None:
        handle.remove()
    return [digest(p) for p in model.parameters()], reruns


_plain = {}


def plain_weights(bf16=False):
    if bf16 not in _plain:
        _plain[bf16], _ = loop(NanoGPT(), batches(), bf16=bf16)
        gc.collect()
    return _plain[bf16]


def wrapped(budget="100%"):
    model = NanoGPT()
    return memtrain.Module(model, budget=budget, blocks=model.blocks, sample=batches()[0][1][:, :-1])


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("where", ["forward", "loss", "backward"])
@pytest.mark.parametrize("at", [0, 1, 3])  # an update's first micro-step, its last, the last update's last
def test_a_micro_step_out_of_memory_anywhere_runs_again_bit_equal(where, at, bf16):
    """torch's out-of-memory error, as a device's allocator raises it, in
    the forward, in the loop's loss or in the backward after the blocks'
    gradients were added to: the micro-step runs again, and the weights
    are the plain loop's, bit for bit (dropout draws included). Under
    bfloat16 autocast the run again is inside the context the failed run
    cast the weights in."""
    fault = Fault(where, at, torch.OutOfMemoryError("injected: out of memory"))
    weights, reruns = loop(wrapped(), batches(), fault, use_step=True, bf16=bf16)
    assert fault.fired
    assert reruns == [int(k == at) for k in range(len(reruns))]
    assert weights == plain_weights(bf16)


def test_without_failures_step_is_loss_backward():
    weights, reruns = loop(wrapped(), batches(), use_step=True)
    assert reruns == [0] * (2 * MICRO)
    assert weights == plain_weights()


@pytest.mark.parametrize("error", [KeyboardInterrupt(), ValueError("a hook's own error")], ids=type)
@pytest.mark.parametrize("where", ["loss", "backward"])
def test_any_other_error_reaches_the_loop_unchanged_with_the_micro_step_rolled_back(error, where):
    """Ctrl-C, or an error of the loop's own, in the second micro-step: it
    reaches the loop as raised, not run again, and the gradients of the
    first micro-step, the random generator and the buffers are as before
    the failed one. The loop can go on from there exactly."""
    m = wrapped()
    first, second = batches()[0]
    torch.manual_seed(7)
    m.step(lambda: lm_loss(m(first[:, :-1]), first))
    grads = [digest(p.grad) for p in m.parameters()]
    rng = torch.get_rng_state()
    fault = Fault(where, 1, error)
    fault.micro_step = 1
    handle = fault.arm(m.blocks[0])

    def closure():
        loss = lm_loss(m(second[:, :-1]), second)
        if fault.due("loss"):
            fault.fire()
        return loss
    with pytest.raises(type(error)) as raised:
        m.step(closure)
    handle.remove()
    assert raised.value is error
    assert [digest(p.grad) for p in m.parameters()] == grads
    assert torch.equal(torch.get_rng_state(), rng)
    # Going on: the second micro-step again, as if the failure never was.
    m.step(lambda: lm_loss(m(second[:, :-1]), second))
    again = [digest(p.grad) for p in m.parameters()]
    del m
    gc.collect()
    model = NanoGPT()
    torch.manual_seed(7)
    for ids in (first, second):
        lm_loss(model(ids[:, :-1]), ids).backward()
    assert again == [digest(p.grad) for p in model.parameters()]


def test_a_loss_the_budget_can_never_hold_is_refused_with_the_micro_step_rolled_back():
    """A loss that needs more than the budget holds with nothing of
    memtrain's left (a second float copy of the logits): where a plain
    loss.backward() meets torch's out-of-memory error in the loop's code,
    step() rolls the micro-step back, runs it again, and refuses it before
    it changes anything: memtrain.Infeasible naming the least, the first
    micro-step's gradients intact."""
    m = wrapped()
    m.budget = m.budget_bytes  # bytes, no longer a share that grows with the loop's step
    first, second = batches()[0]
    m.step(lambda: lm_loss(m(first[:, :-1]), first))
    grads = [digest(p.grad) for p in m.parameters()]

    def greedy():
        logits = m(second[:, :-1])
        return lm_loss(logits, second) + 0.0 * (logits.float() * 2).logsumexp(-1).sum()
    with pytest.raises(memtrain.Infeasible) as refused:
        m.step(greedy)
    assert refused.value.min_bytes > m.budget_bytes
    assert [digest(p.grad) for p in m.parameters()] == grads
    # Named as the loop counts its micro-steps: the one run again is the second still.
    assert "micro-step 2 (the model's forward number 3" in str(refused.value), str(refused.value)


@pytest.mark.parametrize("closure, error, match", [
    (lambda m, ids: None, TypeError, "closure returned a NoneType; expected the loss"),
    (lambda m, ids: m(ids), memtrain.UsageError, r"tensor of shape \(2, 40, 32000\); expected the loss"),
    (lambda m, ids: m(ids).sum().detach(), memtrain.UsageError, "needs no gradient"),
    (lambda m, ids: m(ids).sum().backward(), memtrain.UsageError, "closure ran a backward"),
], ids=["none", "not-scalar", "no-grad", "backward-inside"])
def test_a_closure_that_does_not_return_the_loss_is_refused_by_name(closure, error, match):
    m = wrapped()
    ids = batches()[0][0][:, :-1]
    with pytest.raises(error, match=match):
        m.step(lambda: closure(m, ids))
    assert all(p.grad is None for p in m.parameters())
