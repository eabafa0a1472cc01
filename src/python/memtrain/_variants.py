"""Leaner forms of any block, derived without the user writing them: the
block's call run under torch's selective checkpointing, which keeps some
operations' outputs for the backward and recomputes the rest from the
block's input there. The `joint` planner measures each one per input size,
as it measures the block, and may run one where it is cheaper than
recomputing the whole block or keeps less than keeping it.

Each recomputes in eager mode, from the same parameters, with torch's random
generators replayed (torch.utils.checkpoint keeps their state): gradients
equal the plain block's, bit for bit."""

import functools

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

_aten = torch.ops.aten

# What costs the most to recompute: the matrix products and attention. The
# rest (norms, activations, elementwise work, dropout) is cheap to run again.
_PRODUCTS = {_aten.mm.default, _aten.addmm.default, _aten.bmm.default, _aten.baddbmm.default}
_ATTENTION = {getattr(_aten, name).default for name in (
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")
    if hasattr(_aten, name)}


def _keeps_products(counts, ctx, op, *args, **kwargs):
    """Keeps every matrix product's and attention's output."""
    return CheckpointPolicy.MUST_SAVE if op in _PRODUCTS or op in _ATTENTION else CheckpointPolicy.PREFER_RECOMPUTE


def _keeps_every_other_product(counts, ctx, op, *args, **kwargs):
    """Keeps attention's output and every second matrix product's, counted
    in the order the forward runs them (its recomputation counts afresh)."""
    if op in _ATTENTION:
        return CheckpointPolicy.MUST_SAVE
    if op not in _PRODUCTS:
        return CheckpointPolicy.PREFER_RECOMPUTE
    counts[ctx.is_recompute] += 1
    return CheckpointPolicy.MUST_SAVE if counts[ctx.is_recompute] % 2 == 1 else CheckpointPolicy.PREFER_RECOMPUTE


_POLICIES = {"keeps products": _keeps_products, "keeps every other product": _keeps_every_other_product}


def _contexts(policy):
    """One checkpoint call's contexts, with counts of its own."""
    return create_selective_checkpoint_contexts(functools.partial(policy, {False: 0, True: 0}))


def derived(run):
    """The variants of the block that `run` (its call on an input) runs:
    a dict from a name to a callable on the input, as memtrain_variants."""
    return {name: functools.partial(_selective, run, functools.partial(_contexts, policy))
            for name, policy in _POLICIES.items()}


def _selective(run, context_fn, x):
    if not torch.is_grad_enabled():  # nothing kept for a backward: the block as it is
        return run(x)
    return checkpoint(run, x, use_reentrant=False, context_fn=context_fn, determinism_check="none")
