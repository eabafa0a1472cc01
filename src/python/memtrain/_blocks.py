"""Any model under a budget: its own forward runs as written, and each call
of one of its repeated blocks becomes a step of memtrain's planned chain.

The blocks' forward methods are replaced, on the instances, by a call into
memtrain. Block 0's call begins a step on its input (the input's size picks
the plan); block i's call runs the schedule up to block i + 1's forward and
returns block i's output, as one autograd node per block call. When the
backward reaches a block's node it runs the schedule to that block's
backward (recomputing and reloading as planned) and hands autograd the
gradient of the block's input. What runs between, before and after the
blocks is ordinary autograd; the budget counts its memory too.

The schedule calls a block again with the arguments of its call in this
step, so a recomputed block sees the same mask, positions and flags.
"""

import contextlib
import functools
import copy
import os
import sys
import time
import warnings
import weakref
from collections.abc import Mapping

import torch
from torch._C._dynamo.eval_frame import set_eval_frame as _set_eval_frame
from torch.multiprocessing.reductions import StorageWeakRef

from . import _memtrain as _native
from . import _peers
from . import _variants


def find_blocks(model):
    """The repeated blocks of `model`: the longest torch.nn.ModuleList whose
    modules are all of one class (at least two of them). Raises UsageError
    when there is none, or when two lists are longest, naming them."""
    candidates = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) >= 2:
            kinds = {type(m) for m in module}
            if len(kinds) == 1:
                candidates.append((name, module))
    if not candidates:
        raise _native.UsageError(
            f"found no blocks in {type(model).__name__}: no torch.nn.ModuleList of two or more modules of one "
            "class; pass blocks= (a ModuleList or a list of its submodules that its forward calls in order)")
    longest = max(len(m) for _, m in candidates)
    best = [(n, m) for n, m in candidates if len(m) == longest]
    if len(best) > 1:
        names = ", ".join(f"{n} ({len(m)} x {type(m[0]).__name__})" for n, m in best)
        raise _native.UsageError(f"the blocks of {type(model).__name__} are ambiguous: {names}; pass blocks= one "
                                 "of them")
    return list(best[0][1])


def blocks_of(model, blocks):
    """The blocks as a list, checked to be distinct submodules of `model`."""
    if blocks is None:
        return find_blocks(model)
    if isinstance(blocks, torch.nn.Module) and not isinstance(blocks, torch.nn.ModuleList):
        raise TypeError(f"blocks of type {type(blocks).__name__} are not blocks; expected a torch.nn.ModuleList or a "
                        "list of torch.nn.Module")
    blocks = list(blocks)
    if not blocks:
        raise _native.UsageError("blocks is empty; expected at least one submodule of the model")
    inside = {id(m) for m in model.modules()}
    for i, block in enumerate(blocks):
        if not isinstance(block, torch.nn.Module):
            raise TypeError(f"block {i} is a {type(block).__name__}, not a torch.nn.Module")
        if id(block) not in inside:
            raise _native.UsageError(f"block {i} ({type(block).__name__}) is not a submodule of the model")
        if block is model:
            raise _native.UsageError(f"block {i} is the whole model ({type(block).__name__}); blocks are the "
                                     "model's repeated submodules that its forward calls one after another")
        if any(block is b for b in blocks[:i]):
            raise _native.UsageError(f"block {i} ({type(block).__name__}) is listed twice; each block runs once "
                                     "per forward")
        for role, part in _ends_of(model):
            if part is block or any(part is m for m in block.modules()):
                raise _native.UsageError(
                    f"block {i} ({type(block).__name__}) {'is' if part is block else 'holds'} the model's {role} "
                    f"({type(part).__name__}); blocks are the repeated layers between the embeddings and the head"
                    f"{_found_blocks_hint(model)}")
    return blocks


def _callable_name(f):
    code = getattr(f, "__code__", None)
    name = getattr(f, "__name__", None) or type(f).__name__
    return f"{name} ({code.co_filename}:{code.co_firstlineno})" if code is not None else name


def _ends_of(model):
    """The model's input embeddings and output head, where it names them
    (transformers' get_input_embeddings and get_output_embeddings)."""
    for role, getter in (("input embeddings", "get_input_embeddings"), ("output head", "get_output_embeddings")):
        try:
            part = getattr(model, getter)() if callable(getattr(model, getter, None)) else None
        except (NotImplementedError, AttributeError):
            part = None
        if isinstance(part, torch.nn.Module):
            yield role, part


def _found_blocks_hint(model):
    try:
        found = find_blocks(model)
    except _native.UsageError:
        return ""
    names = {id(m): n for n, m in model.named_modules()}
    first, last = names.get(id(found[0]), "?"), names.get(id(found[-1]), "?")
    return f" (memtrain finds {len(found)} in {type(model).__name__}: {first} .. {last}; leave blocks= out to use them)"


def _primary(result, where):
    """The tensor of a block's result that the next block takes (the result
    itself, or its first tensor), and a function that puts another tensor in
    its place. The function holds the rest of the result, not that tensor."""
    if isinstance(result, torch.Tensor):
        return result, lambda y: y
    if isinstance(result, (tuple, list)):
        for k, item in enumerate(result):
            if isinstance(item, torch.Tensor):
                hollow = list(result)
                hollow[k] = None
                kind = type(result)

                def rebuild(y):
                    items = list(hollow)
                    items[k] = y
                    if kind is list or kind is tuple:
                        return kind(items)
                    return kind(*items) if hasattr(kind, "_fields") else kind(items)
                return item, rebuild
    if isinstance(result, Mapping):
        for key, item in result.items():
            if isinstance(item, torch.Tensor):
                hollow = {k: (None if k == key else v) for k, v in result.items()}
                kind = type(result)

                def rebuild(y):
                    copy = kind(**hollow) if hasattr(kind, "to_tuple") else kind(hollow)
                    copy[key] = y
                    return copy
                return item, rebuild
    raise _native.Error(f"{where} returned a {type(result).__name__} with no tensor; a block returns a tensor, or a "
                        "tuple or output object whose first tensor is its output")


def _replace_tensors(value, replacements):
    """`value` (a block's result) with the tensors whose ids are keys of
    `replacements` replaced, its structure (tuples, lists, named tuples,
    dicts, output objects) kept."""
    if isinstance(value, torch.Tensor):
        return replacements.get(id(value), value)
    if isinstance(value, (tuple, list)):
        items = [_replace_tensors(v, replacements) for v in value]
        if type(value) in (tuple, list):
            return type(value)(items)
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, Mapping):
        for key in list(value.keys()):
            value[key] = _replace_tensors(value[key], replacements)
        return value
    return value


def tensors_of(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors_of(v)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from tensors_of(v)


class _BlockCall(torch.autograd.Function):
    """One block call as one autograd node, whose inputs are the block's
    input and its parameters. Its forward runs the schedule up to the
    block's return; its backward runs the schedule to the block's backward
    and returns the gradients it made: autograd accumulates them into .grad
    (through the parameters' own accumulators, so hooks on them,
    DistributedDataParallel's among them, see each gradient once), or
    returns them from torch.autograd.grad, as for the plain model."""

    @staticmethod
    def forward(ctx, blocks, index, slots, *tensors):
        # The input comes `slots` times, once per use the block's graph
        # makes of it: where the caller's graph adds to its gradient too (a
        # loss on this hidden state), the backward hands each use's piece
        # to its own slot, and autograd adds them after the caller's part,
        # one by one, as for the plain model (InputGradientPieces).
        x, params = tensors[0], tensors[slots:]
        ctx.blocks = blocks
        ctx.index = index
        ctx.params = params
        ctx.slots = slots
        needs_input_grad = ctx.needs_input_grad[3]
        ctx.input_edge = _native.InputEdge(x) if slots > 1 and needs_input_grad else None
        y = blocks.among_peers(lambda: blocks.native.forward(index, x, list(params), needs_input_grad),
                               f"block {index}'s forward")
        # Its backward is the step's last where nothing before the block
        # trains (frozen embeddings and blocks): autograd reaches no other.
        ctx.ends_step = index == 0 or not needs_input_grad
        ctx.step = blocks.native.step
        if index == len(blocks.blocks) - 1:
            ctx.guard = _StepGuard(blocks.native, ctx.step)
            # What a second backward of the step runs its forward again
            # with: block 0's input and the blocks' calls. Saved as autograd
            # saves tensors, they go when a backward lets the graph go, and
            # stay while it is retained.
            tensors = []
            ctx.calls = _hollow(blocks.calls, tensors)
            ctx.save_for_backward(blocks.step_input, *tensors)
            blocks.step_input = None
        # The block's other floating results (a router's logits for a
        # load-balancing loss) are this node's outputs too: their gradients
        # reach the block's backward with its output's.
        extras = [e.detach() for e in blocks.first_extras[index]]
        if not extras:
            return y
        ctx.set_materialize_grads(False)
        ctx.output_like = (y.shape, y.dtype, y.device)
        return (y, *extras)

    @staticmethod
    def backward(ctx, dy, *extra_grads):
        t0 = time.perf_counter()
        if hasattr(ctx, "guard"):
            ctx.guard.reached = True
        blocks = ctx.blocks
        if torch.is_grad_enabled():
            raise _native.UsageError(
                "a backward with create_graph=True (a gradient of a gradient) reached a memtrain.Module's blocks; "
                "memtrain's backward computes first gradients only: compute higher derivatives on the plain model")
        if ctx.index == len(blocks.blocks) - 1 and blocks.output_kept():
            # keeps_output=False, and the loop kept it: planned as keeping
            # it from now on (the sizes its steps measured count it already).
            blocks.native.output_held = True
            warnings.warn("memtrain: the loop keeps the model's output alive through its backward, though "
                          "keeps_output=False said it lets it go first; sizes no step has measured are planned "
                          "with it from now on, but a step of such a size could have run out of the budget "
                          "inside your backward: drop keeps_output=False (or `del` the output before the backward)",
                          stacklevel=_outside_torch_and_memtrain())
        if dy is None:  # only the block's other results reached the loss
            shape, dtype, device = ctx.output_like
            dy = torch.zeros(shape, dtype=dtype, device=device)
        extra_grads = list(extra_grads)
        if blocks.native.runs_again(ctx.step, ctx.index):
            # A second backward of a step that ended: its input and calls
            # back, from the graph the caller retained.
            step_input, *tensors = ctx.saved_tensors
            blocks.calls = _filled(ctx.calls, tensors)
            blocks.native.resume_input(ctx.step, step_input)
        in_pieces = ctx.input_edge is not None and ctx.input_edge.added_to_by_others()
        dx, leaves, gradients, pieces, uses = blocks.among_peers(
            lambda: blocks.native.backward(ctx.step, ctx.index, dy, extra_grads, in_pieces),
            f"block {ctx.index}'s backward")
        blocks.input_uses[ctx.index] = uses  # the slots of the block's next calls
        input_grads = _input_slots(dx, pieces if in_pieces else None, ctx.slots)
        if not ctx.needs_input_grad[3]:
            input_grads = [None] * ctx.slots
        gradients = blocks.route(ctx.index, ctx.params, leaves, gradients)
        blocks.wall += time.perf_counter() - t0
        if ctx.ends_step:
            blocks.calls = [None] * len(blocks.blocks)  # the step's, held no longer than its tensors
            blocks.backwards += 1
            blocks.finished_wall = blocks.wall  # the step the native steps' last_step() now reports
            # What the rest of this backward reaches (the embeddings') is the step's too.
            torch.autograd.Variable._execution_engine.queue_callback(blocks.native.end_of_backward)
        return (None, None, None, *input_grads, *gradients)


# The slots a block's input takes before a backward of the block has
# counted its uses (a Module made without a sample, at its first step):
# more than blocks use their input (a residual and a norm's two reads).
_UNKNOWN_USES = 8


def _input_slots(dx, pieces, slots):
    """The input's gradient, one answer per slot: the whole in the first,
    or each piece in its own. More pieces than slots (a block that used its
    input more often than in the call before) share the last slot."""
    if pieces is None:
        return [dx] + [None] * (slots - 1)
    if len(pieces) > slots:
        pieces = pieces[:slots - 1] + [functools.reduce(torch.add, pieces[slots - 1:])]
    return list(pieces) + [None] * (slots - len(pieces))


def _accumulate(leaves, gradients):
    """Gradients of leaves that were not the node's inputs, into their
    .grad through their own accumulators (their hooks see them), as a
    backward reaching them would."""
    torch.autograd.backward(leaves, gradients)


_CALLED = object()  # a block's template once its call returned


class _Slot:
    """Where a tensor was in a structure _hollow() took it out of."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def _hollow(value, tensors, seen=None):
    """`value` with its tensors (in tuples, lists, named tuples and dicts)
    appended to `tensors`, each once, and _Slot in their place; _filled()
    puts them back. What it does not look into it holds as it is."""
    seen = {} if seen is None else seen  # id -> slot
    if isinstance(value, torch.Tensor):
        if id(value) not in seen:
            seen[id(value)] = _Slot(len(tensors))
            tensors.append(value)
        return seen[id(value)]
    if type(value) in (tuple, list):
        return type(value)(_hollow(v, tensors, seen) for v in value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_hollow(v, tensors, seen) for v in value))
    if type(value) is dict:
        return {k: _hollow(v, tensors, seen) for k, v in value.items()}
    return value


def _filled(value, tensors):
    if isinstance(value, _Slot):
        return tensors[value.index]
    if type(value) in (tuple, list):
        return type(value)(_filled(v, tensors) for v in value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_filled(v, tensors) for v in value))
    if type(value) is dict:
        return {k: _filled(v, tensors) for k, v in value.items()}
    return value


class _StepGuard:
    """Held by the last block's autograd node: when the caller drops the
    step's output without a backward, the node goes, and so does the step
    (its kept activations with it)."""

    def __init__(self, native, step):
        self.native = native
        self.step = step
        self.reached = False

    def __del__(self):
        if not self.reached:
            self.native.abandon(self.step)


class BlockSteps:
    """The blocks of one model, their calls in the running step, and the
    native steps that plan and run them (runtime::BlockSteps)."""

    def __init__(self, blocks, budget, planner, collect_steps, bandwidth, prediction_scale, device, outer=(),
                 weights="device"):
        self.blocks = blocks
        self.calls = [None] * len(blocks)  # (args after the input, kwargs) of each block's call this step
        self.templates = [None] * len(blocks)  # each block's result, to give back around its output
        self.first_extras = [[] for _ in blocks]  # each block's other results given to the caller, from its call
        self.extra_positions = [[] for _ in blocks]  # where they are among the results that may need a gradient
        self.extra_needs = [None] * len(blocks)  # which of those needed one in the last run with grad
        self.run_inputs = [None] * len(blocks)  # each block's input in its call's run
        self.last_output = None  # what the previous block's call returned
        self.step_input = None  # block 0's input, from its call to the last block's
        for b in blocks:
            patched = b.__dict__.get("forward")
            if isinstance(patched, BlockForward) and patched.blocks_ref() is None:
                patched.restore(b)  # its Module is gone: the block is the model's again
        self.originals = [b.forward for b in blocks]
        self.own_forwards = ["forward" in b.__dict__ for b in blocks]  # set on the instance before wrapping
        # Leaves each block's graph reached last time that are not its own
        # parameters (a gain its parent owns): inputs of its next calls.
        self.reached = [[] for _ in blocks]
        self.own_counts = [0] * len(blocks)  # how many of a call's parameters are the block's own
        self.input_uses = [None] * len(blocks)  # edges of each block's graph into its input, from its last backward
        # Generators each block's modules own (its dropout drawn from its
        # own), and their states as the block's call this step found them.
        self.generators = [owned_generators(b) for b in blocks]
        self.model_generators = []  # the whole model's (set_outer_buffers())
        self.generator_states = [[] for _ in blocks]
        self.model_ref = None  # set_outer_buffers()
        self.step_parameters = []  # the model's (name, parameter) at this step's block 0 call
        self.computed = []  # those of them computed from other tensors
        self.swapped = None  # whether they are not the model's own now (found at the first recomputation)
        # Blocks under FSDP2 (fully_shard) hold their shards between calls
        # and the gathered weights during them: their parameters are read
        # at each call, where the block's forward and backward use them.
        self.sharded = [is_fully_sharded(b) for b in blocks]
        self.calling = None  # the block whose call is running its first forward
        self.outer_buffers = ChangingBuffers([])  # the model's buffers outside the blocks (set_outer_buffers)
        self.wall = 0.0  # seconds in memtrain's block calls and backward nodes, this step
        self.finished_wall = None  # the same, for the last step that finished
        self.backwards = 0  # the backwards that reached block 0
        self.watched_output = None  # watch_output(): the step's output's largest storage, weakly
        me = weakref.ref(self)
        calls = [_RunBlock(me, i) for i in range(len(blocks))]
        for call, block in zip(calls, blocks):
            if not hasattr(block, "memtrain_variants"):  # a block's own variants are its own to offer
                call.memtrain_variants = _variants.derived(call)
        self.run_calls = calls  # each holds its last run's other results for the native stage (extras)
        # weights="host": the blocks' own parameters, whose gradients arrive in host memory.
        self.host_ids = frozenset(id(p) for b in blocks for p in b.parameters()) if weights == "host" else frozenset()
        names = [f"block {i} ({type(b).__name__})" for i, b in enumerate(blocks)]
        self.native = _native.BlockSteps(blocks, names, calls, budget, planner, collect_steps, bandwidth,
                                         prediction_scale, device, list(outer), weights)
        if any(self.sharded):
            # What each gather holds: the block's whole weights (a shard's
            # shape is the whole weight's). On a GPU the next block's gather
            # overlaps this one's work.
            gathered = [gathered_bytes(b) if sharded else 0 for b, sharded in zip(blocks, self.sharded)]
            self.native.set_gathered_bytes(gathered, torch.device(device).type == "cuda")
        for i, block in enumerate(blocks):
            block.forward = BlockForward(me, i, self.originals[i], self.own_forwards[i])
        # Sharded blocks' collectives run in memtrain's calls: a failed one names its rank.
        self.peers = _peers.watch_peers() if any(self.sharded) else None

    def watch_output(self, output):
        """The step's output, from a loop said to let it go before its
        backward: its largest storage, weakly, for output_kept(). Scalars
        are not watched: a loss is alive at its own backward whatever the
        loop keeps (a chunked head's output holds nothing else), and their
        bytes are too few to plan for."""
        storages = [t.untyped_storage() for t in tensors_of(output) if t.dim() > 0]
        self.watched_output = StorageWeakRef(max(storages, key=lambda st: st.nbytes())) if storages else None

    def remember_output(self, output, device):
        """The step's output, weakly, each storage on `device` once: what a
        loop that keeps it through its backward keeps into the next step."""
        device = torch.device(device)
        storages = {}
        for t in tensors_of(output):
            if t.device.type == device.type:
                st = t.untyped_storage()
                storages[st.data_ptr()] = (StorageWeakRef(st), st.nbytes())
        self.previous_output = list(storages.values())

    def previous_output_bytes(self):
        """The bytes of the last step's output alive still (the loop kept it)."""
        remembered, self.previous_output = getattr(self, "previous_output", []), []
        return sum(nbytes for ref, nbytes in remembered if not ref.expired())

    def output_kept(self):
        """Whether the watched output is alive still (the backward has
        reached the blocks): the loop kept it. Once per step."""
        watched, self.watched_output = self.watched_output, None
        return watched is not None and not watched.expired()

    def __del__(self):
        if getattr(self, "peers", None) is not None:
            self.peers.close()

    def unwrap(self):
        """The blocks' forwards as they were before these steps took them."""
        self.native.cancel()
        for block in self.blocks:
            patched = block.__dict__.get("forward")
            if isinstance(patched, BlockForward):
                patched.restore(block)

    def among_peers(self, run, what):
        """run(), `what` of a step; a collective of it that fails raises
        memtrain.RankFailure naming the rank to blame."""
        if self.peers is None:
            return run()
        self.peers.progress += 1
        return self.peers.named(run, what)

    def set_outer_buffers(self, model):
        self.model_ref = weakref.ref(model)
        inside = {id(b) for block in self.blocks for b in block.buffers()}
        self.outer_buffers = ChangingBuffers(b for b in model.buffers() if b is not None and id(b) not in inside)
        self.model_generators = owned_generators(model)

    def call(self, i, args, kwargs):
        t0 = time.perf_counter()
        where = f"block {i} ({type(self.blocks[i]).__name__})"
        if not args or not isinstance(args[0], torch.Tensor):
            raise _native.UsageError(f"{where} was called without a tensor as its first argument; memtrain plans "
                                     "blocks whose first argument is the tensor the block before returned")
        x, rest = args[0], args[1:]
        for t in tensors_of((rest, kwargs)):
            if t.requires_grad:
                raise _native.UsageError(
                    f"{where} was called with a tensor other than its input that needs a gradient (shape "
                    f"{tuple(t.shape)}); memtrain plans blocks whose other arguments (masks, positions) need none")
        _refuse_caches(where, rest, kwargs)
        _refuse_recorded_outputs(where)
        if i == 0:
            self.step_input = x  # until the last block's node saves it
            self.calls = [None] * len(self.blocks)
            self.templates = [None] * len(self.blocks)
            self.first_extras = [[] for _ in self.blocks]
            self.run_inputs = [None] * len(self.blocks)
            self.wall = 0.0
        elif not _same_tensor(x, self.last_output):
            raise _native.UsageError(
                f"{where}'s input is not what block {i - 1} returned{self.what_came_between(i)}; memtrain plans "
                "blocks that the forward calls one after another, each on the output of the one before (pass blocks= "
                "the ones that are)")
        if i == 0 and not any(self.sharded):  # FSDP2 swaps sharded and gathered parameters by design
            self.step_parameters = self.model_parameters()
            self.swapped = None
            # Parameters computed from others (a functional_call's, from a
            # hypernetwork): any block may read them, and their gradients
            # go on to what they were computed from.
            self.computed = list({id(t): t for _, t in self.step_parameters if t.grad_fn is not None}.values())
        named = list(self.blocks[i].named_parameters())
        self.own_counts[i] = len(named)
        self.calls[i] = (rest, kwargs, _autocast_state())
        # The block's own generators as its first run of this step finds
        # them: every run of the step draws what that one draws.
        self.generator_states[i] = [(g, g.get_state()) for g in self.generators[i]]
        self.calling = i
        try:
            uses = self.input_uses[i]
            slots = (_UNKNOWN_USES if uses is None else max(1, uses)) if x.requires_grad else 1
            out = _BlockCall.apply(self, i, slots, *([x] * slots), *self.parameters_of(i, named))
        except BaseException:
            # A step that stopped (refused before it ran) holds nothing of the caller's.
            self.step_input = None
            self.calls = [None] * len(self.blocks)
            raise
        finally:
            self.calling = None
        y, extras = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
        self.last_output = y if i + 1 < len(self.blocks) else None
        rebuild = self.templates[i]
        self.wall += time.perf_counter() - t0
        if rebuild is None:  # an operator variant ran, which returns its output
            return y
        replacements = dict(zip((id(e) for e in self.first_extras[i]), extras))
        if self.run_inputs[i] is not None and self.run_inputs[i] is not x:
            replacements[id(self.run_inputs[i])] = x  # its input, passed through: the caller's
        # Held only for this call: a step's inputs and results are the schedule's to keep or free.
        self.run_inputs[i] = None
        self.first_extras[i] = []
        self.templates[i] = _CALLED  # its first run's results, which the template holds, are let go
        result = rebuild(y)
        return _replace_tensors(result, replacements) if replacements else result

    def what_came_between(self, i):
        """What may have replaced block i - 1's output before block i
        took it: hooks that return a new tensor, named, or else the
        model's own code between the two."""
        replaced = [k for k in (i - 1, i) if not isinstance(self.blocks[k].__dict__.get("forward"), BlockForward)]
        if replaced:
            return (f" (block {replaced[0]}'s forward was replaced after wrapping, block.forward = ...: what the "
                    "new forward computes around memtrain's runs outside the block; patch the forward before "
                    "wrapping, or m.unwrap() and wrap the patched model again)")
        hooks = [(f"block {i - 1}'s forward hook", h) for h in self.blocks[i - 1]._forward_hooks.values()]
        hooks += [(f"block {i}'s forward pre-hook", h) for h in self.blocks[i]._forward_pre_hooks.values()]
        hooks += [("a global forward hook", h) for h in torch.nn.modules.module._global_forward_hooks.values()]
        hooks += [("a global forward pre-hook", h)
                  for h in torch.nn.modules.module._global_forward_pre_hooks.values()]
        if hooks:
            named = ", ".join(f"{kind} {_callable_name(h)}" for kind, h in hooks)
            return (f" ({named} may have replaced it: memtrain's blocks take hooks that only look, returning None; "
                    "move one that changes the tensor into the block's forward)")
        return (" (the model's code between the two replaced it: an operation on the hidden states between layers, "
                "a layer skipped as LayerDrop skips one, or the layers run under torch.no_grad())")

    def parameters_of(self, i, named):
        """Block i's parameters at this call (`named`: those a
        functional_call or an adapter added after wrapping put there), and
        the other leaves its graph reached last time."""
        params = [p for _, p in named]
        own = {id(p) for p in params}
        for t in self.reached[i] + self.computed:
            if id(t) not in own:
                own.add(id(t))
                params.append(t)
        return params

    def model_parameters(self):
        model = self.model_ref() if self.model_ref is not None else None
        return [] if model is None else list(model.named_parameters(remove_duplicate=False))

    def parameters_of_the_forward(self):
        """The model with the parameters of this step's forward, where they
        are not its own now (torch.func.functional_call's, which it puts
        back when the forward returns, before the backward recomputes)."""
        if self.swapped is None and not self.step_parameters:
            self.swapped = False
        if self.swapped is None:
            now = self.model_parameters()
            self.swapped = len(now) != len(self.step_parameters) or any(
                a is not b for (_, a), (_, b) in zip(now, self.step_parameters))
        if not self.swapped:
            return contextlib.nullcontext()
        from torch.nn.utils.stateless import _reparametrize_module
        return _reparametrize_module(self.model_ref(), dict(self.step_parameters))

    def route(self, i, params, leaves, gradients):
        """The gradients of block i's backward as its node's answer, one
        per parameter it was called with; those of other leaves its graph
        reached go to their .grad at once, and the leaves are inputs of
        the block's next calls."""
        where = {id(p): k for k, p in enumerate(params)}
        own = {id(p) for p in params[:self.own_counts[i]]}
        answer = [None] * len(params)
        others, their, reached = [], [], []
        on_host, host_grads = [], []
        for leaf, g in zip(leaves, gradients):
            if g is None:
                continue
            if id(leaf) not in own and leaf.grad_fn is None:
                reached.append(leaf)
            k = where.get(id(leaf))
            if id(leaf) in self.host_ids:
                on_host.append(leaf)
                host_grads.append(g)
            elif k is not None:
                answer[k] = g
            else:
                others.append(leaf)
                their.append(g)
        self.reached[i] = reached  # what it read this time, not its own
        if others:
            _accumulate(others, their)
        if on_host:
            # Into .grad in host memory, where the gradients arrived: the
            # node's answer would be copied on the device (autograd copies a
            # gradient a Python node returns into a .grad that has none yet).
            self.native.enter_host_memory()
            try:
                _accumulate(on_host, host_grads)
            finally:
                self.native.leave_host_memory()
        return answer

    def run(self, i, x):
        """Block i on input x, with the rest of its call's arguments (the
        schedule's call, for its first forward and any recomputation)."""
        rest, kwargs, autocast = self.calls[i]
        if self.calling == i:  # inside the caller's own call: its autocast state is in force
            for g, state in self.generator_states[i]:  # a run the call repeats draws as its first
                g.set_state(state)
            result = self.originals[i](x, *rest, **kwargs)
        else:
            # Run again (a recomputation in the backward) with the call's
            # autocast state, the model's parameters as the step's forward
            # had them (a functional_call's are gone by then), and the
            # block's own generators as its first run found them, left as
            # the step left them (torch's own the native steps replay).
            now = [(g, g.get_state()) for g, _ in self.generator_states[i]]
            for g, state in self.generator_states[i]:
                g.set_state(state)
            try:
                with _autocast_as(autocast), self.parameters_of_the_forward():
                    result = self.originals[i](x, *rest, **kwargs)
            finally:
                for g, state in now:
                    g.set_state(state)
        where = f"block {i} ({type(self.blocks[i]).__name__})"
        y, rebuild = _primary(result, where)
        # Its other floating results that may need a gradient (not its
        # arguments passed through): the first run's go to the caller as
        # outputs of the block's node, and every run's to the native stage,
        # whose backward takes their gradients with the output's.
        candidates = [] if isinstance(result, torch.Tensor) else self.extra_candidates(x, rest, kwargs, rebuild)
        if torch.is_grad_enabled():
            self.extra_needs[i] = [t.requires_grad for t in candidates]  # known from now on
        if self.templates[i] is None:
            self.templates[i] = rebuild  # what the caller gets back around the output
            self.run_inputs[i] = x  # the schedule's copy of the input (the caller's own), until call() returns
            needs = self.extra_needs[i]
            if needs is None or len(needs) != len(candidates):
                needs = [True] * len(candidates)  # a run without grad cannot tell: all may
            self.extra_positions[i] = [k for k, need in enumerate(needs) if need]
            self.first_extras[i] = [candidates[k] for k in self.extra_positions[i]]
        self.run_calls[i].extras = [candidates[k] for k in self.extra_positions[i] if k < len(candidates)]
        return y

    @staticmethod
    def extra_candidates(x, rest, kwargs, rebuild):
        passed = {id(t) for t in tensors_of((x, rest, kwargs))}
        return [t for t in tensors_of(rebuild(None)) if t.is_floating_point() and id(t) not in passed]


def _refuse_caches(where, args, kwargs):
    """A key-value cache (transformers' Cache) grows at each call of a
    block: a block memtrain runs again would attend over its own keys twice."""
    cache_utils = sys.modules.get("transformers.cache_utils")
    cache = getattr(cache_utils, "Cache", None)
    if cache is None:
        return
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, cache):
            raise _native.UsageError(
                f"{where} was called with a key-value cache ({type(value).__name__}), which each call of the block "
                "extends; memtrain runs blocks again in the backward: train with use_cache=False")


def _refuse_recorded_outputs(where):
    """transformers records some outputs (router logits, attentions) with
    hooks on submodules inside the blocks: tensors memtrain's steps compute
    would reach the loss around the block's output, and a block whose first
    forward memtrain runs without grad would record them without theirs."""
    capturing = sys.modules.get("transformers.utils.output_capturing")
    collector = getattr(capturing, "_active_collector", None)
    collected = collector.get() if collector is not None else None
    recorded = sorted(k for k in (collected or {}) if k != "hidden_states" and not k.startswith("_"))
    if recorded:
        names = ", ".join(f"output_{k}" for k in recorded)
        raise _native.UsageError(
            f"{where} runs while transformers records its {', '.join(recorded)} from inside it ({names}); "
            "memtrain runs a block's forward and backward on its own and cannot hand their gradients on: train "
            "with them off (the model's config or the call's arguments)")


def is_fully_sharded(module):
    """Whether `module` is sharded by FSDP2 (torch.distributed.fsdp.fully_shard)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch without torch.distributed
        return False
    return isinstance(module, FSDPModule)


def gathered_bytes(block):
    """The bytes of a sharded block's whole weights as FSDP2 gathers them:
    at its MixedPrecisionPolicy's param_dtype where it sets one (a shard's
    shape is the whole weight's)."""
    state = block._get_fsdp_state() if hasattr(block, "_get_fsdp_state") else None
    dtype = getattr(getattr(state, "_mp_policy", None), "param_dtype", None)
    return sum(p.numel() * (dtype.itemsize if dtype is not None else p.element_size()) for p in block.parameters())


def _same_tensor(x, previous):
    """Whether `x` is `previous`, or the same tensor seen through a hook
    that passes it on (FSDP2's pre-forward hook gives a block an alias of
    its input that its backward hook sits on): the same elements of the
    same storage."""
    if x is previous:
        return True
    return (previous is not None and x.data_ptr() == previous.data_ptr() and x.shape == previous.shape
            and x.stride() == previous.stride() and x.dtype == previous.dtype)


@functools.cache
def autocast_devices():
    """The devices whose autocast state a block's call carries: asked once,
    since torch.cuda.is_available() costs about 10 microseconds a call."""
    return ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)


def _autocast_state():
    """torch.autocast as the caller has it, per device: a recomputed block
    runs in the backward, outside the caller's autocast, and must compute
    in the same precision as its first forward."""
    return [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in autocast_devices()]


def autocast_off():
    """torch.autocast off on every device, whatever the caller has on."""
    return _autocast_as([(d, False, torch.get_autocast_dtype(d)) for d in autocast_devices()])


class _autocast_as:
    """torch.autocast per device as `state` says, its cache off as the
    executor has it for every stage's run (torch.autocast would turn it on)."""

    def __init__(self, state):
        self.contexts = [torch.autocast(d, dtype=dtype, enabled=on, cache_enabled=False) for d, on, dtype in state]

    def __enter__(self):
        for c in self.contexts:
            c.__enter__()

    def __exit__(self, *exc):
        for c in reversed(self.contexts):
            c.__exit__(*exc)
        return False


class _RunBlock:
    """What the schedule calls to run block i (holding its BlockSteps
    weakly: the native steps hold this). `extras`: the last run's other
    floating results, which the native stage reads after each run."""

    def __init__(self, blocks_ref, index):
        self.blocks_ref = blocks_ref
        self.index = index
        self.extras = []

    def __call__(self, x):
        return self.blocks_ref().run(self.index, x)


class BlockForward:
    """A block's forward while memtrain plans it: with grad, a step of the
    chain; without (inference, torch.no_grad()), the block's own forward."""

    def __init__(self, blocks_ref, index, original, own):
        self.blocks_ref = blocks_ref
        self.index = index
        self.original = original
        self.own = own  # the original was set on the instance, not the class's

    def restore(self, block):
        """Puts the block's forward back as it was before it was wrapped."""
        if self.own:
            block.forward = self.original
        else:
            block.__dict__.pop("forward", None)

    def __deepcopy__(self, memo):
        # A deep copy of the model (an EMA or teacher copy) is a plain
        # model of its own: its blocks' forward is their own, bound to the copy.
        return copy.deepcopy(self.original, memo)

    def __reduce_ex__(self, protocol):
        # torch.save(model) saves the plain model: its blocks' own forward.
        return self.original.__reduce_ex__(protocol)

    def __call__(self, *args, **kwargs):
        blocks = self.blocks_ref()
        if blocks is None or not torch.is_grad_enabled():
            return self.original(*args, **kwargs)
        if _under_torch_compile():
            raise _native.UsageError(
                "a model memtrain plans was called under torch.compile: torch.compile would compile the blocks "
                "again inside memtrain's steps; compile the blocks themselves before wrapping the model "
                "(model.blocks[i] = torch.compile(block)), and call the memtrain.Module itself")
        return blocks.call(self.index, args, kwargs)


def _under_torch_compile():
    """Whether torch.compile is tracing or running this call: its frame
    callback is set while a compiled function runs, graph breaks included."""
    if torch.compiler.is_compiling():
        return True
    prior = _set_eval_frame(None)
    _set_eval_frame(prior)
    return prior is not None and prior is not False



def _outside_torch_and_memtrain():
    """The warnings stacklevel, from the function calling warn, of the
    first frame that is neither torch's nor memtrain's: the caller's line
    (its loss.backward()), where autograd called memtrain."""
    dirs = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, _native))
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(dirs):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 1


def output_bytes(output, device):
    """The bytes of the output's tensors on `device`, each storage once."""
    device = torch.device(device)
    storages = {}
    for t in tensors_of(output):
        if t.device.type == device.type:
            st = t.untyped_storage()
            storages[st.data_ptr()] = st.nbytes()
    return sum(storages.values())


def loss_of(output):
    """What calibration runs the backward from, standing in for the caller's
    loss until the steps measure it: the output's loss when it has one
    (transformers' models given labels); else, for logits (a floating
    tensor whose last dimension holds classes), a float32 cross-entropy over
    that dimension, as language models' and classifiers' losses are; else
    the first tensor that needs a gradient."""
    loss = output.get("loss") if isinstance(output, Mapping) else None
    if isinstance(loss, torch.Tensor):
        return loss
    for t in tensors_of(output):
        if t.requires_grad:
            if t.is_floating_point() and t.dim() >= 2 and t.shape[-1] >= 2:
                logits = t.flatten(0, -2).float()
                return torch.nn.functional.cross_entropy(
                    logits, torch.zeros(logits.shape[0], dtype=torch.long, device=t.device))
            return t
    raise _native.UsageError(f"the model's output on the sample ({type(output).__name__}) holds no tensor that "
                             "needs a gradient")


class ChangingBuffers:
    """Buffers, and which of them steps change in place (a batch norm's
    running statistics), learnt: all of them at first, then those whose
    version moved since the last look, and any that did before."""

    def __init__(self, buffers):
        self.buffers = list(buffers)
        self.versions = None
        self.changing = set()

    def now(self):
        versions = [b._version for b in self.buffers]
        if self.versions is None:
            self.changing = set(range(len(versions)))
        else:
            self.changing |= {i for i, (a, b) in enumerate(zip(self.versions, versions)) if a != b}
        self.versions = versions
        return [self.buffers[i] for i in sorted(self.changing)]


def owned_generators(module):
    """The torch.Generators a module's submodules hold as attributes (a
    dropout drawn from a block's own)."""
    return [g for m in module.modules() for g in vars(m).values() if isinstance(g, torch.Generator)]


class StepEntry:
    """What a step may change before it is refused or rolled back, as it
    was when the step began: torch's random generators (a dropout before the
    blocks) and those the model's modules own (`generators`), and the
    `changing` buffers that steps change in place (a stem's batch norm).
    restore() puts them back. `keep(t)` copies t where the budget does not
    count it (host memory), so that what a step holds is the same whether
    it is rolled back or not."""

    def __init__(self, changing, device, keep, generators=()):
        self.cpu_rng = keep(torch.get_rng_state())
        self.device = device
        self.cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        self.owned = [(g, keep(g.get_state())) for g in generators]
        self.buffers = [(b, keep(b.detach())) for b in changing.now()]

    def restore(self):
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state(self.cuda_rng, self.device)
        for g, state in self.owned:
            g.set_state(state)
        with torch.no_grad():
            for b, kept in self.buffers:
                b.copy_(kept)


def sample_arguments(sample):
    """A sample as the model's arguments: a tensor, a tuple of positional
    arguments, or a dict of keyword arguments."""
    if isinstance(sample, torch.Tensor):
        return (sample,), {}
    if isinstance(sample, tuple):
        return sample, {}
    if isinstance(sample, Mapping):
        return (), dict(sample)
    raise TypeError(f"sample is a {type(sample).__name__}; expected a torch.Tensor, a tuple of the model's "
                    "arguments or a dict of its keyword arguments")
