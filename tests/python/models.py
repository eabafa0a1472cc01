"""Plain-PyTorch models the tests and bench/python_bench.py wrap: nothing
here is memtrain's."""

import torch
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
