"""The blocks' weights in host memory (memtrain.Module(weights="host")):
the loop's own optimizer updates them there.

The native steps move the blocks' parameters into host memory, bring each
block's to the device for its forward and its backward, and hand its
gradients back in host memory, where autograd accumulates them into the
parameters' .grad. The optimizer the loop steps (or the one transformers'
Trainer makes) holds every parameter; around each of its steps:

- before it, the host weights' gradients are set aside, so that the
  optimizer updates only the rest of the model, on the device;
- after it, the gradients are back, and a copy of the optimizer (its class,
  its groups' options as they are now, its very state dict) updates the host
  weights, with every tensor it makes (its state among them) made in host
  memory, outside the budget.

Each parameter's update is the optimizer's own arithmetic on the same
tensors, whichever of the two runs it: bit-equal to the plain model's step.
That holds for torch.optim's optimizers that update each parameter on its
own; LBFGS (which steps on the whole model through a closure) and
optimizers from other libraries are refused at their first step.
"""

import weakref

import torch
from torch.optim import optimizer as _optim

from ._memtrain import UsageError

# torch.optim's optimizers whose step updates each parameter from its own
# gradient and state alone.
PER_PARAMETER = ("Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD",
                 "Rprop")

_COPY_MARK = "_memtrain_host_copy"


def planner_for(planner, weights):
    """The planner a Module plans with: the one asked, or the default for
    where the weights live (which the native steps check)."""
    if planner is None:
        return "swap" if weights == "host" else "mimose"
    return planner


def is_copy(optimizer):
    """Whether `optimizer` is a copy that updates host weights."""
    return optimizer.__dict__.get(_COPY_MARK, False)


def on_host(module):
    """The ids of the Module's parameters kept in host memory (empty for
    weights on the device)."""
    updates = module.__dict__.get("_host_updates")
    return updates.ids if updates is not None else frozenset()


def give_back(module, optimizer):
    """The host weights' gradients set aside for `optimizer`'s step, back
    (the step is refused before it runs)."""
    updates = module.__dict__.get("_host_updates")
    if updates is not None:
        updates.give_back(optimizer)


class HostUpdates:
    """The host weights of one Module, updated by every optimizer that
    holds them. Global step hooks of torch.optim, holding the Module
    weakly; they remove themselves when the Module goes."""

    def __init__(self, module, ids):
        self.module = weakref.ref(module)
        self.ids = ids  # the host weights' (the blocks' own parameters)
        self.copies = weakref.WeakKeyDictionary()  # an optimizer: its copy over the host weights
        # An optimizer whose step runs now: the host weights' gradients it
        # must not see, given back when its step ends, or raises.
        self.set_aside = weakref.WeakKeyDictionary()
        self.guarded = weakref.WeakSet()  # optimizers whose step gives them back when it raises
        handles = [_optim.register_optimizer_step_pre_hook(self.before),
                   _optim.register_optimizer_step_post_hook(self.after)]
        weakref.finalize(module, lambda: [h.remove() for h in handles])

    def held_by(self, optimizer):
        return [p for g in optimizer.param_groups for p in g["params"] if id(p) in self.ids]

    def before(self, optimizer, args, kwargs):
        if self.module() is None or is_copy(optimizer):
            return
        self.give_back(optimizer)
        held = [p for p in self.held_by(optimizer) if p.grad is not None]
        if not held:
            return
        self.refuse_unsupported(optimizer)
        self.guard(optimizer)
        self.set_aside[optimizer] = [(p, p.grad) for p in held]
        for p in held:
            p.grad = None

    def guard(self, optimizer):
        """From its next step on, a step of `optimizer` that raises gives
        the gradients set aside back (its first step is under way: a
        refusal of the Module's own among its hooks gives them back itself).
        Its step as it is now (an LR scheduler's or accelerate's wrapper of
        it among them) runs inside."""
        if optimizer in self.guarded:
            return
        self.guarded.add(optimizer)
        step, me = optimizer.step, weakref.ref(self)

        def step_giving_back(*args, **kwargs):
            try:
                return step(*args, **kwargs)
            except BaseException:
                updates = me()
                if updates is not None:
                    updates.give_back(optimizer)
                raise

        optimizer.step = step_giving_back

    def give_back(self, optimizer):
        for p, grad in self.set_aside.pop(optimizer, []):
            p.grad = grad

    def after(self, optimizer, args, kwargs):
        module = self.module()
        if module is None or optimizer not in self.set_aside:
            return
        self.give_back(optimizer)
        groups = []
        for g in optimizer.param_groups:
            params = [p for p in g["params"] if id(p) in self.ids and p.grad is not None]
            if params:
                groups.append({**g, "params": params})  # its options as they are now (a scheduler's lr)
        if not groups:
            return
        native = module._native
        native.enter_host_memory()
        try:
            updater = self.copies.get(optimizer)
            if updater is None:
                # Made as unpickling makes one (its class's own __setstate__),
                # not through __init__, whose arguments its defaults need not name.
                updater = type(optimizer).__new__(type(optimizer))
                updater.__setstate__({"defaults": optimizer.defaults, "state": optimizer.state,
                                      "param_groups": groups})
                updater.__dict__[_COPY_MARK] = True
                self.copies[optimizer] = updater
            updater.param_groups = groups
            updater.state = optimizer.state  # one state: the optimizer's state_dict() holds the host weights' too
            updater.step()
        finally:
            native.leave_host_memory()

    def refuse_unsupported(self, optimizer):
        cls = type(optimizer)
        if cls.__module__.startswith("torch.optim") and cls.__name__ in PER_PARAMETER:
            return
        module = self.module()
        raise UsageError(f"{cls.__module__}.{cls.__name__} steps over weights that {type(module._model).__name__}'s "
                         "Module keeps in host memory (weights='host'), and memtrain updates those with a copy of "
                         "the optimizer that must give each parameter the update the optimizer would: supported "
                         f"are torch.optim's {', '.join(PER_PARAMETER)}; use one of them, or weights='device'")
