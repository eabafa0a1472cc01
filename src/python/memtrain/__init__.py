"""memtrain: train a PyTorch model under a hard memory budget.

    import torch, memtrain
    model = torch.nn.Sequential(...)                       # your stages
    m = memtrain.Module(model, budget="50%", sample=largest_batch)
    opt = torch.optim.Adam(m.parameters())
    for x, y in batches:                                   # sizes may vary
        loss = torch.nn.functional.cross_entropy(m(x), y)  # your loss
        opt.zero_grad(); loss.backward(); opt.step()       # the planned backward
    print(m.last_step["plan"], memtrain.memory_stats())

For each input size memtrain predicts what every stage needs, plans which
activations to keep and which to recompute so the step fits the budget, and
runs that plan; gradients are those of the plain model, bit for bit.
"""

import torch  # first: the native module converts torch's tensors

from ._built_for import TORCH_VERSION as _BUILT_FOR_TORCH

if torch.__version__ != _BUILT_FOR_TORCH:
    raise ImportError(f"memtrain was built for torch {_BUILT_FOR_TORCH}, but this environment has torch "
                      f"{torch.__version__} ({torch.__file__}); rebuild memtrain for it: pip install --force-reinstall "
                      "--no-cache-dir <memtrain's source folder>")

from . import _memtrain as _native
from ._memtrain import BrownBatches, Chain, Error, Infeasible, OutOfBudget, UsageError, memory_stats, reset_peak

__all__ = ["Module", "Chain", "BrownBatches", "plan", "advise", "memory_stats", "reset_peak", "planner_names",
           "Error", "UsageError", "OutOfBudget", "Infeasible"]


def planner_names():
    """The planners a Module can use, as the CLI's --planner takes them."""
    return list(_native.planner_names())


class _PlannedStep(torch.autograd.Function):
    """The planned step as one autograd node: forward runs the schedule up to
    the model's output; backward hands the output's gradient to the schedule,
    which runs the planned backward and returns the input's gradient."""

    @staticmethod
    def forward(ctx, runner, x, *params):
        ctx.param_count = len(params)
        ctx.handle = runner.begin(x)
        return ctx.handle.take_output()

    @staticmethod
    def backward(ctx, dy):
        handle = ctx.handle
        ctx.handle = None
        dx = handle.finish(dy.contiguous())
        grads = [None] * (2 + ctx.param_count)
        if ctx.needs_input_grad[1]:
            grads[1] = dx
        return tuple(grads)


def _stages_of(stages):
    if isinstance(stages, torch.nn.Sequential):
        return list(stages.named_children())
    if isinstance(stages, (list, tuple, torch.nn.ModuleList)):
        return [(str(i), s) for i, s in enumerate(stages)]
    raise TypeError(f"stages of type {type(stages).__name__} are not stages; expected a torch.nn.Sequential "
                    "or a list of torch.nn.Module")


class Module(torch.nn.Module):
    """A model under a memory budget.

    stages: a torch.nn.Sequential, or a list of modules applied in order;
      each stage is a unit memtrain may keep, recompute or offload.
    budget: bytes (int), text such as "512MiB", or "N%" of the peak the plain
      model reaches on `sample`.
    planner: one of planner_names() ("mimose", "optimal", ...).
    sample: the largest input the model will see; measured once, before any
      step, for N% budgets and to check that the budget is feasible.
    collect_steps: steps run with every stage checkpointed while memtrain
      learns how each stage's memory grows with the input size.
    bandwidth: the host link that planners which copy to host memory
      ("swap", "tensile") plan with, in bytes/s or text such as "25GB/s";
      measured once when not given. Each step's own copies refine it.

    Calling the module under torch.no_grad() runs the stages plainly.
    """

    def __init__(self, stages, budget, planner="mimose", sample=None, collect_steps=4, bandwidth=None,
                 _prediction_scale=1.0):
        super().__init__()
        named = _stages_of(stages)
        for i, (name, stage) in enumerate(named):
            if not isinstance(stage, torch.nn.Module):
                raise TypeError(f"stage {i} is a {type(stage).__name__}, not a torch.nn.Module")
            # The stages' own names: state_dict() keys are the wrapped model's.
            self.add_module(name, stage)
        with torch.no_grad():
            # Weights made before memtrain was imported move into counted memory.
            for t in list(self.parameters()) + [b for b in self.buffers() if b is not None]:
                if t.device.type != "cpu":
                    raise UsageError(f"a parameter or buffer is on {t.device}; memtrain runs this model on cpu")
                t.data = t.data.clone()
        if sample is not None:
            if not isinstance(sample, torch.Tensor):
                raise TypeError(f"sample is a {type(sample).__name__}; expected a torch.Tensor")
        self._runner = _native.Runner([s for _, s in named], [f"{n} ({type(s).__name__})" for n, s in named],
                                      budget, planner, collect_steps, bandwidth, _prediction_scale)
        if sample is not None:
            self._runner.calibrate(sample)

    @property
    def budget_bytes(self):
        """The budget in bytes (an N% budget once `sample` is measured)."""
        return self._runner.budget_bytes

    @property
    def last_step(self):
        """What the last step did: plan ("collect", "new", "cached" or "retry"),
        input_shape, input_size, peak_bytes, predicted_peak_bytes, budget_bytes,
        retries, seconds and schedule (the operations, as the CLI prints them)."""
        return self._runner.last_step()

    def chain(self):
        """The cost model memtrain has learnt, at the largest input seen."""
        return self._runner.largest_chain()

    def forward(self, x):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"the input is a {type(x).__name__}; expected a torch.Tensor")
        if not torch.is_grad_enabled():
            for stage in self.children():
                x = stage(x)
            return x
        params = [p for p in self.parameters() if p.requires_grad]
        return _PlannedStep.apply(self._runner, x, *params)


def plan(model_or_chain, budget, planner="optimal"):
    """Plans without running: for a Chain, or a Module's learnt chain at its
    largest input. Returns feasible, planner, peak_bytes, time_seconds,
    schedule, recomputed_forwards, budget_bytes and unconstrained_peak_bytes;
    an infeasible budget raises Infeasible, whose min_bytes is the least
    budget the planner could work with."""
    chain = model_or_chain.chain() if isinstance(model_or_chain, Module) else model_or_chain
    if not isinstance(chain, Chain):
        raise TypeError(f"plan() takes a memtrain.Module or memtrain.Chain, not a {type(chain).__name__}")
    return _native.plan_chain(chain, budget, planner)


def advise(measurements, device_memory, headroom=0.10):
    """PAPAYA's advisor, as `memtrain advise`: measurements are
    (method, batch, peak_bytes, step_seconds) rows; returns the largest and
    the best batch per method and the method to use on a device with
    `device_memory` (bytes or text such as "16GiB")."""
    return _native.advise([tuple(r) for r in measurements], device_memory, headroom)
