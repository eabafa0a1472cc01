"""Plain-PyTorch models the tests and bench/python_bench.py wrap: nothing
here is memtrain's."""

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn


class Block(nn.Module):
    """A Transformer block in plain PyTorch: attention and MLP, both residual,
    with dropout, so recomputation must replay the random draws."""

    def __init__(self, width, heads, dropout=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width),
                                 nn.Dropout(dropout))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def transformer(vocab=500, width=64, heads=4, layers=4, classes=20, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Embedding(vocab, width), *[Block(width, heads) for _ in range(layers)],
                         nn.LayerNorm(width), nn.Linear(width, classes))


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 256), nn.Tanh(),
                         nn.Dropout(0.1), nn.Linear(256, 10))


class MaskedBlock(Block):
    """A Transformer block called as real models call theirs: with a mask and
    a keyword flag, returning its output and a statistic that needs no
    gradient."""

    def forward(self, x, mask, scale=1.0):
        h = self.norm1(x)
        x = x + scale * self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(self.norm2(x))
        return x, x.detach().abs().mean()


def causal_mask(ids):
    """An additive attention mask that hides later positions of `ids`' rows."""
    length = ids.shape[1]
    return torch.triu(torch.full((length, length), float("-inf"), device=ids.device), 1)


class MaskedGPT(nn.Module):
    """A small causal language model whose forward loops over its blocks."""

    def __init__(self, vocab=300, width=64, heads=4, layers=6, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, width)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList([MaskedBlock(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        mask = causal_mask(ids)
        x = self.drop(self.embed(ids))
        for block in self.blocks:
            x, _ = block(x, mask, scale=0.5)
        return self.head(self.norm(x))


def gpt2(layers=4, width=64, seed=0):
    """transformers' GPT-2 from its configuration class: random weights,
    nothing downloaded."""
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=500, n_positions=128, n_embd=width, n_layer=layers, n_head=4)
    return transformers.GPT2LMHeadModel(config)


def llama(layers=4, width=64, seed=0):
    """transformers' Llama from its configuration class, with attention dropout."""
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=500, hidden_size=width, intermediate_size=2 * width,
                                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=128, attention_dropout=0.1)
    return transformers.LlamaForCausalLM(config)


def mixtral(layers=3, width=64, seed=0, router_logits=False):
    """transformers' Mixtral (a mixture of experts) from its configuration
    class; router_logits: its load-balancing loss recorded through hooks."""
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    config = transformers.MixtralConfig(vocab_size=500, hidden_size=width, intermediate_size=96,
                                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                        num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
                                        output_router_logits=router_logits, router_aux_loss_coef=0.5)
    return transformers.MixtralForCausalLM(config)


class CausalBlock(Block):
    """A GPT block as nanoGPT writes it, called with the causal mask."""

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class NanoGPT(nn.Module):
    """A language model of real proportions for its width: a 32000-word
    vocabulary, so the head's logits and the loss the training loop computes
    from them are the largest tensors of a step. forward returns the logits;
    hidden() the states the head reads."""

    def __init__(self, vocab=32000, width=64, heads=4, layers=4, positions=512, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(positions, width)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList([CausalBlock(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def hidden(self, ids, checkpoint=False):
        length = ids.shape[1]
        mask = torch.triu(torch.full((length, length), float("-inf"), device=ids.device), 1)
        x = self.drop(self.embed(ids) + self.pos(torch.arange(length, device=ids.device)))
        for block in self.blocks:
            if checkpoint:
                x = torch.utils.checkpoint.checkpoint(block, x, mask, use_reentrant=False)
            else:
                x = block(x, mask)
        return self.norm(x)

    def forward(self, ids, checkpoint=False, hidden=False):
        h = self.hidden(ids, checkpoint)
        return h if hidden else self.head(h)


class RoutedBlock(nn.Module):
    """A mixture-of-experts block with a hash router: each token goes to the
    expert its id picks, and the experts differ in width, so what the block
    holds depends on which tokens it gets, not only on how many."""

    def __init__(self, width, heads, widths=(1, 8), dropout=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(width, m * width), nn.GELU(),
                                                    nn.Linear(m * width, width)) for m in widths])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask, route):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        h = self.norm2(x).flatten(0, 1)
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            rows = (route.flatten() == e).nonzero().squeeze(1)
            out = out.index_add(0, rows, expert(h.index_select(0, rows)))
        return x + self.drop(out.view_as(x))


class RoutedGPT(nn.Module):
    """A causal language model of RoutedBlocks: ids in the upper half of the
    vocabulary go to the wide expert."""

    def __init__(self, vocab=300, width=64, heads=4, layers=4, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList([RoutedBlock(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        mask = causal_mask(ids)
        route = (ids >= self.vocab // 2).long()
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask, route)
        return self.head(self.norm(x))


VOCAB = 32000
GAIN_WIDTH = 64


class LowRank(nn.Module):
    """A linear layer with a low-rank adapter beside it, as LoRA injects one."""

    def __init__(self, base, rank=4):
        super().__init__()
        self.base = base
        self.down = nn.Linear(base.in_features, rank, bias=False)
        self.up = nn.Linear(rank, base.out_features, bias=False)
        nn.init.normal_(self.up.weight, std=0.02)

    def forward(self, x):
        return self.base(x) + self.up(self.down(x))


class GainBlock(nn.Module):
    """A residual MLP block; it reads its parent's gain (not its own
    parameter) and an adapter when one was added to it."""

    def __init__(self, gain, noise=None):
        super().__init__()
        self.noise = noise  # a generator of its own, for a dropout that draws from it
        self.norm = nn.LayerNorm(GAIN_WIDTH)
        self.fc1 = nn.Linear(GAIN_WIDTH, 2 * GAIN_WIDTH)
        self.fc2 = nn.Linear(2 * GAIN_WIDTH, GAIN_WIDTH)
        self.drop = nn.Dropout(0.1)
        self.__dict__["gain"] = gain  # the parent's; not a submodule of the block

    def forward(self, x):
        h = self.fc2(F.gelu(self.fc1(self.norm(x) * self.gain.weight)))
        if hasattr(self, "adapter"):
            h = h + self.adapter(x)
        if self.noise is not None:
            h = h * (torch.rand(h.shape, generator=self.noise) > 0.1) / 0.9
        return x + self.drop(h)


class SharedGainNet(nn.Module):
    """A residual MLP language model at 32000 words whose blocks all read
    a gain their parent owns (its final norm's weight); own_generator:
    each block drops from a generator of its own besides torch's."""

    def __init__(self, layers=4, own_generator=False):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(VOCAB, GAIN_WIDTH)
        self.gain = nn.LayerNorm(GAIN_WIDTH)  # its weight: a gain every block reads
        self.blocks = nn.ModuleList([GainBlock(self.gain, torch.Generator().manual_seed(7 + i) if own_generator else None)
                                     for i in range(layers)])
        self.head = nn.Linear(GAIN_WIDTH, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.gain(x))


def add_adapters(model):
    torch.manual_seed(1)
    for block in model.blocks:
        block.adapter = nn.Linear(GAIN_WIDTH, GAIN_WIDTH, bias=False)


def add_low_rank(model):
    torch.manual_seed(1)
    for block in model.blocks:
        block.fc1 = LowRank(block.fc1)
        block.fc1.base.weight.requires_grad_(False)
        block.fc1.base.bias.requires_grad_(False)
