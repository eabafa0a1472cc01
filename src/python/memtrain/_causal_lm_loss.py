"""transformers' causal language models given labels, their head and loss
chunked: the model's forward computes `logits = self.lm_head(hidden)` and
then `self.loss_function(logits=logits, labels=labels, ...)`. For the
length of one training call memtrain makes the head hand the hidden states
on as they are and sets the model's loss function (the `loss_function`
setter transformers offers for this) to one that computes the head and the
cross-entropy together, chunk by chunk (memtrain.linear_cross_entropy), so
the whole logits (tokens x vocabulary floats) never exist. The labels are
shifted, counted and reduced as transformers' ForCausalLMLoss does
(num_items_in_batch included).

Chunking is on where the user asks for it, or where the budget cannot
hold the whole logits (memtrain.Module finds that when it measures its
sample). Even then, where the whole logits fit what the budget has free
(and chunking is not forced), the model's own head and loss run, bit for
bit the plain model's.
The output holds no `logits` when the head was chunked (reading them raises,
naming chunked_loss): training reads the loss; evaluation (under
torch.no_grad) runs the model plainly.
"""

import collections
import contextlib
import warnings

import torch
import torch.nn.functional as F

from . import _memtrain as _native
from ._blocks import _outside_torch_and_memtrain
from ._linear_cross_entropy import LEAST_CHUNK_TOKENS, linear_cross_entropy


def _causal_lm_loss():
    try:
        from transformers.loss.loss_utils import LOSS_MAPPING, ForCausalLMLoss
    except ImportError:
        return None, None
    return LOSS_MAPPING, ForCausalLMLoss


def causal_lm_head(model):
    """The model's output head when it is a transformers causal language
    model whose loss is ForCausalLMLoss; else None."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(head, torch.nn.Linear) or not hasattr(type(model), "loss_function"):
        return None
    mapping, causal = _causal_lm_loss()
    if causal is None or getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return None
    if mapping.get(getattr(model, "loss_type", None) or "ForCausalLM") is not causal:
        return None
    return head


class ChunkedHead:
    """Chunks a causal language model's head and loss for the calls it
    wraps. mode: True (always: at least `forced_chunks` chunks), False
    (never), None (never, until the Module finds that the budget needs it:
    chunk_where_needed()). `chunk_tokens()(hidden, weight, bias, most,
    measuring)` is the Module's choice of chunk under its budget (a weak
    method): the most tokens, up to `most`, whose logits fit what it has
    free."""

    forced_chunks = 8

    def __init__(self, model, mode, chunk_tokens):
        if mode not in (None, True, False):
            raise _native.UsageError(f"chunked_loss {mode!r} is not a choice; expected None (where the budget needs "
                                     "it), True or False")
        self.head = causal_lm_head(model) if mode is not False else None
        if mode is True and self.head is None:
            raise _native.UsageError(
                f"chunked_loss=True: {type(model).__name__} is not a transformers causal language model whose head "
                "is an nn.Linear and whose loss is ForCausalLM; compute the loss with m.linear_cross_entropy instead")
        self.model = model
        self.mode = mode
        self.chunking = mode is True  # chunks are taken now
        self.chunk_tokens = chunk_tokens
        self.chunked_last = False  # whether the last call's head ran in chunks
        self.warned_without_labels = False  # chunked_loss=True met a call without labels (warned once)
        # While the Module measures its sample, chunks of a fixed share of
        # the tokens: a chunk chosen from a budget not yet known to fit
        # would make the least budget depend on the budget asked with.
        self.measuring = False

    def chunk_where_needed(self):
        """The budget cannot hold the whole logits: from now on the head
        and loss run in chunks where they do not fit. False where this
        head cannot (or is not to be) chunked, or chunks already."""
        if self.mode is not None or self.head is None or self.chunking:
            return False
        self.chunking = True
        return True

    @contextlib.contextmanager
    def whole_logits(self):
        """The model's own head and loss meanwhile, chunks asked for or not."""
        chunking, self.chunking = self.chunking, False
        try:
            yield
        finally:
            self.chunking = chunking

    def applies_after_chunking(self, kwargs):
        """Whether chunk_where_needed() would chunk a call with `kwargs`."""
        return self.mode is None and self.head is not None and not self.chunking and kwargs.get("labels") is not None

    def applies(self, kwargs):
        return self.chunking and kwargs.get("labels") is not None

    def run(self, call, kwargs):
        """call(), the model's forward on kwargs, with its head and loss chunked."""
        self.chunked_last = False
        if not self.applies(kwargs):
            if self.mode is True and kwargs.get("labels") is None and not self.warned_without_labels:
                self.warned_without_labels = True
                warnings.warn(f"memtrain: chunked_loss=True, but {type(self.model).__name__} was called without "
                              "labels: its head ran whole and its logits are the model's; memtrain chunks the "
                              "head and the loss that a causal language model computes from labels (for a loss "
                              "your loop computes, m.linear_cross_entropy(hidden, head.weight, targets))",
                              stacklevel=_outside_torch_and_memtrain())
            return call()
        head, model = self.head, self.model
        own_loss = model.__dict__.get("_loss_function")
        had_forward = "forward" in head.__dict__
        own_forward = head.__dict__.get("forward")

        def loss_function(logits, labels, vocab_size, num_items_in_batch=None, ignore_index=-100,
                          shift_labels=None, **kwargs):
            return self._loss(logits, labels, num_items_in_batch, ignore_index, shift_labels, own_loss, kwargs)

        head.forward = lambda hidden: hidden
        model.loss_function = loss_function
        try:
            output = call()
        finally:
            if had_forward:
                head.forward = own_forward
            else:
                del head.forward
            if own_loss is None:
                model.__dict__.pop("_loss_function", None)
            else:
                model._loss_function = own_loss
        if self.chunked_last and hasattr(output, "logits"):
            _without_logits(output)
        return output

    def _loss(self, hidden, labels, num_items_in_batch, ignore_index, shift_labels, own_loss, kwargs):
        head = self.head
        given_shift = shift_labels
        if shift_labels is None:
            shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
        shift_labels = shift_labels.to(hidden.device)
        tokens = hidden.numel() // hidden.shape[-1]
        vocabulary = head.weight.shape[0]
        share = max(1, -(-tokens // self.forced_chunks))
        if self.measuring:
            # As the least budget is planned for: chunks of at least the least size.
            most = max(share, min(tokens, LEAST_CHUNK_TOKENS))
        else:
            most = share if self.mode is True else tokens
        chunk = self.chunk_tokens()(hidden, head.weight, head.bias, most, self.measuring)
        if chunk >= tokens:  # all of it fits: the model's own head and loss
            logits = F.linear(hidden, head.weight, head.bias)
            loss_of = own_loss or _causal_lm_loss()[1]
            return loss_of(logits=logits, labels=labels, vocab_size=vocabulary, num_items_in_batch=num_items_in_batch,
                           ignore_index=ignore_index, shift_labels=given_shift, **kwargs)
        self.chunked_last = True
        reduction = "sum" if num_items_in_batch is not None else "mean"
        loss = linear_cross_entropy(hidden, head.weight, shift_labels, head.bias, ignore_index=ignore_index,
                                    reduction=reduction, chunk_tokens=chunk)
        if reduction == "sum":
            if isinstance(num_items_in_batch, torch.Tensor):
                num_items_in_batch = num_items_in_batch.to(loss.device)
            loss = loss / num_items_in_batch
        return loss


_WITHOUT_LOGITS = {}  # an output class -> its subclass whose logits were never made


class LogitsNotMade(_native.UsageError, AttributeError, KeyError):
    """Reading the logits of an output whose head ran in chunks. An
    AttributeError and a KeyError too: hasattr(), getattr(out, "logits",
    None) and `"logits" in out` find none, as for a field left None."""

    def __str__(self):  # KeyError's would quote the message
        return str(self.args[0])


def _without_logits(output):
    """`output` (a transformers ModelOutput whose `logits` holds the hidden
    states the head handed on) without logits: gone from its keys and its
    tuple, as a field the model left None is, and reading them raises,
    naming why."""
    if "logits" in output.keys():
        collections.OrderedDict.__delitem__(output, "logits")
    kind = type(output)
    if kind not in _WITHOUT_LOGITS:
        def refuse():
            raise LogitsNotMade(
                "this step's head and loss ran in chunks (memtrain.Module's chunked_loss), so the whole logits "
                "were never made: the output holds the loss. Pass chunked_loss=False to have them (the budget "
                "then holds them), or compute what your loop needs from the hidden states in chunks")

        def get(self):
            value = self.__dict__.get("logits")
            return value if value is not None else refuse()

        def put(self, value):  # a copy made field by field (accelerate's convert_to_fp32) sets None
            self.__dict__["logits"] = value

        def getitem(self, key):
            return refuse() if key == "logits" and "logits" not in self.keys() else kind.__getitem__(self, key)

        def describe(self):  # the dataclass's repr would read every field
            return f"{kind.__name__}({', '.join(f'{k}={v!r}' for k, v in self.items())})"
        _WITHOUT_LOGITS[kind] = type(kind.__name__, (kind,), {
            "logits": property(get, put), "__getitem__": getitem, "__repr__": describe,
            "__module__": kind.__module__})
    output.__dict__["logits"] = None
    output.__class__ = _WITHOUT_LOGITS[kind]
