"""memtrain: train a PyTorch model under a hard memory budget.

    import torch, memtrain
    model = MyGPT(...)                                     # any nn.Module
    m = memtrain.Module(model, budget="50%", sample=(longest_ids, mask))
    opt = torch.optim.Adam(m.parameters())
    for ids, mask, y in batches:                           # sizes may vary
        loss = torch.nn.functional.cross_entropy(m(ids, mask), y)
        opt.zero_grad(); loss.backward(); opt.step()       # the planned backward
    print(m.last_step["plan"], memtrain.memory_stats())

The model's forward runs as written; its repeated blocks (the longest
ModuleList of one class, or blocks=) are the stages memtrain plans. For each
input size memtrain predicts what every block needs, plans which
activations to keep and which to recompute so the step fits the budget, and
runs that plan; gradients are those of the plain model, bit for bit.
"""

import contextlib
import copy
import functools
import gc
import inspect
import math
import os
import traceback
import warnings
import weakref

import torch  # first: the native module converts torch's tensors

from ._built_for import TORCH_VERSION as _BUILT_FOR_TORCH

if torch.__version__ != _BUILT_FOR_TORCH:
    raise ImportError(f"memtrain was built for torch {_BUILT_FOR_TORCH}, but this environment has torch "
                      f"{torch.__version__} ({torch.__file__}); rebuild memtrain for it: pip install --force-reinstall "
                      "--no-cache-dir <memtrain's source folder>")

from . import _blocks
from . import _host_updates
from . import _memtrain as _native
from . import _micro_step
from ._causal_lm_loss import ChunkedHead as _ChunkedHead
from ._linear_cross_entropy import chunk_tokens_for as _chunk_tokens_for
from ._linear_cross_entropy import least_held as _least_held
from ._linear_cross_entropy import linear_cross_entropy
from ._trainer import rerunnable
from . import _job_group
from ._job_group import JobGroup
from ._memtrain import (BrownBatches, Chain, Error, Infeasible, OutOfBudget, RankFailure, UsageError, memory_stats,
                        reset_peak)

__all__ = ["Module", "JobGroup", "Chain", "BrownBatches", "least_budget", "plan", "advise", "memory_stats",
           "reset_peak", "planner_names", "linear_cross_entropy", "rerunnable", "Error", "UsageError", "OutOfBudget",
           "Infeasible", "RankFailure"]


def planner_names():
    """The planners a Module can use, as the CLI's --planner takes them
    ("swap-naive" with weights="host" only)."""
    return list(_native.planner_names())


def _device_of(model):
    """The one device of the model's parameters and buffers: "cpu", or a
    CUDA device with its index."""
    devices = {t.device for t in list(model.parameters()) + list(model.buffers()) if t is not None}
    if len(devices) > 1:
        raise UsageError(f"the model's parameters and buffers are on {', '.join(sorted(map(str, devices)))}; "
                         "memtrain plans a model on one device")
    device = devices.pop() if devices else torch.device("cpu")
    if device.type == "cuda":
        return torch.device("cuda", device.index if device.index is not None else torch.cuda.current_device())
    if device.type != "cpu":
        raise UsageError(f"the model is on {device}; memtrain runs models on cpu or cuda")
    return device


def _as_sequential(stages):
    """A list of stages as the nn.Sequential that applies them in order."""
    if isinstance(stages, torch.nn.Sequential):
        return stages
    for i, stage in enumerate(stages):
        if not isinstance(stage, torch.nn.Module):
            raise TypeError(f"stage {i} is a {type(stage).__name__}, not a torch.nn.Module")
    return torch.nn.Sequential(*stages)


class Module(torch.nn.Module):
    """A model under a memory budget.

    model: any torch.nn.Module. Its forward runs as written, with the
      arguments the module is called with; its repeated blocks are the units
      memtrain may keep, recompute or offload. Or a torch.nn.Sequential (or a
      list of modules applied in order), whose stages are those units.
    budget: bytes (int), text such as "512MiB", or "N%" of the peak the plain
      model reaches on `sample`. Left out with share=.
    blocks: the model's repeated blocks, a torch.nn.ModuleList or a list of
      its submodules, which its forward calls one after another, each on what
      the one before returned. Left out: the longest ModuleList in the model
      whose modules are all of one class.
    planner: one of planner_names() ("mimose", "optimal", ...); left out,
      "mimose", or "swap" with weights="host".
    sample: the largest input the model will see (a tensor, a tuple of the
      forward's arguments or a dict of its keyword arguments); measured once,
      before any step, for N% budgets and to check that the budget is
      feasible. Your loss is not known then: a cross-entropy over the
      output's last dimension stands in for it until the steps measure it,
      the output held through its backward as keeps_output says.
    optimizer: the torch.optim optimizer you will step (made on the model's
      parameters), when its state does not exist yet (Adam's appears at its
      first step): with a sample, its state and its update are measured
      (one update on zero gradients, undone) and counted from the start.
    collect_steps: steps run with every block checkpointed while memtrain
      learns how each block's memory grows with the input size.
    bandwidth: the host link that planners which copy to host memory
      ("swap", "tensile") plan with, in bytes/s or text such as "25GB/s";
      measured once when not given. Each step's own copies refine it.
    chunked_loss: for a transformers causal language model called with
      labels, whether its head and loss run in chunks of tokens, never
      holding the whole logits: None, where the budget needs it; True,
      always; False, never.
    autocast: the precision the loop runs a float32 model's forward in,
      which the least budget is measured for: None, both float32 and
      bfloat16 autocast (as most language models are trained); False,
      float32 only (a forward under autocast is then refused); or
      torch.bfloat16 or torch.float16, that autocast only (a forward
      outside it is then refused). Naming one can lower the least where
      the other precision holds more.
    keeps_output: whether your loop keeps the model's output alive through
      its backward: True (most loops: `out = m(x); out.loss.backward()`, or
      logits kept for the loss the loop computes), and the least budget
      counts the output's bytes; False for a loop that lets it go first
      (`del out`, torchtune's and torchtitan's loops, transformers'
      Trainer), which needs up to the output's bytes less. A loop said to
      let it go that keeps it is warned, and planned as keeping it from
      then on.
    share: the name of a job group (memtrain.JobGroup, or memtrain jobs
      --name) whose budget this process shares with the group's other
      processes: every tensor this process holds on the device counts
      against the group's budget, and each step runs within the lease the
      group grants it, asked with what its input is predicted to need. The
      sample is measured in the group's turn (its plain step is this job's
      part of an N% group budget). CPU only for now.
    weights: where the blocks' weights live between their uses: "device"
      (the default), or "host": in host memory, with their gradients and
      your optimizer's state for them, outside the budget. Each block's
      weights come to the device for its forward and again for its
      backward, as the planner ("swap", or "swap-naive") schedules them,
      and its gradients go back to host memory as the backward makes them,
      so a model whose blocks' weights exceed the budget trains under it.
      Your optimizer updates them there: torch.optim's optimizers that
      update each parameter on its own (Adam, AdamW, SGD, RMSprop, ...)
      are supported, and the result is bit-equal to the plain model's.
      The rest of the model (embeddings, the head) stays on the device,
      with its gradients and optimizer state. Takes a budget in bytes or
      "N%" (of the plain step with every weight on the device), and
      share=; CPU only for now.

    Under torch.no_grad() the model runs plainly. The state_dict() is the
    model's, with its own keys.

    A step no schedule can fit raises memtrain.Infeasible (with the least
    budget in .min_bytes) from this module's call, with torch's random
    generators and the model's buffers as they were before it: the loop may
    catch it and go on with a larger budget or a smaller batch.
    """

    def __init__(self, model, budget=None, blocks=None, planner=None, sample=None, collect_steps=4,
                 bandwidth=None, optimizer=None, chunked_loss=None, autocast=None, keeps_output=True, share=None,
                 weights="device", _prediction_scale=1.0):
        super().__init__()
        planner = _host_updates.planner_for(planner, weights)
        _check_arguments(budget, planner, collect_steps, sample, autocast, keeps_output)
        _check_share(share, budget, sample)
        if blocks is None and isinstance(model, (torch.nn.Sequential, list, tuple, torch.nn.ModuleList)):
            # A chain: its stages are the blocks, called one after another.
            model = _as_sequential(model)
            blocks = list(model.children())
        elif not isinstance(model, torch.nn.Module):
            raise TypeError(f"a model of type {type(model).__name__} is not a model; expected a torch.nn.Module, "
                            "or a list of torch.nn.Module applied in order")
        # Refuses before the blocks are wrapped; holds the Module weakly, as the Module holds it.
        head = _ChunkedHead(model, chunked_loss, weakref.WeakMethod(self._chunk_tokens))
        device = self._share_state_of(model, head)
        blocks = _blocks.blocks_of(model, blocks)
        if any(isinstance(f, _blocks.BlockForward) and f.blocks_ref() is not None
               for f in (b.__dict__.get("forward") for b in blocks)):
            raise UsageError(f"{type(model).__name__} is wrapped by a memtrain.Module already (its blocks run "
                             "through it); wrap a model once: m.unwrap() gives the model back, and "
                             "copy.deepcopy(model) is a plain copy")
        if not any(p.requires_grad for p in model.parameters()):
            raise UsageError(f"every parameter of {type(model).__name__} is frozen (requires_grad=False): a "
                             "training step has nothing to train; memtrain.Module plans training steps")
        self._options = {"planner": planner, "collect_steps": collect_steps, "bandwidth": bandwidth,
                         "chunked_loss": chunked_loss, "autocast": autocast, "keeps_output": keeps_output,
                         "weights": weights}
        self._prediction_scale = _prediction_scale
        self._device = device
        if share is not None:
            # The group's part of this job is its plain step, measured as "100%" is.
            self.__dict__["_member"] = _job_group.join(share, device, type(model).__name__, planner)
            budget = "100%"
        self._budget_spec = budget  # as given: N% stays a share of the plain loop's step
        self._plan_blocks(blocks, budget)
        if weights == "host":
            # Before the sample's optimizer update is measured: it updates them too.
            self.__dict__["_host_updates"] = _host_updates.HostUpdates(self, self._blocks.host_ids)
        try:
            _refuse_share_without_sample(budget, sample)  # after the planner's own refusals
            if share is not None:
                self._member.begin_calibration()  # the group's jobs measure one at a time
            self._measure(sample, optimizer, budget)
            if share is not None:
                self._lease_steps(self._member)
            _refuse_above_the_device(self.budget_bytes, device)
            if self._head.mode is None and self._head.chunking:
                self._warn_chunking(stacklevel=2)
        except BaseException as refused:
            # Refused (Infeasible names the least budget): the model is as
            # it was, to wrap again with another budget, and what measuring
            # held is let go, though the caller keeps the error (a retry
            # with e.min_bytes in its `except` must find that memory free).
            self._blocks.unwrap()
            del self._blocks, self._native
            self.__dict__.pop("_member", None)  # leaves the group
            self.__dict__.pop("_group_budget", None)
            self._explain_refusal(refused, model, optimizer, sample, keeps_output)
            raise
        # Seen from outside, the Module is its model: its class carries the
        # model's forward signature (what transformers' Trainer reads for the
        # columns, labels and loss arguments it passes).
        object.__setattr__(self, "__class__", _module_class_for(type(model)))
        self._optimizers = _OptimizerWatch(self, optimizer)

    def _share_state_of(self, model, head):
        """The model's own parameters, buffers and children, shared: its
        state_dict() keys, its parameters() and train()/eval() reach them.
        Returns the device they are on."""
        self._modules = model._modules
        self._parameters = model._parameters
        self._buffers = model._buffers
        self._non_persistent_buffers_set = model._non_persistent_buffers_set
        object.__setattr__(self, "_model", model)  # not a child: its children are ours
        self._head = head
        device = _device_of(self)
        _native.count_this_thread(str(device))  # a worker thread's tensors count as the main thread's do
        if device.type == "cpu":
            with torch.no_grad():
                # Weights made before memtrain was imported move into counted memory.
                for t in list(self.parameters()) + [b for b in self.buffers() if b is not None]:
                    t.data = t.data.clone()
        return device

    def _explain_refusal(self, refused, model, optimizer, sample, keeps_output):
        """What a refused Module's error adds for the caller: what its least
        leaves out, and the arguments that would count less."""
        if isinstance(refused, Infeasible) and optimizer is None and sample is not None:
            without = _least_without_optimizer(model, _host_updates.on_host(self))
            refused.args = (f"{refused.args[0]}; {without}",) + refused.args[1:]
        output_bytes = self.__dict__.get("_output_bytes", 0)
        # Offered where it saves more than the room the least leaves a
        # loop's own tensors (a chunked head's output is its loss alone).
        if (isinstance(refused, Infeasible) and keeps_output
                and output_bytes > _native.loops_own_bytes(refused.min_bytes)):
            refused.args = (f"{refused.args[0]}; this least holds for a loop that keeps the model's output "
                            "through its backward (out = m(x); out.loss.backward()): one that lets it go "
                            "first (del out, or transformers' Trainer) can pass keeps_output=False, counting "
                            f"up to {_native.format_bytes(output_bytes)} less",) + refused.args[1:]
        if isinstance(refused, Infeasible) and self.__dict__.get("_measured_both"):
            refused.args = (f"{refused.args[0]}; this least holds both in float32 and under bfloat16 "
                            "autocast: a loop that never runs the model under autocast can pass "
                            "autocast=False, measured in float32 alone",) + refused.args[1:]
        if refused.__traceback__ is not None and refused.__traceback__.tb_next is not None:
            traceback.clear_frames(refused.__traceback__.tb_next)

    def _measure(self, sample, optimizer, budget):
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer of type {type(optimizer).__name__} is not an optimizer; expected a "
                            "torch.optim.Optimizer")
        if optimizer is not None:
            ours = {id(p) for p in self.parameters()}
            others = [p for group in optimizer.param_groups for p in group["params"] if id(p) not in ours]
            if others:
                what = "1 tensor that is not" if len(others) == 1 else f"{len(others)} tensors that are not"
                raise UsageError(f"optimizer= updates {what} this model's parameters "
                                 f"(the first of shape {tuple(others[0].shape)}); pass the optimizer made on the "
                                 "model's parameters (model.parameters())")
        if sample is None:
            if optimizer is not None:
                raise UsageError("optimizer= is measured on the sample; give a sample too")
            return
        args, kwargs = _blocks.sample_arguments(sample)
        # N% is of the plain loop's step: with the model's own head and
        # loss, even where chunks are asked for (then measured afresh).
        share_of_whole = self._head.mode is True and _is_share(budget)
        try:
            with self._head.whole_logits() if share_of_whole else contextlib.nullcontext():
                self._calibrate(args, kwargs, optimizer)
        except Infeasible:
            # The budget cannot hold the whole logits: the head and the
            # loss in chunks, the blocks planned and measured afresh (N%
            # stays of the plain loop's step).
            if not (share_of_whole or self._chunk_from_now_on(budget)):
                raise
        else:
            if not share_of_whole:
                return
        if share_of_whole:
            self._plan_blocks_afresh(budget)
        try:
            self._calibrate(args, kwargs, optimizer)
        except Infeasible as chunked:
            raise chunked from None  # its least is the one with chunks: the least there is

    def _lease_steps(self, member):
        """Tells the group what this job's sample needs, waits for the group
        to start, and leases each step's budget from then on."""
        group_budget = self._native.calibrated_for_lease(member)
        self.__dict__["_group_budget"] = group_budget
        self._budget_spec = group_budget
        self._native.lease_from(member, group_budget)
        # A Module let go (or alive at exit) has finished, not failed: its
        # last step's lease settles. The steps planned last are the ones to ask.
        self.__dict__["_leasing"] = [self._native]
        weakref.finalize(self, _job_group.leave, self._leasing)

    @property
    def job_group(self):
        """The job group this Module's steps lease their budgets from
        (share=): its name and state(); None without one."""
        return self.__dict__.get("_member")

    def unwrap(self):
        """The model, as it was before it was wrapped: its blocks' own
        forwards back. The Module plans nothing from then on (calling it
        is refused); the model can be wrapped again."""
        self._blocks.unwrap()
        self.__dict__["_unwrapped"] = True
        return self._model

    def _plan_blocks(self, blocks, budget):
        """The blocks' native steps, under `budget`, learning from nothing."""
        model, options = self._model, self._options
        inside = {id(p) for block in blocks for p in block.parameters()}
        outer = [p for p in model.parameters() if p.requires_grad and id(p) not in inside]
        self._blocks = _blocks.BlockSteps(blocks, budget, options["planner"], options["collect_steps"],
                                          options["bandwidth"], self._prediction_scale, str(self._device), outer,
                                          options["weights"])
        self._native = self._blocks.native
        self._native.output_held = options["keeps_output"]
        if "_group_budget" in self.__dict__:  # planned afresh: its steps lease as the first's did
            self._native.lease_from(self._member, self._group_budget)
            self._leasing[0] = self._native
        self._blocks.set_outer_buffers(model)
        if self._blocks.peers is not None:
            self._blocks.peers.watch_backward(model)

    def _chunk_from_now_on(self, budget):
        """Where chunked_loss is None and the head can be chunked: the head
        and the loss in chunks from now on, and the blocks planned afresh
        under `budget` (their plans left room for the whole logits).
        False where that is not to be, or is done already."""
        if not self._head.chunk_where_needed():
            return False
        self._plan_blocks_afresh(budget)
        return True

    def _warn_chunking(self, stacklevel):
        """Once the budget turning the head to chunks is accepted: a
        refused one leaves no Module, and nothing to warn of."""
        warnings.warn(f"memtrain: the budget cannot hold the whole logits of {type(self._model).__name__}; its head "
                      "and loss run in chunks from now on, where the logits do not fit what is free (their loss "
                      "and gradients then differ from the plain model's by rounding; last_step['chunked_loss'] "
                      "says when). chunked_loss=False keeps them exact and refuses such steps instead",
                      stacklevel=stacklevel + 1)

    def _plan_blocks_afresh(self, budget):
        """The blocks planned anew under `budget`, learning from nothing but
        what an N% budget is of (and the optimizer's state counted)."""
        blocks = self._blocks.blocks
        carried = self._native.share_reference()
        self._blocks.unwrap()
        self._plan_blocks(blocks, budget)
        self._native.carry_share_reference(carried)

    def _calibrate(self, args, kwargs, optimizer=None):
        kwargs = _without_cache(self._model, kwargs)
        for t in _blocks.tensors_of((args, kwargs)):
            if t.numel() == 0:
                raise UsageError(f"sample holds an empty tensor (shape {tuple(t.shape)}); give the largest input "
                                 "the model will see")
            if t.device.type != self._device.type:
                raise UsageError(f"sample holds a tensor on {t.device} (shape {tuple(t.shape)}), and the model is on "
                                 f"{self._device}; give a sample of real tensors on {self._device}")
        params = [p for p in self.parameters() if p.requires_grad]
        self.__dict__["_output_bytes"] = 0  # this measurement's (a chunked head's output holds no logits)
        # A measurement, not a step: what it may change is put back after it
        # as a rolled-back step's is (torch's random generators and those the
        # model's modules own, a block's dropout drawn from its own; the buffers).
        entry = _blocks.StepEntry(_blocks.ChangingBuffers(b for b in self.buffers() if b is not None), self._device,
                                  self._native.host_copy, _blocks.owned_generators(self._model))
        # Gradients a loop has accumulated already (a Module measuring
        # again mid-update) wait in host memory: the rounds' backwards
        # would add to them, and their bytes are counted as allocated below.
        # They come back after the native calibration has put back what it
        # found (no gradient), refused or not.
        held = [(p, self._native.host_copy(p.grad)) for p in params if p.grad is not None]
        for p in params:
            p.grad = None
        try:
            try:
                self._calibration_rounds(args, kwargs, optimizer, params)
            except BaseException:
                self._native.cancel()
                raise
            finally:
                self._head.measuring = False
                entry.restore()
            self._native.end_calibration()
        finally:
            for p in params:
                p.grad = None
            with torch.no_grad():
                for p, kept in held:
                    p.grad = torch.empty_like(kept, device=p.device).copy_(kept)

    def _calibration_rounds(self, args, kwargs, optimizer, params):
        """Calibration's rounds on the sample (args, kwargs), each a forward
        and a backward, then `optimizer`'s first update measured."""
        # Measured at a step's fullest: with every gradient allocated,
        # the blocks' (the memory model counts them all step) and the
        # others' too, as accumulating micro-batches leave them, so the
        # least stated now holds for such steps. Not a sharded model's
        # (FSDP2 makes its gradients in its own reduce-scatter).
        if self._blocks.peers is None:
            inside = {id(p) for block in self._blocks.blocks for p in block.parameters()}
            with torch.no_grad():
                for p in params:
                    if p.grad is None and id(p) not in inside:  # the blocks' are the native steps'
                        p.grad = torch.zeros_like(p)
        rounds = self._native.begin_calibration()
        own, callers = self._precisions_to_measure(params)
        self.__dict__["_measured_both"] = callers is not None
        self._head.measuring = True
        for r in range(rounds + (callers is not None)):
            self._native.calibration_round(r)
            with callers() if r == rounds else own():
                output = self._head.run(lambda: self._model(*args, **kwargs), kwargs)
                loss = _blocks.loss_of(output)
            # What a loop that keeps the output through its backward
            # holds more (most do: out = m(x); out.loss.backward()).
            output_bytes = _blocks.output_bytes(output, self._device)
            self.__dict__["_output_bytes"] = max(self.__dict__.get("_output_bytes", 0), output_bytes)
            self._native.observe_output_bytes(output_bytes)
            del output
            reached = self._blocks.backwards
            torch.autograd.backward(loss, torch.ones_like(loss))
            del loss
            if self._blocks.backwards == reached:
                raise UsageError(
                    f"no block of {type(self._model).__name__} gets a gradient: their parameters are frozen and "
                    "nothing before them trains, so they keep nothing for a backward and memtrain has nothing to "
                    "plan; train the model without memtrain, or unfreeze a block")
            self._native.end_of_backward()
        if optimizer is not None:
            self._native.observe_optimizer(*self._measure_optimizer(optimizer))

    def _precisions_to_measure(self, params):
        """The context of calibration's rounds, and of one more round that
        measures the caller's code again in another precision (None where
        there is none): as the autocast option names them."""
        asked, device = self._options["autocast"], self._device
        if asked is None and self._blocks.peers is None:
            # Once more under bfloat16 autocast, as most language models are
            # trained: the code after the blocks (logits in bfloat16 and
            # their float32 copy for the loss) can hold more.
            if _measures_bfloat16(device, params):
                # The other rounds in the model's own precision, whatever
                # autocast the caller has on (a Module measuring again
                # inside its forward).
                return _blocks.autocast_off, lambda: _autocast_to_measure(device, torch.bfloat16)
        if asked is None:
            return contextlib.nullcontext, None
        if asked is False:
            return _blocks.autocast_off, None
        return lambda: _autocast_to_measure(device, asked), None

    def _refuse_another_precision(self):
        """A forward in a precision the least was not measured for: its
        code after the blocks may hold more than the budget has room for."""
        asked, device = self._options["autocast"], self._device.type
        if asked is None:
            return
        on = torch.is_autocast_enabled(device)
        if asked is False and on:
            raise UsageError(f"this forward runs under {torch.get_autocast_dtype(device)} autocast, and the Module "
                             "was measured for a loop without it (autocast=False); wrap the model with "
                             f"autocast={torch.get_autocast_dtype(device)}, or autocast=None for both")
        if asked is not False and not (on and torch.get_autocast_dtype(device) == asked):
            now = f"under {torch.get_autocast_dtype(device)} autocast" if on else "without autocast"
            raise UsageError(f"this forward runs {now}, and the Module was measured for a loop under {asked} "
                             f"autocast (autocast={asked}); run the forward inside torch.autocast("
                             f"{device!r}, dtype={asked}), or wrap the model with autocast=None for both")

    def _measure_optimizer(self, optimizer):
        """The bytes `optimizer`'s state will hold on the device, the most
        its update needs above them, and the bytes of its state for weights
        in host memory: one update on zero gradients, then the weights, the
        gradients and the optimizer as they were. An optimizer whose state
        exists already holds it now, counted as resident: (0, 0, 0)."""
        params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
        if not params or len(optimizer.state) > 0:
            return 0, 0, 0
        native = self._native
        weights = [p.detach().clone() for p in params]
        grads = [p.grad for p in params]
        called = optimizer.__dict__.get("_opt_called")  # what an LR scheduler checks
        try:
            with torch.no_grad():
                for p in params:
                    p.grad = torch.zeros_like(p)
            before = native.live_bytes()
            native.reset_peak()
            optimizer.step()
            after = native.live_bytes()
            on_host = _host_updates.on_host(self)
            host_state = _state_bytes(optimizer, lambda p: id(p) in on_host)
            return after - before, native.peak_bytes() - after, host_state
        finally:
            optimizer.state.clear()
            if called is None:
                optimizer.__dict__.pop("_opt_called", None)
            else:
                optimizer._opt_called = called
            with torch.no_grad():
                for p, w, g in zip(params, weights, grads):
                    p.copy_(w)
                    p.grad = g

    def __getattr__(self, name):
        """What the model has and the Module has not (transformers' config,
        loss_type, generation_config, its methods) is read from the model."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            model = self.__dict__.get("_model")
            if model is None:
                raise
            return getattr(model, name)

    def __deepcopy__(self, memo):
        """An independent Module: a deep copy of the model, under the same
        budget in bytes and the same planner, with plan state of its own
        (it learns its steps from the start, as a Module made without a
        sample does)."""
        if self.job_group is not None:
            raise UsageError(f"copy.deepcopy of a memtrain.Module in job group {self.job_group.name}: its steps "
                             "lease their budgets from the group, which measured it on its sample; wrap a deep copy "
                             "of the model with share= and a sample instead")
        blocks = self._blocks.blocks
        patched = [b.__dict__.pop("forward") for b in blocks]  # the copy gets the blocks' own forward
        try:
            model = copy.deepcopy(self._model, memo)
        finally:
            for b, forward in zip(blocks, patched):
                b.forward = forward
        return Module(model, budget=self.budget_bytes, blocks=[memo[id(b)] for b in blocks], **self._options)

    def __copy__(self):
        raise UsageError("copy.copy of a memtrain.Module would share its model and its plan state; use "
                         "copy.deepcopy for an independent Module")

    def __reduce_ex__(self, protocol):
        raise UsageError("a memtrain.Module is not picklable: it runs native plan state; save its state_dict() "
                         "(the model's own keys) and wrap a new model")

    def apply(self, fn):
        """fn on every module of the model, the model itself included, as model.apply(fn)."""
        self._model.apply(fn)
        return self

    def train(self, mode=True):
        super().train(mode)
        self._model.training = mode
        return self

    @property
    def training(self):
        """The model's own mode: model.eval() or model.train() on the
        model itself shows here as on m.eval()."""
        model = self.__dict__.get("_model")
        return self.__dict__.get("_training", True) if model is None else model.training

    @training.setter
    def training(self, mode):
        self.__dict__["_training"] = mode
        model = self.__dict__.get("_model")
        if model is not None:
            model.training = mode

    @property
    def blocks(self):
        """The model's own submodule `blocks` where it has one (a name the
        model has is never hidden: functional_call and get_submodule reach
        it); else planned_blocks."""
        own = self._modules.get("blocks")
        return own if own is not None else self.planned_blocks

    @property
    def planned_blocks(self):
        """The modules memtrain plans: the model's blocks, or the chain's stages."""
        return list(self._blocks.blocks)

    @property
    def budget_bytes(self):
        """The budget in bytes (an N% budget once `sample` is measured)."""
        return self._native.budget_bytes

    @property
    def budget(self):
        """The budget in bytes; set it (bytes, text, or N% of the sample's
        peak) to change it from the next step on."""
        return self._native.budget_bytes

    @budget.setter
    def budget(self, budget):
        self._native.set_budget(budget)
        self._budget_spec = budget

    @property
    def last_step(self):
        """What the last step did: plan ("collect", "new", "cached" or "retry"),
        input_shape, input_size, peak_bytes, predicted_peak_bytes, budget_bytes,
        retries, replans (blocks sharded by FSDP2: the times the rest of the
        step was re-planned), seconds, schedule (the operations, as the CLI
        prints them),
        planning_seconds (choosing the schedule), blocks_seconds (running its
        operations), overhead_seconds (memtrain's own time in the step:
        its block calls and backward nodes less the operations they ran) and
        synchronizations (the times the step waited for the device: one, at
        its end, unless it was retried), reruns (the times step(closure)
        ran its last micro-step again) and chunked_loss (whether the head
        and the loss ran in chunks).
        For any model the input is block 0's."""
        report = self._native.last_step()
        wall = self._blocks.finished_wall
        if report is not None and wall is not None:
            report["overhead_seconds"] = max(0.0, wall - report["blocks_seconds"])
        if report is not None:
            report["reruns"] = self.__dict__.get("_reruns", 0)
            report["chunked_loss"] = self._head.chunked_last
        return report

    def chain(self):
        """The cost model memtrain has learnt, at the largest input seen."""
        return self._native.largest_chain()

    def compile(self, *args, **kwargs):
        raise UsageError("memtrain.Module.compile(): memtrain's steps are not compiled; compile the blocks "
                         "themselves before wrapping the model (model.blocks[i] = torch.compile(block))")

    def forward(self, *args, **kwargs):
        if self.__dict__.get("_unwrapped"):
            raise UsageError("this memtrain.Module was unwrapped (m.unwrap()); call the model it returned, or "
                             "wrap it again")
        if not torch.is_grad_enabled():
            return self._model(*args, **kwargs)
        self._refuse_another_precision()
        _native.count_this_thread(str(self._device))
        kwargs = _without_cache(self._model, kwargs)
        entry = _blocks.StepEntry(self._blocks.outer_buffers, self._device, self._native.host_copy,
                                  self._blocks.model_generators)
        # The last step's output, if the loop kept it: resident as this step begins.
        self._native.note_previous_output(self._blocks.previous_output_bytes())
        try:
            output = self._head.run(
                lambda: self._blocks.among_peers(lambda: self._model(*args, **kwargs), "the model's forward"), kwargs)
            if not self._native.output_held:
                self._blocks.watch_output(output)
            else:
                self._blocks.remember_output(output, self._device)
            return output
        except Infeasible as e:
            entry.restore()
            # The frames under this call (the model's, memtrain's), which
            # the error's traceback would keep alive with their tensors, let
            # go: a step run again, or a loop that retries in its `except`,
            # finds their bytes free. The message says what was refused and why.
            if e.__traceback__ is not None:
                e.__traceback__.tb_next = None
            if self._blocks.peers is not None:
                self._blocks.peers.give_up(str(e))
            elif self._head.applies_after_chunking(kwargs):
                # What the steps hold grew past the budget (an optimizer's
                # state, counted at its first update): the head and the loss
                # in chunks from now on, under the budget as it stands, in
                # bytes, measured on this call's input, and the step again.
                return self._rerun_chunked(args, kwargs)
            raise

    def _rerun_chunked(self, args, kwargs):
        # A job of a group measures its new steps within the lease the
        # refused step holds (the group counts it, and other jobs' leases
        # beside it), then settles it: left to the old steps' collection,
        # the group would count it beside the new steps' first request,
        # which could wait on it for ever.
        leasing = self._native if "_group_budget" in self.__dict__ else None
        self._chunk_from_now_on(self._budget_spec)
        try:
            self._calibrate(args, kwargs)
        except Infeasible as chunked:
            # Its least is the one with chunks, the least there is: the
            # refusal with the whole logits, chained, would name another.
            chunked.args = (f"with the head and the loss in chunks, {chunked.args[0]}",) + chunked.args[1:]
            raise chunked.with_traceback(None) from None
        finally:
            if leasing is not None:
                leasing.end_lease()
        self._warn_chunking(stacklevel=3)
        # Module's own forward, not self.forward: accelerate sets the
        # latter to its autocast-decorated wrapper, whose one context
        # object, entered again inside itself, would leave autocast on.
        return Module.forward(self, *args, **kwargs)

    def step(self, closure, retries=2):
        """One micro-step that memtrain can run again whole: closure()
        runs the forward through this Module and returns the loss (it does
        not call backward()); memtrain runs the loss's backward, adding to
        the gradients as loss.backward() does, and returns the loss,
        detached. Where any part runs out of the budget, the closure's own
        code after the blocks included, the micro-step is rolled back
        (torch's random generators, the model's buffers, every gradient as
        it was before it) and run again under the plan the failure taught,
        at most `retries` times: the result is bit for bit that of a
        micro-step that did not fail. What cannot fit at all is refused as
        memtrain.Infeasible with everything rolled back; any other error
        reaches the caller unchanged, after the same rollback.
        last_step["reruns"] says how often the last one ran again.

            for ids, labels in micro_batches:
                m.step(lambda: F.cross_entropy(m(ids).flatten(0, 1), labels.flatten()) / len(micro_batches))
            opt.step(); opt.zero_grad()

        The rollback's cost: each gradient that exists before the micro-step
        is copied to host memory when the backward first reaches it."""
        if not callable(closure):
            raise TypeError(f"closure of type {type(closure).__name__} is not callable; expected a function that "
                            "runs the forward and returns the loss")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise UsageError(f"retries {retries!r} is not a count; expected an integer >= 0")
        return _micro_step.run(self, closure, retries)

    def linear_cross_entropy(self, hidden, weight, targets, bias=None, *, ignore_index=-100, reduction="mean"):
        """memtrain.linear_cross_entropy, its chunk chosen under this
        Module's budget: the most tokens whose logits fit what the budget
        has free now, less a thousandth of it. Where all of them fit, it is
        F.cross_entropy(F.linear(hidden, weight, bias), targets), bit for
        bit; where they do not, it never holds the whole logits. What it
        held is what the step planner learns for the code after the
        blocks, so the blocks' plans leave it that room."""
        return linear_cross_entropy(hidden, weight, targets, bias, ignore_index=ignore_index, reduction=reduction,
                                    chunk_tokens=self._chunk_tokens(hidden, weight, bias))

    def _chunk_tokens(self, hidden, weight, bias, most=None, measuring=False):
        """The most tokens (up to `most`) whose logits fit what the budget
        has free now, less a thousandth of it and what the chunked
        computation holds whatever the chunk (all of them before the budget
        is known); `most` itself while measuring. Chunks above the least
        size, or all the tokens at once, are taken because they are free:
        the step planner learns the code after the blocks with the least."""
        tokens = hidden.numel() // max(1, hidden.shape[-1])
        most = tokens if most is None else min(most, tokens)
        budget = self.budget_bytes
        self._native.begin_elastic(_least_held(hidden, weight, bias))
        if measuring or budget <= 0:
            return most
        free = budget - self._native.live_bytes() - _native.loops_own_bytes(budget)
        return min(most, _chunk_tokens_for(tokens, hidden, weight, bias, free))


def _least_without_optimizer(model, on_host=frozenset()):
    """What a least stated without optimizer= leaves out, in figures (the
    state of the parameters in `on_host` is in host memory)."""
    state = _native.format_bytes(2 * sum(p.numel() * p.element_size() for p in model.parameters()
                                         if p.requires_grad and id(p) not in on_host))
    return (f"this least counts no optimizer's state: one made later adds it at its first update (Adam's and "
            f"AdamW's: {state} for this model), and a budget in bytes that no longer fits "
            "then is refused; pass the optimizer as memtrain.Module(..., optimizer=opt) for a least that counts it")


def _is_share(budget):
    """Whether `budget` is N% (of the plain loop's step), not bytes."""
    return isinstance(budget, str) and budget.strip().endswith("%")


def _measures_bfloat16(device, params):
    """Whether calibration measures bfloat16 autocast too: for a float32
    model that may be trained under it, on a device that has it."""
    if not params or any(p.dtype != torch.float32 for p in params):
        return False
    return device.type != "cuda" or torch.cuda.is_bf16_supported()


def _autocast_to_measure(device, dtype):
    """`dtype` autocast on `device`, as a loop's is."""
    # Cached, as a loop's autocast is: the head's weight cast is then held
    # through the loss (a twentieth of a small model's least). Uncached
    # inside the caller's autocast, whose cache would keep the casts (and
    # their graphs) until the caller's context ends.
    nested = any(torch.is_autocast_enabled(d) for d in _blocks.autocast_devices())
    return torch.autocast(device.type, dtype=dtype, cache_enabled=not nested)


def _without_cache(model, kwargs):
    """A training step's arguments without a key-value cache: a transformers
    model whose configuration asks for one (use_cache, True by default)
    would make one that its blocks extend at each call, and memtrain runs
    blocks again. transformers turns it off itself under gradient
    checkpointing; so does memtrain, where the caller did not ask for it."""
    if "use_cache" in kwargs or not getattr(getattr(model, "config", None), "use_cache", False):
        return kwargs
    return {**kwargs, "use_cache": False} if _takes_use_cache(type(model)) else kwargs


@functools.lru_cache(maxsize=None)
def _takes_use_cache(model_class):
    """Whether the class's forward takes use_cache: read once per class, not per step."""
    try:
        return "use_cache" in inspect.signature(model_class.forward).parameters
    except (TypeError, ValueError):
        return False


@functools.lru_cache(maxsize=None)
def _module_class_for(model_class):
    """memtrain.Module as a subclass for models of `model_class`: its
    forward takes and shows the model's arguments. Tools that read a
    model's class rather than its instance (transformers' label names and
    loss arguments) see what they see on the plain model."""
    forward = Module.forward

    def model_forward(self, *args, **kwargs):
        return forward(self, *args, **kwargs)
    try:
        model_forward.__signature__ = inspect.signature(model_class.forward)
    except (TypeError, ValueError):  # a forward without a signature: the Module's own
        pass
    model_forward.__doc__ = model_class.forward.__doc__
    return type(f"Module[{model_class.__name__}]", (Module,),
                {"forward": model_forward, "__module__": Module.__module__, "__qualname__": "Module"})


class _OptimizerWatch:
    """Counts the state of optimizers over the Module's parameters that it
    did not measure (one a framework makes, as transformers' Trainer does):
    at an optimizer's first update, its state and the memory its update
    reached above it. A global step hook of torch.optim, holding the Module
    weakly; it removes itself when the Module goes."""

    def __init__(self, module, measured):
        self.module = weakref.ref(module)
        self.params = {id(p) for p in module.parameters() if p.requires_grad}  # the Module holds them
        self.seen = weakref.WeakSet([measured] if measured is not None else [])
        self.measuring = None  # the optimizer whose first update runs now
        from torch.optim import optimizer as optim
        handles = [optim.register_optimizer_step_pre_hook(self.before),
                   optim.register_optimizer_step_post_hook(self.after)]
        weakref.finalize(module, lambda: [h.remove() for h in handles])

    def before(self, optimizer, args, kwargs):
        module = self.module()
        if module is None or optimizer in self.seen or _host_updates.is_copy(optimizer):
            return
        self.seen.add(optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if len(optimizer.state) == 0 and any(id(p) in self.params for p in params):
            predicted = _predicted_update(optimizer, module._device, module._native, _host_updates.on_host(module))
            if predicted is not None:
                self.seen.discard(optimizer)  # refused: its next first update is checked again
                try:
                    module._native.admit_optimizer(*predicted)
                except BaseException:
                    _host_updates.give_back(module, optimizer)  # the step does not run: its gradients stay
                    raise
                self.seen.add(optimizer)
            self.measuring = optimizer
            module._native.reset_peak()

    def after(self, optimizer, args, kwargs):
        module = self.module()
        if module is None or self.measuring is not optimizer:
            return
        self.measuring = None
        on_host = _host_updates.on_host(module)  # their state is in host memory
        on_device = _state_bytes(optimizer, lambda p: id(p) not in on_host, module._device.type)
        module._native.count_optimizer(on_device, max(0, module._native.peak_bytes() - module._native.live_bytes()),
                                       _state_bytes(optimizer, lambda p: id(p) in on_host))


def _state_bytes(optimizer, counted, device_type=None):
    """The bytes of the tensors in `optimizer`'s state for the parameters
    `counted` says, on `device_type` (any device: None)."""
    return sum(t.nbytes for p, st in optimizer.state.items() if counted(p) for t in st.values()
               if isinstance(t, torch.Tensor) and device_type in (None, t.device.type))


def _predicted_update(optimizer, device, native, on_host=frozenset()):
    """The bytes on `device` that `optimizer`'s first update will make its
    state hold, and the most it needs above them while it runs, before it
    runs: torch.optim's optimizers keep, per parameter, tensors shaped as
    it and scalars, and their updates work per parameter or per list of
    them. A copy of the optimizer over the parameters' shapes scaled down
    (its groups' options, the same dtypes), stepped at two scales, gives
    both as a constant and a part that grows with the scale. None for other
    optimizers (a factored one keeps less than that would say) or where
    the copy cannot run. The parameters in `on_host` (their ids) are
    updated in host memory, not counted."""
    cls = type(optimizer)
    if not cls.__module__.startswith("torch.optim."):
        return None
    groups = [([p for p in g["params"] if p.requires_grad and p.device.type == device.type and id(p) not in on_host],
               {k: g[k] for k in optimizer.defaults if k in g})  # not a scheduler's initial_lr
              for g in optimizer.param_groups]
    total = sum(p.numel() for params, _ in groups for p in params)
    if total == 0:
        return None
    scale = min(1 / 64, 2**20 / total)  # a copy of at most about a million elements
    try:
        (state1, temp1), (state2, temp2) = (_proxy_update(cls, groups, s, device, native) for s in (scale, 2 * scale))
    except Exception:  # an option the copy cannot take: counted at the update instead
        return None
    return (max(state2, round(2 * state1 - state2 + (state2 - state1) / scale)),
            max(temp2, round(2 * temp1 - temp2 + (temp2 - temp1) / scale)))


def _proxy_update(cls, groups, scale, device, native):
    proxies = []
    for params, options in groups:
        tensors = [torch.zeros(max(1, math.ceil(p.numel() * scale)), dtype=p.dtype, device=device, requires_grad=True)
                   for p in params]
        for t in tensors:
            t.grad = torch.zeros_like(t)
        proxies.append({"params": tensors, **options})
    copy_ = cls(proxies)
    before = native.live_bytes()
    native.reset_peak()
    copy_.step()
    after = native.live_bytes()
    return after - before, max(0, native.peak_bytes() - after)


def _device_bytes(device):
    """The memory the device has: the machine's for the CPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not known here
        return None


def _refuse_above_the_device(budget, device):
    total = _device_bytes(device)
    if budget and total and budget > total:
        raise UsageError(f"budget {budget / 2**30:.1f} GiB ({budget} bytes) is more than {device} has "
                         f"({total / 2**30:.1f} GiB): a budget memtrain keeps is at most the device's memory; give "
                         "at most that, or N% of the sample's step")


def _refuse_share_without_sample(budget, sample):
    if isinstance(budget, str) and budget.strip().endswith("%") and sample is None:
        raise UsageError(f"budget {budget!r} is a share of the peak of a step of the sample that keeps everything, "
                         "and no sample was given: give sample= (the largest input the model will see), or a budget "
                         "in bytes")


def _check_share(share, budget, sample):
    if share is None:
        if budget is None:
            raise UsageError("budget is required: bytes (int), text such as '512MiB', or 'N%' of the sample's "
                             "step; or share='NAME' to take each step's budget from a job group")
        return
    if budget is not None:
        raise UsageError(f"budget {budget!r} and share={share!r}: a job of a group takes each step's budget from "
                         "the group; give the budget to the group (memtrain.JobGroup(name, budget=...)), not here")
    if sample is None:
        raise UsageError(f"share={share!r} needs sample= (the largest input the model will see): the group is "
                         "told what this job's plain step and its least need before any job trains")


def _check_arguments(budget, planner, collect_steps, sample, autocast, keeps_output):
    """Refusals of arguments the native module would take for something
    else, or that a later step would refuse, naming the argument and what
    would be valid."""
    if not isinstance(planner, str):
        raise UsageError(f"planner {planner!r} is not a planner's name; expected one of {planner_names()}")
    if isinstance(collect_steps, bool) or not isinstance(collect_steps, int):
        raise UsageError(f"collect_steps {collect_steps!r} is not a number of steps; expected an integer "
                         f"0..{_native.MAX_COLLECT_STEPS}")
    if isinstance(budget, int) and not isinstance(budget, bool) and not 0 < budget < 2**62:
        raise UsageError(f"budget {budget} bytes is out of range; expected 1..2**62 bytes, text such as '512MiB', "
                         "or 'N%'")
    if not (autocast is None or autocast is False or autocast in (torch.bfloat16, torch.float16)):
        raise UsageError(f"autocast {autocast!r} is not a precision the loop runs in; expected None (both float32 "
                         "and bfloat16 autocast), False (float32 only), torch.bfloat16 or torch.float16 (that "
                         "autocast only)")
    if not isinstance(keeps_output, bool):
        raise UsageError(f"keeps_output {keeps_output!r} is not a yes or no; expected True (the loop keeps the "
                         "model's output through its backward) or False (it lets the output go first)")


def least_budget(model, sample, optimizer=None, **options):
    """The least budget, in bytes, that memtrain.Module(model, budget=...,
    sample=sample, optimizer=optimizer, **options) accepts: the model
    measured on `sample` as the Module measures it (the optimizer's state
    counted where it is given, the head chunked where chunked_loss lets it),
    and left as it was. options: the Module's other keyword arguments
    (blocks, planner, chunked_loss, autocast, keeps_output, ...)."""
    if "budget" in options:
        raise TypeError("least_budget() finds the budget; pass the Module's other arguments")
    if sample is None:
        raise UsageError("least_budget() measures the model on a sample; give its largest input")
    try:
        Module(model, budget=1, sample=sample, optimizer=optimizer, **options)
    except Infeasible as refused:
        least = refused.min_bytes
        del refused
        gc.collect()  # what the refused Module held in cycles is free for the Module made next
    else:
        raise Error(f"{type(model).__name__} was accepted under a budget of 1 byte: it holds nothing memtrain counts")
    return least


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
