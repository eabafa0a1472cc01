"""A micro-step that can be run again whole: Module.step(closure).

The code a loop runs after the blocks (the head, the loss) is the caller's,
and memtrain cannot run it again on its own. Given that code as a closure,
it can: the micro-step's forward, loss and backward run under a Rollback,
and where any part of them runs out of the budget, the micro-step is put
back as it found it and run again, under the plan the failure taught.
"""

import torch

from . import _blocks
from . import _memtrain as _native


class Rollback:
    """What a micro-step may change, as it was before it: torch's random
    generators, the model's buffers that steps change in place, and each
    parameter's gradient. A gradient is copied to host memory (outside the
    budget) only when the backward first reaches its parameter, before
    autograd adds to it: a micro-step that fails in its forward copies
    nothing, and one that succeeds adds nothing to the device."""

    def __init__(self, module):
        self.module = module
        self.device = module._device
        self.entry = _blocks.StepEntry(_all_buffers(module), self.device, module._native.host_copy,
                                       _blocks.owned_generators(module._model))  # generators and buffers
        self.gradients = {}  # parameter's id -> (parameter, its gradient before: a host copy, or None)
        self.hooks = [p.register_hook(self._before_accumulation(p)) for p in module.parameters() if p.requires_grad]

    def _before_accumulation(self, p):
        def hook(grad):
            if id(p) not in self.gradients:
                before = p.grad
                self.gradients[id(p)] = (p, None if before is None else self.module._native.host_copy(before))
            return None
        return hook

    def close(self):
        for h in self.hooks:
            h.remove()
        self.hooks = []

    def roll_back(self):
        self.entry.restore()
        with torch.no_grad():
            for p, before in self.gradients.values():
                if before is None:
                    p.grad = None
                elif p.grad is not None and p.grad.shape == before.shape and p.grad.dtype == before.dtype:
                    p.grad.copy_(before)
                else:
                    p.grad = torch.empty_like(before, device=p.device).copy_(before)
        self.gradients = {}


def _all_buffers(module):
    """The model's buffers, with which of them steps change (learnt across
    micro-steps while the model's buffers stay the same ones)."""
    buffers = [b for b in module.buffers() if b is not None]
    known = module.__dict__.get("_all_buffers")
    if known is None or len(known.buffers) != len(buffers) or any(a is not b for a, b in zip(known.buffers, buffers)):
        known = module.__dict__["_all_buffers"] = _blocks.ChangingBuffers(buffers)
    return known


def ran_out(error, refusals_before, native):
    """Whether `error` is the budget's: memtrain's OutOfBudget, torch's
    out-of-memory error (what the caller's code after the blocks meets), or
    any error raised while the budget refused an allocation."""
    if isinstance(error, _native.Infeasible):
        return False  # refused before anything ran: nothing stricter to try
    if isinstance(error, (_native.OutOfBudget, torch.OutOfMemoryError)):
        return True
    return isinstance(error, RuntimeError) and native.refusals() > refusals_before


def run(module, closure, retries):
    """closure() and its loss's backward, run again after rolling back
    where the budget ran out, at most `retries` times; returns the loss."""
    blocks = module._blocks
    for attempt in range(retries + 1):
        rollback = Rollback(module)
        refusals = module._native.refusals()
        begun = module._native.steps_begun
        backwards = blocks.backwards
        failed = loss = None
        try:
            loss = closure()
            _check_loss(loss, blocks.backwards != backwards)
            loss.backward()
            module._reruns = attempt
            return loss.detach()
        except BaseException as e:
            rollback.roll_back()
            module._native.cancel()
            if attempt == retries or not ran_out(e, refusals, module._native):
                raise
            failed = e
            # The same micro-step runs again: numbered once, as the loop counts it.
            module._native.count_steps_run_again(module._native.steps_begun - begun)
        finally:
            rollback.close()
        # The failure's frames hold the micro-step's tensors: drop them
        # before it runs again.
        failed.__traceback__ = None
        del failed, rollback, loss
    raise AssertionError("unreachable")


def _check_loss(loss, backward_ran):
    if backward_ran:
        raise _native.UsageError("the closure ran a backward through the memtrain.Module itself; memtrain.Module."
                                 "step(closure) runs it: return the loss from the closure without calling backward()")
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"the closure returned a {type(loss).__name__}; expected the loss, a tensor")
    if loss.numel() != 1 or not loss.requires_grad:
        raise _native.UsageError(f"the closure returned a tensor of shape {tuple(loss.shape)}"
                                 f"{'' if loss.requires_grad else ' that needs no gradient'}; expected the loss: "
                                 "one number computed from the Module's output, with grad enabled")
