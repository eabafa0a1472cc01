"""A language model's head and loss without its logits: cross-entropy of
`hidden @ weight.T + bias` against `targets`, computed over chunks of
tokens so that only one chunk's logits exist at a time.

Each chunk's forward also computes that chunk's gradients (of the hidden
states, the weight and the bias), scaled for the mean; the backward only
multiplies them by the gradient of the loss. The whole logits tensor and its
gradient (tokens x vocabulary floats each) never exist: what the step holds
beyond the plain head's inputs is one chunk's logits and the gradients the
plain head's backward makes anyway.

With one chunk (all tokens fit), it is the plain computation,
F.cross_entropy(F.linear(hidden, weight, bias), targets), bit for bit. With
several, the loss and the weight's gradient are sums over chunks in another
order than the plain kernels', so they differ from the plain ones by
rounding (measured in the tests: relative differences below 1e-5 in float32).
"""

import torch
import torch.nn.functional as F

from . import _memtrain as _native

def _bytes(t, dtype=None):
    return t.numel() * (dtype or t.dtype).itemsize if t is not None else 0


def held_whatever_the_chunk(hidden, weight, bias):
    """What the chunked computation holds beside its chunks, whatever their
    size: the gradients it makes in its forward (the weight's and the
    bias's summed in float32, then cast to their dtype; the hidden states'),
    and under autocast the weight's and bias's casts, which every chunk's
    product reads."""
    held = 0
    if hidden.requires_grad:
        held += _bytes(hidden)
    for t in (weight, bias):
        if t is None:
            continue
        if t.requires_grad:
            held += _bytes(t, torch.float32) + (_bytes(t) if t.dtype != torch.float32 else 0)
        if torch.is_autocast_enabled(t.device.type):
            cast = torch.get_autocast_dtype(t.device.type)
            if cast != t.dtype:
                held += _bytes(t, cast)
    return held


def held_per_token(vocabulary, width, dtype):
    """What one token of a chunk holds at most: its float32 logits and the
    temporary logsumexp makes (8 bytes per logit; the softmax gradient
    reuses the logits' bytes), 2 more per logit where the gradient is cast
    to a narrower hidden dtype, and its hidden state cast for the product
    and to float32 for the weight's gradient."""
    return (8 if dtype == torch.float32 else 10) * vocabulary + 8 * width


# The fewest tokens per chunk a budget is planned for: fewer would run the
# head's product on too few rows to be fast. Larger chunks are taken only
# where they are free.
LEAST_CHUNK_TOKENS = 32


def least_held(hidden, weight, bias):
    """What the computation holds in chunks of the least size."""
    tokens = hidden.numel() // max(1, hidden.shape[-1])
    chunk = min(tokens, LEAST_CHUNK_TOKENS)
    return held_whatever_the_chunk(hidden, weight, bias) + chunk * held_per_token(weight.shape[0], weight.shape[1],
                                                                                 hidden.dtype)


def held_per_token_whole(vocabulary):
    """What one token holds where all are taken at once (the plain
    computation, a model's own head and loss): its logits, their float32
    copy, the log-probabilities the loss keeps, and in the backward their
    gradient and the logits', 16 bytes per logit at most (measured
    beside the weight's gradient and cast: 15.5 in float32 with the logits
    kept, as a model's output keeps them; 8.5 under bfloat16 autocast)."""
    return 16 * vocabulary


def chunk_tokens_for(tokens, hidden, weight, bias, free_bytes):
    """The most tokens per chunk, a power of two, whose working set fits
    `free_bytes` beside what the computation holds whatever the chunk
    (held_whatever_the_chunk). At least 1, at most `tokens` (one chunk: the
    plain computation)."""
    free = int(free_bytes) - held_whatever_the_chunk(hidden, weight, bias)
    fit = max(1, free // held_per_token(weight.shape[0], weight.shape[1], hidden.dtype))
    if fit >= tokens and tokens * held_per_token_whole(weight.shape[0]) > free:
        fit = tokens - 1  # all tokens at once run the plain computation, which holds more
    return int(min(tokens, 1 << (max(1, fit).bit_length() - 1)))


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, ignore_index, reduction, chunk):
        n = hidden.shape[0]
        valid = targets != ignore_index
        count = valid.sum()
        # The mean divides by the tokens counted, as F.cross_entropy does.
        scale = 1.0 / count.clamp(min=1).to(torch.float32) if reduction == "mean" else None
        needs = ctx.needs_input_grad
        grad_hidden = torch.empty_like(hidden) if needs[0] else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if needs[1] else None
        grad_bias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if needs[2] else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, n, chunk):
            h = hidden[start:start + chunk]
            t = targets[start:start + chunk]
            ok = valid[start:start + chunk]
            logits = F.linear(h, weight, bias).float()
            safe = t.masked_fill(~ok, 0).unsqueeze(1)
            lse = torch.logsumexp(logits, dim=1)
            picked = logits.gather(1, safe).squeeze(1)
            total += torch.where(ok, lse - picked, 0.0).sum()
            if grad_hidden is None and grad_weight is None and grad_bias is None:
                continue
            # d loss / d logits: softmax less the target's one-hot, zero at ignored tokens.
            g = logits.sub_(lse.unsqueeze(1)).exp_()
            g.scatter_add_(1, safe, torch.full_like(picked, -1.0).unsqueeze(1))
            g.mul_(ok.unsqueeze(1))
            if scale is not None:
                g.mul_(scale)
            if grad_bias is not None:
                grad_bias += g.sum(0)
            g = g.to(hidden.dtype)
            if grad_hidden is not None:
                torch.mm(g, weight, out=grad_hidden[start:start + chunk])
            if grad_weight is not None:
                grad_weight.addmm_(g.t().float(), h.float())
            del g, logits
        ctx.grads = (grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype),
                     None if grad_bias is None else grad_bias.to(bias.dtype))
        if reduction == "mean":
            return total * scale
        return total

    @staticmethod
    def backward(ctx, grad_loss):
        grads = []
        for g in ctx.grads:
            grads.append(None if g is None else g.mul_(grad_loss.to(g.dtype)))
        ctx.grads = None  # their bytes go to the caller
        return grads[0], grads[1], grads[2], None, None, None, None


def linear_cross_entropy(hidden, weight, targets, bias=None, *, ignore_index=-100, reduction="mean",
                         chunk_tokens=None):
    """F.cross_entropy(F.linear(hidden, weight, bias), targets) over chunks
    of `chunk_tokens` tokens, never holding the whole logits.

    hidden: [..., d]; weight: [vocabulary, d] (an nn.Linear's); targets:
    [...] class indices, `ignore_index` where no loss is counted; reduction
    "mean" or "sum". chunk_tokens: tokens per chunk; None takes all of them
    (the plain computation). memtrain.Module.linear_cross_entropy chooses
    it under the Module's budget."""
    if not isinstance(hidden, torch.Tensor) or not isinstance(weight, torch.Tensor):
        raise TypeError("linear_cross_entropy: hidden and weight must be tensors")
    if weight.dim() != 2 or hidden.shape[-1] != weight.shape[1]:
        raise _native.UsageError(f"linear_cross_entropy: hidden {tuple(hidden.shape)} and weight "
                                 f"{tuple(weight.shape)} do not match; expected hidden [..., d] and weight "
                                 "[vocabulary, d]")
    if targets.shape != hidden.shape[:-1]:
        raise _native.UsageError(f"linear_cross_entropy: targets {tuple(targets.shape)} do not match hidden "
                                 f"{tuple(hidden.shape)}; expected targets of shape {tuple(hidden.shape[:-1])}")
    if reduction not in ("mean", "sum"):
        raise _native.UsageError(f"linear_cross_entropy: reduction {reduction!r} is not known; expected 'mean' or "
                                 "'sum'")
    hidden = hidden.reshape(-1, hidden.shape[-1])
    targets = targets.reshape(-1)
    tokens = hidden.shape[0]
    if chunk_tokens is None:
        chunk_tokens = tokens
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        raise _native.UsageError(f"linear_cross_entropy: chunk_tokens {chunk_tokens!r} is not a chunk; expected a "
                                 "positive number of tokens")
    if chunk_tokens >= tokens:
        return F.cross_entropy(F.linear(hidden, weight, bias), targets, ignore_index=ignore_index,
                               reduction=reduction)
    return _ChunkedLinearCrossEntropy.apply(hidden, weight, bias, targets, ignore_index, reduction, chunk_tokens)
